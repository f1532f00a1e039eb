package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/linearizability"
)

// Linearizability tests of the raftstore alone: concurrent clients call the
// leaseholder replica's Write, Get and CompareAndSet directly while a
// nemesis crashes, restarts and isolates nodes; every operation is recorded
// and the history is checked with porcupine. The negative control turns on
// TestingStaleReads and reads from an isolated follower, and must fail.
//
// TIDEKV_LINZ_DURATION (a Go duration) lengthens the nemesis phase of the
// positive test, e.g. TIDEKV_LINZ_DURATION=5m.

const linzDurationEnv = "TIDEKV_LINZ_DURATION"

// linzDuration is how long the nemesis runs: def unless the environment
// says otherwise.
func linzDuration(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(linzDurationEnv)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", linzDurationEnv, s)
	}
	return d
}

// linzCluster wraps testCluster so that the nemesis (on the test goroutine)
// can crash and restart stores while client goroutines look replicas up:
// testCluster's maps are not synchronized, so every access goes through mu.
type linzCluster struct {
	tc *testCluster

	mu       sync.Mutex
	isolated uint64 // node cut off from the others, 0 if none
}

func newLinzCluster(t *testing.T, n int, mutate ...func(*Config)) *linzCluster {
	return &linzCluster{tc: newTestCluster(t, n, mutate...)}
}

// replica returns node's replica of the test range, nil if the node is down.
func (lc *linzCluster) replica(node uint64) *Replica {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if s := lc.tc.stores[node]; s != nil {
		return s.GetReplica(testRangeID)
	}
	return nil
}

// leaders returns every live replica that believes it holds the lease.
// There can be more than one: a deposed leader that has not noticed yet.
func (lc *linzCluster) leaders() []*Replica {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	var out []*Replica
	for _, id := range lc.tc.nodes {
		if s := lc.tc.stores[id]; s != nil {
			if r := s.GetReplica(testRangeID); r != nil && r.IsLeader() {
				out = append(out, r)
			}
		}
	}
	return out
}

// waitLeader waits until some replica other than the isolated one leads,
// and returns its node.
func (lc *linzCluster) waitLeader(t *testing.T) uint64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		lc.mu.Lock()
		iso := lc.isolated
		lc.mu.Unlock()
		for _, r := range lc.leaders() {
			if id := r.store.nodeID; id != iso {
				return id
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no leader within 15s")
	return 0
}

func (lc *linzCluster) crash(id uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.tc.crash(id)
}

func (lc *linzCluster) restart(id uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.tc.restart(id)
}

func (lc *linzCluster) isolate(id uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.tc.net.Isolate(id, lc.tc.nodes, true)
	lc.isolated = id
}

func (lc *linzCluster) heal() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.isolated != 0 {
		lc.tc.net.Isolate(lc.isolated, lc.tc.nodes, false)
		lc.isolated = 0
	}
}

// others returns the nodes other than id.
func (lc *linzCluster) others(id uint64) []uint64 {
	var out []uint64
	for _, n := range lc.tc.nodes {
		if n != id {
			out = append(out, n)
		}
	}
	return out
}

// definitelyNotApplied reports whether err from Write or CompareAndSet
// guarantees that the command never entered the Raft log: the replica
// refused it up front (not the leader, wrong range) or Raft dropped it.
// Everything else (ErrAmbiguous, a stopped store, an apply-time error we
// do not know) is treated as an unknown outcome.
func definitelyNotApplied(err error) bool {
	var nl *NotLeaderError
	var km *KeyMismatchError
	var rnf *RangeNotFoundError
	return errors.As(err, &nl) || errors.As(err, &km) || errors.As(err, &rnf) || errors.Is(err, ErrOverloaded)
}

// linzStats counts outcomes and remembers when successful operations were
// invoked, to show that the workload kept making progress through every
// nemesis step.
type linzStats struct {
	mu      sync.Mutex
	ok      []time.Time // invocation times of operations with a definite result
	unknown int
	failed  int
}

func (s *linzStats) record(start time.Time, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch outcome {
	case "ok":
		s.ok = append(s.ok, start)
	case "unknown":
		s.unknown++
	case "failed":
		s.failed++
	}
}

