package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
)

// pebbleDisk is one node's Pebble engine on an in-memory filesystem that
// can be crash-cloned (vfs.NewCrashableMem), behind errorfs: while fault
// is set, every filesystem operation goes through it first, so a test can
// hold a WAL sync (the crash point between a batch's write and its fsync)
// or fail one.
type pebbleDisk struct {
	fs    *vfs.MemFS
	eng   storage.Engine
	fault atomic.Pointer[func(errorfs.Op) error]
}

const pebbleDiskDir = "/node"

func openPebbleDisk(t testing.TB, fs *vfs.MemFS) *pebbleDisk {
	t.Helper()
	d := &pebbleDisk{fs: fs}
	o := storage.DefaultPebbleOptions()
	o.CacheSizeBytes = 8 << 20
	o.MemTableSizeBytes = 4 << 20
	o.FS = errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if f := d.fault.Load(); f != nil {
			return (*f)(op)
		}
		return nil
	}))
	eng, err := storage.OpenPebble(pebbleDiskDir, o)
	if err != nil {
		t.Fatal(err)
	}
	d.eng = eng
	return d
}

// setFault makes f see every operation from now on.
func (d *pebbleDisk) setFault(f func(errorfs.Op) error) { d.fault.Store(&f) }

func (d *pebbleDisk) close(t testing.TB) {
	if err := d.eng.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
		t.Errorf("close: %v", err)
	}
}

// isWALSync reports whether op syncs a write-ahead log file: where a
// node's log writer waits for its batch to become durable.
func isWALSync(op errorfs.Op) bool {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return strings.HasSuffix(op.Path, ".log")
	}
	return false
}

// pebbleCluster is a test cluster whose nodes run Pebble on pebbleDisks.
type pebbleCluster struct {
	*testCluster
	disks map[uint64]*pebbleDisk
	// told is what each node has told a leader it holds (appendsTold).
	told map[uint64]*appendsTold
	// apart, while not 0, is a node every node's transport drops the
	// Raft messages to and from (apartTransport): set from the cluster's
	// start, it hears nothing of an election or a write.
	apart atomic.Uint64
}

// apartTransport drops the messages to and from the node apart names.
// Unlike a cut of the network it is in place before the stores start.
type apartTransport struct {
	Transport
	apart *atomic.Uint64
}

func (a apartTransport) Send(m *tidekvpb.RaftMessage) bool {
	if n := a.apart.Load(); n != 0 && (m.GetFromNodeId() == n || m.GetToNodeId() == n) {
		return false
	}
	return a.Transport.Send(m)
}

// appendsTold records, at the sender, the highest index a node has
// acknowledged to a leader of testRangeID as appended to its log.
type appendsTold struct {
	Transport
	max atomic.Uint64
}

func (a *appendsTold) Send(m *tidekvpb.RaftMessage) bool {
	if rm := m.GetMessage(); m.GetRangeId() == testRangeID && rm.GetType() == raftpb.MsgAppResp && !rm.GetReject() {
		for cur := a.max.Load(); rm.GetIndex() > cur && !a.max.CompareAndSwap(cur, rm.GetIndex()); cur = a.max.Load() {
		}
	}
	return a.Transport.Send(m)
}

// newPebbleCluster starts a 3-node cluster with node apart (unless 0)
// kept apart from the others until pc.apart is cleared.
func newPebbleCluster(t *testing.T, apart uint64, mutate ...func(*Config)) *pebbleCluster {
	t.Helper()
	pc := &pebbleCluster{disks: map[uint64]*pebbleDisk{}, told: map[uint64]*appendsTold{}}
	pc.apart.Store(apart)
	// Registered first, so it runs after the cluster's cleanup has
	// stopped the stores.
	t.Cleanup(func() {
		for _, d := range pc.disks {
			d.close(t)
		}
	})
	pc.testCluster = newTestClusterOn(t, 3, func(id uint64) storage.Engine {
		pc.disks[id] = openPebbleDisk(t, vfs.NewCrashableMem())
		return pc.disks[id].eng
	}, func(id uint64, tr Transport) Transport {
		// Outermost, the drop: a message dropped was never told.
		pc.told[id] = &appendsTold{Transport: tr}
		return apartTransport{Transport: pc.told[id], apart: &pc.apart}
	}, mutate...)
	return pc
}

// images opens, on a crash clone of each node's filesystem keeping only
// what was synced, what a crash of every node now would leave; the
// caller closes them (closeAll).
func (pc *pebbleCluster) images(t *testing.T) map[uint64]*pebbleDisk {
	imgs := map[uint64]*pebbleDisk{}
	for id, d := range pc.disks {
		imgs[id] = openPebbleDisk(t, d.fs.CrashClone(vfs.CrashCloneCfg{}))
	}
	return imgs
}

