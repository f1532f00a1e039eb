package elastic

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// PlannerState is what a Planner has learnt across rounds, as plain
// values: enough for another planner (on the next meta leaseholder) to
// make the decisions this one would have made. The overflow policy's
// fill rates are not in it: they are relearned within their window.
type PlannerState struct {
	Window     int       `json:"window"`
	OverRounds int       `json:"over_rounds"`
	FitsSince  time.Time `json:"fits_since"`
	LastAction time.Time `json:"last_action"`
	Capped     bool      `json:"capped"`
	// Lead is the measured lead time (0: none yet); LeadSince when the
	// scale-out being timed was asked for (zero: none), LeadFrom the
	// serving nodes then.
	Lead      time.Duration `json:"lead,omitempty"`
	LeadSince time.Time     `json:"lead_since"`
	LeadFrom  int           `json:"lead_from,omitempty"`

	Forecaster ForecasterState `json:"forecaster"`
	Capacity   CapacityState   `json:"capacity"`
	Bandwidth  BandwidthState  `json:"bandwidth"`
}

// ForecasterState is a Forecaster's smoothing state and the forecasts
// still waiting to be scored against the samples they predicted. Season,
// Level and Trend are the first fit's (forecastFits[0], the constants a
// binary without fits ran, which resumes from them); Pending and Error
// are the forecasts given and their error; Fits every fit, the first
// included (absent from a state stored without fits: each fit then
// resumes from the first's).
type ForecasterState struct {
	Season  []float64  `json:"season,omitempty"`
	Level   float64    `json:"level"`
	Trend   float64    `json:"trend"`
	Samples int        `json:"samples"`
	First   float64    `json:"first"`
	Horizon int        `json:"horizon"`
	Pending []float64  `json:"pending,omitempty"`
	Error   float64    `json:"error"`
	Fits    []FitState `json:"fits,omitempty"`
	Best    int        `json:"best,omitempty"`
}

// FitState is one fit's constants, smoothing state, forecasts waiting to
// be scored and score.
type FitState struct {
	Alpha   float64   `json:"alpha"`
	Beta    float64   `json:"beta"`
	Season  []float64 `json:"season,omitempty"`
	Level   float64   `json:"level"`
	Trend   float64   `json:"trend"`
	Pending []float64 `json:"pending,omitempty"`
	Score   float64   `json:"score"`
}

// CapacityState is the capacity model's learned idle p99 and per-node
// capacities (ops/s at full utilisation).
type CapacityState struct {
	IdleP99 time.Duration      `json:"idle_p99"`
	Learned map[uint64]float64 `json:"learned,omitempty"`
}

// BandwidthState is the migration-rate controller's rates and smoothed
// p99s.
type BandwidthState struct {
	Start  float64       `json:"start"`
	Rate   float64       `json:"rate"`
	Steady time.Duration `json:"steady"`
	P99    time.Duration `json:"p99"`
}

// Snapshot copies the planner's learnt state.
func (pl *Planner) Snapshot() PlannerState {
	c, b := pl.capacity, pl.bw
	return PlannerState{Window: pl.window, OverRounds: pl.overRounds, FitsSince: pl.fitsSince, LastAction: pl.lastAction, Capped: pl.capped,
		Lead: pl.lead, LeadSince: pl.leadSince, LeadFrom: pl.leadFrom,
		Forecaster: pl.fc.snapshot(),
		Capacity:   CapacityState{IdleP99: c.idle, Learned: maps.Clone(c.learned)},
		Bandwidth:  BandwidthState{Start: b.start, Rate: b.rate, Steady: b.steady, P99: b.p99},
	}
}

