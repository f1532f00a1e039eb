package placement

import (
	"bytes"
	"fmt"
)

// rf is the number of voters r should have: its key space's replication
// factor, or the cluster's.
func (p *planner) rf(r *Range) int {
	if r.RF > 0 {
		return r.RF
	}
	return p.cfg.ReplicationFactor
}

// keySpaceSplits splits every range that spans a key space boundary at the
// first boundary inside it, so each range holds one key space's keys and
// follows that key space's settings. It runs whatever the rebalance switch
// says: a key space's replication factor depends on it.
func (p *planner) keySpaceSplits() {
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] || r.ControlLoop || r.MergingInto != 0 {
			continue
		}
		if b := p.boundaryInside(r); b != nil {
			p.add(Operator{Kind: OpSplit, Range: r.ID, Generation: r.Generation, SplitKey: b, Policy: "keyspace-split",
				Reason: fmt.Sprintf("the range spans the key space boundary %q", b)})
		}
	}
}

// boundaryInside returns the first boundary strictly inside r, or nil.
func (p *planner) boundaryInside(r *Range) []byte {
	for _, b := range p.s.Boundaries {
		if bytes.Compare(b, r.Start) > 0 && (len(r.End) == 0 || bytes.Compare(b, r.End) < 0) {
			return b
		}
	}
	return nil
}

// isBoundary reports whether key is a key space boundary (ranges meeting
// there must not merge).
func (p *planner) isBoundary(key []byte) bool {
	for _, b := range p.s.Boundaries {
		if bytes.Equal(b, key) {
			return true
		}
	}
	return false
}