// okBetween counts successful operations invoked in [from, to).
func (s *linzStats) okBetween(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.ok {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func (s *linzStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d ok, %d unknown, %d failed (dropped)", len(s.ok), s.unknown, s.failed)
}

// linzClient is one client goroutine's state.
type linzClient struct {
	id    int
	rec   *linearizability.Recorder
	stats *linzStats
	rng   *rand.Rand
	// seen is the last state this client observed per key, which its CAS
	// operations expect.
	seen map[string]*string
	seq  int
	// lastOk: the last operation had a definite outcome.
	lastOk bool
	// opTimeout bounds one operation; a write that runs out of it has an
	// unknown outcome.
	opTimeout time.Duration
}

func newLinzClient(id int, rec *linearizability.Recorder, stats *linzStats, seed uint64) *linzClient {
	return &linzClient{id: id, rec: rec, stats: stats, rng: rand.New(rand.NewPCG(seed, uint64(id))),
		seen: map[string]*string{}, opTimeout: time.Second}
}

func (c *linzClient) outcome(start time.Time, o string) {
	c.lastOk = o == "ok"
	c.stats.record(start, o)
}

func (c *linzClient) value() string {
	c.seq++
	// Unique values make any misordering observable.
	return fmt.Sprintf("c%d-%d", c.id, c.seq)
}

func (c *linzClient) get(r *Replica, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opTimeout)
	defer cancel()
	start := time.Now()
	p := c.rec.Begin(c.id, linearizability.GetInput(key))
	v, found, err := r.Get(ctx, []byte(key))
	switch {
	case err == nil:
		p.Ok(linearizability.Output{Found: found, Value: string(v)})
		c.outcome(start, "ok")
		if found {
			s := string(v)
			c.seen[key] = &s
		} else {
			c.seen[key] = nil
		}
	default:
		// A read has no effect either way; an unknown read is dropped.
		p.Unknown()
		c.outcome(start, "unknown")
	}
}

func (c *linzClient) put(r *Replica, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opTimeout)
	defer cancel()
	val := c.value()
	start := time.Now()
	p := c.rec.Begin(c.id, linearizability.PutInput(key, val))
	_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte(key), Value: []byte(val)}})
	switch {
	case err == nil:
		p.Ok(linearizability.Output{})
		c.outcome(start, "ok")
	case definitelyNotApplied(err):
		p.Failed()
		c.outcome(start, "failed")
	default:
		p.Unknown()
		c.outcome(start, "unknown")
	}
}

func (c *linzClient) cas(r *Replica, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opTimeout)
	defer cancel()
	val := c.value()
	req := &tidekvpb.CompareAndSetRequest{Key: []byte(key), NewValue: []byte(val)}
	in := linearizability.CASAbsentInput(key, val)
	if exp := c.seen[key]; exp != nil {
		req.ExpectExists, req.ExpectedValue = true, []byte(*exp)
		in = linearizability.CASInput(key, *exp, val)
	}
	start := time.Now()
	p := c.rec.Begin(c.id, in)
	resp, err := r.CompareAndSet(ctx, req)
	switch {
	case err == nil:
		p.Ok(linearizability.Output{Swapped: resp.GetSucceeded()})
		c.outcome(start, "ok")
		// Aim the next CAS at what is there now.
		switch {
		case resp.GetSucceeded():
			c.seen[key] = &val
		case resp.GetCurrentExists():
			s := string(resp.GetCurrentValue())
			c.seen[key] = &s
		default:
			c.seen[key] = nil
		}
	case definitelyNotApplied(err):
		p.Failed()
		c.outcome(start, "failed")
	default:
		p.Unknown()
		c.outcome(start, "unknown")
	}
}

// step runs one random operation on a random key against r.
func (c *linzClient) step(r *Replica, keys []string) {
	key := keys[c.rng.IntN(len(keys))]
	switch p := c.rng.IntN(10); {
	case p < 4:
		c.get(r, key)
	case p < 7:
		c.put(r, key)
	default:
		c.cas(r, key)
	}
}

// linzRoute picks the replica for a client's next operation: nil when there
// is nothing to talk to right now; readOnly when only a read may go there.
type linzRoute func(c *linzClient) (r *Replica, readOnly bool)

// runLinzClients starts n clients that loop until ctx ends, each sending
// its operations where route says. The returned function waits for them.
func runLinzClients(ctx context.Context, n int, seed uint64, rec *linearizability.Recorder, stats *linzStats,
	keys []string, route linzRoute) (wait func()) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := newLinzClient(i, rec, stats, seed)
			for ctx.Err() == nil {
				r, readOnly := route(c)
				switch {
				case r == nil:
					time.Sleep(2 * time.Millisecond)
					continue
				case readOnly:
					c.get(r, keys[c.rng.IntN(len(keys))])
				default:
					c.step(r, keys)
				}
				// A little think time keeps the history at a size porcupine
				// checks in seconds.
				time.Sleep(time.Duration(c.rng.IntN(1500)) * time.Microsecond)
			}
		})
	}
	return wg.Wait
}

