package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
)

type fakeActuator struct {
	outs       []int
	joins      [][]string
	removed    []uint64
	failOut    int // fail the next n ScaleOuts
	recommends bool
}

func (f *fakeActuator) Name() string { return "fake" }
func (f *fakeActuator) ScaleOut(_ context.Context, count int, join []string) (string, error) {
	if f.failOut > 0 {
		f.failOut--
		return "", errors.New("quota exceeded")
	}
	f.outs, f.joins = append(f.outs, count), append(f.joins, join)
	return fmt.Sprintf("started %d", count), nil
}
func (f *fakeActuator) Victim(ms []Member) (Member, error) {
	if len(ms) == 0 {
		return Member{}, errors.New("no members")
	}
	return ms[len(ms)-1], nil
}
func (f *fakeActuator) Remove(_ context.Context, m Member) (string, error) {
	f.removed = append(f.removed, m.ID)
	return fmt.Sprintf("stopped node %d", m.ID), nil
}

type recommender struct{ fakeActuator }

func (recommender) RecommendOnly() bool { return true }

type fakeDecom struct{ nodes, kept []uint64 }

func (f *fakeDecom) Decommission(_ context.Context, node uint64, drain bool) error {
	if drain {
		f.nodes = append(f.nodes, node)
	} else {
		f.kept = append(f.kept, node)
	}
	return nil
}

func inline(f func()) { f() }

func view(now time.Time, live int, extra ...placement.Node) ScaleView {
	v := ScaleView{Now: now, States: map[uint64]placement.NodeState{}, Replicas: map[uint64]int{}}
	for i := 1; i <= live; i++ {
		v.Live = append(v.Live, Member{ID: uint64(i), Addr: fmt.Sprintf("127.0.0.1:%d", 7400+10*i)})
		v.States[uint64(i)] = placement.NodeLive
		v.Replicas[uint64(i)] = 5
	}
	for _, n := range extra {
		v.States[n.ID] = n.State
	}
	return v
}

func kinds(h []ScaleRecord) string {
	var out []string
	for _, r := range h {
		out = append(out, r.Action)
	}
	return strings.Join(out, ",")
}

func TestScalerScaleOutWaitsForJoin(t *testing.T) {
	act, ev := &fakeActuator{}, &eventSink{}
	s := NewScaler(DefaultScalerConfig(), act, &fakeDecom{}, inline, ev)
	out := ScaleAction{Kind: ScaleOut, From: 2, To: 4, Reason: "forecast 9000 ops/s"}
	s.Round(out, view(epoch, 2))
	if len(act.outs) != 1 || act.outs[0] != 2 || len(act.joins[0]) != 2 {
		t.Fatalf("actuator calls %v joins %v", act.outs, act.joins)
	}
	if o, _ := s.Pending(); o != 2 {
		t.Fatalf("pending %d", o)
	}
	s.Round(out, view(epoch.Add(time.Second), 3)) // one joined: still waiting, no new call
	if len(act.outs) != 1 {
		t.Fatal("asked again while nodes were on their way")
	}
	s.Round(ScaleAction{}, view(epoch.Add(2*time.Second), 4))
	if o, _ := s.Pending(); o != 0 || kinds(s.History()) != "scale-out,scale-out-done" {
		t.Fatalf("pending %d history %s", o, kinds(s.History()))
	}
}

