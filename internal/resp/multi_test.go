package resp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/testutil/redisserver"
)

// session is one connection to s: each call sends one command and
// returns its reply, rendered as pipeline's are.
func session(t *testing.T, s *Server) func(cmd ...string) string {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	return func(cmd ...string) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var sb strings.Builder
		fmt.Fprintf(&sb, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := c.Write([]byte(sb.String())); err != nil {
			t.Fatal(err)
		}
		v, err := readReply(r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// EXEC runs the queue in order, each command seeing the earlier ones'
// writes, and answers with their replies; the commands before MULTI in
// the same pipeline still run as a batch, the queued ones not until EXEC.
func TestMultiExecRunsTheQueue(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	got := pipeline(t, s,
		[]string{"SET", "k", "10"},
		[]string{"SET", "z", "0"},
		[]string{"GET", "k"},
		[]string{"MULTI"},
		[]string{"GET", "k"},
		[]string{"SET", "k", "11"},
		[]string{"GET", "k"},
		[]string{"INCR", "k"},
		[]string{"DEL", "k", "missing"},
		[]string{"EXISTS", "k"},
		[]string{"MSET", "a", "1", "b", "2"},
		[]string{"MGET", "a", "b"},
		[]string{"SETNX", "a", "9"},
		[]string{"GETSET", "b", "3"},
		[]string{"SET", "b", "4", "XX", "GET"},
		[]string{"INCRBY", "n", "5"},
		[]string{"DECR", "n"},
		[]string{"TYPE", "b"},
		[]string{"PING"},
		[]string{"ECHO", "hi"},
		[]string{"EXEC"},
		[]string{"MGET", "k", "a", "b", "n"},
	)
	want := []string{"+OK", "+OK", "$10", "+OK"}
	for range 16 {
		want = append(want, "+QUEUED")
	}
	want = append(want,
		"*[$10 +OK $11 :12 :1 :0 +OK *[$1 $2] :0 $2 $3 :5 :4 +string +PONG $hi]",
		"*[$<nil> $1 $4 $4]")
	eqReplies(t, got, want)
	if len(kv.eachOps) != 1 || len(kv.eachOps[0]) != 2 {
		t.Fatalf("WriteEach calls %v: want one, of the two SETs before MULTI", kv.eachOps)
	}
}

// A runtime error is that command's reply; the other commands commit.
func TestExecRuntimeErrorCommitsTheRest(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	got := pipeline(t, s,
		[]string{"SET", "s", "abc"},
		[]string{"MULTI"},
		[]string{"SET", "a", "1"},
		[]string{"INCR", "s"},
		[]string{"SET", "b", "2"},
		[]string{"EXEC"},
		[]string{"MGET", "a", "s", "b"},
	)
	eqReplies(t, got, []string{"+OK", "+OK", "+QUEUED", "+QUEUED", "+QUEUED",
		"*[+OK -" + errNotInt + " +OK]", "*[$1 $abc $2]"})
}

// TTLs inside EXEC as in Redis: SET's expiries, SET KEEPTTL (of a stored
// value, and of the transaction's own put), INCR and DECRBY keeping the
// TTL, EXPIRE, PEXPIRE, PERSIST, and TTL reading them before the commit.
// The same pipeline runs against redis-server when it is installed, and
// must get the same replies.
func TestExecTTLsAsRedis(t *testing.T) {
	cmds := [][]string{
		{"SET", "n", "1", "EX", "100"},
		{"SET", "k", "v", "EX", "100"},
		{"SET", "p", "v", "EX", "100"},
		{"SET", "q", "v"},
		{"MULTI"},
		{"SET", "a", "1", "EX", "10"},
		{"SET", "b", "2", "PX", "500000", "GET"},
		{"INCR", "n"},
		{"DECRBY", "n", "5"},
		{"SET", "k", "w", "KEEPTTL"},
		{"TTL", "k"},
		{"EXPIRE", "q", "50"},
		{"TTL", "q"},
		{"PEXPIRE", "a", "20000"},
		{"PERSIST", "p"},
		{"PERSIST", "p"},
		{"TTL", "p"},
		{"EXPIRE", "missing", "10"},
		{"SET", "e", "v", "EX", "30"},
		{"SET", "e", "w", "KEEPTTL"},
		{"TTL", "e"},
		{"SET", "f", "v", "KEEPTTL"},
		{"EXEC"},
		{"TTL", "a"},
		{"TTL", "b"},
		{"TTL", "n"},
		{"GET", "n"},
		{"TTL", "k"},
		{"GET", "k"},
		{"TTL", "q"},
		{"TTL", "p"},
		{"TTL", "e"},
		{"TTL", "f"},
	}
	want := []string{"+OK", "+OK", "+OK", "+OK", "+OK"}
	for range 17 {
		want = append(want, "+QUEUED")
	}
	want = append(want,
		"*[+OK $<nil> :2 :-3 +OK :100 :1 :50 :1 :1 :0 :-1 :0 +OK +OK :30 +OK]",
		":20", ":500", ":100", "$-3", ":100", "$w", ":50", ":-1", ":30", ":-1")
	kv := newFakeKV()
	s, _ := start(t, kv, func(c *Config) { c.Now = kv.clock.Now }, nil)
	eqReplies(t, pipeline(t, s, cmds...), want)
	addr := redisserver.Start(t)
	if addr == "" {
		t.Log("redis-server is not installed: TideKV's replies were checked, not compared with Redis's")
		return
	}
	eqReplies(t, pipelineTo(t, addr, cmds...), want)
}

// A command refused while queuing (unknown, arity, syntax, one EXEC cannot
// run) aborts the transaction: EXEC answers EXECABORT and applies nothing.
func TestExecAbortsAfterARefusal(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	refused := [][]string{
		{"NOSUCH"},
		{"GET", "a", "b"},
		{"MSET", "a", "1", "b"},
		{"SET", "a", "1", "BOGUS"},
		{"FLUSHDB"},
		{"TKV.RANGE", "a", "b"},
		{"CLIENT", "ID"},
		{"SELECT", "0"},
	}
	cmds := [][]string{{"MULTI"}, {"SET", "a", "1"}}
	for _, r := range refused {
		cmds = append(cmds, r, []string{"SET", "a", "1"})
	}
	cmds = append(cmds, []string{"EXEC"}, []string{"GET", "a"})
	got := pipeline(t, s, cmds...)
	eq(t, got[0], "+OK")
	for i, r := range refused {
		if q := got[2+2*i]; !strings.HasPrefix(q, "-ERR") {
			t.Errorf("%v: %s, want an error", r, q)
		}
		eq(t, got[3+2*i], "+QUEUED")
	}
	eqReplies(t, got[len(got)-2:], []string{"-" + errExecAbort, "$<nil>"})
	eq(t, got[2+2*4], "-ERR FLUSHDB inside MULTI is not supported by TideKV; EXEC runs every command but "+notInMultiList)
}

// A user without write access gets NOPERM at queue time, which aborts.
func TestMultiNoPermAborts(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.Auth = users{"reader": {"r", AccessRead}} }, nil)
	got := pipeline(t, s, []string{"AUTH", "reader", "r"}, []string{"MULTI"}, []string{"GET", "a"},
		[]string{"SET", "a", "1"}, []string{"EXEC"})
	eqReplies(t, got, []string{"+OK", "+OK", "+QUEUED",
		"-NOPERM User reader has no permissions to run the 'set' command", "-" + errExecAbort})
}

// Redis's sentences; a nested MULTI and a WATCH inside MULTI are refused
// without aborting; DISCARD drops the queue.
func TestMultiErrors(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	got := pipeline(t, s,
		[]string{"EXEC"},
		[]string{"DISCARD"},
		[]string{"MULTI"},
		[]string{"MULTI"},
		[]string{"WATCH", "a"},
		[]string{"SET", "a", "1"},
		[]string{"EXEC"},
		[]string{"MULTI"},
		[]string{"SET", "a", "2"},
		[]string{"DISCARD"},
		[]string{"EXEC"},
		[]string{"GET", "a"},
	)
	eqReplies(t, got, []string{
		"-ERR EXEC without MULTI", "-ERR DISCARD without MULTI",
		"+OK", "-ERR MULTI calls can not be nested", "-ERR WATCH inside MULTI is not allowed", "+QUEUED", "*[+OK]",
		"+OK", "+QUEUED", "+OK", "-ERR EXEC without MULTI", "$1",
	})
}

// WATCH: a change by another connection, to a value, from absent, or to
// another value and back (a new version), makes EXEC answer the null array
// and apply nothing; EXEC, DISCARD and UNWATCH clear the watches.
func TestWatch(t *testing.T) {
	s, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	c := session(t, s)
	eq(t, c("SET", "w", "1"), "+OK")
	eq(t, c("WATCH", "w", "absent"), "+OK")
	eq(t, c("MULTI"), "+OK")
	eq(t, c("SET", "out", "x"), "+QUEUED")
	eq(t, c("EXEC"), "*[+OK]") // nothing changed

	for _, change := range [][]string{{"w", "2"}, {"absent", "2"}, {"w", "3", "1"}, {"absent", "3", ""}} {
		eq(t, c("SET", "w", "1"), "+OK")
		eq(t, c("WATCH", "w", "absent"), "+OK")
		for _, v := range change[1:] {
			if v == "" {
				must(rc.Del(ctx, change[0]).Result())
			} else {
				must(rc.Set(ctx, change[0], v, 0).Result())
			}
		}
		eq(t, c("MULTI"), "+OK")
		eq(t, c("SET", "out", "y"), "+QUEUED")
		if got := c("EXEC"); got != "*<nil>" {
			t.Fatalf("EXEC after %v: %s, want *<nil>", change, got)
		}
		eq(t, must(rc.Get(ctx, "out").Result()), "x")
		must(rc.Del(ctx, "absent").Result())
	}

	// EXEC cleared the watches: a change now does not matter.
	must(rc.Set(ctx, "w", "3", 0).Result())
	eq(t, c("MULTI"), "+OK")
	eq(t, c("SET", "out", "z"), "+QUEUED")
	eq(t, c("EXEC"), "*[+OK]")

	eq(t, c("WATCH", "w"), "+OK")
	eq(t, c("UNWATCH"), "+OK")
	must(rc.Set(ctx, "w", "4", 0).Result())
	eq(t, c("MULTI"), "+OK")
	eq(t, c("SET", "out", "u"), "+QUEUED")
	eq(t, c("EXEC"), "*[+OK]")

	eq(t, c("WATCH", "w"), "+OK")
	eq(t, c("MULTI"), "+OK")
	eq(t, c("DISCARD"), "+OK")
	must(rc.Set(ctx, "w", "5", 0).Result())
	eq(t, c("MULTI"), "+OK")
	eq(t, c("EXEC"), "*[]")
	eq(t, must(rc.Get(ctx, "out").Result()), "u")
}

// go-redis's optimistic locking (Watch, TxPipelined) against the node:
// its TxFailedErr when another client writes the watched key.
func TestWatchWithGoRedis(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	incr := func(interfere bool) error {
		return rc.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, "ctr").Int()
			if err != nil && err != redis.Nil {
				return err
			}
			if interfere {
				must(rc.Set(ctx, "ctr", "100", 0).Result())
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "ctr", n+1, 0)
				return nil
			})
			return err
		}, "ctr")
	}
	eq(t, incr(false), nil)
	eq(t, incr(true), error(redis.TxFailedErr))
	eq(t, must(rc.Get(ctx, "ctr").Result()), "100")
	eq(t, incr(false), nil)
	eq(t, must(rc.Get(ctx, "ctr").Result()), "101")
}

