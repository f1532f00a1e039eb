package elastic

import "math"

// Forecaster is additive Holt-Winters over one sample per step: a level,
// a damped trend, and (with a season) one seasonal offset per step of the
// season. The trend is damped (each further step adds phi times the
// previous step's trend) so a step in the load is not extrapolated into
// a ramp over a long horizon. Until a full season has been seen it is Holt's linear method.
// It also tracks its own error at a fixed horizon: each forecast made for
// ErrorHorizon steps ahead is compared with the sample that arrives then.
type Forecaster struct {
	alpha, beta, gamma float64
	season             []float64 // offsets, by step within the season
	level, trend       float64
	n                  int     // samples seen
	first              float64 // the first sample, for the first season

	horizon int
	pending []float64 // forecasts for the next `horizon` steps, oldest first
	err     float64   // smoothed relative error at the horizon
}

// Forecaster smoothing: level and season adapt within a few steps, the
// trend more slowly so one noisy sample does not tilt it.
const (
	forecastAlpha = 0.5
	forecastBeta  = 0.05
	forecastGamma = 0.3
	forecastPhi   = 0.9
	errorAlpha    = 0.1
)

// NewForecaster forecasts with a season of seasonSteps samples (0 or 1:
// none) and tracks its error errorHorizon steps ahead (at least 1).
func NewForecaster(seasonSteps, errorHorizon int) *Forecaster {
	f := &Forecaster{alpha: forecastAlpha, beta: forecastBeta, gamma: forecastGamma, horizon: max(errorHorizon, 1)}
	if seasonSteps > 1 {
		f.season = make([]float64, seasonSteps)
	}
	return f
}

// Observe feeds the next sample.
func (f *Forecaster) Observe(x float64) {
	if len(f.pending) == f.horizon {
		predicted := f.pending[0]
		f.pending = f.pending[1:]
		e := math.Abs(predicted-x) / math.Max(math.Abs(x), 1)
		f.err = errorAlpha*e + (1-errorAlpha)*f.err
	}
	m := len(f.season)
	switch {
	case f.n == 0:
		f.level = x
	case m > 0 && f.n < m:
		// The first season is recorded as it is, then becomes the
		// seasonal offsets around its mean (the usual initialisation).
		f.season[f.n] = x
		f.level += (x - f.level) * f.alpha
		if f.n == m-1 {
			f.season[0] = f.first
			mean := 0.0
			for _, v := range f.season {
				mean += v
			}
			mean /= float64(m)
			for i := range f.season {
				f.season[i] -= mean
			}
			f.level, f.trend = mean, 0
		}
	default:
		s := f.offset(0)
		prev := f.level
		f.level = f.alpha*(x-s) + (1-f.alpha)*(f.level+forecastPhi*f.trend)
		f.trend = f.beta*(f.level-prev) + (1-f.beta)*forecastPhi*f.trend
		if m > 0 {
			f.season[f.n%m] = f.gamma*(x-f.level) + (1-f.gamma)*f.season[f.n%m]
		}
	}
	if f.n == 0 {
		f.first = x
	}
	f.n++
	f.pending = append(f.pending, f.Forecast(f.horizon))
}

// offset is the seasonal offset h steps after the last sample (h = 0:
// the sample being observed now).
func (f *Forecaster) offset(h int) float64 {
	if f.season == nil || f.n < len(f.season) {
		return 0
	}
	return f.season[(f.n+h)%len(f.season)]
}

// Forecast is the expected sample h ≥ 1 steps after the last one, never
// negative.
func (f *Forecaster) Forecast(h int) float64 {
	if f.n == 0 {
		return 0
	}
	damped, phi := 0.0, 1.0
	for range h {
		phi *= forecastPhi
		damped += phi
	}
	return math.Max(0, f.level+damped*f.trend+f.offset(h-1))
}

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
