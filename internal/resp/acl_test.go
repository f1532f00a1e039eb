package resp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// users is an Authenticator over fixed pairs.
type users map[string]struct {
	pass   string
	access Access
}

func (u users) Authenticate(user, pass, _ string) (Access, error) {
	if user == "limited" {
		return AccessNone, backingOff{}
	}
	if e, ok := u[user]; ok && e.pass == pass {
		return e.access, nil
	}
	return AccessNone, errors.New("bad pair")
}

// backingOff is an Authenticator's refusal during a back-off.
type backingOff struct{}

func (backingOff) Error() string             { return "too many failed logins: retry in 4s" }
func (backingOff) RetryAfter() time.Duration { return 4 * time.Second }

func TestUsersAndAccess(t *testing.T) {
	ctx := context.Background()
	auth := users{"reader": {"r", AccessRead}, "writer": {"w", AccessWrite}, "default": {"d", AccessWrite}}
	s, anon := start(t, newFakeKV(), func(c *Config) { c.Auth = auth }, nil)
	wantErr(t, anon.Get(ctx, "a").Err(), "NOAUTH Authentication required.")
	wantErr(t, anon.Do(ctx, "AUTH", "reader", "nope").Err(), "WRONGPASS")
	wantErr(t, anon.Do(ctx, "AUTH", "limited", "x").Err(), "ERR too many failed logins: retry in 4s")

	client := func(user, pass string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Username: user, Password: pass, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	w := client("writer", "w")
	eq(t, must(w.Set(ctx, "a", "1", 0).Result()), "OK")
	eq(t, must(w.HSet(ctx, "h", "f", "v").Result()), int64(1))

	r := client("reader", "r")
	eq(t, must(r.Get(ctx, "a").Result()), "1")
	eq(t, must(r.HGet(ctx, "h", "f").Result()), "v")
	wantErr(t, r.Set(ctx, "a", "2", 0).Err(), "NOPERM User reader has no permissions to run the 'set' command")
	wantErr(t, r.Incr(ctx, "n").Err(), "NOPERM User reader has no permissions to run the 'incr' command")
	wantErr(t, r.Del(ctx, "a").Err(), "NOPERM")
	for _, cmd := range [][]any{{"APPEND", "a", "x"}, {"SETRANGE", "a", "0", "x"}, {"GETDEL", "a"}, {"GETEX", "a", "EX", "9"},
		{"SETEX", "a", "9", "x"}, {"PSETEX", "a", "9", "x"}, {"MSETNX", "b", "x"}, {"INCRBYFLOAT", "n", "1"},
		{"HINCRBY", "h", "f", "1"}, {"HSETNX", "h", "g", "1"}, {"RENAME", "a", "b"}, {"COPY", "a", "b"},
		{"LPUSH", "l", "x"}, {"RPUSH", "l", "x"}, {"SADD", "s", "x"}, {"ZADD", "z", "1", "x"}, {"ZINCRBY", "z", "1", "x"}} {
		wantErr(t, r.Do(ctx, cmd...).Err(), "NOPERM")
	}
	eq(t, must(r.Get(ctx, "a").Result()), "1")

	// AUTH password alone is the default user.
	d := client("", "d")
	eq(t, must(d.Set(ctx, "b", "1", 0).Result()), "OK")
}

// Every command is read, write or admin, once: a command added without a
// decision fails here instead of reaching read-only users (the list, set
// and sorted-set writes once did).
func TestEveryCommandHasAnAccess(t *testing.T) {
	for name := range commands {
		n := 0
		for _, m := range []map[string]bool{readCommands, writeCommands, adminCommands} {
			if m[name] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is in %d of readCommands, writeCommands and adminCommands, want exactly 1 (acl.go)", name, n)
		}
	}
	for _, m := range []map[string]bool{readCommands, writeCommands, adminCommands} {
		for name := range m {
			if _, ok := commands[name]; !ok {
				t.Errorf("%s has an access but is no command", name)
			}
		}
	}
}
