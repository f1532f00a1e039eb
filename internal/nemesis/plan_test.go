package nemesis

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPlanIsSeededAndKeepsOneNodeDown(t *testing.T) {
	c := DefaultConfig()
	a, b := Plan(7, c), Plan(7, c)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different plans")
	}
	if reflect.DeepEqual(a, Plan(8, c)) {
		t.Fatal("different seeds gave the same plan")
	}
	if len(a) != 7 {
		t.Fatalf("%d steps in a minute at one per 8 s, want 7", len(a))
	}
	kinds := map[Kind]int{}
	for i, s := range a {
		kinds[s.Kind]++
		if s.Node < 1 || s.Node > c.Nodes || s.For != c.Down || s.At+s.For > c.Duration {
			t.Fatalf("step %v out of bounds", s)
		}
		if i > 0 && s.At < a[i-1].At+a[i-1].For {
			t.Fatalf("step %v starts before %v ends: two nodes down", s, a[i-1])
		}
	}
	counts := map[Kind]int{}
	skews := map[bool]int{} // by sign
	for seed := range uint64(50) {
		for _, s := range Plan(seed, c) {
			counts[s.Kind]++
			switch s.Kind {
			case Skew:
				skews[s.Amount > 0]++
				if s.Amount < -c.MaxSkew || s.Amount > c.MaxSkew || s.Amount%time.Millisecond != 0 {
					t.Fatalf("step %v: skew out of bounds", s)
				}
			case SlowDisk:
				if s.Amount != c.DiskDelay {
					t.Fatalf("step %v: want a delay of %v", s, c.DiskDelay)
				}
			default:
				if s.Amount != 0 {
					t.Fatalf("step %v has an amount", s)
				}
			}
		}
	}
	for _, k := range AllKinds() {
		if share := float64(counts[k]) / 350; share < 0.1 || share > 0.3 {
			t.Fatalf("%v share over 50 plans %.2f, want about 1/5", k, share)
		}
	}
	if skews[true] < counts[Skew]/4 || skews[false] < counts[Skew]/4 {
		t.Fatalf("skews ahead/behind: %v, want both", skews)
	}
	// Only the kinds asked for; a kind listed twice is twice as likely.
	c.Kinds = []Kind{Kill, Kill, Partition}
	counts = map[Kind]int{}
	for seed := range uint64(50) {
		for _, s := range Plan(seed, c) {
			counts[s.Kind]++
		}
	}
	if counts[Pause] != 0 || counts[Kill] < 2*counts[Partition]*3/4 || counts[Kill] > 2*counts[Partition]*5/4 {
		t.Fatalf("kinds kill,kill,partition gave %v", counts)
	}
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("kill, partition,pause")
	if err != nil || !reflect.DeepEqual(got, []Kind{Kill, Partition, Pause}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseKinds("kill,flood"); err == nil || !strings.Contains(err.Error(), `unknown fault "flood" (known: kill, pause, partition, skew, slow-disk, bridge, split, move, churn, disk-fail, replace, range-split, merge, lease-transfer)`) {
		t.Fatalf("an unknown kind: %v", err)
	}
	for _, k := range append(AllKinds(), Bridge, Split, Move, Churn, DiskFail, Replace, RangeSplit, Merge, LeaseTransfer) {
		if back, err := ParseKinds(k.String()); err != nil || back[0] != k {
			t.Fatalf("%v does not round-trip: %v %v", k, back, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Down = c.Interval
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "one node down at a time") {
		t.Fatalf("down = interval: %v", err)
	}
	c = DefaultConfig()
	c.Kinds = nil
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "no fault kinds") {
		t.Fatalf("no kinds: %v", err)
	}
}

// fakeTarget records what was done, in order; faults and operations run
// beside each other, so it locks.
type fakeTarget struct {
	mu  sync.Mutex
	log []string
}

func (f *fakeTarget) did(what ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprint(what...))
	return nil
}

