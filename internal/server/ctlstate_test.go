package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// countingActuator accepts every scale-out and starts nothing: the nodes
// asked for never join, so the scale-out stays pending.
type countingActuator struct{ outs atomic.Int32 }

func (a *countingActuator) Name() string { return "counting" }
func (a *countingActuator) ScaleOut(context.Context, int, []string) (string, error) {
	a.outs.Add(1)
	return "asked for a node", nil
}
func (a *countingActuator) Victim([]control.Member) (control.Member, error) {
	return control.Member{}, errors.New("no scale-in in this test")
}
func (a *countingActuator) Remove(context.Context, control.Member) (string, error) { return "", nil }

// The meta lease moves in the middle of a scale-out, transferred or
// because its holder is killed: the new leaseholder resumes the stored
// controller state (the forecaster where the old one left it, the
// scale-out pending) and follows the scale-out instead of asking for the
// node again.
func TestControllerStateSurvivesMetaLeaseMove(t *testing.T) {
	t.Run("transfer", func(t *testing.T) {
		testControllerStateSurvives(t, func(ctx context.Context, tc *testCluster, c *client.Client, old uint64) uint64 {
			to := tc.nodes[0].NodeID()
			if to == old {
				to = tc.nodes[1].NodeID()
			}
			if err := c.TransferLease(ctx, keys.MetaRangeID, to); err != nil {
				t.Fatal(err)
			}
			return to
		})
	})
	t.Run("kill", func(t *testing.T) {
		testControllerStateSurvives(t, func(ctx context.Context, tc *testCluster, c *client.Client, old uint64) uint64 {
			var to uint64
			for i, s := range tc.nodes {
				if s.NodeID() == old {
					tc.nodes[i] = nil
					s.Stop()
				}
			}
			eventually(t, 20*time.Second, "a new meta leaseholder", func() error {
				for _, s := range tc.nodes {
					if s != nil && s.metaLeader() != nil {
						to = s.NodeID()
						return nil
					}
				}
				return errors.New("none yet")
			})
			return to
		})
	})
}

// testControllerStateSurvives starts a scale-out, moves the meta lease
// away from its holder with move (which returns the new holder) and
// checks the new holder resumes it.
func testControllerStateSurvives(t *testing.T, move func(ctx context.Context, tc *testCluster, c *client.Client, old uint64) uint64) {
	// Stored only on the first round and when a scale operation starts or
	// ends, so the stored state is the one the scale-out left.
	tc := startClusterWith(t, 3, func(c *Config) { c.Control.StateEvery = time.Hour })
	c := tc.client()
	tc.waitReplicated(c, 3)
	acts := map[uint64]*countingActuator{}
	for _, s := range tc.nodes {
		a := &countingActuator{}
		acts[s.NodeID()] = a
		s.meta.ctl.UseActuator("manual", a) // the policy's actuator name: applyAutoscale keeps it
	}
	asked := func() (n int32) {
		for _, a := range acts {
			n += a.outs.Load()
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Three nodes under a floor of four: one node is asked for.
	if _, err := c.Settings(ctx, map[string]string{"autoscale.enabled": "true", "autoscale.min-nodes": "4", "autoscale.max-nodes": "5"}); err != nil {
		t.Fatal(err)
	}
	// The call that asks for the node runs outside the round and records
	// its answer in the scaler's history when it returns; the round after
	// that stores the state again (the scaler changed), one forecaster
	// sample on. So the stored state is the last before the move only
	// once it holds the record: a loaded machine otherwise ended the call
	// after the round that stored the pending scale-out, and the new
	// leaseholder resumed the later state.
	var stored control.State
	eventually(t, 10*time.Second, "the pending scale-out and its record stored in the meta range", func() error {
		raw, err := raftstore.ReadMetaControllerState(tc.server(tc.leaseholder(t, keys.MetaRangeID)).ks.Engine())
		if err != nil || raw == nil {
			return fmt.Errorf("stored state %q: %v", raw, err)
		}
		if stored, err = control.DecodeState(raw); err != nil {
			t.Fatal(err)
		}
		if stored.Scaler == nil || stored.Scaler.OutWant != 4 || stored.Scaler.OutCount != 1 ||
			!slices.ContainsFunc(stored.Scaler.History, func(r control.ScaleRecord) bool { return r.Action == "scale-out" }) {
			return fmt.Errorf("stored scaler %+v", stored.Scaler)
		}
		return nil
	})
	if n := asked(); n != 1 || stored.Planner.Forecaster.Samples < 2 {
		tc.logEvents(t)
		t.Fatalf("%d scale-outs asked before the move, %d forecaster samples stored", n, stored.Planner.Forecaster.Samples)
	}
	to := move(ctx, tc, c, tc.leaseholder(t, keys.MetaRangeID))
	tc.waitEvents(t, [3]string{"controller-state",
		fmt.Sprintf("resumed the elasticity controller: %d forecaster samples, 1 node(s) pending to join", stored.Planner.Forecaster.Samples), "cluster"})
	// The new leaseholder runs rounds on from the stored forecaster, with
	// the scale-out pending, and asks for nothing more.
	s := tc.server(to)
	eventually(t, 10*time.Second, "rounds on the new leaseholder", func() error {
		var st control.State
		s.meta.ctl.WithAutoscaler(func(a *control.Autoscaler) { st = a.Snapshot() })
		if st.Planner.Forecaster.Samples < stored.Planner.Forecaster.Samples+5 {
			return fmt.Errorf("%d forecaster samples, stored %d", st.Planner.Forecaster.Samples, stored.Planner.Forecaster.Samples)
		}
		return nil
	})
	if n := asked(); n != 1 {
		t.Fatalf("%d scale-outs asked (new leaseholder node %d: %d): the pending one was asked for again", n, to, acts[to].outs.Load())
	}
	if st := s.meta.ctl.Status(); st.PendingOut != 1 {
		t.Fatalf("the new leaseholder has %d node(s) pending, want the 1 asked for", st.PendingOut)
	}
}
