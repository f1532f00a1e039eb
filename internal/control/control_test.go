package control

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
)

// fakeExec records operators and leaves them running until the test ends
// them; ops whose Reason is "invalid" fail its Check.
type fakeExec struct {
	started []placement.Operator
	done    map[uint64]func(error) // by range
	ends    []func(error)          // by start
}

func (f *fakeExec) Check(op placement.Operator) error {
	if op.Reason == "invalid" {
		return errors.New("no such node")
	}
	return nil
}

func (f *fakeExec) Execute(op placement.Operator, done func(error)) {
	f.started = append(f.started, op)
	f.done[op.Range] = done
	f.ends = append(f.ends, done)
}

type eventSink []Event

func (e *eventSink) Event(ev Event) { *e = append(*e, ev) }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestRunner(cfg RunnerConfig) (*Runner, *fakeExec, *eventSink, *clock) {
	x, ev, c := &fakeExec{done: map[uint64]func(error){}}, &eventSink{}, &clock{t: epoch}
	return NewRunner(cfg, x, c.now, ev), x, ev, c
}

func add(rangeID, target uint64) placement.Operator {
	return placement.Operator{Kind: placement.OpAddVoter, Range: rangeID, Target: target}
}

func TestRunnerLimits(t *testing.T) {
	cfg := DefaultRunnerConfig()
	cfg.MaxInFlight, cfg.MaxSnapshotsPerNode, cfg.OpsPerMinute = 3, 1, 4
	r, x, _, c := newTestRunner(cfg)
	started := func(op placement.Operator) bool {
		ok, err := r.Start(op)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !started(add(1, 2)) || started(add(2, 2)) {
		t.Fatal("a second snapshot to node 2 must wait")
	}
	if started(add(1, 3)) {
		t.Fatal("a second operator on range 1 must wait")
	}
	if !started(add(3, 3)) || !started(placement.Operator{Kind: placement.OpTransferLease, Range: 4, Target: 1}) {
		t.Fatal("within the limits")
	}
	if started(placement.Operator{Kind: placement.OpSplit, Range: 5}) {
		t.Fatal("in flight is capped at 3")
	}
	busy, inFlight := r.Busy()
	if len(busy) != 3 || len(inFlight) != 3 || inFlight[0].Range != 1 || inFlight[2].Range != 4 {
		t.Fatalf("busy %v, in flight %v", busy, inFlight)
	}
	x.done[1](nil)
	x.done[3](errors.New("target died"))
	if !started(add(2, 2)) {
		t.Fatal("node 2's snapshot slot is free again")
	}
	if started(add(6, 4)) {
		t.Fatal("4 starts within a minute is the cap")
	}
	c.t = c.t.Add(time.Minute)
	if !started(add(6, 4)) {
		t.Fatal("a minute later the rate window has room")
	}
	st := r.Stats()
	if st.Started != 5 || st.Succeeded != 1 || st.Failed != 1 || st.Throttled != 4 {
		t.Fatalf("stats %+v", st)
	}
	rec := r.Recent()
	if len(rec) != 2 || rec[0].Op.Range != 1 || rec[1].Err == nil {
		t.Fatalf("recent %+v", rec)
	}
	c.t = c.t.Add(cfg.RecentWindow + time.Second)
	if rec := r.Recent(); len(rec) != 0 {
		t.Fatalf("recent after the window: %+v", rec)
	}
}

// Splits by size wait only for a slot in flight: writes are held until
// they are made. Load splits, like every other operator, are paced, and
// size splits leave the pace's budget to them.
func TestRunnerDoesNotPaceSizeSplits(t *testing.T) {
	cfg := DefaultRunnerConfig()
	cfg.MaxInFlight, cfg.OpsPerMinute = 3, 1
	r, x, _, _ := newTestRunner(cfg)
	start := func(op placement.Operator) bool {
		ok, err := r.Start(op)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !start(placement.Operator{Kind: placement.OpSplit, Range: 1}) || !start(placement.Operator{Kind: placement.OpSplit, Range: 2, SplitKey: []byte("k")}) {
		t.Fatal("splits by size and at a boundary are not paced")
	}
	if !start(placement.Operator{Kind: placement.OpSplit, Range: 3, SplitByLoad: true}) {
		t.Fatal("the minute's one paced start is still free")
	}
	x.done[3](nil)
	if start(placement.Operator{Kind: placement.OpSplit, Range: 4, SplitByLoad: true}) || start(add(5, 2)) {
		t.Fatal("a second paced start within the minute must wait")
	}
	if !start(placement.Operator{Kind: placement.OpSplit, Range: 6}) || start(placement.Operator{Kind: placement.OpSplit, Range: 7}) {
		t.Fatal("in flight is capped at 3, size splits included")
	}
	x.done[1](nil)
	if !start(placement.Operator{Kind: placement.OpSplit, Range: 7}) {
		t.Fatal("a size split takes the freed slot")
	}
}

func TestRunnerDoneOnceAndFailureEvent(t *testing.T) {
	r, x, ev, _ := newTestRunner(DefaultRunnerConfig())
	if ok, _ := r.Start(add(1, 2)); !ok {
		t.Fatal("not started")
	}
	x.done[1](errors.New("ambiguous result"))
	x.done[1](nil) // a second call must not free another slot or count twice
	if st := r.Stats(); st.Failed != 1 || st.Succeeded != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(*ev) != 1 || (*ev)[0].Kind != "operator-failed" || !strings.Contains((*ev)[0].Reason, "ambiguous result") {
		t.Fatalf("events %+v", *ev)
	}
}

func TestRunnerCheckerRefusesWithoutSpendingLimits(t *testing.T) {
	cfg := DefaultRunnerConfig()
	cfg.OpsPerMinute = 1
	r, x, ev, _ := newTestRunner(cfg)
	bad := add(1, 9)
	bad.Reason = "invalid"
	if ok, err := r.Start(bad); ok || err == nil {
		t.Fatal("an invalid operator must be refused with its error")
	}
	if len(*ev) != 1 || (*ev)[0].Kind != EventPolicyBug {
		t.Fatalf("events %+v", *ev)
	}
	if ok, _ := r.Start(add(1, 2)); !ok || len(x.started) != 1 {
		t.Fatal("the refused operator must not count against the rate")
	}
}

func snapObs(now time.Time, nodes []placement.Node, ranges ...placement.Range) Observation {
	return Observation{Now: now, Nodes: nodes, Ranges: ranges}
}

func live(ids ...uint64) []placement.Node {
	var out []placement.Node
	for _, id := range ids {
		out = append(out, placement.Node{ID: id, State: placement.NodeLive})
	}
	return out
}

func voters(ids ...uint64) []placement.Replica {
	var out []placement.Replica
	for _, id := range ids {
		out = append(out, placement.Replica{Node: id, Type: placement.Voter})
	}
	return out
}

func TestControllerDerivesSoftState(t *testing.T) {
	policy := placement.DefaultConfig()
	policy.Rebalance = false
	c := NewController(DefaultConfig(), policy)
	var seen []placement.Snapshot
	c.SetDecider(func(s placement.Snapshot) placement.Plan { seen = append(seen, s); return placement.Plan{} })
	r := placement.Range{ID: 2, QPS: 1000, Leaseholder: 1,
		Replicas: append(voters(1, 2, 3), placement.Replica{Node: 4, Type: placement.Learner})}
	c.Decide(snapObs(epoch, live(1, 2, 3, 4), r), nil, nil, nil)
	c.Decide(snapObs(epoch.Add(time.Second), live(1, 2, 3, 4), r), nil, nil, nil)
	s := seen[1].Ranges[0]
	if want := hitsAlpha*1000 + (1-hitsAlpha)*hitsAlpha*1000; s.HitsEWMA != want {
		t.Fatalf("hits %v want %v", s.HitsEWMA, want)
	}
	if !s.SplitAt.Equal(epoch) || !s.Replicas[3].Since.Equal(epoch) {
		t.Fatalf("first sightings: split %v learner %v", s.SplitAt, s.Replicas[3].Since)
	}
	if r.Replicas[3].Since != (time.Time{}) {
		t.Fatal("the observation itself must not be changed")
	}
	// A range that disappeared (merged) is forgotten: seen again, it is new.
	c.Decide(snapObs(epoch.Add(2*time.Second), live(1, 2, 3, 4)), nil, nil, nil)
	c.Decide(snapObs(epoch.Add(3*time.Second), live(1, 2, 3, 4), r), nil, nil, nil)
	if s := seen[3].Ranges[0]; !s.SplitAt.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("forgotten range's first sighting %v", s.SplitAt)
	}
}

// A plain learner's grace counts from when its leaseholder last reported
// no replica change running: while one runs, the learner is that change's.
func TestControllerLearnerGraceWaitsForChange(t *testing.T) {
	c := NewController(DefaultConfig(), placement.DefaultConfig())
	var seen []placement.Snapshot
	c.SetDecider(func(s placement.Snapshot) placement.Plan { seen = append(seen, s); return placement.Plan{} })
	r := placement.Range{ID: 2, Leaseholder: 1, ChangeInProgress: true,
		Replicas: append(voters(1, 2, 3), placement.Replica{Node: 4, Type: placement.Learner})}
	for i := range 10 {
		c.Decide(snapObs(epoch.Add(time.Duration(i)*time.Second), live(1, 2, 3, 4), r), nil, nil, nil)
	}
	if since := seen[9].Ranges[0].Replicas[3].Since; !since.Equal(epoch.Add(9 * time.Second)) {
		t.Fatalf("learner of a running change: since %v, want the latest round", since)
	}
	r.ChangeInProgress = false
	c.Decide(snapObs(epoch.Add(10*time.Second), live(1, 2, 3, 4), r), nil, nil, nil)
	c.Decide(snapObs(epoch.Add(20*time.Second), live(1, 2, 3, 4), r), nil, nil, nil)
	if since := seen[11].Ranges[0].Replicas[3].Since; !since.Equal(epoch.Add(9 * time.Second)) {
		t.Fatalf("learner after the change stopped: since %v, want the last round it ran", since)
	}
}

// A voter's sighting starts when it became a voter, not when it came as a
// learner: a learner promoted into a surplus starts the surplus grace.
func TestControllerVoterSightingStartsAtPromotion(t *testing.T) {
	c := NewController(DefaultConfig(), placement.DefaultConfig())
	var seen []placement.Snapshot
	c.SetDecider(func(s placement.Snapshot) placement.Plan { seen = append(seen, s); return placement.Plan{} })
	r := placement.Range{ID: 2, Leaseholder: 1, Replicas: append(voters(1, 2, 3), placement.Replica{Node: 4, Type: placement.Learner})}
	c.Decide(snapObs(epoch, live(1, 2, 3, 4), r), nil, nil, nil)
	r.Replicas = voters(1, 2, 3, 4)
	c.Decide(snapObs(epoch.Add(7*time.Second), live(1, 2, 3, 4), r), nil, nil, nil)
	reps := seen[1].Ranges[0].Replicas
	if !reps[0].Since.Equal(epoch) || !reps[3].Since.Equal(epoch.Add(7*time.Second)) {
		t.Fatalf("voter sightings %v and %v, want the first round and the promotion's", reps[0].Since, reps[3].Since)
	}
}

func TestControllerBootstrapPhases(t *testing.T) {
	c := NewController(DefaultConfig(), placement.DefaultConfig())
	c.SetDecider(func(placement.Snapshot) placement.Plan { return placement.Plan{} })
	var ranges []placement.Range
	for i := uint64(1); i <= 20; i++ {
		ranges = append(ranges, placement.Range{ID: i, Leaseholder: 1, Replicas: voters(1, 2, 3)})
	}
	obs := func(now time.Time) Observation { return snapObs(now, live(1, 2, 3, 4), ranges...) }
	d := c.Decide(obs(epoch), nil, nil, nil)
	if c.Phase(4) != placement.PhaseOne || c.Phase(1) != placement.PhaseNone {
		t.Fatalf("phases %v %v", c.Phase(4), c.Phase(1))
	}
	if len(d.Events) != 1 || d.Events[0].Kind != "bootstrap" || d.Events[0].Subject != "node 4" {
		t.Fatalf("events %+v", d.Events)
	}
	if d.Snapshot.Nodes[3].Phase != placement.PhaseOne {
		t.Fatal("the policies see the phase of this round")
	}
	// Node 4 takes its quota (10% of the 60 replicas on the above-mean
	// nodes): phase 2.
	for i := 0; i < 6; i++ {
		ranges[i].Replicas = voters(4, 2, 3)
	}
	c.Decide(obs(epoch.Add(time.Second)), nil, nil, nil)
	if c.Phase(4) != placement.PhaseTwo {
		t.Fatalf("phase after the quota: %v", c.Phase(4))
	}
	// The meta lease moves: a fresh controller finds node 4 below its
	// share and carries on its bootstrap in phase 2, then reports it done.
	fresh := NewController(DefaultConfig(), placement.DefaultConfig())
	fresh.SetDecider(func(placement.Snapshot) placement.Plan { return placement.Plan{} })
	d = fresh.Decide(obs(epoch.Add(time.Second)), nil, nil, nil)
	if fresh.Phase(4) != placement.PhaseTwo || fresh.Phase(1) != placement.PhaseNone || len(d.Events) != 1 {
		t.Fatalf("fresh controller: phase %v, events %+v", fresh.Phase(4), d.Events)
	}
	for i := 6; i < 15; i++ {
		ranges[i].Replicas = voters(4, 1, 2)
	}
	d = fresh.Decide(obs(epoch.Add(2*time.Second)), nil, nil, nil)
	if fresh.Phase(4) != placement.PhaseNone || len(d.Events) != 1 || !strings.Contains(d.Events[0].Reason, "bootstrap done") {
		t.Fatalf("after balancing: phase %v, events %+v", fresh.Phase(4), d.Events)
	}
	// It dies: the phase is dropped.
	nodes := live(1, 2, 3)
	nodes = append(nodes, placement.Node{ID: 4, State: placement.NodeDead})
	c.Decide(snapObs(epoch.Add(2*time.Second), nodes, ranges...), nil, nil, nil)
	if c.Phase(4) != placement.PhaseNone {
		t.Fatalf("phase of a dead node: %v", c.Phase(4))
	}
}

func TestControllerNotesOncePerShape(t *testing.T) {
	cfg := DefaultConfig()
	c := NewController(cfg, placement.DefaultConfig())
	n := 0
	c.SetDecider(func(placement.Snapshot) placement.Plan {
		n++
		return placement.Plan{Notes: []string{"range 2: " + strings.Repeat("9", n) + " qps on one key"}}
	})
	var events []Event
	for i := 0; i < 3; i++ {
		events = append(events, c.Decide(snapObs(epoch.Add(time.Duration(i)*time.Second), nil), nil, nil, nil).Events...)
	}
	events = append(events, c.Decide(snapObs(epoch.Add(cfg.NoteEvery), nil), nil, nil, nil).Events...)
	if len(events) != 2 {
		t.Fatalf("events %+v", events)
	}
}

func learner(rangeID, target uint64) placement.Operator {
	return placement.Operator{Kind: placement.OpAddLearner, Range: rangeID, Target: target}
}

// Adaptive learners of one range run together (placement.Together), each
// within the runner's limits; nothing else joins them, and the range stays
// busy until the last ends.
func TestRunnerLearnersTogether(t *testing.T) {
	cfg := DefaultRunnerConfig()
	cfg.MaxInFlight = 3
	r, x, _, _ := newTestRunner(cfg)
	for _, c := range []struct {
		op   placement.Operator
		want bool
	}{
		{learner(1, 2), true},
		{learner(1, 3), true},
		{learner(1, 3), false}, // the same node twice
		{add(1, 4), false},     // not a learner
		{placement.Operator{Kind: placement.OpTransferLease, Range: 1, Target: 2}, false},
		{learner(2, 4), true},
		{learner(1, 5), false}, // in flight is capped at 3
	} {
		if ok, err := r.Start(c.op); err != nil || ok != c.want {
			t.Fatalf("%s: started %v (%v), want %v", Describe(c.op), ok, err, c.want)
		}
	}
	if busy, inFlight := r.Busy(); len(busy) != 2 || len(inFlight) != 3 || inFlight[1].Target != 3 {
		t.Fatalf("busy %v, in flight %v", busy, inFlight)
	}
	x.ends[0](nil)
	if busy, inFlight := r.Busy(); !busy[1] || len(inFlight) != 2 || inFlight[0].Target != 3 {
		t.Fatalf("after the first learner: busy %v, in flight %v", busy, inFlight)
	}
	if ok, _ := r.Start(add(1, 4)); ok {
		t.Fatal("range 1 is busy until its last learner ends")
	}
	x.ends[1](nil)
	if ok, _ := r.Start(add(1, 4)); !ok {
		t.Fatal("range 1 is free")
	}
}

// A plan's learners for one range all start in its round, not one per
// round; any other second operator for the range is a policy bug.
func TestLoopStartsLearnersTogether(t *testing.T) {
	r, x, ev, _ := newTestRunner(DefaultRunnerConfig())
	c := NewController(DefaultConfig(), placement.DefaultConfig())
	l := &Loop{Controller: c, Runner: r, Sink: ev}
	c.SetDecider(func(placement.Snapshot) placement.Plan {
		return placement.Plan{Ops: []placement.Operator{learner(1, 2), learner(1, 3), add(1, 4)}}
	})
	l.Round(snapObs(epoch, live(1, 2, 3, 4)))
	if len(x.started) != 2 || x.started[0].Target != 2 || x.started[1].Target != 3 {
		t.Fatalf("started %+v", x.started)
	}
	if len(*ev) != 1 || (*ev)[0].Kind != EventPolicyBug || !strings.Contains((*ev)[0].Reason, "second operator for range 1") {
		t.Fatalf("events %+v", *ev)
	}
}

func TestLoopRefusesPlanBugs(t *testing.T) {
	r, x, ev, _ := newTestRunner(DefaultRunnerConfig())
	c := NewController(DefaultConfig(), placement.DefaultConfig())
	l := &Loop{Controller: c, Runner: r, Sink: ev}
	if ok, _ := r.Start(add(7, 2)); !ok {
		t.Fatal("setup")
	}
	invalid := add(1, 9)
	invalid.Reason = "invalid"
	c.SetDecider(func(placement.Snapshot) placement.Plan {
		return placement.Plan{Ops: []placement.Operator{
			invalid,   // refused by the checker: range 1 stays free
			add(1, 3), // valid
			add(1, 4), // second operator for range 1
			{Kind: placement.OpMerge, Range: 6, Other: 7}, // range 7 is busy
		}}
	})
	l.Round(snapObs(epoch, live(1, 2, 3, 4)))
	if len(x.started) != 2 || x.started[1].Range != 1 || x.started[1].Target != 3 {
		t.Fatalf("started %+v", x.started)
	}
	var bugs []string
	for _, e := range *ev {
		if e.Kind == EventPolicyBug {
			bugs = append(bugs, e.Reason)
		}
	}
	if len(bugs) != 3 || !strings.Contains(bugs[1], "second operator for range 1") || !strings.Contains(bugs[2], "range 7 is busy") {
		t.Fatalf("bugs %q", bugs)
	}
}

// An adaptive learner serving a range's reads is kept through a report
// window that caught its node's reads in a dip (a CPU-starved node served
// few reads for a moment): the range goes cool only once the reads its
// learner served stayed below half the threshold for a whole cool-down. A
// controller that has not watched the range that long does not know that.
func TestControllerKeepsLearnerThroughReadDip(t *testing.T) {
	policy := placement.DefaultConfig()
	policy.AdaptiveReadQPS, policy.MaxAdaptiveReplicas, policy.RangeCooldown = 100, 1, 3*time.Second
	r := placement.Range{ID: 2, Leaseholder: 1,
		Replicas: append(voters(1, 2, 3), placement.Replica{Node: 4, Type: placement.Learner, Adaptive: true})}
	removals := func(c *Controller, at time.Duration, replicaReads float64) int {
		r.ReplicaReadQPS = replicaReads
		n := 0
		for _, op := range c.Decide(snapObs(epoch.Add(at), live(1, 2, 3, 4), r), nil, nil, nil).Ops {
			if op.Kind == placement.OpRemoveReplica {
				n++
			}
		}
		return n
	}
	c := NewController(DefaultConfig(), policy)
	at := time.Duration(0)
	round := func(reads float64) int {
		at += 100 * time.Millisecond
		return removals(c, at, reads)
	}
	for range 50 { // 5 s, past the cool-down, serving 1500 reads/s
		if round(1500) != 0 {
			t.Fatalf("%v: the learner serving 1500 reads/s removed", at)
		}
	}
	if round(4) != 0 {
		t.Fatalf("%v: the learner removed on one window of 4 reads/s after 1500", at)
	}
	for range 10 {
		round(1500)
	}
	lastWarm := at
	for round(0) == 0 {
		if at-lastWarm > policy.RangeCooldown {
			t.Fatalf("learner kept %v after its reads stopped, want it gone after the cool-down (%v)", at-lastWarm, policy.RangeCooldown)
		}
	}
	if at-lastWarm < policy.RangeCooldown {
		t.Fatalf("learner removed %v after its reads stopped, before the cool-down (%v)", at-lastWarm, policy.RangeCooldown)
	}
	fresh := NewController(DefaultConfig(), policy)
	if removals(fresh, at, 0) != 0 {
		t.Fatal("a new controller removed the learner on its first sight of the range")
	}
	if removals(fresh, at+policy.RangeCooldown, 0) != 1 {
		t.Fatal("a new controller kept the learner of a range cool for a whole cool-down")
	}
}
