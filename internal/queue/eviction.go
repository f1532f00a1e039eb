package queue

import (
	"bytes"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/keys"
)

// Eviction is the eviction loop's memory between rounds: which key spaces
// are evicting (cache.Decide keeps evicting down to a low-water mark once
// started) and, per led range, where its next sample of keys starts (the
// clock hand going round the range). Only the eviction loop uses it.
type Eviction struct {
	evicting map[keyspace.ID]bool
	cursors  Ranges[[]byte]
}

// Evicting says whether key space id was evicting after its last round.
func (e *Eviction) Evicting(id keyspace.ID) bool { return e.evicting[id] }

// SetEvicting records whether key space id is evicting.
func (e *Eviction) SetEvicting(id keyspace.ID, on bool) {
	if e.evicting == nil {
		e.evicting = map[keyspace.ID]bool{}
	}
	e.evicting[id] = on
}

// SampleFrom is where range id, spanning [start, end), is next sampled
// from: where the last sample stopped, or start when that is not in the
// span any more (the range split or merged) or there was none.
func (e *Eviction) SampleFrom(id uint64, start, end []byte) []byte {
	from, _ := e.cursors.Get(id)
	if from == nil || !keys.Contains(start, end, from) {
		return start
	}
	return from
}

// Sampled records that a sample of range id read up to last: the next
// starts just after it. With full false the sample reached the range's
// end, and the next starts from its start again.
func (e *Eviction) Sampled(id uint64, last []byte, full bool) {
	if !full {
		e.cursors.Delete(id)
		return
	}
	e.cursors.Set(id, append(bytes.Clone(last), 0))
}

// KeepOnly forgets the cursors of ranges not in local.
func (e *Eviction) KeepOnly(local map[uint64]bool) { e.cursors.KeepOnly(local) }