func TestScalerJoinTimeoutAndBackoff(t *testing.T) {
	act := &fakeActuator{failOut: 1}
	cfg := DefaultScalerConfig()
	s := NewScaler(cfg, act, &fakeDecom{}, inline, &eventSink{})
	out := ScaleAction{Kind: ScaleOut, From: 1, To: 2}
	s.Round(out, view(epoch, 1)) // refused by the actuator: back off RetryMin
	s.Round(out, view(epoch.Add(cfg.RetryMin-time.Second), 1))
	if len(act.outs) != 0 {
		t.Fatal("retried inside the back-off")
	}
	s.Round(out, view(epoch.Add(cfg.RetryMin), 1))
	if len(act.outs) != 1 {
		t.Fatal("not retried after the back-off")
	}
	// The node never joins: after JoinTimeout it is a failure, not capacity.
	at := epoch.Add(cfg.RetryMin + cfg.JoinTimeout)
	s.Round(out, view(at, 1))
	if o, _ := s.Pending(); o != 0 || kinds(s.History()) != "scale-out-failed,scale-out,scale-out-failed" {
		t.Fatalf("pending %d history %s", o, kinds(s.History()))
	}
	// Second failure in a row: twice the back-off.
	s.Round(out, view(at.Add(2*cfg.RetryMin-time.Second), 1))
	if len(act.outs) != 1 {
		t.Fatal("the back-off did not double")
	}
}

func TestScalerScaleInDrainsThenRemoves(t *testing.T) {
	act, dec := &fakeActuator{}, &fakeDecom{}
	s := NewScaler(DefaultScalerConfig(), act, dec, inline, &eventSink{})
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2, Reason: "forecast below 2 nodes"}, view(epoch, 3))
	if len(dec.nodes) != 1 || dec.nodes[0] != 3 {
		t.Fatalf("decommissioned %v", dec.nodes)
	}
	v := view(epoch.Add(time.Second), 2, placement.Node{ID: 3, State: placement.NodeDraining})
	v.Replicas[3] = 2
	s.Round(ScaleAction{Kind: ScaleIn, From: 2, To: 1}, v)
	if len(act.removed) != 0 || len(dec.nodes) != 1 {
		t.Fatal("removed before drained, or a second scale-in started")
	}
	v.Replicas[3] = 0
	s.Round(ScaleAction{}, v)
	if len(act.removed) != 1 || act.removed[0] != 3 || kinds(s.History()) != "scale-in,scale-in-done" {
		t.Fatalf("removed %v history %s", act.removed, kinds(s.History()))
	}
	if _, in := s.Pending(); in != 0 {
		t.Fatal("still draining")
	}
}

func TestScalerRecommendOnly(t *testing.T) {
	act := &recommender{}
	s := NewScaler(DefaultScalerConfig(), act, &fakeDecom{}, inline, &eventSink{})
	s.Round(ScaleAction{Kind: ScaleOut, From: 1, To: 2}, view(epoch, 1))
	if o, _ := s.Pending(); o != 0 {
		t.Fatal("a recommendation is not waited for")
	}
}

// An operator recommissions the node a scale-in drains: once it has been
// live for longer than a call could take, the scale-in is over.
func TestScalerScaleInCancelled(t *testing.T) {
	act, dec := &fakeActuator{}, &fakeDecom{}
	cfg := DefaultScalerConfig()
	s := NewScaler(cfg, act, dec, inline, &eventSink{})
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2}, view(epoch, 3))
	s.Round(ScaleAction{}, view(epoch.Add(time.Second), 3)) // not yet visible as draining
	if _, in := s.Pending(); in != 1 {
		t.Fatal("gave up on the drain at once")
	}
	s.Round(ScaleAction{}, view(epoch.Add(cfg.CallTimeout+2*time.Second), 3))
	if _, in := s.Pending(); in != 0 || kinds(s.History()) != "scale-in,scale-in-cancelled" || len(act.removed) != 0 {
		t.Fatalf("history %s, removed %v", kinds(s.History()), act.removed)
	}
}

// The load rises while a node drains: the drain is cancelled (the node
// is kept) before any new node is asked for.
func TestScalerScaleOutCancelsADrain(t *testing.T) {
	act, dec := &fakeActuator{}, &fakeDecom{}
	s := NewScaler(DefaultScalerConfig(), act, dec, inline, &eventSink{})
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2}, view(epoch, 3))
	v := view(epoch.Add(time.Second), 2, placement.Node{ID: 3, State: placement.NodeDraining})
	v.Replicas[3] = 2
	s.Round(ScaleAction{Kind: ScaleOut, From: 2, To: 4, Reason: "load rose"}, v)
	if len(dec.kept) != 1 || dec.kept[0] != 3 || len(act.outs) != 0 {
		t.Fatalf("kept %v, scale-outs %v", dec.kept, act.outs)
	}
	if _, in := s.Pending(); in != 0 || kinds(s.History()) != "scale-in,scale-in-cancelled" {
		t.Fatalf("history %s", kinds(s.History()))
	}
}