func closeAll(t *testing.T, disks map[uint64]*pebbleDisk) {
	for _, d := range disks {
		d.close(t)
	}
}

// pebbleCrashStage names where in the pipeline a node's disk is crashed.
type pebbleCrashStage int

const (
	// crashBeforeSync: a batch of new entries is in the WAL, its fsync
	// held in errorfs; of what was not synced a random part survives.
	crashBeforeSync pebbleCrashStage = iota
	// crashSynced: the batch is synced, and nothing of it is handed back
	// to its replicas (acknowledged or applied) yet.
	crashSynced
	// crashInApply: an entry written by the test's in-flight writes is
	// being applied (its apply batch not yet committed).
	crashInApply
)

func (s pebbleCrashStage) String() string {
	return [...]string{"before-sync", "synced", "in-apply"}[s]
}

// pebbleCrash is a crash point armed on one node: the first time the node
// reaches it, the goroutine there cuts the node off, clones its
// filesystem as a crash would leave it, reports, and waits for release;
// the test stops the node meanwhile. Nothing the node does after the
// crash point reaches the clone or anyone else: its other goroutines go
// on (the log writer while the scheduler is held in apply, the scheduler
// while the writer's sync is held), and what they send is lost.
type pebbleCrash struct {
	node  uint64
	stage pebbleCrashStage
	// isolate cuts every link from the node.
	isolate func()
	// from: the in-apply stage stops at the first entry at or above it.
	from    uint64
	disk    *pebbleDisk
	told    *appendsTold
	rng     *rand.Rand
	hit     chan pebbleCrashHit
	release chan struct{}
	once    sync.Once
}

// pebbleCrashHit is what the crash point saw.
type pebbleCrashHit struct {
	clone *vfs.MemFS
	// applied is the node's applied index at the crash point (for
	// in-apply, the index being applied); first is the first index of
	// the batch not yet handed back (0 for in-apply); told is the highest
	// index it had acknowledged to a leader.
	applied, first, told uint64
}

func (c *pebbleCrash) let() { c.once.Do(func() { close(c.release) }) }

func (c *pebbleCrash) crash(applied, first uint64) {
	c.isolate()
	pct := c.rng.IntN(101)
	c.hit <- pebbleCrashHit{clone: c.disk.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: c.rng}),
		applied: applied, first: first, told: c.told.max.Load()}
	<-c.release
}

// onLogWrite is the crash point's Config.testingLogWrite part.
func (c *pebbleCrash) onLogWrite(armed *atomic.Pointer[pebbleCrash], node uint64, st logWriteStage, ws []logWrite) {
	if c == nil || c.node != node || c.stage == crashInApply {
		return
	}
	var first uint64
	var r *Replica
	for _, lw := range ws {
		if lw.r.rangeID == testRangeID && len(lw.m.GetEntries()) > 0 && first == 0 {
			first, r = lw.m.GetEntries()[0].GetIndex(), lw.r
		}
	}
	if first == 0 {
		return
	}
	switch {
	case c.stage == crashBeforeSync && st == logBeforeCommit && armed.CompareAndSwap(c, nil):
		// The batch's own commit writes the WAL and then syncs it: the
		// next WAL sync is where it waits.
		var held atomic.Bool
		c.disk.setFault(func(op errorfs.Op) error {
			if isWALSync(op) && held.CompareAndSwap(false, true) {
				c.crash(r.applied.Load(), first)
			}
			return nil
		})
	case c.stage == crashSynced && st == logDurable && armed.CompareAndSwap(c, nil):
		c.crash(r.applied.Load(), first)
	}
}

// onApplied is the crash point's Config.testingApplied part.
func (c *pebbleCrash) onApplied(armed *atomic.Pointer[pebbleCrash], node, rangeID, index uint64) {
	if c != nil && c.stage == crashInApply && c.node == node && rangeID == testRangeID && index >= c.from &&
		armed.CompareAndSwap(c, nil) {
		c.crash(index, 0)
	}
}