// The queue and the watches are bounded; past the bound the queue is
// dropped, the rest of the transaction is refused, not run, and EXEC
// answers EXECABORT.
func TestMultiBounds(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.MaxMultiCommands, c.MaxMultiBytes = 2, 80 }, nil)
	over := "-ERR transaction discarded: more than 2 commands or 80 bytes queued; EXEC will answer EXECABORT"
	got := pipeline(t, s,
		[]string{"MULTI"},
		[]string{"SET", "a", "1"},
		[]string{"SET", "b", "1"},
		[]string{"SET", "c", "1"},
		[]string{"SET", "d", "1"},
		[]string{"EXEC"},
		[]string{"MGET", "a", "d"},
		[]string{"MULTI"},
		[]string{"SET", "a", strings.Repeat("v", 80)},
		[]string{"DISCARD"},
		[]string{"WATCH", "a", "b", "c"},
		[]string{"WATCH", "a", "b"},
		[]string{"WATCH", "c"},
	)
	eqReplies(t, got, []string{"+OK", "+QUEUED", "+QUEUED", over, over, "-" + errExecAbort, "*[$<nil> $<nil>]",
		"+OK", over, "+OK",
		"-ERR too many watched keys (at most 2 keys of 80 bytes in all); the watches were cleared", "+OK",
		"-ERR too many watched keys (at most 2 keys of 80 bytes in all); the watches were cleared"})
}

