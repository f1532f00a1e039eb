package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestParseReadMode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string // String() of the result
		wantErr string // substring of the error
	}{
		{in: "linearizable", want: "linearizable"},
		{in: "any", want: "any"},
		{in: " ANY ", want: "any"},
		{in: "bounded:500ms", want: "bounded:500ms"},
		{in: "Bounded:2s", want: "bounded:2s"},
		{in: "bounded: 1ms", want: "bounded:1ms"},
		{in: "bounded:1m30s", want: "bounded:1m30s"},
		{in: "bounded", wantErr: "needs a staleness bound"},
		{in: "bounded:", wantErr: "staleness bound"},
		{in: "bounded:fast", wantErr: "staleness bound"},
		{in: "bounded:500", wantErr: "missing unit"},
		{in: "bounded:999us", wantErr: "below the minimum of 1ms"},
		{in: "bounded:0s", wantErr: "below the minimum"},
		{in: "bounded:-5s", wantErr: "below the minimum"},
		{in: "bounded:2000h", wantErr: "exceeds the maximum"},
		{in: "", wantErr: "unknown read mode"},
		{in: "stale", wantErr: "want linearizable, any or bounded:DURATION"},
	} {
		got, err := ParseReadMode(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseReadMode(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseReadMode(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
			continue
		}
		// String round-trips.
		if back, err := ParseReadMode(got.String()); err != nil || back != got {
			t.Errorf("ParseReadMode(%q.String()) = %v, %v", tc.in, back, err)
		}
	}

	// The flag.Value face.
	var o ReadOption
	if o.String() != "linearizable" || o != Linearizable() {
		t.Fatalf("zero ReadOption = %v, want linearizable", o)
	}
	if err := o.Set("bounded:250ms"); err != nil || o.Mode() != tidekvpb.ReadMode_BOUNDED || o.MaxStaleness() != 250*time.Millisecond {
		t.Fatalf("Set: %v %v", o, err)
	}
	if err := o.Set("nope"); err == nil || o.MaxStaleness() != 250*time.Millisecond {
		t.Fatalf("failed Set changed the value: %v %v", o, err)
	}
	if Any().MaxStaleness() != 0 || Bounded(1500*time.Microsecond).staleMs() != 1 {
		t.Fatal("MaxStaleness / staleMs")
	}

	// Config.DefaultRead is validated like the parser validates.
	if _, err := New(Config{Addrs: []string{"h:1"}, DefaultRead: Bounded(time.Microsecond)}); err == nil {
		t.Fatal("New accepted DefaultRead with a bound below 1ms")
	}
	if _, err := New(Config{Addrs: []string{"h:1"}, RTTWeight: -1}); err == nil {
		t.Fatal("New accepted a negative RTTWeight")
	}
}

// readCluster: one range on n1..n3 with n1 holding the lease, key "a" set,
// and a client with short replica-choice timings whose cache is warm.
func readCluster(t *testing.T, mod func(*Config)) (*fakeCluster, *Client) {
	t.Helper()
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(func(cfg *Config) {
		// Ranked by the load scores the test sets alone: a round trip to
		// a fake on a loaded machine can take tens of milliseconds, past
		// the gaps between the scores (TestReadFailoverWithoutBackoff
		// chose n1 at 40 over n3 at 10 under CPU hogs). A test of round
		// trips sets its own weight.
		cfg.RTTWeight = 1e-9
		if mod != nil {
			mod(cfg)
		}
	})
	cl.tune.pollInterval = 20 * time.Millisecond
	mustPut(t, cl, "a", "1")
	return c, cl
}

// waitLoads starts the poller and waits until the client holds n fresh
// scores.
func waitLoads(t *testing.T, cl *Client, n int) {
	t.Helper()
	cl.startPoller()
	deadline := time.Now().Add(5 * time.Second)
	for cl.loads.Load().fresh < n {
		if time.Now().After(deadline) {
			t.Fatalf("client holds %d fresh scores, want %d", cl.loads.Load().fresh, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustGetWith(t *testing.T, cl *Client, k, want string, o ReadOption) {
	t.Helper()
	v, err := cl.Get(testCtx(t), []byte(k), o)
	if err != nil {
		t.Fatalf("get %q (%s): %v", k, o, err)
	}
	if string(v) != want {
		t.Fatalf("get %q (%s) = %q, want %q", k, o, v, want)
	}
}

func TestReadOptionsOnTheWire(t *testing.T) {
	c, cl := readCluster(t, nil)
	c.resetCalls()
	n1 := c.node(1)
	ctx := testCtx(t)

	mustGet(t, cl, "a", "1")
	mustGetWith(t, cl, "a", "1", Linearizable())
	if n := n1.modeCount("Get", tidekvpb.ReadMode_LINEARIZABLE, 0); n != 2 {
		t.Fatalf("linearizable gets on n1: %d, want 2", n)
	}
	// The last option wins.
	if _, err := cl.Get(ctx, []byte("a"), Any(), Bounded(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Scan(ctx, nil, nil, 0, Bounded(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.BatchGet(ctx, [][]byte{[]byte("a")}, Any()); err != nil {
		t.Fatal(err)
	}
	sum := func(method string, mode tidekvpb.ReadMode, ms uint32) int {
		n := 0
		for _, nd := range c.nodes {
			n += nd.modeCount(method, mode, ms)
		}
		return n
	}
	for _, w := range []struct {
		method string
		mode   tidekvpb.ReadMode
		ms     uint32
	}{
		{"Get", tidekvpb.ReadMode_BOUNDED, 1500},
		{"Scan", tidekvpb.ReadMode_BOUNDED, 1000},
		{"BatchGet", tidekvpb.ReadMode_ANY, 0},
	} {
		if n := sum(w.method, w.mode, w.ms); n != 1 {
			t.Errorf("%s %s %d: %d requests, want 1", w.method, w.mode, w.ms, n)
		}
	}

	// A bound below 1ms is refused before anything is sent.
	c.resetCalls()
	for _, err := range []error{
		func() error { _, err := cl.Get(ctx, []byte("a"), Bounded(time.Microsecond)); return err }(),
		func() error { _, err := cl.Scan(ctx, nil, nil, 0, Bounded(0)); return err }(),
		func() error { _, err := cl.BatchGet(ctx, [][]byte{[]byte("a")}, Bounded(-time.Second)); return err }(),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("read with a bound below 1ms: %v, want ErrInvalidArgument", err)
		}
	}
	if got := c.callCounts(); strings.Contains(got, "Get") || strings.Contains(got, "Scan") {
		t.Errorf("invalid reads were sent: %s", got)
	}

	// Config.DefaultRead applies when no option is given.
	cl2 := c.newClient(func(cfg *Config) { cfg.DefaultRead = Bounded(2 * time.Second) })
	mustGet(t, cl2, "a", "1")
	if n := sum("Get", tidekvpb.ReadMode_BOUNDED, 2000); n != 1 {
		t.Errorf("DefaultRead not applied: %s", c.callCounts())
	}
	mustGetWith(t, cl2, "a", "1", Linearizable())
	if n := n1.modeCount("Get", tidekvpb.ReadMode_LINEARIZABLE, 0); n != 1 {
		t.Errorf("explicit Linearizable did not override DefaultRead")
	}
}

func TestBoundedReadGoesToLowestScore(t *testing.T) {
	c, cl := readCluster(t, nil)
	c.setLoad(1, 40, 0) // the leaseholder is busy
	c.setLoad(2, 4, 0)
	c.setLoad(3, 20, 0)
	waitLoads(t, cl, 3)
	c.resetCalls()
	for range 20 {
		mustGetWith(t, cl, "a", "1", Bounded(500*time.Millisecond))
	}
	if got := c.methodCounts("Get"); got != "n2=20" {
		t.Fatalf("bounded gets: %s, want all 20 on n2", got)
	}
	if n := c.node(2).modeCount("Get", tidekvpb.ReadMode_BOUNDED, 500); n != 20 {
		t.Fatalf("n2 saw %d BOUNDED/500ms gets", n)
	}
}

func TestFollowerScanAndBatchGet(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(threeRanges()...)
	cl := c.newClient(nil)
	cl.tune.pollInterval = 20 * time.Millisecond
	c.setLoad(1, 40, 0)
	c.setLoad(2, 40, 0)
	c.setLoad(3, 4, 0)
	for _, k := range []string{"a", "b", "k", "x"} {
		mustPut(t, cl, k, "v"+k)
	}
	waitLoads(t, cl, 3)
	c.resetCalls()
	kvs, err := cl.Scan(testCtx(t), nil, nil, 0, Any())
	if err != nil || len(kvs) != 4 {
		t.Fatalf("scan: %v %v", kvs, err)
	}
	if got := c.methodCounts("Scan"); got != "n3=3" {
		t.Fatalf("any scans: %s, want one per range, all on n3", got)
	}
	res, err := cl.BatchGet(testCtx(t), [][]byte{[]byte("x"), []byte("b"), []byte("k")}, Bounded(time.Second))
	if err != nil || !res[0].Found || string(res[2].Value) != "vk" {
		t.Fatalf("batch get: %v %v", res, err)
	}
	if got := c.methodCounts("BatchGet"); got != "n3=3" {
		t.Fatalf("bounded batch gets: %s, want one per range, all on n3", got)
	}
}

func staleErr(c *fakeCluster, leader uint64) error {
	return statusWith(codes.FailedPrecondition, "replica is 2s behind", &tidekvpb.ErrorDetail{
		Kind: tidekvpb.ErrorKind_STALE_REPLICA, LeaderNodeId: leader, LeaderAddr: c.node(leader).addr})
}

func TestStaleReplicaTriesNextThenLeaseholder(t *testing.T) {
	c, cl := readCluster(t, nil)
	c.setLoad(1, 40, 0)
	c.setLoad(2, 4, 0)
	c.setLoad(3, 10, 0)
	var (
		mu    sync.Mutex
		order []string
	)
	for id := uint64(1); id <= 3; id++ {
		c.node(id).setHook(func(ctx context.Context, method string, key []byte) error {
			if method != "Get" {
				return nil
			}
			mu.Lock()
			order = append(order, fmt.Sprintf("n%d", id))
			mu.Unlock()
			if id != 1 {
				return staleErr(c, 1)
			}
			return nil
		})
	}
	take := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := strings.Join(order, " ")
		order = nil
		return s
	}
	waitLoads(t, cl, 3)

	// Backing off shows as a pause. (The read used to be timed against
	// 250 ms with backoffs of 300 ms, which a loaded machine's
	// scheduling can exceed without any backoff.)
	pauses := recordPauses(cl)
	mustGetWith(t, cl, "a", "1", Bounded(100*time.Millisecond))
	if p := pauses(); len(p) != 0 {
		t.Fatalf("failover paused %v: it backed off", p)
	}
	if got := take(); got != "n2 n3 n1" {
		t.Fatalf("tried %s, want n2 n3 n1 (cheapest first, the leaseholder last)", got)
	}

	// The refusals are remembered for this range and bound (or tighter).
	mustGetWith(t, cl, "a", "1", Bounded(100*time.Millisecond))
	mustGetWith(t, cl, "a", "1", Bounded(50*time.Millisecond))
	if got := take(); got != "n1 n1" {
		t.Fatalf("tried %s, want the leaseholder straight away", got)
	}
	// A looser bound may be within what n2 can serve: ask it again.
	mustGetWith(t, cl, "a", "1", Bounded(10*time.Second))
	if got := take(); got != "n2 n3 n1" {
		t.Fatalf("looser bound tried %s, want n2 n3 n1", got)
	}
	// ANY reads are never refused as stale; the hints do not apply.
	c.node(2).setHook(nil)
	mustGetWith(t, cl, "a", "1", Any())
	if n := c.node(2).modeCount("Get", tidekvpb.ReadMode_ANY, 0); n != 1 {
		t.Fatalf("any read did not go to n2: %s", c.methodCounts("Get"))
	}
}

func TestReadFailoverWithoutBackoff(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(c *fakeCluster) hookFunc // nil: stop n2
	}{
		{"overloaded", func(*fakeCluster) hookFunc {
			return func(context.Context, string, []byte) error {
				// A linearizable read would wait these 5s.
				return statusWith(codes.ResourceExhausted, "busy", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: 5000})
			}
		}},
		{"unavailable", func(*fakeCluster) hookFunc {
			return func(context.Context, string, []byte) error {
				return statusWith(codes.Unavailable, "replica unavailable", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_UNAVAILABLE})
			}
		}},
		{"range not found", func(*fakeCluster) hookFunc {
			return func(context.Context, string, []byte) error {
				return statusWith(codes.FailedPrecondition, "no replica", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_NOT_FOUND})
			}
		}},
		{"connection refused", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A wait for a dial or attempt timeout would run into
			// testCtx's deadline; a backoff shows as a pause. (The read
			// used to be timed against 500 ms with backoffs of 1 s,
			// which a loaded machine's scheduling can exceed without any
			// wait in the client.)
			c, cl := readCluster(t, func(cfg *Config) { cfg.DialTimeout, cfg.AttemptTimeout = time.Hour, time.Hour })
			c.setLoad(1, 40, 0)
			c.setLoad(2, 4, 0)
			c.setLoad(3, 10, 0)
			waitLoads(t, cl, 3)
			if tc.fail == nil {
				c.node(2).srv.Stop()
			} else {
				h := tc.fail(c)
				c.node(2).setHook(func(ctx context.Context, method string, key []byte) error {
					if method == "Get" {
						return h(ctx, method, key)
					}
					return nil
				})
			}
			c.resetCalls()
			pauses := recordPauses(cl)
			mustGetWith(t, cl, "a", "1", Any())
			if p := pauses(); len(p) != 0 {
				t.Fatalf("failover paused %v", p)
			}
			if n := c.node(3).count("Get"); n != 1 {
				t.Fatalf("next-best replica n3 not tried: %s", c.callCounts())
			}
			// n2 is penalised: the next reads go straight to n3.
			c.resetCalls()
			for range 5 {
				mustGetWith(t, cl, "a", "1", Bounded(time.Second))
			}
			if got := c.methodCounts("Get"); got != "n3=5" {
				t.Fatalf("after the failure: %s, want n3=5", got)
			}
		})
	}
}

func TestAnyAvoidsHotNode(t *testing.T) {
	c, cl := readCluster(t, nil)
	c.setLoad(1, 4, 0)
	c.setLoad(2, 1000, 0)
	c.setLoad(3, 4.2, 0)
	waitLoads(t, cl, 3)
	c.resetCalls()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if _, err := cl.Get(testCtx(t), []byte("a"), Any()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := c.node(2).count("Get"); n != 0 {
		t.Fatalf("hot n2 served %d reads: %s", n, c.methodCounts("Get"))
	}
	if n := c.node(1).count("Get") + c.node(3).count("Get"); n != 100 {
		t.Fatalf("%d reads served, want 100", n)
	}
}

func TestStaleScoresUseMedian(t *testing.T) {
	c, cl := readCluster(t, nil)
	c.setLoad(1, 30, 0)
	c.setLoad(2, 1, 10*time.Second) // would be cheapest, but the sample is old
	c.setLoad(3, 10, 0)
	waitLoads(t, cl, 2)
	if s := cl.loads.Load().score(2).score; s != 20 {
		t.Fatalf("stale n2 scores %v, want the median of the fresh ones, 20", s)
	}
	c.resetCalls()
	for range 10 {
		mustGetWith(t, cl, "a", "1", Any())
	}
	if got := c.methodCounts("Get"); got != "n3=10" {
		t.Fatalf("gets %s, want n3=10", got)
	}
}

// A failed replica is left out of the choice for the penalty, measured
// from the failure, and chosen again once it is over. The penalty is an
// hour, so that the reads during it are checked however long they take
// (with 300 ms they were checked only if they took under 250 ms); its
// end is then moved to the present, where the hour would have taken it.
func TestPenaltyExpires(t *testing.T) {
	c, cl := readCluster(t, nil)
	cl.tune.penaltyBase, cl.tune.penaltyMax = time.Hour, time.Hour
	c.setLoad(1, 20, 0)
	c.setLoad(2, 4, 0)
	c.setLoad(3, 20, 0)
	var failing atomic.Bool
	failing.Store(true)
	c.node(2).setHook(func(ctx context.Context, method string, key []byte) error {
		if method == "Get" && failing.Load() {
			return statusWith(codes.Unavailable, "replica unavailable", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_UNAVAILABLE})
		}
		return nil
	})
	waitLoads(t, cl, 3)
	n2 := cl.peer(c.node(2).addr)
	before := monoNow()
	mustGetWith(t, cl, "a", "1", Any())
	after := monoNow()
	failing.Store(false)
	if until := n2.penaltyUntil.Load(); until < before+int64(time.Hour) || until > after+int64(time.Hour) {
		t.Fatalf("n2 penalised until %v after the read began, want the hour from its failure", time.Duration(until-before))
	}

	c.resetCalls()
	for range 5 {
		mustGetWith(t, cl, "a", "1", Any())
	}
	if c.node(2).count("Get") != 0 {
		t.Fatalf("penalised n2 got reads: %s", c.methodCounts("Get"))
	}
	n2.penaltyUntil.Store(monoNow())
	c.resetCalls()
	for range 5 {
		mustGetWith(t, cl, "a", "1", Any())
	}
	if got := c.methodCounts("Get"); got != "n2=5" {
		t.Fatalf("after the penalty: %s, want n2=5", got)
	}
}

func TestHungReplicaAvoided(t *testing.T) {
	// The attempt timeout is an hour: a read that waits for it rather
	// than stallAfter has hung.
	c, cl := readCluster(t, func(cfg *Config) { cfg.AttemptTimeout = time.Hour })
	cl.tune.stallAfter = 200 * time.Millisecond
	c.setLoad(1, 20, 0)
	c.setLoad(2, 4, 0)
	c.setLoad(3, 20, 0)
	release := make(chan struct{})
	defer close(release)
	var hangs atomic.Bool
	hangs.Store(true)
	c.node(2).setHook(func(ctx context.Context, method string, key []byte) error {
		if method == "Get" && hangs.Load() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-release:
			}
		}
		return nil
	})
	waitLoads(t, cl, 3)

	first := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := cl.Get(testCtx(t), []byte("a"), Any())
		first <- err
	}()
	for c.node(2).count("Get") == 0 {
		time.Sleep(time.Millisecond)
	}
	// The stuck read gives up on n2 after stallAfter, not after the
	// attempt timeout, and the next replica serves it. (Its upper bound
	// was 1 s against a 5 s attempt timeout, which a loaded machine's
	// scheduling can exceed; now 10 s only tells a hang.)
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("read stuck on the hung node: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read stuck on the hung node for 10s")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("stuck read returned after %v, before stallAfter (200ms)", d)
	}
	// n2 is penalised now: reads go elsewhere without delay. A read that
	// went to the hung node shows in its count and one that backed off as
	// a pause. (Each read used to be timed against 150 ms.)
	pauses := recordPauses(cl)
	for range 5 {
		mustGetWith(t, cl, "a", "1", Any())
	}
	if n := c.node(2).count("Get"); n != 1 {
		t.Fatalf("hung n2 got %d reads", n)
	}
	if p := pauses(); len(p) != 0 {
		t.Fatalf("reads after the stall paused %v", p)
	}
}