func (f *fakeTarget) Kill(i int) error                       { return f.did("kill ", i) }
func (f *fakeTarget) Restart(_ context.Context, i int) error { return f.did("restart ", i) }
func (f *fakeTarget) Pause(i int) error                      { return f.did("pause ", i) }
func (f *fakeTarget) Resume(i int) error                     { return f.did("resume ", i) }

// fakePartitioner also records partitions, skews, slow disks, cuts and
// operations.
type fakePartitioner struct{ fakeTarget }

func (f *fakePartitioner) Isolate(i int) error                   { return f.did("isolate ", i) }
func (f *fakePartitioner) Heal(i int) error                      { return f.did("heal ", i) }
func (f *fakePartitioner) Skew(i int, d time.Duration) error     { return f.did("skew ", i, " ", d) }
func (f *fakePartitioner) SlowDisk(i int, d time.Duration) error { return f.did("disk ", i, " ", d) }
func (f *fakePartitioner) FailDisk(i int) error                  { return f.did("fail disk ", i) }
func (f *fakePartitioner) Wipe(i int) error                      { return f.did("wipe ", i) }
func (f *fakePartitioner) AwaitRepair(_ context.Context, i int) error {
	return f.did("repaired ", i)
}
func (f *fakePartitioner) RecoverDisk(_ context.Context, i int) error {
	return f.did("recover disk ", i)
}
func (f *fakePartitioner) CutLinks(a, b []int) error  { return f.did("cut ", a, "-", b) }
func (f *fakePartitioner) HealLinks(a, b []int) error { return f.did("mend ", a, "-", b) }
func (f *fakePartitioner) MoveReplica(_ context.Context, from int, pick uint64) error {
	return f.did("move ", pick, " off ", from)
}
func (f *fakePartitioner) Decommission(_ context.Context, i int, drain bool) error {
	return f.did("drain ", i, " ", drain)
}
func (f *fakePartitioner) SplitRange(_ context.Context, pick uint64) error {
	return f.did("range split ", pick)
}
func (f *fakePartitioner) MergeRange(_ context.Context, pick uint64) error {
	return f.did("merge ", pick)
}
func (f *fakePartitioner) TransferLease(_ context.Context, to int, pick uint64) error {
	return f.did("transfer ", pick, " to ", to)
}

// runFake runs steps against a fakePartitioner and returns what it did.
func runFake(t *testing.T, steps []Step) string {
	t.Helper()
	p := &fakePartitioner{}
	if _, err := Run(context.Background(), steps, p, nil); err != nil {
		t.Fatal(err)
	}
	return strings.Join(p.log, ",")
}

func TestRunBringsEveryNodeBack(t *testing.T) {
	steps := []Step{{At: 0, Kind: Kill, Node: 2, For: time.Millisecond}, {At: 5 * time.Millisecond, Kind: Pause, Node: 3, For: time.Millisecond}}
	f := &fakeTarget{}
	if _, err := Run(context.Background(), steps, f, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.log, ","); got != "kill 2,restart 2,pause 3,resume 3" {
		t.Fatalf("did %s", got)
	}
	// Cancelled while a node is down: it is brought back all the same.
	f = &fakeTarget{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, []Step{{At: 0, Kind: Pause, Node: 1, For: time.Hour}}, f, nil)
	if err == nil || strings.Join(f.log, ",") != "pause 1,resume 1" {
		t.Fatalf("cancelled run: %v, did %v", err, f.log)
	}
}

