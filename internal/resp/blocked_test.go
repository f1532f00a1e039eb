package resp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTimers are blockTimers the test fires. Each timer made is sent on
// made, so the test learns where a blocked client is: a recheck timer is
// made only once the client is registered and about to wait.
type fakeTimers struct{ made chan *fakeTimer }

func newFakeTimers() *fakeTimers { return &fakeTimers{made: make(chan *fakeTimer, 256)} }

func (f *fakeTimers) newTimer(d time.Duration) blockTimer {
	t := &fakeTimer{d: d, c: make(chan time.Time, 1), stopped: make(chan struct{})}
	f.made <- t
	return t
}

type fakeTimer struct {
	d       time.Duration
	c       chan time.Time
	once    sync.Once
	stopped chan struct{}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.once.Do(func() { close(t.stopped) })
	return true
}

func (t *fakeTimer) fire() { t.c <- time.Now() }

// guard bounds how long a test waits for what must happen; reaching it is
// a failure (a hang), never an outcome the test accepts.
const guard = 10 * time.Second

// next is the next timer made.
func (f *fakeTimers) next(t *testing.T) *fakeTimer {
	t.Helper()
	select {
	case tm := <-f.made:
		return tm
	case <-time.After(guard):
		t.Fatal("no timer made: the client did not block")
		return nil
	}
}

// waiting returns once a client is blocked and waiting: its recheck timer
// was made (a timeout timer made before it is returned too, or nil).
func (f *fakeTimers) waiting(t *testing.T) (timeout, recheck *fakeTimer) {
	t.Helper()
	for {
		tm := f.next(t)
		if tm.d == DefaultConfig().BlockRecheck {
			return timeout, tm
		}
		timeout = tm
	}
}

// rawClient is a connection whose replies the test reads when it wants.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, s *Server) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{c: c, r: bufio.NewReader(c)}
}

func (rc *rawClient) send(t *testing.T, args ...string) {
	t.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := rc.c.Write([]byte(sb.String())); err != nil {
		t.Fatal(err)
	}
}

func (rc *rawClient) reply(t *testing.T) string {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(guard))
	v, err := readReply(rc.r)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (rc *rawClient) do(t *testing.T, args ...string) string {
	t.Helper()
	rc.send(t, args...)
	return rc.reply(t)
}

func startBlocking(t *testing.T, kv KV, mod func(*Config)) (*Server, *fakeTimers) {
	ft := newFakeTimers()
	s, _ := start(t, kv, func(c *Config) {
		c.timers = ft
		if mod != nil {
			mod(c)
		}
	}, nil)
	return s, ft
}

// A timeout in seconds (a float) becomes the client's timer; when it
// fires the client gets the null array and leaves the registry. 0 makes
// no timeout timer.
func TestBlockTimeout(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a := dialRaw(t, s)
	a.send(t, "BLPOP", "k", "1.5")
	timeout, recheck := ft.waiting(t)
	if timeout == nil || timeout.d != 1500*time.Millisecond {
		t.Fatalf("timeout timer %+v, want 1.5s", timeout)
	}
	eq(t, s.blocked.count(), 1)
	recheck.fire() // a try that finds nothing: it waits again
	_, recheck = ft.waiting(t)
	timeout.fire()
	eq(t, a.reply(t), "*<nil>")
	eq(t, s.blocked.count(), 0)

	a.send(t, "BRPOPLPUSH", "k", "d", "0")
	if timeout, _ := ft.waiting(t); timeout != nil {
		t.Fatalf("timeout 0 made a timer of %v", timeout.d)
	}
	b := dialRaw(t, s)
	eq(t, b.do(t, "RPUSH", "k", "v"), ":1")
	eq(t, a.reply(t), "$v")
	eq(t, b.do(t, "LRANGE", "d", "0", "-1"), "*[$v]")

	// Seconds times 1000, rounded up to milliseconds as Redis rounds: a
	// tiny negative one is 0, no timeout.
	for _, c := range []struct {
		arg  string
		want time.Duration
	}{{"0.0015", 2 * time.Millisecond}, {"0x10", 16 * time.Second}, {"0.25", 250 * time.Millisecond},
		{"0.0001", time.Millisecond}, {"0.001", time.Millisecond}, {"-0.0001", 0}} {
		a.send(t, "BLPOP", "k", c.arg)
		timeout, _ := ft.waiting(t)
		switch {
		case c.want == 0 && timeout != nil:
			t.Fatalf("BLPOP k %s made a timeout timer of %v", c.arg, timeout.d)
		case c.want != 0 && (timeout == nil || timeout.d != c.want):
			t.Fatalf("BLPOP k %s: timeout timer %+v, want %v", c.arg, timeout, c.want)
		}
		eq(t, b.do(t, "RPUSH", "k", c.arg), ":1")
		eq(t, a.reply(t), "*[$k $"+c.arg+"]")
	}
}

