package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
//
// The random workload, its statistics and the reporting of a failed check
// come from package linearizability; this file supplies the transport
// (replicaDo) and the nemesis.

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

// restartVolatile brings a crashed node back with its range data gone
// (volatile_test.go).
func (lc *linzCluster) restartVolatile(id uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.tc.restartVolatile(id)
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
	var lost *DataLostError
	return errors.As(err, &nl) || errors.As(err, &km) || errors.As(err, &rnf) || errors.As(err, &lost) || errors.Is(err, ErrOverloaded)
}

// linzOpTimeout bounds one operation; a write that runs out of it has an
// unknown outcome.
const linzOpTimeout = time.Second

// writeReply maps the error of a Write or CompareAndSet to an outcome.
func writeReply(err error, out linearizability.Output) linearizability.Reply {
	switch {
	case err == nil:
		return linearizability.Reply{Output: out}
	case definitelyNotApplied(err):
		return linearizability.Reply{Outcome: linearizability.OutcomeFailed, Err: err}
	}
	return linearizability.Reply{Outcome: linearizability.OutcomeUnknown, Err: err}
}

// replicaDo runs workload operations directly on replica r, each bounded by
// timeout.
func replicaDo(r *Replica, timeout time.Duration) linearizability.Do {
	return func(in linearizability.Input) linearizability.Reply {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		key := []byte(in.Key)
		switch in.Kind {
		case linearizability.Get:
			v, found, err := r.Get(ctx, key, ReadOptions{})
			if err != nil {
				// A read has no effect either way; an unknown read is dropped.
				return linearizability.Reply{Outcome: linearizability.OutcomeUnknown, Err: err}
			}
			return linearizability.Reply{Output: linearizability.Output{Found: found, Value: string(v)}}
		case linearizability.Put:
			_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: key, Value: []byte(in.Value)}})
			return writeReply(err, linearizability.Output{})
		case linearizability.CAS:
			req := &tidekvpb.CompareAndSetRequest{Key: key, NewValue: []byte(in.Value)}
			if in.ExpectExists {
				req.ExpectExists, req.ExpectedValue = true, []byte(in.Expected)
			}
			resp, err := r.CompareAndSet(ctx, req)
			res := writeReply(err, linearizability.Output{Swapped: resp.GetSucceeded()})
			if resp.GetCurrentExists() {
				cur := string(resp.GetCurrentValue())
				res.Current = &cur
			}
			return res
		}
		panic(fmt.Sprintf("linearizability workload: unexpected %s", in.Kind))
	}
}

// linzWorkload is a test's random workload: the recorder and statistics
// its clients share, their keys, the seed of their random choices, and the
// nemesis's random source (derived from the same seed).
type linzWorkload struct {
	rec   *linearizability.Recorder
	stats *linearizability.Stats
	keys  []string
	seed  uint64
	rng   *rand.Rand
}

// newLinzWorkload returns a workload over 4 keys with a fresh seed, which
// it logs.
func newLinzWorkload(t *testing.T) *linzWorkload {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return &linzWorkload{rec: linearizability.NewRecorder(), stats: &linearizability.Stats{},
		keys: linearizability.Keys(4), seed: seed, rng: rand.New(rand.NewPCG(seed, 1<<32))}
}

// client returns workload client id.
func (w *linzWorkload) client(id int) *linearizability.Client {
	c := linearizability.NewClient(id, w.rec, w.keys, w.seed)
	c.OnReply = w.stats.Record
	return c
}

// linzRoute picks the replica for a client's next operation: nil when there
// is nothing to talk to right now; readOnly when only a read may go there.
type linzRoute func(c *linearizability.Client) (r *Replica, readOnly bool)

