package elastic

import "math"

// Forecaster is additive Holt-Winters over one sample per step: a level,
// a damped trend, and (with a season) one seasonal offset per step of the
// season. The trend is damped (each further step adds phi times the
// previous step's trend) so a step in the load is not extrapolated into
// a ramp over a long horizon. With a season, the first season is
// recorded as it comes and only the level follows it (no trend); without
// one it is Holt's linear method from the start.
//
// It keeps one fit per pair of level and trend constants in
// forecastFits, all fed the same samples, and forecasts with the fit
// whose forecasts ErrorHorizon steps ahead erred least over about the
// last horizon of samples: the constants are chosen by the error at the
// horizon the planner plans over, measured online, not fixed. A fixed
// level constant of 0.5 took half of each seasonal surprise into the
// level, so a ramp that came a few seconds early lifted the forecast of
// the whole window's peak (simulator: +5.3% at a ramp's turn), while a
// slow level follows a load that moved for good too late; which is right
// is a property of the load, and the horizon error measures it.
//
// It also tracks the error of the forecasts it gave at that horizon
// (Error): each is compared with the sample that arrives then.
type Forecaster struct {
	fits []*fit
	best int // the fit it forecasts with

	n     int     // samples seen
	first float64 // the first sample, for the first season

	horizon int
	pending []float64 // forecasts given for the next `horizon` steps, oldest first
	err     float64   // smoothed relative error at the horizon
}

// fit is Holt-Winters at one pair of smoothing constants.
type fit struct {
	alpha, beta  float64
	season       []float64 // offsets, by step within the season
	level, trend float64
	pending      []float64 // this fit's forecasts at the horizon, oldest first
	score        float64   // their smoothed relative error
}

// forecastFits are the level (alpha) and trend (beta) constants the
// forecaster chooses among. The first pair forecasts until the fits have
// been scored (and is what a forecaster without fits ran): a level that
// adapts within a few steps, a trend more slowly so one noisy sample
// does not tilt it. The others are slower levels and no trend, the
// ends of the usual ranges, between which the error chooses.
var forecastFits = [...]struct{ alpha, beta float64 }{
	{0.5, 0.05}, {0.5, 0}, {0.25, 0.05}, {0.25, 0}, {0.1, 0.05}, {0.1, 0},
}

// Forecaster smoothing shared by every fit: the season adapts within a
// few seasons, the trend's damping, and the memory of Error.
const (
	forecastGamma = 0.3
	forecastPhi   = 0.9
	errorAlpha    = 0.1
)

// NewForecaster forecasts with a season of seasonSteps samples (0 or 1:
// none) and tracks its error errorHorizon steps ahead (at least 1).
func NewForecaster(seasonSteps, errorHorizon int) *Forecaster {
	f := &Forecaster{horizon: max(errorHorizon, 1)}
	for _, c := range forecastFits {
		ft := &fit{alpha: c.alpha, beta: c.beta}
		if seasonSteps > 1 {
			ft.season = make([]float64, seasonSteps)
		}
		f.fits = append(f.fits, ft)
	}
	return f
}

// relError is how far predicted was from x, relative to x.
func relError(predicted, x float64) float64 {
	return math.Abs(predicted-x) / math.Max(math.Abs(x), 1)
}

// Observe feeds the next sample.
func (f *Forecaster) Observe(x float64) {
	if len(f.pending) == f.horizon {
		f.err = errorAlpha*relError(f.pending[0], x) + (1-errorAlpha)*f.err
		f.pending = f.pending[1:]
	}
	if f.n == 0 {
		f.first = x
	}
	for i, ft := range f.fits {
		// Each fit is scored over about one horizon of its forecasts: as
		// many as are in flight at once.
		if len(ft.pending) == f.horizon {
			ft.score += (relError(ft.pending[0], x) - ft.score) / float64(f.horizon)
			ft.pending = ft.pending[1:]
		}
		ft.observe(x, f.n, f.first)
		ft.pending = append(ft.pending, ft.forecast(f.n+1, f.horizon))
		if ft.score < f.fits[f.best].score {
			f.best = i
		}
	}
	f.n++
	f.pending = append(f.pending, f.Forecast(f.horizon))
}

// observe feeds x, the sample after n others (first the first of them).
func (ft *fit) observe(x float64, n int, first float64) {
	m := len(ft.season)
	switch {
	case n == 0:
		ft.level = x
	case m > 0 && n < m:
		// The first season is recorded as it is, then becomes the
		// seasonal offsets around its mean (the usual initialisation).
		ft.season[n] = x
		ft.level += (x - ft.level) * ft.alpha
		if n == m-1 {
			ft.season[0] = first
			mean := 0.0
			for _, v := range ft.season {
				mean += v
			}
			mean /= float64(m)
			for i := range ft.season {
				ft.season[i] -= mean
			}
			ft.level, ft.trend = mean, 0
		}
	default:
		s := ft.offset(n, 0)
		prev := ft.level
		ft.level = ft.alpha*(x-s) + (1-ft.alpha)*(ft.level+forecastPhi*ft.trend)
		ft.trend = ft.beta*(ft.level-prev) + (1-ft.beta)*forecastPhi*ft.trend
		if m > 0 {
			ft.season[n%m] = forecastGamma*(x-ft.level) + (1-forecastGamma)*ft.season[n%m]
		}
	}
}

// offset is the seasonal offset h steps after the last of n samples (h =
// 0: the sample being observed as the n+1st).
func (ft *fit) offset(n, h int) float64 {
	if ft.season == nil || n < len(ft.season) {
		return 0
	}
	return ft.season[(n+h)%len(ft.season)]
}

// forecast is the expected sample h ≥ 1 steps after the last of n.
func (ft *fit) forecast(n, h int) float64 {
	if n == 0 {
		return 0
	}
	damped, phi := 0.0, 1.0
	for range h {
		phi *= forecastPhi
		damped += phi
	}
	return math.Max(0, ft.level+damped*ft.trend+ft.offset(n, h-1))
}

// Forecast is the expected sample h ≥ 1 steps after the last one, never
// negative.
func (f *Forecaster) Forecast(h int) float64 { return f.fits[f.best].forecast(f.n, h) }

// Peak is the highest forecast over the next h steps.
func (f *Forecaster) Peak(h int) float64 {
	peak := 0.0
	for i := 1; i <= max(h, 1); i++ {
		peak = math.Max(peak, f.Forecast(i))
	}
	return peak
}

// Error is the smoothed relative error of the forecasts made ErrorHorizon
// steps ahead (0 until one has come due).
func (f *Forecaster) Error() float64 { return f.err }

// Samples is how many samples it has seen.
func (f *Forecaster) Samples() int { return f.n }
