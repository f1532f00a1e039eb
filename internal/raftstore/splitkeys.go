package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Where to split a range: by size (the key that halves its data) or by load
// (the median key of recent requests). Placement decides whether to split;
// these only find the key.

// maxSizePieces bounds the pieces one size split makes.
const maxSizePieces = 64

// SizeSplitKey returns a key k that splits the range's user data (keys and
// values, in bytes) about in half: the range's first key < k < its end key,
// and the data before k is as close to half the total as the keys sampled
// allow. Only the leaseholder answers. A range with fewer than two keys
// cannot be split (ErrInvalidRequest).
func (r *Replica) SizeSplitKey(ctx context.Context) ([]byte, error) {
	ks, err := r.SizeSplitKeys(ctx, 0)
	if err != nil {
		return nil, err
	}
	return ks[0], nil
}

// SizeSplitKeys returns the keys, ascending, that cut the range's data into
// equal pieces: two, or with maxBytes > 0 the fewest power of two (at most
// maxSizePieces) that brings each piece to maxBytes or below. That is where
// halving again and again would end, in one step: a range that outgrew
// maxBytes several times over while its splits were being decided needs no
// further rounds. Keys are as close to the exact points as the sampled keys
// allow; a range with few keys gets fewer pieces.
func (r *Replica) SizeSplitKeys(ctx context.Context, maxBytes uint64) ([][]byte, error) {
	if !r.isLeader.Load() {
		return nil, r.notLeader()
	}
	d := r.desc.Load()
	if d == nil {
		return nil, &RangeNotFoundError{RangeID: r.rangeID}
	}
	if r.rangeID == keys.MetaRangeID {
		return nil, fmt.Errorf("%w: the meta range does not split", ErrInvalidRequest)
	}
	var pts *mvcc.SplitPoints
	versioned := false
	for {
		lv, err := r.readLayout(ctx)
		if err != nil {
			return nil, err
		}
		pts, err = splitPoints(ctx, r.store.eng, d, lv.mvcc)
		if r.stillLayout(lv) {
			if err != nil {
				return nil, err
			}
			versioned = lv.mvcc
			break
		}
	}
	if pts.Keys() < 2 {
		return nil, fmt.Errorf("%w: range too small to split: range %d has fewer than 2 keys", ErrInvalidRequest, d.GetRangeId())
	}
	pieces := uint64(2)
	for maxBytes > 0 && pts.Total()/pieces > maxBytes && pieces < maxSizePieces {
		pieces *= 2
	}
	cut := pts.Cut(int(pieces))
	if versioned {
		for i, k := range cut {
			cut[i] = keys.UserKey(k) // cut at the versioned prefix and key
		}
	}
	return cut, nil
}

// splitPoints reads the range d's data in a layout for SizeSplitKeys. On
// the versioned one every version counts (they move with the range) and a
// cut never separates two versions of one user key.
func splitPoints(ctx context.Context, eng storage.Reader, d *tidekvpb.RangeDescriptor, versioned bool) (*mvcc.SplitPoints, error) {
	if versioned {
		lo, hi := keys.VersionedSpan(d.GetStartKey(), d.GetEndKey())
		return mvcc.SplitPointsOf(ctx, eng, lo, hi)
	}
	lo, hi := dataSpan(d, false)
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var p mvcc.SplitPoints
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := keys.UserKey(it.Key())
		p.Add(true, func() []byte { return append([]byte(nil), k...) }, uint64(len(k)+len(it.Value())))
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return &p, it.Close()
}

// Load sampling: every loadSampleEvery-th request's key goes into a ring
// of the last loadSampleSize samples.
const (
	loadSampleEvery = 8
	loadSampleSize  = 512
	// loadMinSamples is the fewest samples LoadSplitKey decides on.
	loadMinSamples = 32
)

// loadSampler holds recent request keys. The ring is allocated on the first
// sample, so idle replicas pay nothing for it.
type loadSampler struct {
	mu    sync.Mutex
	ring  [][]byte
	taken uint64 // samples ever taken; the next goes to ring[taken%loadSampleSize]
}

func (s *loadSampler) add(key []byte) {
	s.mu.Lock()
	if s.ring == nil {
		s.ring = make([][]byte, loadSampleSize)
	}
	i := s.taken % loadSampleSize
	s.ring[i] = append(s.ring[i][:0], key...) // reuses the slot's buffer
	s.taken++
	s.mu.Unlock()
}

// inSpan returns copies of the samples held that lie in [start, end): keys
// sampled before a split may belong to the other half now.
func (s *loadSampler) inSpan(start, end []byte) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(s.taken, loadSampleSize)
	out := make([][]byte, 0, n)
	for _, k := range s.ring[:n] {
		if keys.Contains(start, end, k) {
			out = append(out, bytes.Clone(k))
		}
	}
	return out
}

// CountRequest records one KV request for key served by this replica: it
// counts it, and samples every loadSampleEvery-th key for LoadSplitKey.
// The unsampled path is one atomic add.
func (r *Replica) CountRequest(key []byte) {
	if r.requests.Add(1)%loadSampleEvery == 0 {
		r.load.add(key)
	}
}

// LoadSplitKey returns the median key of the recently sampled requests
// that lie in the range: splitting there divides the recent load about in
// half. ok is false with fewer than loadMinSamples such samples, or when
// the median is the range's start key (no split can happen there).
// hotShare is the share of those samples taken by the single most frequent
// key, so the caller can tell when one hot key dominates and no split
// would spread its load; it is set whenever there are enough samples, even
// if ok is false.
func (r *Replica) LoadSplitKey() (key []byte, hotShare float64, ok bool) {
	d := r.desc.Load()
	if d == nil {
		return nil, 0, false
	}
	ks := r.load.inSpan(d.GetStartKey(), d.GetEndKey())
	if len(ks) < loadMinSamples {
		return nil, 0, false
	}
	slices.SortFunc(ks, bytes.Compare)
	hotShare = hottestShare(ks)
	med := ks[len(ks)/2]
	if bytes.Equal(med, d.GetStartKey()) {
		return nil, hotShare, false
	}
	return med, hotShare, true
}

// HotKeyShare is LoadSplitKey's hotShare: the share of the recent request
// samples taken by the most frequent key (0 with too few samples).
func (r *Replica) HotKeyShare() float64 {
	_, share, _ := r.LoadSplitKey()
	return share
}

// hottestShare returns the longest run of equal keys in sorted ks as a
// share of len(ks) (> 0).
func hottestShare(ks [][]byte) float64 {
	best, run := 0, 0
	for i := range ks {
		if i > 0 && bytes.Equal(ks[i], ks[i-1]) {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return float64(best) / float64(len(ks))
}