// Bad timeouts and arguments get Redis's errors at once, without
// blocking.
func TestBlockErrors(t *testing.T) {
	s, _ := startBlocking(t, newFakeKV(), nil)
	a := dialRaw(t, s)
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"BLPOP", "k", "x"}, "-ERR timeout is not a float or out of range"},
		{[]string{"BLPOP", "k", "-1"}, "-ERR timeout is negative"},
		{[]string{"BRPOP", "k", "inf"}, "-ERR timeout is negative"},
		{[]string{"BLMOVE", "k", "d", "LEFT", "UP", "0"}, "-ERR syntax error"},
		{[]string{"BLMPOP", "0", "0", "k", "LEFT"}, "-ERR numkeys should be greater than 0"},
		{[]string{"BLMPOP", "x", "1", "k", "LEFT"}, "-ERR timeout is not a float or out of range"},
		{[]string{"BLPOP", "k"}, "-ERR wrong number of arguments for 'blpop' command"},
	} {
		eq(t, a.do(t, c.cmd...), c.want)
	}
	eq(t, a.do(t, "SET", "s", "v"), "+OK")
	eq(t, a.do(t, "BLPOP", "s", "0"), "-"+errWrongType)
	eq(t, s.blocked.count(), 0)
}

// Two clients blocked on one key are served in the order they blocked:
// one push of two elements serves both, the first client the first
// element; then one element reaches the first of two new waiters only.
func TestBlockFIFO(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b, c := dialRaw(t, s), dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	b.send(t, "BLPOP", "other", "k", "0")
	ft.waiting(t)
	eq(t, c.do(t, "RPUSH", "k", "x", "y"), ":2")
	eq(t, a.reply(t), "*[$k $x]")
	eq(t, b.reply(t), "*[$k $y]")

	b.send(t, "BRPOP", "k", "0")
	ft.waiting(t)
	a.send(t, "BRPOP", "k", "0")
	ft.waiting(t)
	eq(t, c.do(t, "LPUSH", "k", "1"), ":1")
	eq(t, b.reply(t), "*[$k $1]")
	// a is first now, woken by b's leaving: it tries, finds nothing, and
	// waits again; the next push is its.
	ft.waiting(t)
	eq(t, c.do(t, "LLEN", "k"), ":0")
	eq(t, c.do(t, "LPUSH", "k", "2"), ":1")
	eq(t, a.reply(t), "*[$k $2]")
	eq(t, s.blocked.count(), 0)
}

// A new blocking command takes nothing from a key that clients wait on
// here: it waits behind them, as in Redis, where such a list is empty.
func TestBlockNewcomerWaitsBehind(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b, c := dialRaw(t, s), dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BLMOVE", "k", "d", "RIGHT", "LEFT", "0")
	ft.waiting(t)
	// A push through another node: this node's waiter has not seen it.
	other, _ := start(t, s.kv, nil, nil)
	eq(t, dialRaw(t, other).do(t, "RPUSH", "k", "v"), ":1")
	b.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	eq(t, c.do(t, "LLEN", "k"), ":1")
	eq(t, s.blocked.count(), 2)
}