func TestLatencyHookSteersChoice(t *testing.T) {
	var far sync.Map // addr -> one-way delay
	c, cl := readCluster(t, func(cfg *Config) {
		cfg.RTTWeight = 1 // round trips are what this test ranks by
		cfg.Latency = func(addr string) time.Duration {
			if d, ok := far.Load(addr); ok {
				return d.(time.Duration)
			}
			return 0
		}
	})
	far.Store(c.node(1).addr, 15*time.Millisecond)
	far.Store(c.node(2).addr, 15*time.Millisecond)
	for id := uint64(1); id <= 3; id++ {
		c.setLoad(id, 4, 0)
	}

	// The hook delays both ways: a linearizable read of n1 costs 2×15ms,
	// and so does the round trip the client measures (from the put's
	// fraction of a millisecond it takes sixteen replies to get near).
	for range 16 {
		start := time.Now()
		mustGet(t, cl, "a", "1")
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Fatalf("read of a 15ms-away node took %v", d)
		}
	}
	if rtt := time.Duration(cl.peer(c.node(1).addr).rtt.Load()); rtt < 22*time.Millisecond {
		t.Fatalf("measured rtt to n1 %v, want about 30ms", rtt)
	}
	// Exact counts below: no periodic probes, and round trips do not age
	// toward the nearest (on a slow run the far nodes' would, and rejoin
	// the choice as designed).
	cl.tune.probeAfter = 0
	cl.tune.rttHalfLife = 0

	waitLoads(t, cl, 3)
	c.resetCalls()
	for range 30 {
		mustGetWith(t, cl, "a", "1", Bounded(time.Second))
	}
	// n1 is measured (the reads above); n2 and n3 are not, so each is
	// probed in replica order until it is, which takes two reads: a node's
	// first reply is not measured (peerStats.observe). Then near n3 takes
	// every read.
	if got := c.methodCounts("Get"); got != "n2=2 n3=28" {
		t.Fatalf("gets %s, want n2=2 n3=28", got)
	}
	c.resetCalls()
	for range 10 {
		mustGetWith(t, cl, "a", "1", Bounded(time.Second))
	}
	if got := c.methodCounts("Get"); got != "n3=10" {
		t.Fatalf("gets %s, want n3=10", got)
	}
}