func TestRunInjectedFaults(t *testing.T) {
	steps := []Step{{At: 0, Kind: Kill, Node: 1, For: time.Millisecond}, {At: 2 * time.Millisecond, Kind: Partition, Node: 4, For: time.Millisecond},
		{At: 4 * time.Millisecond, Kind: Skew, Node: 2, For: time.Millisecond, Amount: -90 * time.Millisecond},
		{At: 6 * time.Millisecond, Kind: SlowDisk, Node: 3, For: time.Millisecond, Amount: 100 * time.Millisecond},
		{At: 8 * time.Millisecond, Kind: Bridge, Node: 2, Peer: 4, For: time.Millisecond},
		{At: 10 * time.Millisecond, Kind: DiskFail, Node: 1, For: time.Millisecond},
		{At: 12 * time.Millisecond, Kind: Replace, Node: 2, For: time.Millisecond}}
	if got := runFake(t, steps); got != "kill 1,restart 1,isolate 4,heal 4,skew 2 -90ms,skew 2 0s,disk 3 100ms,disk 3 0s,cut [2]-[4],mend [2]-[4],fail disk 1,recover disk 1,kill 2,wipe 2,restart 2,repaired 2" {
		t.Fatalf("did %s", got)
	}
	// A target that cannot partition, skew, slow a disk or cut a link is
	// refused before any fault.
	for _, k := range []Kind{Partition, Skew, SlowDisk, DiskFail, Replace, Bridge, Split, Move, Churn} {
		f := &fakeTarget{}
		_, err := Run(context.Background(), append(steps[:1:1], Step{At: time.Millisecond, Kind: k, Node: 1, For: time.Millisecond}), f, nil)
		if err == nil || !strings.Contains(err.Error(), "cannot do "+k.String()) || len(f.log) != 0 {
			t.Fatalf("%v plan on a kill/pause target: %v, did %v", k, err, f.log)
		}
	}
}

// Leases run on the monotonic clock, so a chaos run may step a node's wall
// clock by more than the lease's margin.
func TestChaosConfigAcceptsLargeSkews(t *testing.T) {
	c := DefaultChaosConfig()
	c.Binary = "tidekv"
	c.Faults.MaxSkew = time.Hour
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A bridge cuts a node from one other node, never from itself, and needs a
// third node for the two to reach each other through.
func TestPlanBridges(t *testing.T) {
	c := DefaultConfig()
	c.Kinds, c.Nodes, c.Duration = []Kind{Bridge}, 3, 10*time.Minute
	peers := map[[2]int]bool{}
	for _, s := range Plan(7, c) {
		if s.Peer == s.Node || s.Peer < 1 || s.Peer > c.Nodes {
			t.Fatalf("%s: peer %d", s, s.Peer)
		}
		peers[[2]int{s.Node, s.Peer}] = true
	}
	if len(peers) != 6 {
		t.Fatalf("75 bridges on 3 nodes cut %d of the 6 ordered pairs", len(peers))
	}
	c.Nodes = 2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "at least 3 nodes") {
		t.Fatalf("bridge on 2 nodes: %v", err)
	}
}

// A split's small side is the node and at most one more, never more than
// half the cluster; on 4 nodes both 1-3 and 2-2 splits come up.
func TestPlanSplits(t *testing.T) {
	c := DefaultConfig()
	c.Kinds, c.Duration = []Kind{Split}, 10*time.Minute
	sizes := map[int]int{}
	for _, s := range Plan(7, c) {
		a, b := s.sides()
		if s.Peer == s.Node || s.Peer < 0 || s.Peer > c.Nodes || b != nil {
			t.Fatalf("%s: sides %v and %v", s, a, b)
		}
		sizes[len(a)]++
	}
	if sizes[1] < 20 || sizes[2] < 20 || len(sizes) != 2 {
		t.Fatalf("75 splits of 4 nodes had small sides of sizes %v", sizes)
	}
	c.Nodes = 3
	for _, s := range Plan(7, c) {
		if s.Peer != 0 {
			t.Fatalf("%s: two of 3 nodes on the small side", s)
		}
	}
	if got := (Step{At: time.Second, Kind: Split, Node: 2, Peer: 4, For: 3 * time.Second}).String(); got != "1s: split: cut nodes 2,4 from the rest for 3s" {
		t.Fatalf("a split reads %q", got)
	}
}

