package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/transport"
)

// testCluster runs n stores in process on in-memory engines connected by a
// MemNetwork. All nodes bootstrap range 2 covering the whole key space with
// every node as a voter (no meta range: the raftstore alone).
// followClockSteps makes every store's time follow a step of the wall
// clock they share, as each node's offset monitor does once its peers'
// clocks agree with the stepped one (here they are the same clock).
func (tc *testCluster) followClockSteps() {
	for _, s := range tc.stores {
		s.clock.Follow()
	}
}

type testCluster struct {
	t       *testing.T
	cfg     Config
	net     *transport.MemNetwork
	engines map[uint64]*storage.MemEngine
	// running is the engine each node's store was last started on.
	running map[uint64]storage.Engine
	stores  map[uint64]*Store
	nodes   []uint64
	rng     *rand.Rand // for fault choices; set by tests that need one
	// wrap, when set, stands between a store started from then on and
	// the network (fault injection at the sender).
	wrap func(node uint64, t Transport) Transport
}

const testRangeID = 2

func testStoreConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.InitialLogVersion = LatestLogVersion
	cfg.TickInterval = 10 * time.Millisecond
	// A quarter of the election timeout, as with the defaults: an elected
	// leaseholder stamps writes from its clock on (leaseLowWater).
	cfg.MaxClockOffset = 25 * time.Millisecond
	cfg.SnapshotDir = t.TempDir()
	cfg.CatchUpTimeout = 10 * time.Second
	return cfg
}

func newTestCluster(t *testing.T, n int, mutate ...func(*Config)) *testCluster {
	t.Helper()
	return newTestClusterOn(t, n, nil, nil, mutate...)
}