// Adaptive learners cause no routing error. A client learns of them when a
// read reports a newer range generation than it caches, or (from nodes that
// report none) when its poller re-reads the range map; then its relaxed
// reads spread over them, and its linearizable reads stay with the
// leaseholder.
func TestLearnersServeRelaxedReads(t *testing.T) {
	for _, tc := range []struct {
		name          string
		noGenerations bool
		pollInterval  time.Duration
	}{
		{"told by a read", false, time.Hour},
		{"re-read by the poller", true, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, 3)
			c.noGenerations = tc.noGenerations
			c.setRanges(rng(1, "", "", 1, 1)) // one replica
			// Ranked by load alone (all equal), so that the spread does
			// not depend on round trips measured on a busy machine.
			cl := c.newClient(func(cfg *Config) { cfg.RTTWeight = 1e-9 })
			cl.tune.pollInterval = tc.pollInterval // the first poll is at once
			for id := uint64(1); id <= 3; id++ {
				c.setLoad(id, 4, 0)
			}
			mustPut(t, cl, "a", "1")
			waitLoads(t, cl, 3)
			mustGetWith(t, cl, "a", "1", Any())
			hot := rng(1, "", "", 1, 1, 2, 3)
			hot.desc.Generation = 2
			for _, rd := range hot.desc.Replicas[1:] {
				rd.Type, rd.Adaptive = tidekvpb.ReplicaType_LEARNER, true
			}
			c.setRanges(hot)
			deadline := time.Now().Add(5 * time.Second)
			for len(cl.cache.load().lookup([]byte("a")).desc.GetReplicas()) < 3 {
				if time.Now().After(deadline) {
					t.Fatal("the client never learnt of the learners")
				}
				mustGetWith(t, cl, "a", "1", Any())
				time.Sleep(5 * time.Millisecond)
			}
			c.resetCalls()
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for i := range 50 {
						o := Any()
						if i%2 == 0 {
							o = Bounded(time.Second)
						}
						if _, err := cl.Get(testCtx(t), []byte("a"), o); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			// Who gets how many depends on whose answers come back first,
			// so only the spread is checked.
			n1, n2, n3 := c.node(1).count("Get"), c.node(2).count("Get"), c.node(3).count("Get")
			if n1 == 0 || n2 == 0 || n3 == 0 || n2+n3 < 50 {
				t.Errorf("relaxed reads: %s, want every replica used and the learners serving at least 50 of 200", c.methodCounts("Get"))
			}
			c.resetCalls()
			for range 10 {
				mustGetWith(t, cl, "a", "1", Linearizable())
			}
			if got := c.methodCounts("Get"); got != "n1=10" {
				t.Fatalf("linearizable reads: %s, want n1=10", got)
			}
		})
	}
}