// The real engine crashes mid-pipeline: Pebble on a crash-cloneable
// in-memory filesystem, a node cut off at a WAL fsync held in errorfs
// (part of what was not synced survives), once its batch is synced and
// before anything of it is handed back, and while it applies an entry of
// the writes in flight; as leader, as follower, and as a follower behind
// from the start (it hears nothing until the crash point is armed, so the
// batch crashed is its first with entries and its applied index is still
// initialIndex, which no log holds: its applied state does). At the crash
// point the node has applied nothing that is not durable in its own
// synced log (or applied state) and on a quorum's, and nothing of the
// batch not yet handed back; after it restarts from the clone no
// acknowledged write is lost, every node applies each entry once in order
// (applyAudit), and the replicas converge.
func TestCrashOnPebble(t *testing.T) {
	for _, stage := range []pebbleCrashStage{crashBeforeSync, crashSynced, crashInApply} {
		for _, v := range []struct{ leader, behind bool }{{true, false}, {false, false}, {false, true}} {
			name := fmt.Sprintf("%v/leader=%v", stage, v.leader)
			if v.behind {
				name += "/behind"
			}
			t.Run(name, func(t *testing.T) {
				testCrashOnPebble(t, stage, v.leader, v.behind)
			})
		}
	}
}

func testCrashOnPebble(t *testing.T, stage pebbleCrashStage, leader, behind bool) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	// Kept apart, the first node cannot lead: it is the follower
	// writeAndPickVictim picks.
	var apart uint64
	if behind {
		apart = 1
	}
	audit := &applyAudit{last: map[uint64]uint64{}}
	var armed atomic.Pointer[pebbleCrash]
	// The log is kept whole (the default LogKeepEntries is far above
	// this test's writes): a node behind a truncation catches up by
	// snapshot, whose SST is received on the real disk while Pebble here
	// ingests from its in-memory filesystem. TestCrashInLogWrite crashes
	// across truncations on in-memory engines.
	pc := newPebbleCluster(t, apart, func(c *Config) {
		c.testingApplied = func(node, rangeID, index uint64) {
			audit.applied(node, rangeID, index)
			armed.Load().onApplied(&armed, node, rangeID, index)
		}
		c.testingLogWrite = func(node uint64, st logWriteStage, ws []logWrite) {
			armed.Load().onLogWrite(&armed, node, st, ws)
		}
	})
	audit.mu.Lock()
	audit.on = true
	audit.mu.Unlock()

	acked, ld, victim := pc.writeAndPickVictim(leader)
	if behind && victim != apart {
		t.Fatalf("the victim is node %d, not node %d kept apart", victim, apart)
	}
	c := &pebbleCrash{node: victim, stage: stage, from: ld.applied.Load() + 1, disk: pc.disks[victim], told: pc.told[victim],
		isolate: func() {
			for _, id := range pc.nodes {
				pc.net.SetCut(victim, id, true)
			}
		},
		rng: rand.New(rand.NewPCG(seed, seed)), hit: make(chan pebbleCrashHit, 1), release: make(chan struct{})}
	t.Cleanup(c.let)
	armed.Store(c)
	pc.apart.Store(0)

	// Writes in flight through the leader when the crash comes.
	collect := writesInFlight(t, ld)
	var hit pebbleCrashHit
	select {
	case hit = <-c.hit:
	case <-time.After(10 * time.Second):
		t.Fatal("the crash point was not reached")
	}
	if behind && stage != crashInApply && hit.applied != initialIndex {
		t.Errorf("node %d kept apart had applied index %d at the crash point, not initialIndex", victim, hit.applied)
	}
	if hit.first != 0 && hit.applied >= hit.first {
		t.Errorf("node %d had applied index %d at the crash point, and its entries from %d were not yet handed back as durable",
			victim, hit.applied, hit.first)
	}
	if hit.applied > 0 {
		imgs := pc.images(t)
		readers := map[uint64]storage.Reader{}
		for id, d := range imgs {
			readers[id] = d.eng
		}
		if msg := durabilityError(readers, victim, hit.applied); msg != "" {
			t.Errorf("at the crash point: %s", msg)
		}
		closeAll(t, imgs)
	}
	// What the node counts or told a leader it holds is durable: a
	// follower's acknowledgements, and a leader's own match index (read
	// while its writer is held, so its durable log cannot grow; in apply
	// the scheduler holds the replica).
	claimed := hit.told
	if leader && stage != crashInApply {
		ld.mu.Lock()
		claimed = max(claimed, ld.mu.raw.Status().Progress[ld.mu.replicaID].Match)
		ld.mu.Unlock()
	}
	if claimed > 0 {
		img := openPebbleDisk(t, c.disk.fs.CrashClone(vfs.CrashCloneCfg{}))
		if e, applied := durableEntry(img.eng, claimed); e == nil && !applied {
			t.Errorf("node %d counted or acknowledged index %d at the crash point, which is not durable in its log", victim, claimed)
		}
		img.close(t)
	}
	if t.Failed() {
		// Restarting from a crash point that broke these would only make
		// raft panic on the lost entries, taking the test binary with it.
		t.FailNow()
	}

	s := pc.stores[victim]
	crashed := make(chan struct{})
	go func() {
		pc.crash(victim)
		close(crashed)
	}()
	<-s.stopper
	c.let()
	<-crashed
	pc.disks[victim].close(t)
	pc.disks[victim] = openPebbleDisk(t, hit.clone)
	audit.restarted(t, victim, pc.disks[victim].eng)
	for _, id := range pc.nodes {
		pc.net.SetCut(victim, id, false)
	}
	pc.startStoreOn(victim, pc.disks[victim].eng)

	collect(acked)
	pc.checkAcknowledged(t, acked)
	audit.check(t)
}

