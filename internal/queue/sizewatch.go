package queue

// SizeAlerts is the size watch's memory: the descriptor generation at
// which each led range was last reported above its split line, so that a
// range is reported once per generation (a split gives both halves new
// generations; a range still above the line after one is reported again).
type SizeAlerts struct {
	ranges Ranges[uint64]
}

// Crossed says whether range id, at generation gen and size bytes, is to
// be reported now: it is above limit and was not reported at gen yet. It
// records the report.
func (a *SizeAlerts) Crossed(id, gen, bytes, limit uint64) bool {
	if g, ok := a.ranges.Get(id); bytes <= limit || ok && g == gen {
		return false
	}
	a.ranges.Set(id, gen)
	return true
}

// KeepOnly forgets the ranges not in led.
func (a *SizeAlerts) KeepOnly(led map[uint64]bool) { a.ranges.KeepOnly(led) }
