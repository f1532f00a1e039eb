package raftstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// applyAudit checks every entry of testRangeID as a node applies it
// (Config.testingApplied): a node applies each index once, in order:
// within one run of a store the indexes follow each other, and after a
// restart they go on from the applied index its engine kept. On
// in-memory engines (engines set) each applied entry must also be durable
// in the node's own log and in a quorum's (what a crash of each engine
// would keep); a Pebble engine's crash image costs an open, so Pebble
// tests check that at their crash point (durabilityError).
type applyAudit struct {
	mu sync.Mutex
	// on: the cluster is up (applies before that are not audited).
	on      bool
	engines map[uint64]*storage.MemEngine
	last    map[uint64]uint64
	errs    []string
	applies int
}

func (a *applyAudit) applied(node, rangeID, index uint64) {
	if rangeID != testRangeID {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.on {
		return
	}
	a.applies++
	if last, ok := a.last[node]; ok && index != last+1 {
		a.errs = append(a.errs, fmt.Sprintf("node %d applied index %d after %d", node, index, last))
	}
	a.last[node] = index
	if a.engines == nil {
		return
	}
	images := map[uint64]storage.Reader{}
	for id, eng := range a.engines {
		images[id] = eng.CrashClone()
	}
	if msg := durabilityError(images, node, index); msg != "" {
		a.errs = append(a.errs, msg)
	}
}

// durabilityError says what is wrong, if anything, with node applying
// index when a crash of every node would leave images: the entry must be
// in node's own log (or its applied index there has reached it already)
// and, with the same term, on a quorum (or applied there already). An
// index a node's durable applied index covers needs no entry in its log:
// a range's log begins after initialIndex, which a follower that has
// applied nothing since it was bootstrapped reports as its applied index.
func durabilityError(images map[uint64]storage.Reader, node, index uint64) string {
	own, applied := durableEntry(images[node], index)
	if own == nil && !applied {
		return fmt.Sprintf("node %d applied index %d, which is not durable in its log", node, index)
	}
	quorum := 0
	for _, img := range images {
		if e, applied := durableEntry(img, index); applied || e != nil && e.GetTerm() == own.GetTerm() {
			quorum++
		}
	}
	if quorum <= len(images)/2 {
		return fmt.Sprintf("node %d applied index %d, durable on only %d of %d nodes", node, index, quorum, len(images))
	}
	return ""
}

// restarted records that node now runs on eng, which kept its applied
// index.
func (a *applyAudit) restarted(t *testing.T, node uint64, eng storage.Engine) {
	st, err := loadReplicaState(eng, testRangeID)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.engines != nil {
		a.engines[node] = eng.(*storage.MemEngine)
	}
	a.last[node] = st.GetAppliedIndex()
}

func (a *applyAudit) check(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.errs {
		t.Error(e)
	}
	if a.applies == 0 {
		t.Error("no apply audited")
	}
}

// durableEntry is what a crash image keeps of index: the entry in its
// log, and whether its applied index has reached index.
func durableEntry(img storage.Reader, index uint64) (*raftpb.Entry, bool) {
	st, _ := loadReplicaState(img, testRangeID)
	v, ok, _ := img.Get(keys.LogKey(testRangeID, index))
	if !ok {
		return nil, st.GetAppliedIndex() >= index
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		return nil, false
	}
	return e, st.GetAppliedIndex() >= index
}

// logCrash is a power cut in one node's log writer: at the first batch that
// reaches stage with entries of testRangeID, the engine is cloned as a
// crash would leave it (of the writes not synced, a random prefix
// survives), the batch is handed to the test, and the writer waits for
// release: the node is stopped meanwhile, so nothing after the crash point
// reaches the clone or anyone else.
type logCrash struct {
	node    uint64
	stage   logWriteStage
	eng     *storage.MemEngine
	rng     *rand.Rand
	hit     chan []logWrite
	clone   *storage.MemEngine
	release chan struct{}
	once    sync.Once
}

// armLogCrashOn sets a crash point on node at stage; a test that fails
// before it lets the writer go on leaves none stopped there (the cluster's
// cleanup waits for the writers).
func armLogCrashOn(t *testing.T, armed *atomic.Pointer[logCrash], node uint64, stage logWriteStage, eng *storage.MemEngine, seed uint64) *logCrash {
	c := &logCrash{node: node, stage: stage, eng: eng, rng: rand.New(rand.NewPCG(seed, seed)),
		hit: make(chan []logWrite, 1), release: make(chan struct{})}
	t.Cleanup(c.let)
	armed.Store(c)
	return c
}

// let lets the writer stopped at the crash point go on.
func (c *logCrash) let() { c.once.Do(func() { close(c.release) }) }

func armLogCrash(armed *atomic.Pointer[logCrash], node uint64, stage logWriteStage, ws []logWrite) {
	c := armed.Load()
	if c == nil || c.node != node || c.stage != stage {
		return
	}
	carries := false
	for _, lw := range ws {
		carries = carries || lw.r.rangeID == testRangeID && len(lw.m.GetEntries()) > 0
	}
	if !carries || !armed.CompareAndSwap(c, nil) {
		return
	}
	c.clone = c.eng.CrashCloneKeeping(c.rng.IntN(c.eng.UnsyncedBatches() + 1))
	c.hit <- ws
	<-c.release
}

// A node crashes in its log writer, before a batch of new entries is
// written or once it is durable and before anything of it is acknowledged
// or applied, as leader and as follower, while writes are in flight. No
// acknowledged write is lost, nothing of the batch was applied at the
// crash point, and every node applies each entry once, only when it is
// durable in its own log and on a quorum (applyAudit).
func TestCrashInLogWrite(t *testing.T) {
	for _, stage := range []struct {
		name  string
		stage logWriteStage
	}{{"before-commit", logBeforeCommit}, {"durable", logDurable}} {
		for _, leader := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/leader=%v", stage.name, leader), func(t *testing.T) {
				testCrashInLogWrite(t, stage.stage, leader)
			})
		}
	}
}