func TestLinearizableReadsUnaffected(t *testing.T) {
	c, cl := readCluster(t, nil)
	c.setLoad(1, 1000, 0)
	c.setLoad(2, 1, 0)
	c.setLoad(3, 1, 0)
	c.resetCalls()
	ctx := testCtx(t)
	for range 5 {
		mustGet(t, cl, "a", "1")
		mustGetWith(t, cl, "a", "1", Linearizable())
	}
	if _, err := cl.Scan(ctx, nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.BatchGet(ctx, [][]byte{[]byte("a")}, Linearizable()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, c, "n1:BatchGet=1 n1:Get=10 n1:Scan=1")
	if cl.pollStarted.Load() {
		t.Fatal("linearizable reads started the load poller")
	}
	if n := c.node(1).modeCount("Get", tidekvpb.ReadMode_LINEARIZABLE, 0); n != 10 {
		t.Fatalf("%d LINEARIZABLE gets", n)
	}
}

func TestClosePollerStops(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	for id := uint64(1); id <= 3; id++ {
		c.setLoad(id, 4, 0)
	}
	polls := func() int {
		n := 0
		for _, nd := range c.nodes {
			n += nd.count("NodeLoads")
		}
		return n
	}
	baseline := runtime.NumGoroutine()
	for i := range 10 {
		cl, err := New(Config{Addrs: c.addrs()})
		if err != nil {
			t.Fatal(err)
		}
		cl.tune.pollInterval = 5 * time.Millisecond
		if _, err := cl.Get(testCtx(t), []byte("a"), Any()); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		before := polls()
		for polls() < before+3 {
			time.Sleep(time.Millisecond)
		}
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-cl.pollDone:
		default:
			t.Fatal("Close returned with the poller running")
		}
		if i == 0 {
			after := polls()
			time.Sleep(50 * time.Millisecond)
			if n := polls(); n != after {
				t.Fatalf("%d polls after Close", n-after)
			}
		}
	}
	// Ten clients came and went; gRPC winds its goroutines down
	// asynchronously, so allow a moment and a little slack.
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > baseline+3 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before the clients:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---------- The pure parts ----------

// testRefs builds replicas n1..n(len(rtts)) with the given measured round
// trips (0: never measured).
func testRefs(rtts ...time.Duration) []replicaRef {
	refs := make([]replicaRef, len(rtts))
	for i, r := range rtts {
		p := new(peerStats)
		p.rtt.Store(int64(r))
		p.near.cur.Store(int64(r))
		refs[i] = replicaRef{id: uint64(i + 1), addr: fmt.Sprintf("n%d:1", i+1), peer: p}
	}
	return refs
}

// testView builds a view of one sample per node (NaN: no sample), so
// scores without noise.
func testView(scores ...float64) *loadView {
	f := scoreFilter{}
	now := time.Now()
	for i, s := range scores {
		f.add(&tidekvpb.NodeLoad{NodeId: uint64(i + 1), Score: s, UnixNanos: now.UnixNano()})
	}
	return buildLoadView(f, now, 3*time.Second)
}

// pickCounts runs chooseReplica for turns 1..n and counts the winners by
// node ("n2=10 n3=10"; "none" if -1).
func pickCounts(in pickInput, n int) string {
	counts := map[int]int{}
	for i := range n {
		in.turn = uint64(i + 1)
		counts[chooseReplica(&in)]++
	}
	var parts []string
	if k := counts[-1]; k > 0 {
		parts = append(parts, "none")
	}
	for i := range in.refs {
		if k := counts[i]; k > 0 {
			parts = append(parts, fmt.Sprintf("n%d=%d", i+1, k))
		}
	}
	return strings.Join(parts, " ")
}

func TestChooseReplica(t *testing.T) {
	ms := time.Millisecond
	now := int64(time.Hour) // any mono time
	base := func(refs []replicaRef, v *loadView) pickInput {
		return pickInput{refs: refs, loads: v, rttWeight: 1, now: now, stallAfter: int64(time.Second)}
	}
	for _, tc := range []struct {
		name string
		in   pickInput
		want string
	}{
		{"lowest score", base(testRefs(ms/10, ms/10, ms/10), testView(9, 4, 6)), "n2=12"},
		{"rtt is added to the score", base(testRefs(20*ms, ms/10, ms/10), testView(4, 9, 12)), "n2=12"},
		{"ties share the load", base(testRefs(ms/10, ms/10, ms/10), testView(4, 4.3, 9)), "n1=6 n2=6"},
		// n2 is cheapest (4.3 vs 4.4); n1's extra 0.7 ms is within the
		// noise of round trips.
		{"small rtt differences tie", base(testRefs(ms/10, 800*time.Microsecond, ms/10), testView(4.3, 3.5, 9)), "n1=6 n2=6"},
		// The band grows with the nearest round trip: 30 ms and 40 ms
		// are equal, 60 ms is not.
		{"the band is relative", base(testRefs(30*ms, 40*ms, 60*ms), testView(4, 4, 4)), "n1=6 n2=6"},
		// n1 has no score: it gets the median 9, not 0.
		{"unknown scores take the median", base(testRefs(ms/10, ms/10, ms/10, ms/10), testView(math.NaN(), 5, 9, 20)), "n2=12"},
		{"no scores at all: rtt decides", base(testRefs(3*ms, ms/10, 2*ms), testView()), "n2=12"},
		{"a replica never measured is probed", base(testRefs(5*ms, 0, 20*ms), testView(4, 4, 4)), "n2=12"},
		{"unless it is busy: its score would not tie", base(testRefs(5*ms, 0, 20*ms), testView(4, 9, 4)), "n1=12"},
		// With a probe in flight to it, it counts as the nearest.
		{"while measured, it counts as the nearest", func() pickInput {
			in := base(testRefs(5*ms, 0, 20*ms), testView(4, 4, 4))
			in.refs[1].peer.inflight.Store(1)
			in.refs[1].peer.lastProgress.Store(now)
			in.refs[0].peer.inflight.Store(1)
			in.refs[0].peer.lastProgress.Store(now)
			return in
		}(), "n1=6 n2=6"},
		{"nil view", base(testRefs(ms, ms, ms), nil), "n1=4 n2=4 n3=4"},
		{"tried are skipped", func() pickInput {
			in := base(testRefs(ms/10, ms/10, ms/10), testView(9, 4, 6))
			in.skip = 0b010
			return in
		}(), "n3=12"},
		{"all tried", func() pickInput { in := base(testRefs(ms, ms), testView(1, 1)); in.skip = 0b11; return in }(), "none"},
		{"unresolved replicas are skipped", func() pickInput {
			in := base(testRefs(ms/10, ms/10), testView(1, 5))
			in.refs[0].peer = nil
			return in
		}(), "n2=12"},
	} {
		if got := pickCounts(tc.in, 12); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}

	t.Run("equals take turns, yielding to the next with fewer in flight", func(t *testing.T) {
		in := base(testRefs(ms/10, ms/10, ms/10, ms/10), testView(4, 4, 4, 9))
		for i, n := range []int32{3, 1, 2, 0} {
			in.refs[i].peer.inflight.Store(n)
			in.refs[i].peer.lastProgress.Store(now) // busy, not hung
		}
		// n4 is idle but costlier: in-flight counts only rank equals. n1's
		// turns go to n2, n2 keeps its own, and n3 keeps its own (n1 after
		// it has more in flight).
		if got := pickCounts(in, 12); got != "n2=8 n3=4" {
			t.Fatalf("in flight 3/1/2: %s", got)
		}
		for _, r := range in.refs {
			r.peer.inflight.Store(1)
		}
		if got := pickCounts(in, 12); got != "n1=4 n2=4 n3=4" {
			t.Fatalf("in flight 1/1/1: %s, want round robin", got)
		}
	})

	t.Run("a node that refused lately takes no other's turn", func(t *testing.T) {
		in := base(testRefs(ms/10, ms/10, ms/10), testView(4, 4, 4))
		for i, n := range []int32{2, 0, 2} {
			in.refs[i].peer.inflight.Store(n)
			in.refs[i].peer.lastProgress.Store(now)
		}
		// n2 answers fast because it refuses: by in-flight counts it
		// would take n1's turns as well as its own.
		if got := pickCounts(in, 12); got != "n2=8 n3=4" {
			t.Fatalf("before any refusal: %s", got)
		}
		in.refs[1].peer.cutAt.Store(now - int64(5*ms))
		if got := pickCounts(in, 12); got != "n1=4 n2=4 n3=4" {
			t.Fatalf("n2 refused 5 ms ago: %s, want its own turns only", got)
		}
		in.refs[1].peer.cutAt.Store(now - int64(25*ms))
		if got := pickCounts(in, 12); got != "n2=8 n3=4" {
			t.Fatalf("n2 refused 25 ms ago (past the 20 ms default): %s", got)
		}
	})

	t.Run("replicas at a shedding node's window are skipped while others are not", func(t *testing.T) {
		in := base(testRefs(ms/10, ms/10, ms/10), testView(4, 9, 9))
		p := in.refs[0].peer
		p.window.Store(math.Float64bits(4))
		p.inflight.Store(4)
		p.lastProgress.Store(now)
		p.shedding.Store(true)
		if got := pickCounts(in, 4); got != "n2=2 n3=2" {
			t.Fatalf("n1 at its window: %s", got)
		}
		p.inflight.Store(3)
		if got := pickCounts(in, 4); got != "n1=4" {
			t.Fatalf("n1 below its window: %s", got)
		}
		// All at their windows: the read goes where it would anyway.
		p.inflight.Store(4)
		for _, r := range in.refs[1:] {
			r.peer.window.Store(math.Float64bits(4))
			r.peer.inflight.Store(5)
			r.peer.lastProgress.Store(now)
			r.peer.shedding.Store(true)
		}
		if got := pickCounts(in, 4); got != "n1=4" {
			t.Fatalf("all at their windows: %s", got)
		}
		// A window cut by a node that admits everything (its slots were
		// full) does not hold relaxed reads back.
		for _, r := range in.refs {
			r.peer.shedding.Store(false)
		}
		in.loads = testView(4, 4, 4)
		// Turns as usual: n1 (4 in flight) keeps its own and takes n3's (5).
		if got := pickCounts(in, 6); got != "n1=4 n2=2" {
			t.Fatalf("windows of nodes not shedding: %s", got)
		}
	})

	t.Run("an unrefreshed round trip ages toward the nearest", func(t *testing.T) {
		half := int64(time.Second)
		in := base(testRefs(8*ms, ms, ms), testView(4, 4, 4))
		in.rttHalfLife = half
		p := in.refs[0].peer
		p.rttAt.Store(now - half/2)
		for i := 1; i < 3; i++ {
			in.refs[i].peer.rttAt.Store(now)
		}
		if got := pickCounts(in, 6); strings.Contains(got, "n1") {
			t.Fatalf("8 ms half a half-life ago (~6 ms) against 1 ms: %s", got)
		}
		// Three half-lives: 1 + 7/8 ms, within the band of 1 ms.
		p.rttAt.Store(now - 3*half)
		if got := pickCounts(in, 6); got != "n1=2 n2=2 n3=2" {
			t.Fatalf("8 ms three half-lives ago: %s", got)
		}
		in.rttHalfLife = 0 // no ageing: an old round trip counts in full
		if got := pickCounts(in, 6); strings.Contains(got, "n1") {
			t.Fatalf("without ageing: %s", got)
		}
	})

	t.Run("slow replies exclude a replica only when they are all it answered for a while", func(t *testing.T) {
		half := int64(time.Second)
		in := base(testRefs(ms/10, ms/10, ms/10), testView(4, 4, 4))
		in.rttHalfLife = half
		for _, r := range in.refs {
			r.peer.rttHalfLife = half
			r.peer.rttAt.Store(now)
		}
		p := in.refs[0].peer
		p.firstReply.Store(1)
		for range 6 {
			p.observe(now-int64(50*ms), now) // a pause: every reply in flight is late
		}
		if got := pickCounts(in, 6); got != "n1=2 n2=2 n3=2" {
			t.Fatalf("after a pause's six 50 ms replies (average %v): %s", time.Duration(p.rtt.Load()), got)
		}
		// A bucket later it still answers only slowly: it is that far now.
		later := now + nearBucket
		p.observe(later-int64(50*ms), later)
		in.now = later
		for _, r := range in.refs[1:] {
			r.peer.rttAt.Store(later)
		}
		if got := pickCounts(in, 6); strings.Contains(got, "n1") {
			t.Fatalf("slow for a whole bucket (quickest %v): %s", time.Duration(p.near.get()), got)
		}
		in.now = later + 7*half // no reply since; the others are fresh
		for _, r := range in.refs[1:] {
			r.peer.rttAt.Store(in.now)
		}
		if got := pickCounts(in, 6); got != "n1=2 n2=2 n3=2" {
			t.Fatalf("seven half-lives later: %s", got)
		}
	})

	t.Run("replicas sent nothing lately are probed", func(t *testing.T) {
		in := base(testRefs(30*ms, ms, ms), testView(4, 4, 4))
		in.probeAfter = int64(time.Second)
		for i, ago := range []time.Duration{2 * time.Second, 0, 0} {
			in.refs[i].peer.lastSent.Store(now - int64(ago))
		}
		probes := func() (n int) {
			for r := range uint64(4 * probeOneIn) {
				in.turn = r
				if chooseReplica(&in) == 0 {
					n++
				}
			}
			return n
		}
		if n := probes(); n != 4 {
			t.Fatalf("far n1, sent nothing for 2 s: probed %d times in %d reads, want 4", n, 4*probeOneIn)
		}
		in.refs[0].peer.inflight.Store(1) // its probe is out: wait for it
		if n := probes(); n != 0 {
			t.Fatalf("probed %d times with a probe in flight", n)
		}
		in.refs[0].peer.inflight.Store(0)
		in.refs[0].peer.lastSent.Store(now - int64(500*ms))
		if n := probes(); n != 0 {
			t.Fatalf("probed %d times 500 ms after the last request", n)
		}
		// The one sent nothing for longest goes first.
		in.refs[0].peer.lastSent.Store(now - int64(2*time.Second))
		in.refs[1].peer.lastSent.Store(now - int64(3*time.Second))
		in.turn = 0
		if got := chooseReplica(&in); got != 1 {
			t.Fatalf("probed n%d, want n2 (idle longest)", got+1)
		}
		// A busy node is not worth measuring: near or far, it would not be
		// chosen.
		in.loads = testView(30, 4, 4)
		in.refs[1].peer.lastSent.Store(now)
		if n := probes(); n != 0 {
			t.Fatalf("a node scoring 30 against 4 probed %d times", n)
		}
	})

	t.Run("penalised, hung and stale replicas are skipped", func(t *testing.T) {
		in := base(testRefs(ms/10, ms/10, ms/10), testView(1, 2.5, 5))
		in.refs[0].peer.penaltyUntil.Store(now + 1)
		if got := pickCounts(in, 4); got != "n2=4" {
			t.Fatalf("penalised n1: %s", got)
		}
		in.refs[0].peer.penaltyUntil.Store(now) // expired
		if got := pickCounts(in, 4); got != "n1=4" {
			t.Fatalf("penalty over: %s", got)
		}
		p := in.refs[0].peer
		p.inflight.Store(1)
		p.lastProgress.Store(now - int64(500*ms))
		if got := pickCounts(in, 4); got != "n1=4" {
			t.Fatalf("busy 500ms is not hung: %s", got)
		}
		p.lastProgress.Store(now - int64(2*time.Second))
		if got := pickCounts(in, 4); got != "n2=4" {
			t.Fatalf("hung n1: %s", got)
		}
		p.inflight.Store(0)

		in.stale = make([]staleHint, 3)
		in.stale[0].set(now-1, time.Second, 100*ms)
		in.bound = 100 * ms
		if got := pickCounts(in, 4); got != "n2=4" {
			t.Fatalf("n1 stale for this bound: %s", got)
		}
		in.bound = 200 * ms
		if got := pickCounts(in, 4); got != "n1=4" {
			t.Fatalf("looser bound: %s", got)
		}
		in.bound = anyBound // ANY reads are never refused as stale
		if got := pickCounts(in, 4); got != "n1=4" {
			t.Fatalf("any read: %s", got)
		}
		in.stale[0].set(now-1, time.Second, anyBound) // RANGE_NOT_FOUND
		if got := pickCounts(in, 4); got != "n2=4" {
			t.Fatalf("n1 has no replica: %s", got)
		}
	})
}

func TestBuildLoadView(t *testing.T) {
	now := time.Unix(1000, 0)
	sample := func(id uint64, score float64, age time.Duration) *tidekvpb.NodeLoad {
		return &tidekvpb.NodeLoad{NodeId: id, Score: score, UnixNanos: now.Add(-age).UnixNano()}
	}
	filter := func(ls ...*tidekvpb.NodeLoad) scoreFilter {
		f := scoreFilter{}
		for _, l := range ls {
			f.add(l)
		}
		return f
	}
	v := buildLoadView(filter(
		sample(1, 5, 0),
		sample(2, 7, 2900*time.Millisecond),
		sample(3, 1, 3100*time.Millisecond), // stale
		sample(4, math.NaN(), 0),            // unusable
		sample(5, -3, 0),                    // clamped to 0
		sample(6, math.Inf(1), 0),           // kept finite
		sample(70000, 9, 0),                 // beyond the dense table
	), now, 3*time.Second)
	if v.fresh != 5 {
		t.Fatalf("fresh = %d, want 5", v.fresh)
	}
	// Fresh: 0, 5, 7, 9, 1e9; median 7.
	for id, want := range map[uint64]float64{1: 5, 2: 7, 3: 7, 4: 7, 5: 0, 6: maxScore, 70000: 9, 99: 7, 1 << 40: 7} {
		if got := v.score(id); got != (nodeScore{score: want}) {
			t.Errorf("score(%d) = %v, want %v", id, got, want)
		}
	}
	if v := buildLoadView(filter(sample(1, 5, time.Minute)), now, 3*time.Second); v.score(1).score != 0 || v.fresh != 0 {
		t.Errorf("nothing fresh: score %v, want 0", v.score(1))
	}
	// Later samples move the mean a quarter of the way and the noise a
	// quarter of the way to the deviation; a sample relayed again, or
	// stamped anew with the same score, counts once.
	f := filter(sample(1, 4, 2*time.Second))
	f.add(sample(1, 100, time.Second))
	f.add(sample(1, 100, time.Second))
	f.add(sample(1, 100, 0))
	if got, want := buildLoadView(f, now, 3*time.Second).score(1), (nodeScore{score: 28, noise: 24}); got != want {
		t.Errorf("after 4 then 100: %+v, want %+v", got, want)
	}
	if at := f[1].at; at != now.UnixNano() {
		t.Errorf("the same score stamped anew: track at %v, want renewed to now", time.Unix(0, at))
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("even median = %v", m)
	}
}

func TestRTTAverage(t *testing.T) {
	ms := int64(time.Millisecond)
	now := int64(time.Hour)
	p := peerStats{rttHalfLife: int64(time.Second)}
	p.observe(now-40*ms, now) // the first reply waited for a connection
	p.observe(now-ms, now)    // and so did this one, sent before it came
	if got := p.rtt.Load(); got != 0 {
		t.Fatalf("replies to requests sent before the first reply counted: %v", time.Duration(got))
	}
	at := now + 200*ms
	obs := func(rtt int64) { p.observe(at-rtt, at) }
	obs(4 * ms)
	if got := p.rtt.Load(); got != 4*ms {
		t.Fatalf("first sample: %v", got)
	}
	// The lone first sample counts as a half-life old: it ages half way
	// to 8 ms (6 ms), then the sample moves it a quarter of the way.
	obs(8 * ms)
	if got := p.rtt.Load(); got != 6500*time.Microsecond.Nanoseconds() {
		t.Fatalf("after 8ms: %v, want 6.5ms", time.Duration(got))
	}
	obs(10500 * time.Microsecond.Nanoseconds()) // a quarter of the way
	if got := p.rtt.Load(); got != 7500*time.Microsecond.Nanoseconds() {
		t.Fatalf("after 10.5ms: %v, want 7.5ms", time.Duration(got))
	}
	for range 20 {
		obs(ms)
	}
	if got := time.Duration(p.rtt.Load()); got > 1100*time.Microsecond {
		t.Fatalf("after 20 × 1ms: %v", got)
	}
	p.rtt.Store(ms)
	obs(100 * ms) // one stall counts as 4 ms
	if got := p.rtt.Load(); got != 1750*time.Microsecond.Nanoseconds() {
		t.Fatalf("after one 100 ms stall: %v, want 1.75ms", time.Duration(got))
	}
	for range 15 {
		obs(100 * ms) // a lasting change wins
	}
	if got := time.Duration(p.rtt.Load()); got < 75*time.Millisecond {
		t.Fatalf("after 16 × 100ms: %v", got)
	}
	at += int64(10 * time.Second)
	obs(ms) // after a silence, the fresh sample all but replaces the average
	if got := time.Duration(p.rtt.Load()); got > 1100*time.Microsecond {
		t.Fatalf("1 ms ten half-lives after the average: %v", got)
	}
	if got := p.rttAt.Load(); got != at {
		t.Fatalf("rttAt %v, want %v", got, at)
	}
	obs(0)
	if p.rtt.Load() == 0 {
		t.Fatal("a zero sample made the rtt unknown again")
	}
}

func TestOverloadRefusals(t *testing.T) {
	now := int64(time.Hour)
	detail := func(share float64) *tidekvpb.ErrorDetail {
		return &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: 30, AdmitShare: share}
	}
	for _, tc := range []struct {
		name    string
		share   float64
		sent    bool
		penalty time.Duration
		window  float64
	}{
		// Its slots were full that instant: not left out, the window narrows.
		{"at the in-flight cap", 1, true, 0, 5},
		{"shedding", 0.2, true, 30 * time.Millisecond, minWindow},
		{"share not given", 0, true, 30 * time.Millisecond, 5},
		// This client's own refusal: the node said nothing.
		{"refused here", 0.2, false, 0, 0},
	} {
		var p peerStats
		p.inflight.Store(10)
		p.refused(now, detail(tc.share), tc.sent)
		if got := time.Duration(max(p.penaltyUntil.Load()-now, 0)); got != tc.penalty {
			t.Errorf("%s: left out for %v, want %v", tc.name, got, tc.penalty)
		}
		if got := math.Float64frombits(p.window.Load()); got != tc.window {
			t.Errorf("%s: window %v, want %v", tc.name, got, tc.window)
		}
		if got, want := p.shedding.Load(), tc.sent && tc.share < 1; got != want {
			t.Errorf("%s: shedding %v, want %v", tc.name, got, want)
		}
	}
}