// An operation comes with a fault drawn from the fault kinds and starts
// halfway through it; the faults stay one at a time, and everything ends
// within the duration.
func TestPlanOperationsMeetFaults(t *testing.T) {
	c := DefaultConfig()
	c.Kinds = []Kind{Kill, Partition, Move, Churn}
	counts := map[Kind]int{}
	for seed := range uint64(50) {
		steps := Plan(seed, c)
		var last Step // the last fault
		for _, s := range steps {
			counts[s.Kind]++
			if s.At+s.For > c.Duration {
				t.Fatalf("seed %d: %s ends after %v", seed, s, c.Duration)
			}
			if !s.Kind.Operation() {
				if last.For != 0 && s.At < last.At+last.For {
					t.Fatalf("seed %d: %s starts before %s ends", seed, s, last)
				}
				last = s
				continue
			}
			if s.At != last.At+c.Down/2 || s.For > c.Down {
				t.Fatalf("seed %d: %s is not halfway through the fault %s", seed, s, last)
			}
			if s.Kind != Move && s.Pick != 0 {
				t.Fatalf("seed %d: %s has a pick", seed, s)
			}
		}
	}
	// Every slot has a fault; half of them an operation too.
	if faults := counts[Kill] + counts[Partition]; faults != 350 || counts[Move] < 60 || counts[Churn] < 60 {
		t.Fatalf("50 plans of 7 slots gave %v", counts)
	}
	// Operations alone: no fault to meet.
	c.Kinds = []Kind{Move}
	for _, s := range Plan(1, c) {
		if s.Kind != Move {
			t.Fatalf("kinds move gave %s", s)
		}
	}
}

// Operations run beside the faults: a move planned inside a kill happens
// while the node is down, and a churn's recommission follows its drain.
func TestRunOperationsBesideFaults(t *testing.T) {
	steps := []Step{{At: 0, Kind: Kill, Node: 1, For: 300 * time.Millisecond},
		{At: 100 * time.Millisecond, Kind: Move, Node: 3, Pick: 9, For: time.Millisecond},
		{At: 150 * time.Millisecond, Kind: Churn, Node: 2, For: time.Millisecond},
		{At: 400 * time.Millisecond, Kind: Split, Node: 2, Peer: 4, For: time.Millisecond}}
	if got := runFake(t, steps); got != "kill 1,move 9 off 3,drain 2 true,drain 2 false,restart 1,cut [2 4]-[],mend [2 4]-[]" {
		t.Fatalf("did %s", got)
	}
}

// Layout operations run beside the faults, as moves do, each with its
// node and pick; a target that cannot change the layout is refused one.
func TestRunLayoutOperations(t *testing.T) {
	steps := []Step{{At: 0, Kind: Pause, Node: 1, For: 300 * time.Millisecond},
		{At: 50 * time.Millisecond, Kind: RangeSplit, Node: 2, Pick: 5, For: time.Millisecond},
		{At: 100 * time.Millisecond, Kind: Merge, Node: 3, Pick: 6, For: time.Millisecond},
		{At: 150 * time.Millisecond, Kind: LeaseTransfer, Node: 4, Pick: 7, For: time.Millisecond}}
	if got := runFake(t, steps); got != "pause 1,range split 5,merge 6,transfer 7 to 4,resume 1" {
		t.Fatalf("did %s", got)
	}
	if _, err := Run(context.Background(), steps[1:2], &fakeTarget{}, nil); err == nil || !strings.Contains(err.Error(), "cannot do range-split") {
		t.Fatalf("a range split on a target without Rearranger: %v", err)
	}
	kinds, err := ParseKinds("range-split,merge,lease-transfer")
	if err != nil || !slices.Equal(kinds, []Kind{RangeSplit, Merge, LeaseTransfer}) {
		t.Fatalf("parsed %v, %v", kinds, err)
	}
	c := DefaultConfig()
	c.Kinds = kinds
	for _, s := range Plan(3, c) {
		if !s.Kind.Operation() || s.Pick == 0 {
			t.Fatalf("a layout plan's step %v is no operation with a pick", s)
		}
	}
}
