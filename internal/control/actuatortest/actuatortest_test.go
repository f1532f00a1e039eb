package actuatortest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/control"
)

func TestFakeRecordsAndInjects(t *testing.T) {
	ctx := context.Background()
	f := New("fake")
	var hooked int
	f.OnScaleOut(func(n int, _ []string) { hooked += n })
	f.FailScaleOut(1)
	if _, err := f.ScaleOut(ctx, 2, []string{"a:1"}); !errors.Is(err, ErrInjected) {
		t.Fatalf("first ScaleOut: want injected failure, got %v", err)
	}
	if _, err := f.ScaleOut(ctx, 2, []string{"a:1"}); err != nil {
		t.Fatalf("second ScaleOut: %v", err)
	}
	if f.ScaledOut() != 2 || hooked != 2 {
		t.Fatalf("ScaledOut=%d hook=%d, want 2 and 2", f.ScaledOut(), hooked)
	}
	v, err := f.Victim([]control.Member{{ID: 3, Addr: "c"}, {ID: 7, Addr: "g"}, {ID: 5}})
	if err != nil || v.ID != 7 {
		t.Fatalf("Victim = %+v, %v; want ID 7", v, err)
	}
	f.FailRemove(1)
	if _, err := f.Remove(ctx, v); !errors.Is(err, ErrInjected) {
		t.Fatalf("Remove: want injected failure, got %v", err)
	}
	if _, err := f.Remove(ctx, v); err != nil || f.Removed() != 1 {
		t.Fatalf("Remove: %v, removed %d", err, f.Removed())
	}
	ops := []Op{}
	for _, c := range f.Calls() {
		ops = append(ops, c.Op)
	}
	want := []Op{OpScaleOut, OpScaleOut, OpVictim, OpRemove, OpRemove}
	if len(ops) != len(want) {
		t.Fatalf("calls %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("calls %v, want %v", ops, want)
		}
	}
}

func TestFakeHangsUntilContextEnds(t *testing.T) {
	f := New("fake")
	f.HangRemove(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Remove(ctx, control.Member{ID: 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung Remove returned %v, want deadline exceeded", err)
	}
	f.HangRemove(false)
	if _, err := f.Remove(context.Background(), control.Member{ID: 1}); err != nil {
		t.Fatalf("Remove after un-hang: %v", err)
	}
}