// routeToLeader sends every operation to a replica that believes it leads,
// chosen at random when several do (a deposed leader that has not noticed
// yet must be exercised too: that is where stale reads would come from).
func routeToLeader(lc *linzCluster) linzRoute {
	return func(c *linzClient) (*Replica, bool) {
		ls := lc.leaders()
		if len(ls) == 0 {
			return nil, false
		}
		return ls[c.rng.IntN(len(ls))], false
	}
}

func linzKeys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("linz/k%d", i)
	}
	return ks
}

// linzArtifactDir is where a failing check leaves its visualization and
// history: $TIDEKV_ARTIFACTS if set, else a directory kept only if the test
// fails.
func linzArtifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(linearizability.ArtifactsEnv); d != "" {
		return d
	}
	d, err := os.MkdirTemp("", "tidekv-linz-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(d)
		}
	})
	return d
}

// checkHistory checks h; on a violation it writes the visualization and
// the failing keys' operations next to it.
func checkHistory(t *testing.T, h linearizability.History) linearizability.Result {
	t.Helper()
	viz := linearizability.VisualizationPath(linzArtifactDir(t), t.Name())
	start := time.Now()
	res := linearizability.Check(h, 2*time.Minute, linearizability.WithVisualization(viz))
	t.Logf("%s (checked in %v)", res.Describe, time.Since(start).Round(time.Millisecond))
	if res.Unknown {
		t.Fatalf("linearizability check timed out")
	}
	if !res.Ok {
		path := strings.TrimSuffix(viz, ".html") + ".history.txt"
		if err := os.WriteFile(path, []byte(formatHistory(h, res.FailedKeys)), 0o644); err == nil {
			t.Logf("history of the failing keys: %s", path)
		}
	}
	return res
}

// formatHistory lists the operations on keys (all keys if none) in
// invocation order, one per line, for humans.
func formatHistory(h linearizability.History, keys []string) string {
	ops := slices.Clone(h)
	slices.SortStableFunc(ops, func(a, b linearizability.Op) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	var b strings.Builder
	for _, op := range ops {
		if len(keys) > 0 && !slices.Contains(keys, op.Input.Key) {
			continue
		}
		fmt.Fprintf(&b, "%s\n", formatOp(op))
	}
	return b.String()
}

func formatOp(op linearizability.Op) string {
	in, out := op.Input, op.Output
	var call string
	switch in.Kind {
	case linearizability.Get:
		call = fmt.Sprintf("get(%s)", in.Key)
	case linearizability.Put:
		call = fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
	case linearizability.Delete:
		call = fmt.Sprintf("delete(%s)", in.Key)
	case linearizability.CAS:
		exp := "<absent>"
		if in.ExpectExists {
			exp = in.Expected
		}
		call = fmt.Sprintf("cas(%s, %s -> %s)", in.Key, exp, in.Value)
	}
	var res string
	switch {
	case out.Unknown:
		return fmt.Sprintf("client %2d  [%12.6fms, ?]  %s -> ?", op.ClientID, float64(op.Call)/1e6, call)
	case in.Kind == linearizability.Get && out.Found:
		res = out.Value
	case in.Kind == linearizability.Get:
		res = "<not found>"
	case in.Kind == linearizability.CAS:
		res = fmt.Sprintf("swapped=%v", out.Swapped)
	default:
		res = "ok"
	}
	return fmt.Sprintf("client %2d  [%12.6fms, %12.6fms]  %s -> %s", op.ClientID, float64(op.Call)/1e6, float64(op.Return)/1e6, call, res)
}

// probeDeposed runs right after the nemesis isolated the leaseholder old.
// For about a second it waits for the moment when the majority side has
// elected a new leaseholder while old still believes it holds the lease
// (it has not yet noticed that it lost its quorum). Then it writes key
// through the new leaseholder and, once that is acknowledged, reads key
// from old. A correct lease makes old refuse (or delay) the read; a stale
// answer is a linearizability violation. It reports whether it got to
// probe: old may step down before anyone else takes over.
func (lc *linzCluster) probeDeposed(t *testing.T, c *linzClient, old uint64, key string) bool {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		var oldR, newR *Replica
		for _, r := range lc.leaders() {
			if r.store.nodeID == old {
				oldR = r
			} else {
				newR = r
			}
		}
		if oldR == nil {
			return false // stepped down first: nothing to probe
		}
		if newR == nil {
			time.Sleep(time.Millisecond)
			continue
		}
		seq := c.seq
		c.put(newR, key)
		if c.seq == seq || !c.lastOk {
			continue
		}
		c.get(oldR, key)
		return true
	}
	return false
}