// run starts n clients (ids 0..n-1) that loop, each sending its
// operations where route says, until stop is called or the test ends.
// stop returns once they have all finished.
func (w *linzWorkload) run(t *testing.T, n int, route linzRoute) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := w.client(i)
			for ctx.Err() == nil {
				r, readOnly := route(c)
				switch {
				case r == nil:
					time.Sleep(2 * time.Millisecond)
					continue
				case readOnly:
					c.Get(c.RandomKey(), replicaDo(r, linzOpTimeout))
				default:
					c.Step(replicaDo(r, linzOpTimeout))
				}
				// A little think time keeps the history at a size porcupine
				// checks in seconds.
				time.Sleep(time.Duration(c.Rand().IntN(1500)) * time.Microsecond)
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// routeToLeader sends every operation to a replica that believes it leads,
// chosen at random when several do (a deposed leader that has not noticed
// yet must be exercised too: that is where stale reads would come from).
func routeToLeader(lc *linzCluster) linzRoute {
	return func(c *linearizability.Client) (*Replica, bool) {
		ls := lc.leaders()
		if len(ls) == 0 {
			return nil, false
		}
		return ls[c.Rand().IntN(len(ls))], false
	}
}

// probeDeposed runs right after the nemesis isolated the leaseholder old.
// For about a second it waits for the moment when the majority side has
// elected a new leaseholder while old still believes it holds the lease
// (it has not yet noticed that it lost its quorum). Then it writes key
// through the new leaseholder and, once that is acknowledged, reads key
// from old. A correct lease makes old refuse (or delay) the read; a stale
// answer is a linearizability violation. It reports whether it got to
// probe: old may step down before anyone else takes over.
func (lc *linzCluster) probeDeposed(t *testing.T, c *linearizability.Client, old uint64, key string) bool {
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
		if c.Put(key, replicaDo(newR, linzOpTimeout)).Outcome != linearizability.OutcomeOk {
			continue
		}
		c.Get(key, replicaDo(oldR, linzOpTimeout))
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
	dur := linearizability.NemesisDuration(t, 6*time.Second)
	lc := newLinzCluster(t, 3)
	lc.waitLeader(t)

	w := newLinzWorkload(t)
	stop := w.run(t, 6, routeToLeader(lc))

	rng := w.rng
	// The nemesis's own client, for probing a deposed leaseholder.
	probe := w.client(1000)
	probes := 0
	pause := func(base, spread time.Duration) {
		time.Sleep(base + time.Duration(rng.Int64N(int64(spread))))
	}
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
			w.stats.Mark(fmt.Sprintf("crash node %d (%s)", victim, kind))
			lc.crash(victim)
			pause(200*time.Millisecond, 400*time.Millisecond)
			lc.restart(victim)
		} else {
			w.stats.Mark(fmt.Sprintf("isolate node %d (%s)", victim, kind))
			lc.isolate(victim)
			isoStart := time.Now()
			if victim == leader && lc.probeDeposed(t, probe, victim, w.keys[rng.IntN(len(w.keys))]) {
				probes++
			}
			time.Sleep(time.Until(isoStart.Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond))))))
			lc.heal()
		}
		lc.waitLeader(t)
		pause(200*time.Millisecond, 300*time.Millisecond)
	}
	w.finish(t, stop, time.Now(), fmt.Sprintf("; %d probes of a deposed leaseholder", probes))
}

// finish ends a nemesis run whose last fault was at end: it stops the
// clients a moment later (the last recovery shows in the history), logs
// the faults, and checks that each was followed by successful operations,
// that there were at least four, and that the history, of at least 500
// operations, is linearizable.
func (w *linzWorkload) finish(t *testing.T, stop func(), end time.Time, note string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	stop()
	events := w.stats.Events(end)
	t.Logf("%d nemesis events; operations: %s%s", len(events), w.stats, note)
	for _, ev := range events {
		t.Logf("  %-40s then %5d successful ops", ev.What, ev.Ok)
		if ev.Ok == 0 {
			t.Errorf("no successful operation between %q and the next event", ev.What)
		}
	}
	if len(events) < 4 {
		t.Errorf("only %d nemesis events", len(events))
	}
	res := linearizability.CheckWithArtifacts(t, w.rec.History(), 2*time.Minute)
	if !res.Ok {
		t.Fatalf("history is not linearizable (seed %d)", w.seed)
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
	w := newLinzWorkload(t)
	stop := w.run(t, 4, routeToLeader(lc))

	rng := w.rng
	probe := w.client(1000)
	probes, rounds := 0, 0
	for ; rounds < 10 && probes < 3; rounds++ {
		time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond))))
		leader := lc.waitLeader(t)
		lc.isolate(leader)
		if lc.probeDeposed(t, probe, leader, w.keys[rng.IntN(len(w.keys))]) {
			probes++
		}
		lc.heal()
		lc.waitLeader(t)
	}
	stop()
	t.Logf("%d isolations of the leaseholder, %d probes while it was deposed; operations: %s", rounds, probes, w.stats)
	res := linearizability.CheckWithArtifacts(t, w.rec.History(), 2*time.Minute)
	if !res.Ok {
		t.Fatalf("history is not linearizable (seed %d): a deposed leaseholder served a stale read", w.seed)
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

	w := newLinzWorkload(t)
	t.Logf("leader %d, follower to isolate %d", leader, follower)

	// The certain violation, by a client of its own (id 100).
	const key = "linz/stale"
	const det = 100
	mustPut := func(val string) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			r := lc.replica(lc.waitLeader(t))
			if r == nil || !r.IsLeader() {
				continue
			}
			res := w.rec.Run(det, linearizability.PutInput(key, val), replicaDo(r, 2*time.Second))
			if res.Outcome == linearizability.OutcomeOk {
				return
			}
			if attempt > 50 {
				t.Fatalf("put %s=%s: %v", key, val, res.Err)
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
	stop := w.run(t, 6, func(c *linearizability.Client) (*Replica, bool) {
		if f := isolatedReplica.Load(); f != nil && c.Rand().IntN(3) == 0 {
			return f, true
		}
		return toLeader(c)
	})

	time.Sleep(300 * time.Millisecond)
	lc.isolate(follower)
	isolatedReplica.Store(lc.replica(follower))
	mustPut("v-new")
	// Acknowledged above, after the isolation: the follower cannot have it.
	p := w.rec.Begin(det, linearizability.GetInput(key))
	v, found, err := lc.replica(follower).Get(context.Background(), []byte(key), ReadOptions{})
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
	stop()
	t.Logf("operations: %s", w.stats)

	linearizability.WantViolation(t, w.rec.History(), key, time.Minute)
}
