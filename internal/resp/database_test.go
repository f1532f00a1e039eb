package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FLUSHDB and FLUSHALL need an admin user when Auth is set; a writer gets
// NOPERM and the data stays.
func TestFlushNeedsAdmin(t *testing.T) {
	ctx := context.Background()
	auth := users{"writer": {"w", AccessWrite}, "admin": {"a", AccessAdmin}}
	s, _ := start(t, newFakeKV(), func(c *Config) { c.Auth = auth }, nil)
	client := func(user, pass string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Username: user, Password: pass, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	w, a := client("writer", "w"), client("admin", "a")
	eq(t, must(w.Set(ctx, "k", "v", 0).Result()), "OK")
	wantErr(t, w.FlushDB(ctx).Err(), "NOPERM User writer has no permissions to run the 'flushdb' command")
	wantErr(t, w.FlushAll(ctx).Err(), "NOPERM User writer has no permissions to run the 'flushall' command")
	eq(t, must(w.Exists(ctx, "k").Result()), int64(1))
	eq(t, must(a.FlushDB(ctx).Result()), "OK")
	eq(t, must(w.Exists(ctx, "k").Result()), int64(0))
}

// FLUSHDB deletes more keys than one batch, hash fields included.
func TestFlushManyKeys(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	_, rc := start(t, kv, func(c *Config) { c.MaxBatchKeys = 7 }, nil)
	for i := range 50 {
		eq(t, must(rc.Set(ctx, fmt.Sprintf("k%02d", i), "v", 0).Result()), "OK")
	}
	eq(t, must(rc.HSet(ctx, "h", "a", 1, "b", 2, "c", 3).Result()), int64(3))
	eq(t, must(rc.FlushAll(ctx).Result()), "OK")
	eq(t, must(rc.DBSize(ctx).Result()), int64(0))
	if left, err := kv.Scan(ctx, nil, nil, 0); err != nil || len(left) != 0 {
		t.Fatalf("stored keys left after FLUSHALL: %d (%v)", len(left), err)
	}
}

// CLIENT LIST shows every connection; CLIENT KILL ID closes another one
// (its socket is closed), which then leaves the list.
func TestClientListAndKill(t *testing.T) {
	ctx := context.Background()
	s, rc := start(t, newFakeKV(), nil, nil)
	other, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	r := bufio.NewReader(other)
	fmt.Fprint(other, "CLIENT SETNAME victim\r\nCLIENT ID\r\n")
	if l, _ := r.ReadString('\n'); l != "+OK\r\n" {
		t.Fatalf("SETNAME answered %q", l)
	}
	l, _ := r.ReadString('\n')
	id := strings.TrimSpace(strings.TrimPrefix(l, ":"))
	list := must(rc.ClientList(ctx).Result())
	if !strings.Contains(list, "id="+id+" ") || !strings.Contains(list, "name=victim ") {
		t.Fatalf("CLIENT LIST misses the other connection (id %s):\n%s", id, list)
	}
	eq(t, must(rc.Do(ctx, "CLIENT", "KILL", "ID", id).Int64()), int64(1))
	_ = other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("the killed connection: read %v, want EOF", err)
	}
	for deadline := time.Now().Add(5 * time.Second); strings.Contains(must(rc.ClientList(ctx).Result()), "name=victim "); {
		if time.Now().After(deadline) {
			t.Fatal("CLIENT LIST still shows the killed connection 5s after")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
