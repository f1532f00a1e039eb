package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
)

// scripted is a fake policy: its i-th decision returns plans[i] (then
// nothing). It records the snapshots it saw.
type scripted struct {
	plans [][]placement.Operator
	seen  []placement.Snapshot
}

func (f *scripted) policy(rf int) Policy {
	cfg := placement.DefaultConfig()
	cfg.ReplicationFactor = rf
	return Policy{Name: "scripted", Config: cfg, Decide: func(s placement.Snapshot) placement.Plan {
		f.seen = append(f.seen, s)
		if i := len(f.seen) - 1; i < len(f.plans) {
			return placement.Plan{Ops: f.plans[i]}
		}
		return placement.Plan{}
	}}
}

func newTestSim(t *testing.T, c ClusterSpec, f *scripted, o Options) *Sim {
	t.Helper()
	if o.Control.Interval == 0 {
		o.Control.Interval = 10 * time.Second // decisions at 10s, 20s, …
	}
	w := DefaultWorkload()
	s, err := New(c, w, f.policy(c.RF), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSplitMergeBookkeeping(t *testing.T) {
	f := &scripted{plans: [][]placement.Operator{
		{{Kind: placement.OpSplit, Range: 1}},
		{{Kind: placement.OpSplit, Range: 2, SplitKey: Key(75_000)}},
		{{Kind: placement.OpMerge, Range: 1, Other: 2}},
	}}
	s := newTestSim(t, ClusterSpec{Nodes: 1, Ranges: 1, RF: 1, BytesPerRange: 64 << 20}, f, Options{})
	s.RunFor(10 * time.Second)
	if len(s.ranges) != 2 {
		t.Fatalf("after a split: %d ranges", len(s.ranges))
	}
	l, r := s.ranges[0], s.ranges[1]
	if l.id != 1 || r.id != 2 || string(l.end) != string(Key(50_000)) || string(r.start) != string(Key(50_000)) || r.end != nil {
		t.Fatalf("split at the middle key: %v %v", l, r)
	}
	if l.bytes != 32<<20 || r.bytes != 32<<20 || math.Abs(l.qps-500) > 1e-6 || math.Abs(r.qps-500) > 1e-6 {
		t.Fatalf("halves: bytes %v/%v qps %v/%v", l.bytes, r.bytes, l.qps, r.qps)
	}
	if !l.splitAt.Equal(s.clock.Now()) || r.lease != 1 || len(r.replicas) != 1 {
		t.Fatalf("right half: %+v", r)
	}
	s.RunFor(10 * time.Second)
	if len(s.ranges) != 3 || s.ranges[2].bytes != 16<<20 || s.ranges[2].lo != 75_000 {
		t.Fatalf("explicit split key: %v", s.formatRanges())
	}
	s.RunFor(10 * time.Second)
	// A merge takes 2s; meanwhile both ranges are busy.
	if b := s.Snapshot().Busy; !b[1] || !b[2] || len(b) != 2 || len(s.ranges) != 3 {
		t.Fatalf("busy during the merge: %v", b)
	}
	s.RunFor(2 * time.Second)
	if len(s.ranges) != 2 || s.ranges[0].bytes != 48<<20 || string(s.ranges[0].end) != string(Key(75_000)) || s.byID[2] != nil {
		t.Fatalf("merge: %v", s.formatRanges())
	}
	if c := s.Total(); c.Splits != 2 || c.Merges != 1 || c.Unsplits != 1 || c.PolicyBugs != 0 {
		t.Fatalf("counters: %+v", c)
	}
}

func TestLoadSplitAtMedian(t *testing.T) {
	f := &scripted{plans: [][]placement.Operator{{{Kind: placement.OpSplit, Range: 1, SplitByLoad: true}}}}
	s := newTestSim(t, ClusterSpec{Nodes: 1, Ranges: 1, RF: 1, BytesPerRange: 64 << 20}, f, Options{})
	w := s.Workload()
	w.Dist, w.HotStart, w.HotKeys, w.HotShare = HotSpan, 10_000, 100, 0.9
	if err := s.SetWorkload(w); err != nil {
		t.Fatal(err)
	}
	s.RunFor(10 * time.Second)
	l := s.ranges[0]
	// Half of the requests: 0.1·s/100000 + 0.9·(s−10000)/100 = 0.5 at s ≈ 10055.
	if l.hi < 10_050 || l.hi > 10_060 {
		t.Fatalf("load split at key %d, want about 10055", l.hi)
	}
	if q := l.qps / (l.qps + s.ranges[1].qps); q < 0.49 || q > 0.51 {
		t.Fatalf("left share %v", q)
	}
}

func TestSnapshotTiming(t *testing.T) {
	add := func(rangeID, target uint64) placement.Operator {
		return placement.Operator{Kind: placement.OpAddVoter, Range: rangeID, Target: target}
	}
	// One snapshot of 64 MiB at 64 MiB/s: 1 s of data, 1 s of catch-up.
	f := &scripted{plans: [][]placement.Operator{{add(1, 2)}}}
	s := newTestSim(t, ClusterSpec{Nodes: 3, Ranges: 2, RF: 1, BytesPerRange: 64 << 20}, f, Options{})
	s.RunFor(time.Minute)
	ops := s.Ops()
	if len(ops) != 1 || ops[0].Err != "" || ops[0].Started != 10*time.Second || ops[0].Ended != 12*time.Second {
		t.Fatalf("ops: %+v", ops)
	}
	// Two snapshots sent by n1 at once share its bandwidth: 2 s + 1 s.
	f = &scripted{plans: [][]placement.Operator{{add(1, 2), add(4, 3)}}} // ranges 1 and 4 are on n1
	s = newTestSim(t, ClusterSpec{Nodes: 3, Ranges: 4, RF: 1, BytesPerRange: 64 << 20}, f, Options{})
	s.RunFor(time.Minute)
	ops = s.Ops()
	if len(ops) != 2 || ops[0].Ended != 13*time.Second || ops[1].Ended != 13*time.Second {
		t.Fatalf("shared bandwidth: %+v", ops)
	}
	if got := f.seen[1].Busy; len(got) != 0 {
		t.Fatalf("busy after completion: %v", got)
	}
	if s.Total().BytesMoved != 128<<20 {
		t.Fatalf("bytes moved %d", s.Total().BytesMoved)
	}
}

func TestRunnerLimits(t *testing.T) {
	// Three snapshots to n2: the third is over SnapshotsPerNode.
	var plan []placement.Operator
	for r := uint64(1); r <= 7; r += 3 { // ranges on n1 with rf 1 and 3 nodes
		plan = append(plan, placement.Operator{Kind: placement.OpAddVoter, Range: r, Target: 2})
	}
	f := &scripted{plans: [][]placement.Operator{plan}}
	s := newTestSim(t, ClusterSpec{Nodes: 3, Ranges: 9, RF: 1, BytesPerRange: 64 << 20}, f, Options{})
	s.RunFor(11 * time.Second)
	if c := s.Total(); c.Started != 2 || c.Throttled != 1 {
		t.Fatalf("snapshot limit: %+v", c)
	}
	if b := s.Snapshot().Busy; !b[1] || !b[4] || b[7] {
		t.Fatalf("busy: %v", b)
	}
	// Operators per minute: 5, so 5 of 8 lease transfers start now, the
	// rest are throttled; a minute later there is room again (the five
	// done already are now invalid: no-op transfers).
	var leases []placement.Operator
	for r := uint64(1); r <= 8; r++ {
		leases = append(leases, placement.Operator{Kind: placement.OpTransferLease, Range: r, Target: 1 + r%3})
	}
	f = &scripted{plans: [][]placement.Operator{leases, nil, nil, nil, nil, nil, leases}}
	s = newTestSim(t, ClusterSpec{Nodes: 3, Ranges: 8, RF: 3}, f, Options{Control: control.Config{Runner: control.RunnerConfig{OpsPerMinute: 5}}})
	s.RunFor(10 * time.Second)
	if c := s.Total(); c.LeaseTransfers != 5 || c.Throttled != 3 {
		t.Fatalf("ops per minute: %+v", c)
	}
	s.RunFor(time.Minute)
	if c := s.Total(); c.Started != 8 || c.PolicyBugs != 5 {
		t.Fatalf("a minute later: %+v", c)
	}
}

func TestPolicyBugs(t *testing.T) {
	f := &scripted{plans: [][]placement.Operator{{
		{Kind: placement.OpRemoveReplica, Range: 1, Source: 2},                  // below rf 3
		{Kind: placement.OpMerge, Range: 1, Other: 3},                           // not adjacent
		{Kind: placement.OpTransferLease, Range: 2, Target: 9},                  // no such node
		{Kind: placement.OpAddVoter, Range: 2, Target: 2},                       // already a voter
		{Kind: placement.OpSplit, Range: 2, SplitKey: []byte("a")},              // outside
		{Kind: placement.OpMoveReplica, Range: 3, Source: 1, Target: 2},         // valid (range 3 is on n3 n4 n1)
		{Kind: placement.OpTransferLease, Range: 3, Source: 3, Target: 4},       // second op for range 3
		{Kind: placement.OpAddLearner, Range: 4, Target: 3, Policy: "adaptive"}, // valid (range 4 is on n4 n1 n2)
	}, {
		{Kind: placement.OpRemoveReplica, Range: 4, Source: 3}, // busy: the learner is still streaming
	}}}
	s := newTestSim(t, ClusterSpec{Nodes: 4, Ranges: 4, RF: 3, BytesPerRange: 1 << 30}, f, Options{})
	s.RunFor(20 * time.Second)
	if c := s.Total(); c.PolicyBugs != 7 || c.Started != 2 {
		t.Fatalf("counters: %+v\n%s", c, FormatLog(s.Log(), 0))
	}
	log := FormatLog(s.Log(), 0)
	for _, want := range []string{"below replication factor 3", "range 3 is not range 1's right neighbour", "unknown target node 9",
		"already holds a voter", "outside", "second operator for range 3", "range 4 is busy"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestKillFailsMoveToDeadNode(t *testing.T) {
	f := &scripted{plans: [][]placement.Operator{{{Kind: placement.OpMoveReplica, Range: 1, Source: 1, Target: 4}}}}
	s := newTestSim(t, ClusterSpec{Nodes: 4, Ranges: 2, RF: 3, BytesPerRange: 1 << 30}, f, Options{})
	s.RunFor(12 * time.Second)
	if !s.Snapshot().Busy[1] {
		t.Fatal("move not in flight")
	}
	if err := s.KillNode(4); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if snap.Busy[1] || s.Total().Failed != 1 || len(s.byID[1].replicas) != 3 {
		t.Fatalf("busy=%v counters=%+v", snap.Busy, s.Total())
	}
	if n := snap.Nodes[3]; n.State != placement.NodeSuspect {
		t.Fatalf("n4 %v", n.State)
	}
	s.RunFor(time.Minute)
	if n := s.Snapshot().Nodes[3]; n.State != placement.NodeDead {
		t.Fatalf("n4 after the grace: %v", n.State)
	}
	// Killing a leaseholder elects another voter.
	lh := s.byID[1].lease
	if err := s.KillNode(lh); err != nil {
		t.Fatal(err)
	}
	if nl := s.byID[1].lease; nl == lh || nl == 0 {
		t.Fatalf("lease stayed on %d", nl)
	}
}

func TestDeterministic(t *testing.T) {
	sc := Scenario{
		Name:     "det",
		Cluster:  ClusterSpec{Nodes: 3, Ranges: 12, RF: 3, BytesPerRange: 32 << 20},
		Workload: Workload{Keys: 10_000, QPS: 8000, ReadShare: 0.9, Dist: Zipf, ZipfS: 1.1, Scramble: true, GrowthBytesPerSec: 1 << 20},
		Options:  Options{Seed: 7},
		Events: []Event{
			{At: time.Minute, Kind: AddNode},
			{At: 3 * time.Minute, Kind: KillNode, Node: 2},
		},
		Duration: 8 * time.Minute,
	}
	a, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if ta, tb := a.Timeline(time.Minute), b.Timeline(time.Minute); ta != tb {
		t.Fatalf("two runs differ:\n%s\n---\n%s", ta, tb)
	}
	if len(a.Steps) != 480 || a.Final.At != 8*time.Minute {
		t.Fatalf("%d steps, final at %s", len(a.Steps), a.Final.At)
	}
}

func TestApplyOverrides(t *testing.T) {
	cfg := placement.DefaultConfig()
	err := ApplyOverrides(&cfg, map[string]string{"rf": "5", "range-max": "128MiB", "merge-cooldown": "1m", "split-qps": "100", "HeavyCPU": "0.7"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReplicationFactor != 5 || cfg.RangeMaxBytes != 128<<20 || cfg.MergeCooldown != time.Minute || cfg.SplitQPS != 100 || cfg.HeavyCPU != 0.7 {
		t.Fatalf("%+v", cfg)
	}
	if err := ApplyOverrides(&cfg, map[string]string{"no-such": "1"}); err == nil {
		t.Fatal("unknown key accepted")
	}
	if kebab("AdaptiveReadQPS") != "adaptive-read-qps" || kebab("HeavyCPU") != "heavy-cpu" {
		t.Fatal(kebab("AdaptiveReadQPS"), kebab("HeavyCPU"))
	}
}

func TestQuorumLoss(t *testing.T) {
	f := &scripted{}
	s := newTestSim(t, ClusterSpec{Nodes: 3, Ranges: 3, RF: 3, BytesPerRange: 1 << 20}, f, Options{})
	for _, id := range []uint64{1, 2} {
		if err := s.KillNode(id); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stat(); st.Unavailable != 3 || st.UnderReplicated != 3 {
		t.Fatalf("two of three down: %+v", st)
	}
	if err := s.RestartNode(2); err != nil {
		t.Fatal(err)
	}
	if st := s.Stat(); st.Unavailable != 0 {
		t.Fatalf("quorum back: %d unavailable", st.Unavailable)
	}
}

func TestMaxInFlight(t *testing.T) {
	// Twelve adds to distinct targets: only MaxInFlight (8) start.
	var plan []placement.Operator
	for r := uint64(1); r <= 12; r++ {
		plan = append(plan, placement.Operator{Kind: placement.OpAddVoter, Range: r, Target: r + 1})
	}
	f := &scripted{plans: [][]placement.Operator{plan}}
	s := newTestSim(t, ClusterSpec{Nodes: 13, Ranges: 13, RF: 1, BytesPerRange: 1 << 30}, f, Options{})
	s.RunFor(10 * time.Second)
	if c := s.Total(); c.Started != 8 || c.Throttled != 4 || len(s.Snapshot().Busy) != 8 {
		t.Fatalf("%+v", c)
	}
}