// A push through another node (another Server over the same KV) is seen
// at the next recheck.
func TestBlockRecheckSeesOtherNodes(t *testing.T) {
	kv := newFakeKV()
	s, ft := startBlocking(t, kv, nil)
	other, _ := start(t, kv, nil, nil)
	a := dialRaw(t, s)
	a.send(t, "BLMPOP", "0", "2", "k1", "k2", "LEFT", "COUNT", "5")
	_, recheck := ft.waiting(t)
	eq(t, dialRaw(t, other).do(t, "RPUSH", "k2", "a", "b"), ":2")
	recheck.fire()
	eq(t, a.reply(t), "*[$k2 *[$a $b]]")
}

// A blocked client that disconnects leaves the registry, and a later push
// stays in the list.
func TestBlockDisconnect(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BLPOP", "k", "100")
	timeout, _ := ft.waiting(t)
	a.c.Close()
	select {
	case <-timeout.stopped:
	case <-time.After(guard):
		t.Fatal("the disconnected client's command did not end")
	}
	eq(t, b.do(t, "RPUSH", "k", "v"), ":1")
	eq(t, b.do(t, "LLEN", "k"), ":1")
	eq(t, s.blocked.count(), 0)
}

// Commands a blocked client sends while it waits are served after it, in
// order (they were read ahead to watch the connection).
func TestBlockPipelinedAfter(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.send(t, "PING")
	a.send(t, "BLPOP", "k", "0")
	eq(t, a.reply(t), "+PONG") // flushed before blocking
	ft.waiting(t)
	a.send(t, "ECHO", "after")
	eq(t, b.do(t, "RPUSH", "k", "v"), ":1")
	eq(t, a.reply(t), "*[$k $v]")
	eq(t, a.reply(t), "$after")
}

// At most MaxBlockedClients wait; one more is refused at once. INFO
// counts the blocked clients.
func TestBlockLimit(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), func(c *Config) { c.MaxBlockedClients = 1 })
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	eq(t, b.do(t, "BRPOP", "j", "0"), "-"+errMaxBlocked)
	// INFO counts it, as Redis test harnesses read (wait_for_blocked_client).
	if info := b.do(t, "INFO"); !strings.Contains(info, "blocked_clients:1\r\n") {
		t.Fatalf("INFO while one client blocks:\n%s", info)
	}
	// Something to pop is popped whatever the limit.
	eq(t, b.do(t, "RPUSH", "j", "v"), ":1")
	eq(t, b.do(t, "BRPOP", "j", "0"), "*[$j $v]")
	eq(t, b.do(t, "RPUSH", "k", "w"), ":1")
	eq(t, a.reply(t), "*[$k $w]")
}

// Inside MULTI nothing blocks; a push in EXEC wakes a client blocked on
// another connection once it commits.
func TestBlockAndExec(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	eq(t, b.do(t, "MULTI"), "+OK")
	eq(t, b.do(t, "BLPOP", "k", "0"), "+QUEUED")
	eq(t, b.do(t, "BLMOVE", "k", "d", "LEFT", "LEFT", "0"), "+QUEUED")
	eq(t, b.do(t, "EXEC"), "*[*<nil> $<nil>]")
	a.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	eq(t, b.do(t, "MULTI"), "+OK")
	eq(t, b.do(t, "RPUSH", "k", "v"), "+QUEUED")
	eq(t, b.do(t, "EXEC"), "*[:1]")
	eq(t, a.reply(t), "*[$k $v]")
}

