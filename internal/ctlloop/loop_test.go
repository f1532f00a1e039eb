package ctlloop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
)

// fakeNode is a meta leaseholder in memory: it logs the calls that do
// I/O on a real node.
type fakeNode struct {
	meta     *raftstore.Replica
	stores   bool
	stored   []byte
	readErr  error
	saveErr  error
	calls    []string
	recorded []string
}

func (n *fakeNode) MetaLeader() *raftstore.Replica { return n.meta }
func (n *fakeNode) LivenessKnown() bool            { return true }
func (n *fakeNode) Ranges(context.Context, *raftstore.Replica) (*tidekvpb.RangesResponse, error) {
	n.calls = append(n.calls, "ranges")
	return &tidekvpb.RangesResponse{}, nil
}
func (n *fakeNode) Observe(_ *raftstore.Replica, _ *tidekvpb.RangesResponse, now time.Time) control.Observation {
	n.calls = append(n.calls, "observe")
	return control.Observation{Now: now}
}
func (n *fakeNode) Config() settings.Config {
	return settings.Config{Placement: placement.DefaultConfig(), Autoscale: elastic.DefaultPolicy()}
}
func (n *fakeNode) ReadState(context.Context, *raftstore.Replica) ([]byte, error) {
	n.calls = append(n.calls, "read")
	return n.stored, n.readErr
}
func (n *fakeNode) SaveState(_ context.Context, _ *raftstore.Replica, raw []byte) error {
	n.calls = append(n.calls, "save")
	if n.saveErr == nil {
		n.stored = raw
	}
	return n.saveErr
}
func (n *fakeNode) StoresState() bool { return n.stores }
func (n *fakeNode) Actuator(name string) (control.Actuator, error) {
	return nil, errors.New("no actuator here")
}
func (n *fakeNode) Decommission(context.Context, uint64, bool) error { return nil }
func (n *fakeNode) Overflow(string, float64, float64)                {}
func (n *fakeNode) Record(kind, subject, format string, args ...any) {
	n.recorded = append(n.recorded, kind+": "+fmt.Sprintf(format, args...))
}

type nopExec struct{}

func (nopExec) Execute(_ placement.Operator, done func(error)) { done(nil) }

func newTestLoop(n *fakeNode, now *time.Time) *Loop {
	cfg := control.DefaultConfig()
	cfg.StateEvery = time.Minute
	return New(Deps{Control: cfg, Placement: placement.DefaultConfig(), Autoscale: elastic.DefaultPolicy(), Node: n, Exec: nopExec{},
		Spawn: func(f func()) { f() }, Now: func() time.Time { return *now }})
}

// TestStateRounds: the state is read once after the lease is acquired,
// stored in that round and then only every StateEvery, and not at all
// while the log version does not allow it; a round whose read fails does
// nothing, and one without the meta lease reads nothing.
func TestStateRounds(t *testing.T) {
	now := time.Unix(1000, 0)
	n := &fakeNode{}
	l := newTestLoop(n, &now)
	ctx := context.Background()
	step := func(name string, d time.Duration, round func(context.Context), want ...string) {
		t.Helper()
		now = now.Add(d)
		n.calls = nil
		round(ctx)
		if fmt.Sprint(n.calls) != fmt.Sprint(want) {
			t.Fatalf("%s: calls %v, want %v", name, n.calls, want)
		}
	}
	step("no meta lease", 0, l.Round)
	n.meta = &raftstore.Replica{}
	l.Reset()
	n.readErr = errors.New("not readable yet")
	step("state not readable", 0, l.Round, "ranges", "read")
	n.readErr = nil
	step("resumed (nothing stored), not stored below the log version", time.Second, l.Round, "ranges", "read", "observe")
	n.stores = true
	step("stored once the log version allows it", time.Second, l.Round, "ranges", "observe", "save")
	step("not due", 10*time.Second, l.Round, "ranges", "observe")
	step("urgent rounds never store", time.Minute, l.Urgent, "ranges", "observe")
	step("due", 0, l.Round, "ranges", "observe", "save")
	n.saveErr = errors.New("proposal failed")
	step("failed store", time.Minute, l.Round, "ranges", "observe", "save")
	step("retried next round", time.Second, l.Round, "ranges", "observe", "save")
	failed := 0
	for _, r := range n.recorded {
		if r == "controller-state: storing the elasticity controller state failed (retried next round): proposal failed" {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("store failures reported %d times, want once: %q", failed, n.recorded)
	}
	// A node that acquires the lease again resumes what was stored: the
	// forecaster's samples of the seven full rounds since the first
	// resume (urgent rounds plan nothing).
	n.saveErr = nil
	step("stored", time.Minute, l.Round, "ranges", "observe", "save")
	l.Reset()
	step("resumed", time.Second, l.Round, "ranges", "read", "observe")
	if last := n.recorded[len(n.recorded)-1]; last != "controller-state: resumed the elasticity controller: 7 forecaster samples, 0 node(s) pending to join" {
		t.Fatalf("last event %q", last)
	}
}