// newTestClusterOn is newTestCluster with each node's engine from open
// (nil opens in-memory engines, which the cluster keeps in engines) and
// wrap set from the start.
func newTestClusterOn(t *testing.T, n int, open func(node uint64) storage.Engine,
	wrap func(node uint64, t Transport) Transport, mutate ...func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, cfg: testStoreConfig(t), net: transport.NewMemNetwork(), wrap: wrap,
		engines: map[uint64]*storage.MemEngine{}, running: map[uint64]storage.Engine{}, stores: map[uint64]*Store{}}
	for _, m := range mutate {
		m(&tc.cfg)
	}
	desc := &tidekvpb.RangeDescriptor{RangeId: testRangeID, Generation: 1, NextReplicaId: uint64(n) + 1}
	for i := 1; i <= n; i++ {
		desc.Replicas = append(desc.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: uint64(i), ReplicaId: uint64(i)})
		tc.nodes = append(tc.nodes, uint64(i))
	}
	engs := map[uint64]storage.Engine{}
	for _, id := range tc.nodes {
		if open == nil {
			tc.engines[id] = storage.NewMem()
			engs[id] = tc.engines[id]
		} else {
			engs[id] = open(id)
		}
		s, err := NewStore(tc.cfg, id, engs[id], tc.net.Transport(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The range begins unversioned, as in a cluster that began
		// before log version 4: tests move it with MigrateLayout.
		if err := s.Bootstrap([]*tidekvpb.RangeDescriptor{desc}, LogVersionBase); err != nil {
			t.Fatal(err)
		}
		s.Stop()
	}
	for _, id := range tc.nodes {
		tc.startStoreOn(id, engs[id])
	}
	t.Cleanup(func() {
		for _, s := range tc.stores {
			s.Stop()
		}
		tc.net.Close()
	})
	return tc
}

func (tc *testCluster) startStore(id uint64) *Store {
	tc.t.Helper()
	return tc.startStoreOn(id, tc.engines[id])
}

// startStoreOn starts node id's store on eng (its engine, or one wrapping
// it).
func (tc *testCluster) startStoreOn(id uint64, eng storage.Engine) *Store {
	tc.t.Helper()
	var tr Transport = tc.net.Transport(id)
	if tc.wrap != nil {
		tr = tc.wrap(id, tr)
	}
	s, err := NewStore(tc.cfg, id, eng, tr, nil)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.net.Register(id, s)
	s.Start()
	tc.stores[id] = s
	tc.running[id] = eng
	return s
}

// addNode starts an empty store that holds no replica yet.
func (tc *testCluster) addNode() uint64 {
	id := uint64(len(tc.nodes) + 1)
	tc.nodes = append(tc.nodes, id)
	tc.engines[id] = storage.NewMem()
	tc.startStore(id)
	return id
}

// crash stops a node's store as if the process died (its engine survives).
func (tc *testCluster) crash(id uint64) {
	tc.net.Unregister(id)
	tc.stores[id].Stop()
	delete(tc.stores, id)
}

// restart brings a crashed node back on its engine.
func (tc *testCluster) restart(id uint64) { tc.startStore(id) }

// leader waits for the leaseholder of a range and returns it.
func (tc *testCluster) leader(rangeID uint64) *Replica {
	tc.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range tc.nodes {
			if s := tc.stores[id]; s != nil {
				if r := s.GetReplica(rangeID); r != nil && r.IsLeader() {
					return r
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tc.t.Fatalf("no leader for range %d", rangeID)
	return nil
}

// put writes through the current leader, retrying across leader changes.
func (tc *testCluster) put(key, value string) {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		r := tc.leader(testRangeID)
		if _, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte(key), Value: []byte(value)}}); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tc.t.Fatalf("put %s: timed out", key)
}

// Get reads one key: GetValue without the TTL, for tests.
func (r *Replica) Get(ctx context.Context, key []byte, ro ReadOptions) ([]byte, bool, error) {
	v, err := r.GetValue(ctx, key, ro)
	return v.Value, v.Found, err
}

// get reads linearizably through the current leader.
func (tc *testCluster) get(key string) (string, bool) {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		// The key's range is looked up on every try: since a split another
		// node may lead it, and a range merged away may still be found on
		// a store until its replica is destroyed.
		for _, id := range tc.nodes {
			s := tc.stores[id]
			if s == nil {
				continue
			}
			if r := s.LookupKey([]byte(key)); r != nil && r.IsLeader() {
				if v, ok, err := r.Get(ctx, []byte(key), ReadOptions{}); err == nil {
					return string(v), ok
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tc.t.Fatalf("get %s: timed out", key)
	return "", false
}

func TestClusterWriteReadAcrossLeaderCrash(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := 0; i < 20; i++ {
		tc.put(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	old := tc.leader(testRangeID)
	crashed := old.store.nodeID
	tc.crash(crashed)
	tc.put("after", "crash")
	if v, ok := tc.get("k05"); !ok || v != "v5" {
		t.Fatalf("k05 = %q, %v after leader crash", v, ok)
	}
	tc.restart(crashed)
	tc.put("after2", "restart")
	// The restarted node catches up: every replica applies the same state.
	waitFor(t, func() bool {
		v, ok, _ := tc.engines[crashed].Get(dataKey("after2"))
		return ok && string(v) == "restart"
	})
}

func TestAddReplicaBySnapshotAndRemove(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := 0; i < 100; i++ {
		tc.put(fmt.Sprintf("k%03d", i), "x")
	}
	n4 := tc.addNode()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ld := tc.leader(testRangeID)
	d, err := ld.ChangeReplicas(ctx, n4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if countVoters(d) != 4 || isJoint(d) {
		t.Fatalf("after add: %s", FormatReplicas(d))
	}
	waitFor(t, func() bool { _, ok, _ := tc.engines[n4].Get(dataKey("k099")); return ok })
	// Removing below the replication factor is refused.
	var victim uint64
	for _, id := range tc.nodes {
		if id != ld.store.nodeID && id != n4 {
			victim = id
		}
	}
	if d, err = ld.ChangeReplicas(ctx, 0, victim); err != nil {
		t.Fatal(err)
	}
	if countVoters(d) != 3 {
		t.Fatalf("after remove: %s", FormatReplicas(d))
	}
	var other uint64
	for _, id := range tc.nodes {
		if id != ld.store.nodeID && id != victim {
			other = id
			break
		}
	}
	if _, err := ld.ChangeReplicas(ctx, 0, other); err == nil {
		t.Fatal("removal below the replication factor was accepted")
	}
	// The removed node dropped its replica and its data.
	waitFor(t, func() bool { return tc.stores[victim].GetReplica(testRangeID) == nil })
	if _, ok, _ := tc.engines[victim].Get(dataKey("k001")); ok {
		t.Fatal("removed replica left its data behind")
	}
}

func dataKey(k string) []byte { return append([]byte{0x04}, k...) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitForWhy(t, func() (bool, string) { return cond(), "" })
}

// waitForWhy is waitFor for a condition that says what it found when it
// does not hold; the last such answer is in the failure.
func waitForWhy(t *testing.T, cond func() (ok bool, found string)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var found string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, found = cond(); ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	if found == "" {
		t.Fatal("condition not met in time")
	}
	t.Fatalf("condition not met in time; last found: %s", found)
}

// A replica addition to a node that dies gives up once the new learner has
// not answered for a few election timeouts, not after CatchUpTimeout (a
// minute, during which the range could not be repaired). The silence is
// counted in the leader's Raft ticks, so the test counts ticks too: every
// store's ticks are held from before the change, and the leader's are then
// delivered one at a time until the give-up.
//
// The bound, with E = ElectionTicks and L = learnerSilenceLimit: the
// learner's Progress starts RecentActive, and no tick passes while the
// change adds it (ticks held), so it stays so until the leader's next
// check-quorum, on the j-th tick delivered, 1 ≤ j ≤ E (the leader's
// election clock stood anywhere in its E-tick cycle when the ticks were
// held). That tick clears RecentActive and the
// silence begins; it is judged after every tick, and the change gives up on
// the tick that makes it L·E ticks long: after j + L·E ticks, so between
// L·E+1 and (L+1)·E. No tick passes after the give-up until the error.
func TestAddReplicaToDeadNodeGivesUp(t *testing.T) {
	tc, ld, w, done := addOnDeadNodeTicksHeld(t)
	e := uint64(tc.cfg.ElectionTicks)
	var ticks uint64
	for gaveUp := false; !gaveUp; {
		if ticks == (learnerSilenceLimit+1)*e {
			t.Fatalf("no give-up after %d ticks, want at most %d", ticks, ticks)
		}
		tc.stepTick(ld)
		ticks++
		select {
		case <-w.silent:
			gaveUp = true
		default:
		}
	}
	if err := <-done; !learnerSilent(err) {
		t.Fatalf("adding a replica on a dead node: %v after %d ticks, want errNotCaughtUp", err, ticks)
	}
	if ticks <= learnerSilenceLimit*e {
		t.Fatalf("gave up after %d ticks, before the learner was silent for %d", ticks, learnerSilenceLimit*e)
	}
	t.Logf("gave up after %d ticks", ticks)
}

// The silence of a learner is counted in Raft ticks, not wall time: with
// the leader's ticks held, after Raft found the learner inactive, the
// change does not give up however long the wall clock runs (here twice the
// whole limit and the RecentActive lag of wall time at the configured tick
// interval); once the ticks resume it does.
func TestAddReplicaLearnerSilenceCountsTicks(t *testing.T) {
	tc, ld, w, done := addOnDeadNodeTicksHeld(t)
	// Up to the check-quorum that clears the learner's RecentActive, at
	// most ElectionTicks ticks away.
	for active, ticks := true, 0; active; ticks++ {
		if ticks == tc.cfg.ElectionTicks {
			t.Fatalf("the learner is still active to Raft after %d ticks", ticks)
		}
		tc.stepTick(ld)
		ld.mu.Lock()
		active = ld.mu.raw.Status().Progress[w.replicaID].RecentActive
		ld.mu.Unlock()
	}
	held, stop := context.WithTimeout(context.Background(), 2*(learnerSilenceLimit+1)*tc.cfg.electionTimeout())
	defer stop()
	select {
	case err := <-done:
		t.Fatalf("the change ended with the leader's ticks held: %v", err)
	case <-held.Done():
	}
	tc.holdTicks(false, 1, 2, 3)
	if err := <-done; !learnerSilent(err) {
		t.Fatalf("adding a replica on a dead node once ticks resumed: %v, want errNotCaughtUp", err)
	}
}

// addOnDeadNodeTicksHeld holds the Raft ticks of a 3-node cluster's stores
// and starts adding a replica of the range on a fourth node that is down.
// It returns once the change waits for its learner to catch up: the
// cluster, the leader, that wait, and where the change's error arrives.
func addOnDeadNodeTicksHeld(t *testing.T) (*testCluster, *Replica, *learnerWait, <-chan error) {
	t.Helper()
	tc := newTestCluster(t, 3)
	tc.put("k", "v")
	n4 := tc.addNode()
	tc.crash(n4)
	ld := tc.leader(testRangeID)
	tc.holdTicks(true, 1, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { _, err := ld.ChangeReplicas(ctx, n4, 0); done <- err }()
	var w *learnerWait
	waitFor(t, func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		w = ld.mu.learnerWait
		return w != nil
	})
	return tc, ld, w, done
}

// learnerSilent reports whether err is a replica change's give-up on a
// learner that stopped answering.
func learnerSilent(err error) bool {
	return errors.Is(err, errNotCaughtUp) && strings.Contains(err.Error(), "has not answered")
}

// stepTick delivers one Raft tick to r's store, whose ticks are held
// (holdTicks), and waits until r has taken it: what the scheduler does for
// r on that tick is done when it returns.
func (tc *testCluster) stepTick(r *Replica) {
	tc.t.Helper()
	ticks := func() uint64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.ticks
	}
	before := ticks()
	r.store.testingTicksLent.Add(1)
	waitFor(tc.t, func() bool { return ticks() > before })
}

// holdTicks stops (hold) or restarts the Raft clocks of nodes' stores
// (Store.testingTicksHeld): with its clock held a replica starts no
// election of its own, and a follower keeps counting itself in its
// leader's lease.
func (tc *testCluster) holdTicks(hold bool, nodes ...uint64) {
	for _, id := range nodes {
		tc.stores[id].testingTicksHeld.Store(hold)
	}
}

// releaser returns a function that closes ch once: when the test calls it
// to let held messages through, or else when the test ends, before its
// cluster stops.
func releaser(t *testing.T, ch chan struct{}) func() {
	var once sync.Once
	release := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release
}