// failedDiskCase is one case of TestFailedDiskStopsTheNode.
type failedDiskCase struct {
	name string
	// op is the operation that fails on the node's WAL.
	op     func(errorfs.Op) bool
	err    error
	leader bool
}

func failedDiskCases() []failedDiskCase {
	syncErr := errors.New("injected failure of a WAL fsync")
	writeErr := errors.New("injected failure of a WAL write")
	isWALWrite := func(op errorfs.Op) bool {
		return (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) && strings.HasSuffix(op.Path, ".log")
	}
	var cs []failedDiskCase
	for _, leader := range []bool{true, false} {
		cs = append(cs,
			failedDiskCase{fmt.Sprintf("fsync/leader=%v", leader), isWALSync, syncErr, leader},
			failedDiskCase{fmt.Sprintf("write/leader=%v", leader), isWALWrite, writeErr, leader})
	}
	return cs
}

// The child's markers on its output.
const (
	diskFailedMark = "the disk failed"
	ackedMark      = "acknowledged after the failure: "
	survivedMark   = "the node kept running on a failed disk"
)

// A node whose disk fails a WAL fsync or write stops: Pebble's commit
// error is fatal (storage's Logger.Fatalf exits the process), so the log
// writer never hands back a batch that is not durable and the node
// acknowledges nothing after the failure. Pebble does not return the
// error, it calls Fatalf and, were that to return, would report the
// commit done (docs/design.md, "Crash safety of the log writer
// pipeline"). A leader acknowledges no write issued after its disk
// failed; a follower's failure also stops it (the other two may go on).
// Each case runs a 3-node cluster in a child process, which is expected
// to die.
func TestFailedDiskStopsTheNode(t *testing.T) {
	const env = "TIDEKV_FAILED_DISK_CASE"
	if name := os.Getenv(env); name != "" {
		for _, c := range failedDiskCases() {
			if c.name == name {
				failedDiskChild(t, c)
				return
			}
		}
		t.Fatalf("no case %q", name)
	}
	for _, c := range failedDiskCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFailedDiskStopsTheNode$", "-test.count=1")
			// The child dies by exit, so its own t.TempDir is never
			// removed: root its temporary files in the parent's, which is.
			cmd.Env = append(os.Environ(), env+"="+c.name, "TMPDIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case !errors.As(err, &exit) || exit.ExitCode() <= 0:
				t.Fatalf("the child did not die of the failure: %v, output:\n%s", err, out)
			case !strings.Contains(string(out), diskFailedMark):
				t.Fatalf("the child died before its disk failed, output:\n%s", out)
			case !strings.Contains(string(out), "pebble: FATAL: pebble: fatal commit error: "+c.err.Error()):
				t.Fatalf("the child did not stop on Pebble's fatal commit error, output:\n%s", out)
			case c.leader && strings.Contains(string(out), ackedMark):
				t.Fatalf("the leader acknowledged a write after its disk failed, output:\n%s", out)
			}
		})
	}
}

// failedDiskChild fails the victim's disk and writes through the leader
// until the process dies; if it does not, it says so and returns.
func failedDiskChild(t *testing.T, c failedDiskCase) {
	pc := newPebbleCluster(t, 0)
	for i := 0; i < 10; i++ {
		pc.put(fmt.Sprintf("k%d", i), "v")
	}
	ld := pc.leader(testRangeID)
	victim := ld.store.nodeID
	if !c.leader {
		victim = pc.nodes[0]
		if victim == ld.store.nodeID {
			victim = pc.nodes[1]
		}
	}
	pc.disks[victim].setFault(func(op errorfs.Op) error {
		if c.op(op) {
			return c.err
		}
		return nil
	})
	fmt.Println(diskFailedMark)
	for i, end := 0, time.Now().Add(5*time.Second); time.Now().Before(end); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if _, err := ld.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte(fmt.Sprintf("a%d", i)), Value: []byte("v")}}); err == nil {
			fmt.Println(ackedMark, i)
		}
		cancel()
	}
	fmt.Println(survivedMark)
}
