package queue

import "bytes"

// SizeAlerts is the size watch's memory: the span at which each led range
// was last reported above its split line, so that a range is reported once
// per span (a split gives both halves new spans; a range still above the
// line after one is reported again). A replica change bumps the
// descriptor's generation but leaves the span, and the size, as they were:
// keyed by generation, every rebalancing step re-reported a range waiting
// for its split.
type SizeAlerts struct {
	ranges Ranges[alertSpan]
}

type alertSpan struct{ start, end []byte }

// Crossed says whether range id, spanning [start, end) storing size bytes,
// is to be reported now: it is above limit and was not reported at this
// span yet. It records the report.
func (a *SizeAlerts) Crossed(id uint64, start, end []byte, size, limit uint64) bool {
	if s, ok := a.ranges.Get(id); size <= limit || ok && bytes.Equal(s.start, start) && bytes.Equal(s.end, end) {
		return false
	}
	a.ranges.Set(id, alertSpan{start, end})
	return true
}

// KeepOnly forgets the ranges not in led.
func (a *SizeAlerts) KeepOnly(led map[uint64]bool) { a.ranges.KeepOnly(led) }