// TestLinearizabilityUnderNemesis runs concurrent clients against the
// leaseholder while a nemesis crashes and restarts nodes (the leaseholder
// or a random one) and isolates and heals the leaseholder, probing it while
// it is deposed but unaware (see probeDeposed), and checks that the history
// is linearizable.
func TestLinearizabilityUnderNemesis(t *testing.T) {
	dur := linzDuration(t, 6*time.Second)
	lc := newLinzCluster(t, 3)
	lc.waitLeader(t)

	rec := linearizability.NewRecorder()
	stats := &linzStats{}
	keys := linzKeys(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	wait := runLinzClients(ctx, 6, seed, rec, stats, keys, routeToLeader(lc))

	rng := rand.New(rand.NewPCG(seed, 1<<32))
	// The nemesis's own client, for probing a deposed leaseholder.
	probe := newLinzClient(1000, rec, stats, seed)
	probes := 0
	pause := func(base, spread time.Duration) {
		time.Sleep(base + time.Duration(rng.Int64N(int64(spread))))
	}
	type event struct {
		at   time.Time
		what string
	}
	var events []event
	time.Sleep(300 * time.Millisecond) // a fault-free start
	deadline := time.Now().Add(dur)
	for round := 0; time.Now().Before(deadline); round++ {
		// Even rounds crash a node, alternately the leader and a random
		// one; odd rounds isolate the leader.
		leader := lc.waitLeader(t)
		victim := leader
		if round%4 == 2 {
			victim = lc.tc.nodes[rng.IntN(len(lc.tc.nodes))]
		}
		kind := "leader"
		if victim != leader {
			kind = "follower"
		}
		if round%2 == 0 {
			events = append(events, event{time.Now(), fmt.Sprintf("crash node %d (%s)", victim, kind)})
			lc.crash(victim)
			pause(200*time.Millisecond, 400*time.Millisecond)
			lc.restart(victim)
		} else {
			what := fmt.Sprintf("isolate node %d (%s)", victim, kind)
			events = append(events, event{time.Now(), what})
			lc.isolate(victim)
			isoStart := time.Now()
			if victim == leader && lc.probeDeposed(t, probe, victim, keys[rng.IntN(len(keys))]) {
				probes++
			}
			time.Sleep(time.Until(isoStart.Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond))))))
			lc.heal()
		}
		lc.waitLeader(t)
		pause(200*time.Millisecond, 300*time.Millisecond)
	}
	end := time.Now()
	time.Sleep(200 * time.Millisecond) // let the last recovery show in the history
	cancel()
	wait()

	t.Logf("%d nemesis events; operations: %s; %d probes of a deposed leaseholder", len(events), stats, probes)
	for i, ev := range events {
		to := end
		if i+1 < len(events) {
			to = events[i+1].at
		}
		n := stats.okBetween(ev.at, to)
		t.Logf("  %-32s then %5d successful ops", ev.what, n)
		if n == 0 {
			t.Errorf("no successful operation between %q and the next event", ev.what)
		}
	}
	if len(events) < 4 {
		t.Errorf("only %d nemesis events", len(events))
	}
	res := checkHistory(t, rec.History())
	if !res.Ok {
		t.Fatalf("history is not linearizable (seed %d)", seed)
	}
	if res.Ops < 500 {
		t.Fatalf("only %d operations checked; the test proves little", res.Ops)
	}
}

// TestLinearizabilityDeposedLeaseholder isolates the leaseholder again and
// again, with the random workload running, until probeDeposed has caught
// the old leaseholder still believing in its lease after a new one was
// elected (three times, or ten isolations), and checks the history. A
// lease that outlives the followers' promise not to elect anyone else
// shows up here as a stale read.
func TestLinearizabilityDeposedLeaseholder(t *testing.T) {
	lc := newLinzCluster(t, 3)
	lc.waitLeader(t)
	rec := linearizability.NewRecorder()
	stats := &linzStats{}
	keys := linzKeys(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	wait := runLinzClients(ctx, 4, seed, rec, stats, keys, routeToLeader(lc))

	rng := rand.New(rand.NewPCG(seed, 1<<32))
	probe := newLinzClient(1000, rec, stats, seed)
	probes, rounds := 0, 0
	for ; rounds < 10 && probes < 3; rounds++ {
		time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond))))
		leader := lc.waitLeader(t)
		lc.isolate(leader)
		if lc.probeDeposed(t, probe, leader, keys[rng.IntN(len(keys))]) {
			probes++
		}
		lc.heal()
		lc.waitLeader(t)
	}
	cancel()
	wait()
	t.Logf("%d isolations of the leaseholder, %d probes while it was deposed; operations: %s", rounds, probes, stats)
	res := checkHistory(t, rec.History())
	if !res.Ok {
		t.Fatalf("history is not linearizable (seed %d): a deposed leaseholder served a stale read", seed)
	}
	if probes == 0 {
		t.Fatalf("in %d isolations the old leaseholder never outlived the election of a new one: nothing was probed", rounds)
	}
}