// A conflict runs the queue again: the reply and the writes are the last
// attempt's alone.
func TestExecRetriesConflicts(t *testing.T) {
	kv := newFakeKV()
	kv.conflicts = 2
	s, _ := start(t, kv, nil, nil)
	got := pipeline(t, s, []string{"MULTI"}, []string{"INCR", "n"}, []string{"GET", "n"}, []string{"EXEC"}, []string{"GET", "n"})
	eqReplies(t, got, []string{"+OK", "+QUEUED", "+QUEUED", "*[:1 $1]", "$1"})
}

// A KV failure, of the transaction or of one of its writes, fails EXEC as
// a whole with the usual error, and nothing is applied.
func TestExecOverloaded(t *testing.T) {
	overloaded := &OverloadedError{RetryAfter: 50 * time.Millisecond}
	s, _ := start(t, errKV{newFakeKV(), overloaded}, nil, nil)
	got := pipeline(t, s, []string{"MULTI"}, []string{"SET", "a", "1"}, []string{"EXEC"})
	eqReplies(t, got, []string{"+OK", "+QUEUED", "-TRYAGAIN overloaded, retry after 50 ms"})

	kv := newFakeKV()
	kv.txFail = overloaded
	s, _ = start(t, kv, nil, nil)
	got = pipeline(t, s, []string{"MULTI"}, []string{"SET", "a", "1"}, []string{"SET", "b", "1"}, []string{"EXEC"})
	eqReplies(t, got, []string{"+OK", "+QUEUED", "+QUEUED", "-TRYAGAIN overloaded, retry after 50 ms"})
}