// BZPOPMIN and BZPOPMAX wait for a sorted set; ZADD wakes them.
func TestBlockZPop(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BZPOPMAX", "z1", "z2", "0")
	ft.waiting(t)
	eq(t, b.do(t, "ZADD", "z2", "1", "a", "2", "b"), ":2")
	eq(t, a.reply(t), "*[$z2 $b $2]")
	eq(t, b.do(t, "ZRANGE", "z2", "0", "-1"), "*[$a]")

	a.send(t, "BZMPOP", "0", "2", "z3", "z4", "MIN", "COUNT", "2")
	ft.waiting(t)
	eq(t, b.do(t, "ZADD", "z4", "1", "a", "2", "b", "3", "c"), ":3")
	eq(t, b.do(t, "ZRANGE", "z4", "0", "-1"), "*[$c]")
	eq(t, a.reply(t), "*[$z4 *[*[$a $1] *[$b $2]]]")
}

// A push answers once the clients it serves through this node have
// popped, as in Redis, where serving them is part of the push: chained
// BLMOVEs have moved the element to the end of the chain when RPUSH
// answers, and a cycle of them, or a BRPOPLPUSH into its own source,
// does not wait for itself (RequestTimeout is long, so a deadlock would
// hang the test, not pass late).
func TestBlockServedBeforePushAnswers(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), func(c *Config) { c.RequestTimeout = time.Hour })
	a, b, c := dialRaw(t, s), dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BLMOVE", "l1", "l2", "RIGHT", "LEFT", "0")
	ft.waiting(t)
	b.send(t, "BLMOVE", "l2", "l3", "LEFT", "RIGHT", "0")
	ft.waiting(t)
	eq(t, c.do(t, "RPUSH", "l1", "foo"), ":1")
	eq(t, c.do(t, "LRANGE", "l1", "0", "-1"), "*[]")
	eq(t, c.do(t, "LRANGE", "l2", "0", "-1"), "*[]")
	eq(t, c.do(t, "LRANGE", "l3", "0", "-1"), "*[$foo]")
	eq(t, a.reply(t), "$foo")
	eq(t, b.reply(t), "$foo")

	a.send(t, "BRPOPLPUSH", "c1", "c2", "0")
	ft.waiting(t)
	b.send(t, "BRPOPLPUSH", "c2", "c1", "0")
	ft.waiting(t)
	eq(t, c.do(t, "RPUSH", "c1", "x"), ":1")
	eq(t, a.reply(t), "$x")
	eq(t, b.reply(t), "$x")
	eq(t, c.do(t, "LRANGE", "c1", "0", "-1"), "*[$x]")

	a.send(t, "BRPOPLPUSH", "self", "self", "0")
	ft.waiting(t)
	eq(t, c.do(t, "RPUSH", "self", "y"), ":1")
	eq(t, a.reply(t), "$y")
	eq(t, c.do(t, "LRANGE", "self", "0", "-1"), "*[$y]")

	// Two clients on one key, one push of two elements: both popped when
	// it answers.
	a.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	b.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	eq(t, c.do(t, "RPUSH", "k", "1", "2"), ":2")
	eq(t, c.do(t, "LLEN", "k"), ":0")
	eq(t, a.reply(t), "*[$k $1]")
	eq(t, b.reply(t), "*[$k $2]")
}

// ctxKV records the context of each BatchGet (a blocked client's try
// reads its keys with one).
type ctxKV struct {
	*fakeKV
	mu   sync.Mutex
	ctxs []context.Context
}

func (k *ctxKV) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	k.mu.Lock()
	k.ctxs = append(k.ctxs, ctx)
	k.mu.Unlock()
	return k.fakeKV.BatchGet(ctx, keys)
}