// TestLinearizabilityNegativeControlStaleReads shows that the checker can
// fail: with TestingStaleReads every replica answers reads from local state,
// so a follower cut off from the others keeps answering with old values
// while the leader acknowledges new ones. The same random workload runs
// with a share of its reads sent to the isolated follower, and one client
// makes the violation certain: it writes a key, waits until the follower
// has applied it, isolates the follower, overwrites the key through the
// leader, and only then reads it from the follower.
func TestLinearizabilityNegativeControlStaleReads(t *testing.T) {
	lc := newLinzCluster(t, 3, func(c *Config) { c.TestingStaleReads = true })
	leader := lc.waitLeader(t)
	var follower uint64
	for _, id := range lc.others(leader) {
		follower = id
		break
	}

	rec := linearizability.NewRecorder()
	stats := &linzStats{}
	keys := linzKeys(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d; leader %d, follower to isolate %d", seed, leader, follower)

	// The certain violation, by a client of its own (id 100).
	const key = "linz/stale"
	det := newLinzClient(100, rec, stats, seed)
	mustPut := func(val string) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			r := lc.replica(lc.waitLeader(t))
			if r == nil || !r.IsLeader() {
				continue
			}
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			p := rec.Begin(det.id, linearizability.PutInput(key, val))
			_, err := r.Write(c, []*tidekvpb.WriteOp{{Key: []byte(key), Value: []byte(val)}})
			cancel()
			if err == nil {
				p.Ok(linearizability.Output{})
				return
			}
			if definitelyNotApplied(err) {
				p.Failed()
			} else {
				p.Unknown()
			}
			if attempt > 50 {
				t.Fatalf("put %s=%s: %v", key, val, err)
			}
		}
	}
	mustPut("v-old")
	waitFor(t, func() bool {
		v, ok, _ := lc.tc.engines[follower].Get(dataKey(key))
		return ok && string(v) == "v-old"
	})

	// The random workload goes to the leader, except that while a follower
	// is isolated a third of the operations are reads sent to it (writes
	// would only be refused there as not leader).
	var isolatedReplica atomic.Pointer[Replica]
	toLeader := routeToLeader(lc)
	wait := runLinzClients(ctx, 6, seed, rec, stats, keys, func(c *linzClient) (*Replica, bool) {
		if f := isolatedReplica.Load(); f != nil && c.rng.IntN(3) == 0 {
			return f, true
		}
		return toLeader(c)
	})

	time.Sleep(300 * time.Millisecond)
	lc.isolate(follower)
	isolatedReplica.Store(lc.replica(follower))
	mustPut("v-new")
	// Acknowledged above, after the isolation: the follower cannot have it.
	p := rec.Begin(det.id, linearizability.GetInput(key))
	v, found, err := lc.replica(follower).Get(context.Background(), []byte(key))
	if err != nil {
		p.Failed()
		t.Fatalf("stale-reads mode: follower refused a read: %v", err)
	}
	p.Ok(linearizability.Output{Found: found, Value: string(v)})
	if !found || string(v) != "v-old" {
		t.Fatalf("isolated follower read %s = %q (found %v), want the stale v-old", key, v, found)
	}

	time.Sleep(700 * time.Millisecond) // more of the random workload
	isolatedReplica.Store(nil)
	lc.heal()
	time.Sleep(200 * time.Millisecond)
	cancel()
	wait()
	t.Logf("operations: %s", stats)

	h := rec.History()
	res := linearizability.Check(h, time.Minute)
	t.Logf("%s", res.Describe)
	switch {
	case res.Unknown:
		t.Fatal("check timed out")
	case res.Ok:
		t.Fatal("negative control passed the check: the checker did not catch stale reads")
	case !slices.Contains(res.FailedKeys, key):
		t.Errorf("failing keys %q do not include %q", res.FailedKeys, key)
	}
}