func testCrashInLogWrite(t *testing.T, stage logWriteStage, leader bool) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	audit := &applyAudit{last: map[uint64]uint64{}}
	var armed atomic.Pointer[logCrash]
	tc := newTestCluster(t, 3, func(c *Config) {
		c.LogKeepEntries = 20
		c.testingApplied = audit.applied
		c.testingLogWrite = func(node uint64, st logWriteStage, ws []logWrite) { armLogCrash(&armed, node, st, ws) }
	})
	audit.mu.Lock()
	audit.on = true
	audit.engines = map[uint64]*storage.MemEngine{}
	for id, eng := range tc.engines {
		audit.engines[id] = eng
	}
	audit.mu.Unlock()

	acked, ld, victim := tc.writeAndPickVictim(leader)
	c := armLogCrashOn(t, &armed, victim, stage, tc.engines[victim], seed)

	// Writes in flight through the leader when the crash comes.
	collect := writesInFlight(t, ld)
	var ws []logWrite
	select {
	case ws = <-c.hit:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch with entries reached the crash point")
	}
	for _, lw := range ws {
		if lw.r.rangeID != testRangeID || len(lw.m.GetEntries()) == 0 {
			continue
		}
		if first, applied := lw.m.GetEntries()[0].GetIndex(), lw.r.applied.Load(); applied >= first {
			t.Errorf("node %d had applied index %d at the crash point, and its entries from %d were not yet handed back as durable", victim, applied, first)
		}
	}
	s := tc.stores[victim]
	crashed := make(chan struct{})
	go func() {
		tc.crash(victim)
		close(crashed)
	}()
	<-s.done
	c.let()
	<-crashed
	tc.engines[victim] = c.clone
	audit.restarted(t, victim, c.clone)
	tc.restart(victim)

	collect(acked)
	tc.checkAcknowledged(t, acked)
	audit.check(t)
}

