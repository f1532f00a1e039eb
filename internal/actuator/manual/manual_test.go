package manual

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/control"
)

func TestRecommendsWithoutHook(t *testing.T) {
	a, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := a.ScaleOut(context.Background(), 2, []string{"10.0.0.1:7400"})
	if err != nil || !strings.Contains(msg, "adding 2 node(s)") || !strings.Contains(msg, "10.0.0.1:7400") {
		t.Fatalf("ScaleOut = %q, %v", msg, err)
	}
	if _, err := a.ScaleOut(context.Background(), 0, nil); err == nil {
		t.Fatal("ScaleOut(0) accepted")
	}
	v, err := a.Victim([]control.Member{{ID: 4, Addr: "d"}, {ID: 9, Addr: "i"}, {ID: 2, Addr: "b"}})
	if err != nil || v.ID != 9 {
		t.Fatalf("Victim = %+v, %v; want ID 9", v, err)
	}
	if _, err := a.Victim(nil); err == nil {
		t.Fatal("Victim(nil) returned a member")
	}
	msg, err = a.Remove(context.Background(), v)
	if err != nil || !strings.Contains(msg, "node 9 (i)") {
		t.Fatalf("Remove = %q, %v", msg, err)
	}
}

func TestHookGetsActionAndMember(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	cfg := DefaultConfig()
	cfg.Command = []string{"sh", "-c", `echo "$TIDEKV_SCALE_ACTION $TIDEKV_SCALE_COUNT $TIDEKV_MEMBER_ID $TIDEKV_MEMBER_ADDR $TIDEKV_JOIN" >> ` + out + `; echo done`}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if msg, err := a.ScaleOut(ctx, 3, []string{"a:1", "b:2"}); err != nil || !strings.HasSuffix(msg, "ran: done") {
		t.Fatalf("ScaleOut = %q, %v", msg, err)
	}
	if _, err := a.Remove(ctx, control.Member{ID: 7, Addr: "g:7400"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "scale-out 3   a:1,b:2\nscale-in 1 7 g:7400 \n"
	if string(b) != want {
		t.Fatalf("hook saw\n%q\nwant\n%q", b, want)
	}
}

func TestHookFailureAndTimeoutAreErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Command = []string{"sh", "-c", "echo no capacity >&2; exit 3"}
	a, _ := New(cfg)
	if _, err := a.ScaleOut(context.Background(), 1, nil); err == nil || !strings.Contains(err.Error(), "no capacity") {
		t.Fatalf("failing hook: err = %v", err)
	}
	cfg.Command = []string{"sh", "-c", "sleep 30 & sleep 30"}
	cfg.Timeout = 100 * time.Millisecond
	a, _ = New(cfg)
	start := time.Now()
	_, err := a.Remove(context.Background(), control.Member{ID: 1, Addr: "a:1"})
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("hanging hook: err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timed-out hook took %v to return", d)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.Timeout = 0
	if _, err := New(c); err == nil {
		t.Fatal("zero timeout accepted")
	}
	c = DefaultConfig()
	c.Command = []string{""}
	if _, err := New(c); err == nil {
		t.Fatal("empty program accepted")
	}
}
