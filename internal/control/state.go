package control

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
)

// The elasticity controller's state outlives the node that runs it: the
// server stores it in the meta range each round it changes and the next
// meta leaseholder resumes from it (docs/design.md). State is what is
// stored; EncodeState and DecodeState are its one wire form.

// StateVersion is the version of the encoded state this binary writes
// and the only one it reads. A change to what State means (not a new
// optional field) takes a new version.
const StateVersion = 1

// State is the elasticity controller's state: the planner's models and
// the scale operation under way.
type State struct {
	Version int                  `json:"version"`
	Planner elastic.PlannerState `json:"planner"`
	// Scaler is nil when no actuator could be built (nothing scales).
	Scaler *ScalerState `json:"scaler,omitempty"`
}

// ScalerState is a Scaler's work in progress and back-off. A scale-out
// is in it from the actuator call on; a scale-in from the answer to its
// decommission (the drain itself is in the node's record).
type ScalerState struct {
	// OutWant is the live nodes a pending scale-out waits for (0: none),
	// OutCount the nodes it asked for, OutSince when.
	OutWant  int       `json:"out_want"`
	OutCount int       `json:"out_count"`
	OutSince time.Time `json:"out_since"`
	// Victim is the node the first scale-in under way drains (nil:
	// none), since VictimAt; Later are the drains begun after it, in
	// order (a binary that drained one node at a time follows the first
	// only).
	Victim   *Member      `json:"victim,omitempty"`
	VictimAt time.Time    `json:"victim_at"`
	Later    []DrainState `json:"later,omitempty"`
	Fails    int          `json:"fails"`
	RetryAt  time.Time    `json:"retry_at"`
	// History is the recent decisions status shows.
	History []ScaleRecord `json:"history,omitempty"`
}

// DrainState is a node a scale-in drains, since At.
type DrainState struct {
	Member Member    `json:"member"`
	At     time.Time `json:"at"`
}

// EncodeState encodes st at StateVersion.
func EncodeState(st State) ([]byte, error) {
	st.Version = StateVersion
	return json.Marshal(st)
}

// DecodeState decodes what EncodeState wrote, refusing any other version.
func DecodeState(b []byte) (State, error) {
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return State{}, fmt.Errorf("control: the stored controller state is not readable: %v", err)
	}
	if head.Version != StateVersion {
		return State{}, fmt.Errorf("control: the stored controller state is at version %d, this binary reads version %d only", head.Version, StateVersion)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("control: the stored controller state (version %d) is not readable: %v", head.Version, err)
	}
	return st, nil
}

// Snapshot copies the scaler's work in progress.
func (s *Scaler) Snapshot() ScalerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ScalerState{OutWant: s.outWant, OutCount: s.outCount, OutSince: s.outSince, Fails: s.fails,
		RetryAt: s.retryAt, History: slices.Clone(s.history)}
	for i, d := range s.drains {
		if i == 0 {
			m := d.m
			st.Victim, st.VictimAt = &m, d.at
			continue
		}
		st.Later = append(st.Later, DrainState{Member: d.m, At: d.at})
	}
	return st
}

// Restore takes over st's work in progress: a pending scale-out is
// followed until its nodes join or it times out, not asked for again; a
// drain is followed to the node's removal.
func (s *Scaler) Restore(st ScalerState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outWant, s.outCount, s.outSince, s.fails, s.retryAt = st.OutWant, st.OutCount, st.OutSince, st.Fails, st.RetryAt
	s.drains = nil
	if st.Victim != nil {
		s.drains = append(s.drains, drain{m: *st.Victim, at: st.VictimAt})
		for _, d := range st.Later {
			s.drains = append(s.drains, drain{m: d.Member, at: d.At})
		}
	}
	s.history = slices.Clone(st.History)
	if over := len(s.history) - s.cfg.History; over > 0 {
		s.history = s.history[over:]
	}
}

// Snapshot copies the controller's state.
func (a *Autoscaler) Snapshot() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := State{Version: StateVersion, Planner: a.planner.Snapshot()}
	if a.scaler != nil {
		sc := a.scaler.Snapshot()
		st.Scaler = &sc
	}
	return st
}

// Restore resumes from st: the planner's models, and the scale operation
// under way if this autoscaler has a scaler to follow it with. A planner
// state the policy in force cannot take is refused, and nothing changes.
func (a *Autoscaler) Restore(st State) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.planner.Restore(st.Planner); err != nil {
		return err
	}
	if a.scaler != nil && st.Scaler != nil {
		a.scaler.Restore(*st.Scaler)
	}
	return nil
}