// A lease transfer whose transferee has caught up while the leader's own
// write of the last entries is still in its log writer starts only once
// the leader has applied them: the transferee would otherwise take over
// and commit them in its term, and the old leader would answer their
// proposer "ambiguous" although the write was made.
func TestLeaseTransferWaitsForLeadersOwnWrite(t *testing.T) {
	var armed atomic.Pointer[logCrash]
	tc := newTestCluster(t, 3, func(c *Config) {
		c.testingLogWrite = func(node uint64, st logWriteStage, ws []logWrite) { armLogCrash(&armed, node, st, ws) }
	})
	tc.put("a", "1")
	ld := tc.leader(testRangeID)
	node := ld.store.nodeID
	target := tc.nodes[0]
	if target == node {
		target = tc.nodes[1]
	}
	c := armLogCrashOn(t, &armed, node, logBeforeCommit, tc.engines[node], 1)
	done := make(chan error, 1)
	go func() {
		_, err := ld.Write(context.Background(), []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("v")}})
		done <- err
	}()
	ws := <-c.hit
	last := ws[len(ws)-1].m.GetEntries()
	idx := last[len(last)-1].GetIndex()
	transferee := replicaOnNode(ld.Desc(), target).GetReplicaId()
	// The transferee acknowledged the entry: its log matches the leader's.
	waitFor(t, func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		return ld.mu.raw.Status().Progress[transferee].Match >= idx
	})
	if err := ld.TransferLease(target); err != nil {
		t.Fatal(err)
	}
	// The round that started the transfer is over once the lock is free
	// and raft names the transferee (or, had the transferee been told to
	// campaign at once, once the leader has stepped down): a MsgTimeoutNow
	// sent would be noted.
	waitFor(t, func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		bs := ld.mu.raw.BasicStatus()
		return bs.LeadTransferee == transferee || bs.RaftState != raft.StateLeader
	})
	ld.mu.Lock()
	sent := len(ld.mu.timeoutNow)
	ld.mu.Unlock()
	if sent != 0 {
		t.Errorf("the leader sent MsgTimeoutNow with its own write of index %d not durable", idx)
	}
	c.let()
	if err := <-done; err != nil {
		t.Fatalf("write in flight across the transfer: %v", err)
	}
	waitFor(t, func() bool {
		r := tc.stores[target].GetReplica(testRangeID)
		return r != nil && r.IsLeader()
	})
	if got, ok := tc.get("k"); !ok || got != "v" {
		t.Fatalf("k = %q (found %v)", got, ok)
	}
}

// writeAndPickVictim acknowledges 30 writes over 10 keys (the last value
// of each key is returned) and names the node a crash test crashes: the
// range's leader, or with leader false a follower.
func (tc *testCluster) writeAndPickVictim(leader bool) (acked map[string]string, ld *Replica, victim uint64) {
	acked = map[string]string{}
	for i := 0; i < 30; i++ {
		k, v := fmt.Sprintf("k%02d", i%10), fmt.Sprintf("v%d", i)
		tc.put(k, v)
		acked[k] = v
	}
	ld = tc.leader(testRangeID)
	victim = ld.store.nodeID
	if !leader {
		victim = tc.nodes[0]
		if victim == ld.store.nodeID {
			victim = tc.nodes[1]
		}
	}
	return acked, ld, victim
}

// writesInFlight starts writes through ld that a crash test's crash comes
// during; collect waits for them and adds those acknowledged to acked.
func writesInFlight(t *testing.T, ld *Replica) (collect func(acked map[string]string)) {
	type result struct {
		k, v string
		err  error
	}
	const inFlight = 8
	results := make(chan result, inFlight)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	for i := 0; i < inFlight; i++ {
		k, v := fmt.Sprintf("f%d", i), fmt.Sprintf("flight%d", i)
		go func() {
			_, err := ld.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte(k), Value: []byte(v)}})
			results <- result{k, v, err}
		}()
	}
	return func(acked map[string]string) {
		for i := 0; i < inFlight; i++ {
			if r := <-results; r.err == nil {
				acked[r.k] = r.v
			}
		}
	}
}

// checkAcknowledged writes once more after a crash, then checks that every
// acknowledged write reads back and reaches every replica.
func (tc *testCluster) checkAcknowledged(t *testing.T, acked map[string]string) {
	tc.put("after", "x")
	acked["after"] = "x"
	for k, want := range acked {
		if got, ok := tc.get(k); !ok || got != want {
			t.Fatalf("after the crash %s = %q (found %v), acknowledged %q", k, got, ok, want)
		}
	}
	tc.waitReplicated(acked)
}