// Restore replaces the planner's learnt state with st. A state whose
// forecaster has another shape than the policy in force gives (the
// season or the planning window changed since it was taken) is refused
// whole: the planner keeps what it has, as after a policy change.
func (pl *Planner) Restore(st PlannerState) error {
	f := st.Forecaster
	season := pl.steps(pl.policy.Season)
	if season <= 1 {
		season = 0
	}
	switch {
	case len(f.Season) != season || f.Horizon != pl.fc.horizon:
		return fmt.Errorf("elastic: the saved forecaster has a season of %d steps and a horizon of %d, the policy gives %d and %d",
			len(f.Season), f.Horizon, season, pl.fc.horizon)
	case len(f.Pending) > f.Horizon || f.Samples < 0 || st.Window < 0 || st.OverRounds < 0:
		return fmt.Errorf("elastic: the saved planner state is inconsistent (%d pending forecasts for a horizon of %d, %d samples)",
			len(f.Pending), f.Horizon, f.Samples)
	case !fitsMatch(f, season):
		return fmt.Errorf("elastic: the saved forecaster's %d fits are not this binary's %d (constants, season or forecasts in flight differ)",
			len(f.Fits), len(forecastFits))
	case st.Lead < 0 || st.LeadFrom < 0:
		return fmt.Errorf("elastic: the saved lead time %v (timed from %d nodes) is negative", st.Lead, st.LeadFrom)
	case st.Capacity.IdleP99 <= 0:
		return fmt.Errorf("elastic: the saved idle p99 %v is not positive", st.Capacity.IdleP99)
	case !(st.Bandwidth.Rate > 0) || !(st.Bandwidth.Start > 0):
		return fmt.Errorf("elastic: the saved migration rate %v (start %v) is not positive", st.Bandwidth.Rate, st.Bandwidth.Start)
	}
	pl.window, pl.overRounds, pl.fitsSince, pl.lastAction, pl.capped = st.Window, st.OverRounds, st.FitsSince, st.LastAction, st.Capped
	pl.lead, pl.leadSince, pl.leadFrom = st.Lead, st.LeadSince, st.LeadFrom
	pl.fc.restore(f)
	learned := maps.Clone(st.Capacity.Learned)
	if learned == nil {
		learned = map[uint64]float64{}
	}
	pl.capacity.idle, pl.capacity.learned = st.Capacity.IdleP99, learned
	pl.bw.start, pl.bw.rate, pl.bw.steady, pl.bw.p99 = st.Bandwidth.Start, st.Bandwidth.Rate, st.Bandwidth.Steady, st.Bandwidth.P99
	// The policy's limits apply to a rate saved under other limits.
	pl.bw.SetConfig(pl.policy.Bandwidth)
	return nil
}

func (f *Forecaster) snapshot() ForecasterState {
	first := f.fits[0]
	st := ForecasterState{Season: slices.Clone(first.season), Level: first.level, Trend: first.trend, Samples: f.n, First: f.first,
		Horizon: f.horizon, Pending: slices.Clone(f.pending), Error: f.err, Best: f.best}
	for _, ft := range f.fits {
		st.Fits = append(st.Fits, FitState{Alpha: ft.alpha, Beta: ft.beta, Season: slices.Clone(ft.season), Level: ft.level, Trend: ft.trend,
			Pending: slices.Clone(ft.pending), Score: ft.score})
	}
	return st
}

// fitsMatch says whether st's fits, if any, are this binary's, each with
// season steps of season and no more forecasts in flight than the horizon.
func fitsMatch(st ForecasterState, season int) bool {
	if st.Fits == nil {
		return true
	}
	if len(st.Fits) != len(forecastFits) || st.Best < 0 || st.Best >= len(st.Fits) {
		return false
	}
	for i, ft := range st.Fits {
		if ft.Alpha != forecastFits[i].alpha || ft.Beta != forecastFits[i].beta || len(ft.Season) != season || len(ft.Pending) > st.Horizon {
			return false
		}
	}
	return true
}

// restore replaces f's state with st (checked by Restore). A state stored
// without fits resumes every fit from the one it has, unscored.
func (f *Forecaster) restore(st ForecasterState) {
	f.n, f.first, f.pending, f.err, f.best = st.Samples, st.First, slices.Clone(st.Pending), st.Error, st.Best
	for i, ft := range f.fits {
		s := FitState{Season: st.Season, Level: st.Level, Trend: st.Trend, Pending: st.Pending}
		if st.Fits != nil {
			s = st.Fits[i]
		}
		ft.season, ft.level, ft.trend, ft.pending, ft.score = slices.Clone(s.Season), s.Level, s.Trend, slices.Clone(s.Pending), s.Score
	}
}