// A scale-in planned to overlap a drain starts beside it once the view
// shows the first node draining (not before: the plan still counted it);
// one not so planned waits. Drained nodes are removed in the order their
// drains began, a scale-out keeps the node drained last, and a restored
// scaler follows both drains.
func TestScalerScaleInOverlapsDrains(t *testing.T) {
	act, dec := &fakeActuator{}, &fakeDecom{}
	s := NewScaler(DefaultScalerConfig(), act, dec, inline, &eventSink{})
	s.Round(ScaleAction{Kind: ScaleIn, From: 4, To: 3}, view(epoch, 4))
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2, Overlap: true}, view(epoch.Add(time.Second), 4))
	draining := func(at time.Duration, replicas map[uint64]int) ScaleView {
		v := view(epoch.Add(at), 4-len(replicas))
		for id, n := range replicas {
			v.States[id], v.Replicas[id] = placement.NodeDraining, n
		}
		return v
	}
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2}, draining(2*time.Second, map[uint64]int{4: 3}))
	if len(dec.nodes) != 1 {
		t.Fatalf("decommissioned %v: a second drain began before the view showed the first, or without being planned to overlap", dec.nodes)
	}
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2, Overlap: true}, draining(3*time.Second, map[uint64]int{4: 3}))
	if len(dec.nodes) != 2 || dec.nodes[1] != 3 {
		t.Fatalf("decommissioned %v, want 4 then 3", dec.nodes)
	}
	if _, in := s.Pending(); in != 2 {
		t.Fatalf("%d drain(s) pending, want 2", in)
	}
	raw, err := EncodeState(State{Scaler: ptr(s.Snapshot())})
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := NewScaler(DefaultScalerConfig(), act, dec, inline, &eventSink{})
	r.Restore(*st.Scaler)
	if _, in := r.Pending(); in != 2 {
		t.Fatalf("restored: %d drain(s) pending, want 2", in)
	}
	r.Round(ScaleAction{}, draining(4*time.Second, map[uint64]int{4: 1, 3: 0}))
	if len(act.removed) != 0 {
		t.Fatalf("removed %v while node 4, drained first, still holds data", act.removed)
	}
	r.Round(ScaleAction{}, draining(5*time.Second, map[uint64]int{4: 0, 3: 0}))
	r.Round(ScaleAction{}, draining(6*time.Second, map[uint64]int{4: 0, 3: 0}))
	if len(act.removed) != 2 || act.removed[0] != 4 || act.removed[1] != 3 {
		t.Fatalf("removed %v, want 4 then 3", act.removed)
	}

	// A scale-out during two drains keeps the node drained last.
	act, dec = &fakeActuator{}, &fakeDecom{}
	s = NewScaler(DefaultScalerConfig(), act, dec, inline, &eventSink{})
	s.Round(ScaleAction{Kind: ScaleIn, From: 4, To: 3}, view(epoch, 4))
	s.Round(ScaleAction{Kind: ScaleIn, From: 3, To: 2, Overlap: true}, draining(time.Second, map[uint64]int{4: 3}))
	s.Round(ScaleAction{Kind: ScaleOut, From: 2, To: 3}, draining(2*time.Second, map[uint64]int{4: 3, 3: 3}))
	if len(dec.kept) != 1 || dec.kept[0] != 3 || len(act.outs) != 0 {
		t.Fatalf("kept %v, scale-outs %v: want node 3 kept and no new node", dec.kept, act.outs)
	}
	if _, in := s.Pending(); in != 1 {
		t.Fatalf("%d drain(s) pending, want node 4's", in)
	}
}

func ptr[T any](v T) *T { return &v }