func TestPenaltyGrows(t *testing.T) {
	tune := defaultReadTuning()
	var p peerStats
	now := int64(time.Hour)
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		p.penalise(now, &tune, 0)
		if got := time.Duration(p.penaltyUntil.Load() - now); got != want {
			t.Fatalf("penalty %v, want %v", got, want)
		}
	}
	p.succeeded()
	p.penalise(now, &tune, 0)
	if got := time.Duration(p.penaltyUntil.Load() - now); got != time.Second {
		t.Fatalf("after a success: %v, want 1s", got)
	}
	p.penalise(now, &tune, 10*time.Second) // a long retry_after wins
	if got := time.Duration(p.penaltyUntil.Load() - now); got != 10*time.Second {
		t.Fatalf("with retry_after 10s: %v", got)
	}
}

// BenchmarkChooseReplica measures the replica choice of one BOUNDED or ANY
// read attempt. "choose" is chooseReplica alone; "route" adds what the
// request path does around it (cache lookup, resolved replicas, clock,
// random value).
func BenchmarkChooseReplica(b *testing.B) {
	for _, n := range []int{3, 5} {
		rtts := make([]time.Duration, n)
		scores := make([]float64, n)
		for i := range n {
			rtts[i] = time.Duration(100+37*i) * time.Microsecond
			scores[i] = 4 + float64(i%3)*0.2
		}
		refs := testRefs(rtts...)
		view := testView(scores...)
		now := monoNow()
		for _, r := range refs {
			r.peer.rttAt.Store(now) // measured just now, as under load
			r.peer.lastSent.Store(now)
		}
		b.Run(fmt.Sprintf("choose/replicas=%d", n), func(b *testing.B) {
			in := pickInput{refs: refs, loads: view, rttWeight: 1, now: now, stallAfter: int64(time.Second), stale: make([]staleHint, n), bound: time.Second,
				rttHalfLife: int64(time.Second), probeAfter: int64(time.Second)}
			var sink int
			for i := 0; b.Loop(); i++ {
				in.turn = uint64(i)
				sink += chooseReplica(&in)
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("route/replicas=%d", n), func(b *testing.B) {
			cl, err := New(Config{Addrs: []string{"seed:1"}})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			resp := &tidekvpb.RangesResponse{}
			desc := &tidekvpb.RangeDescriptor{RangeId: 1, Generation: 1}
			for i := range n {
				id := uint64(i + 1)
				desc.Replicas = append(desc.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: id, ReplicaId: id})
				addr := fmt.Sprintf("n%d:1", id)
				resp.Nodes = append(resp.Nodes, &tidekvpb.NodeDescriptor{NodeId: id, GrpcAddr: addr})
				p := cl.peer(addr)
				p.rtt.Store(int64(rtts[i]))
				p.near.cur.Store(int64(rtts[i]))
				p.rttAt.Store(monoNow())
				p.lastSent.Store(monoNow())
			}
			resp.Ranges = []*tidekvpb.RangeInfo{{Desc: desc, LeaderNodeId: 1}}
			cl.cache.install(resp)
			cl.loads.Store(view)
			r := &rpc{key: []byte("k"), read: Bounded(time.Second)}
			var tried uint64
			var triedEntry *rangeEntry
			ctx := context.Background()
			for b.Loop() {
				tried = 0
				if _, _, _, i, err := cl.routeFollower(ctx, r, &tried, &triedEntry); err != nil || i < 0 {
					b.Fatal(i, err)
				}
			}
		})
	}
}

// A node whose requests stop being answered is left out of replica choice
// after stallAfter even when what hangs there is not a follower read (here a
// write at the leaseholder, which must wait out its attempt timeout).
func TestStalledNodeLeftOut(t *testing.T) {
	c, cl := readCluster(t, nil)
	cl.tune.stallAfter = 100 * time.Millisecond
	c.setLoad(1, 4, 0)
	c.setLoad(2, 20, 0)
	c.setLoad(3, 20, 0)
	release := make(chan struct{})
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		if method == "Put" {
			<-release
		}
		return nil
	})
	waitLoads(t, cl, 3)
	mustGetWith(t, cl, "a", "1", Any())
	if n := c.node(1).count("Get"); n != 1 {
		t.Fatalf("cheapest n1 not chosen: %s", c.methodCounts("Get"))
	}
	put := make(chan error, 1)
	go func() { put <- cl.Put(testCtx(t), []byte("b"), []byte("2")) }()
	for c.node(1).count("Put") < 2 { // readCluster's put was the first
		time.Sleep(time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	c.resetCalls()
	for range 5 {
		mustGetWith(t, cl, "a", "1", Any())
	}
	if n := c.node(1).count("Get"); n != 0 {
		t.Fatalf("n1, busy with no reply for 150ms, got %d reads", n)
	}
	close(release)
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	// It answered: no longer excluded (though the slow reply now weighs in
	// its measured round trip).
	if _, _, ok := cl.peer(c.node(1).addr).usable(monoNow(), int64(cl.tune.stallAfter)); !ok {
		t.Fatal("n1 still excluded after replying")
	}
}

// A node that ignores the read timestamp (the fake, as a binary from before
// reads at timestamps would) answers with the newest data: the client
// refuses the answer rather than pass it off as a read at the timestamp.
func TestReadAtRefusesAnswersOfTheNewestData(t *testing.T) {
	_, cl := readCluster(t, nil)
	ctx := testCtx(t)
	at := ReadAt(cl.Now())
	for op, err := range map[string]error{
		"get":       func() error { _, err := cl.Get(ctx, []byte("a"), at); return err }(),
		"scan":      func() error { _, err := cl.Scan(ctx, nil, nil, 0, at); return err }(),
		"batch get": func() error { _, err := cl.BatchGet(ctx, [][]byte{[]byte("a")}, at); return err }(),
	} {
		if !errors.Is(err, ErrNoReadAt) {
			t.Errorf("%s at a timestamp from a node that ignores it: %v, want ErrNoReadAt", op, err)
		}
	}
	if _, err := cl.Get(ctx, []byte("a")); err != nil {
		t.Errorf("get of the newest data: %v", err)
	}
}

// TestNoisyScoresSpread feeds chooseReplica the view the poller would
// build from sampled scores: with an admission limit of one, a node's
// score reads about 4 when sampled idle and about 103 when a request was in
// flight at that instant. Replicas alike on average must share the reads
// evenly however their samples fall, poll after poll, not only on average
// (a node left out for one poll interval overflows the others); one
// clearly busier must get clearly fewer; a failed one none.
func TestNoisyScoresSpread(t *testing.T) {
	const polls, readsPerPoll = 200, 30
	now := int64(time.Hour)
	rng := rand.New(rand.NewPCG(1, 2))
	// spread polls, each node busy at its sample with probability busy[i],
	// and returns each node's share of the reads and the share of polls in
	// which some node's share of that poll's reads was off a fair one by
	// more than a tenth.
	spread := func(refs []replicaRef, busy ...float64) (shares []float64, uneven float64) {
		f := scoreFilter{}
		at := time.Unix(1000, 0)
		total := make([]int, len(refs))
		in := pickInput{refs: refs, rttWeight: 1, now: now, stallAfter: int64(time.Second)}
		for p := range polls {
			at = at.Add(500 * time.Millisecond)
			for i, b := range busy {
				s := 4 + rng.Float64()
				if rng.Float64() < b {
					s += 99
				}
				f.add(&tidekvpb.NodeLoad{NodeId: uint64(i + 1), Score: s, UnixNanos: at.UnixNano()})
			}
			in.loads = buildLoadView(f, at, 3*time.Second)
			counts := make([]int, len(refs))
			for r := range readsPerPoll {
				in.turn = uint64(p*readsPerPoll + r)
				if k := chooseReplica(&in); k >= 0 {
					counts[k]++
				}
			}
			for i, n := range counts {
				total[i] += n
				if math.Abs(float64(n)/readsPerPoll-1.0/3) > 0.1/3 {
					uneven++
					break
				}
			}
		}
		shares = make([]float64, len(refs))
		for i, n := range total {
			shares[i] = float64(n) / (polls * readsPerPoll)
		}
		return shares, uneven / polls
	}
	ms := time.Millisecond
	for _, b := range []float64{0.1, 0.3, 0.5, 0.8} {
		shares, uneven := spread(testRefs(ms/10, ms/10, ms/10), b, b, b)
		for i, s := range shares {
			if math.Abs(s-1.0/3) > 0.1/3 {
				t.Errorf("busy %.0f%% of samples each: n%d got %.1f%% of the reads, want 33.3%% ± 3.3", 100*b, i+1, 100*s)
			}
		}
		if uneven > 0.1 {
			t.Errorf("busy %.0f%% of samples each: %.0f%% of polls split unevenly, want under 10%%", 100*b, 100*uneven)
		}
	}
	// n3 is saturated at every sample, the others at a third of theirs.
	if shares, _ := spread(testRefs(ms/10, ms/10, ms/10), 0.3, 0.3, 1); shares[2] > 0.05 {
		t.Errorf("saturated n3 got %.1f%% of the reads, want under 5%%", 100*shares[2])
	}
	// n3 is busy at nine samples in ten, the others at one in ten.
	if shares, _ := spread(testRefs(ms/10, ms/10, ms/10), 0.1, 0.1, 0.9); shares[2] > 0.15 {
		t.Errorf("n3 busy nine times in ten got %.1f%% of the reads, want under 15%%", 100*shares[2])
	}
	refs := testRefs(ms/10, ms/10, ms/10)
	refs[1].peer.penaltyUntil.Store(now + int64(time.Second))
	if shares, _ := spread(refs, 0.5, 0.5, 0.5); shares[1] != 0 || math.Abs(shares[0]-0.5) > 0.05 {
		t.Errorf("n2 failed: shares %.3f, want n2 none and the others half each", shares)
	}
}

// TestSaturatedNodeLeavesChoice: a node saturated at every sample, among
// others busy at a third of theirs, leaves the choice within seven of its
// samples (docs/read-modes.md) and stays out but for the odd sample.
func TestSaturatedNodeLeavesChoice(t *testing.T) {
	ms, now := time.Millisecond, int64(time.Hour)
	rng := rand.New(rand.NewPCG(3, 4))
	f, at := scoreFilter{}, time.Unix(1000, 0)
	in := pickInput{refs: testRefs(ms/10, ms/10, ms/10), rttWeight: 1, now: now, stallAfter: int64(time.Second)}
	left, back := 0, 0 // samples until it left; samples it was back after
	for p := range 100 {
		at = at.Add(time.Second)
		for i := range 3 {
			s := 4 + rng.Float64()
			if rng.Float64() < 0.3 || (i == 2 && p >= 50) {
				s += 99
			}
			f.add(&tidekvpb.NodeLoad{NodeId: uint64(i + 1), Score: s, UnixNanos: at.UnixNano()})
		}
		in.loads = buildLoadView(f, at, 3*time.Second)
		picked := false
		for r := range 3 {
			in.turn = uint64(r)
			picked = picked || chooseReplica(&in) == 2
		}
		switch {
		case p >= 50 && !picked && left == 0:
			left = p - 49
		case left != 0 && picked:
			back++
		}
	}
	if left == 0 || left > 7 || back > 5 {
		t.Errorf("n3 saturated: left the choice after %d samples (want 1 to 7), back at %d of the next %d (want at most 5)", left, back, 50-left)
	}
}