// Each try of a blocked client runs under a context of its own, ended
// when the next begins: a context a KV derived from an earlier try's must
// find it done with an error (it found it done and read no error, and
// panicked, when the tries shared one handle begun again).
func TestBlockTriesEndTheirContexts(t *testing.T) {
	kv := &ctxKV{fakeKV: newFakeKV()}
	s, ft := startBlocking(t, kv, nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.send(t, "BLPOP", "k", "0")
	_, recheck := ft.waiting(t)
	for range 3 {
		recheck.fire()
		_, recheck = ft.waiting(t)
	}
	kv.mu.Lock()
	ctxs := slices.Clone(kv.ctxs)
	kv.mu.Unlock()
	if len(ctxs) < 3 {
		t.Fatalf("%d tries read the keys, want at least 3", len(ctxs))
	}
	for i, c := range ctxs[:len(ctxs)-1] {
		if c.Err() == nil {
			t.Fatalf("try %d's context is not done after later tries began", i)
		}
	}
	eq(t, b.do(t, "RPUSH", "k", "v"), ":1")
	eq(t, a.reply(t), "*[$k $v]")
}

// CLIENT UNBLOCK ends a blocked client's wait as a timeout or with an
// error, and answers 0 for a client that is not blocked.
func TestBlockClientUnblock(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b := dialRaw(t, s), dialRaw(t, s)
	id := strings.TrimPrefix(a.do(t, "CLIENT", "ID"), ":")
	a.send(t, "BLPOP", "k", "0")
	ft.waiting(t)
	eq(t, b.do(t, "CLIENT", "UNBLOCK", id), ":1")
	eq(t, a.reply(t), "*<nil>")
	a.send(t, "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
	ft.waiting(t)
	eq(t, b.do(t, "CLIENT", "UNBLOCK", id, "ERROR"), ":1")
	eq(t, a.reply(t), "-UNBLOCKED client unblocked via CLIENT UNBLOCK")
	eq(t, b.do(t, "CLIENT", "UNBLOCK", id), ":0")
	eq(t, b.do(t, "CLIENT", "UNBLOCK", "x"), "-"+errNotInt)
	eq(t, b.do(t, "CLIENT", "UNBLOCK", id, "LATER"), "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
	eq(t, s.blocked.count(), 0)
}

// A list or sorted set that a command other than a push makes (RENAME,
// COPY, the sorted-set STOREs) wakes the clients blocked on it through
// this node at once, not at the next re-check (never fired here), and
// they have popped when the command answers.
func TestBlockWokenByStores(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), func(c *Config) { c.RequestTimeout = time.Hour })
	a, c := dialRaw(t, s), dialRaw(t, s)
	for _, tc := range []struct {
		setup, block, store []string
		stored, popped      string
		read                []string
		left                string // read's answer once the client popped
	}{
		{[]string{"RPUSH", "l1", "a", "b"}, []string{"BLPOP", "l2", "0"}, []string{"RENAME", "l1", "l2"},
			"+OK", "*[$l2 $a]", []string{"LRANGE", "l2", "0", "-1"}, "*[$b]"},
		{[]string{"RPUSH", "l3", "c"}, []string{"BLPOP", "l4", "0"}, []string{"COPY", "l3", "l4"},
			":1", "*[$l4 $c]", []string{"EXISTS", "l4"}, ":0"},
		{[]string{"ZADD", "z1", "1", "m", "2", "n"}, []string{"BZPOPMIN", "z2", "0"}, []string{"ZUNIONSTORE", "z2", "1", "z1"},
			":2", "*[$z2 $m $1]", []string{"ZRANGE", "z2", "0", "-1"}, "*[$n]"},
		{[]string{"ZADD", "z3", "1", "p", "2", "q"}, []string{"BZPOPMAX", "z4", "0"}, []string{"ZRANGESTORE", "z4", "z3", "0", "-1"},
			":2", "*[$z4 $q $2]", []string{"ZRANGE", "z4", "0", "-1"}, "*[$p]"},
		{[]string{"ZADD", "z5", "5", "r"}, []string{"BZPOPMIN", "z6", "0"}, []string{"RENAME", "z5", "z6"},
			"+OK", "*[$z6 $r $5]", []string{"EXISTS", "z6"}, ":0"},
	} {
		c.do(t, tc.setup...)
		a.send(t, tc.block...)
		ft.waiting(t)
		eq(t, c.do(t, tc.store...), tc.stored)
		eq(t, c.do(t, tc.read...), tc.left)
		eq(t, a.reply(t), tc.popped)
	}
}
