package routed

import (
	"bytes"
	"errors"
	"sync"

	"github.com/tidekv/tidekv/internal/storage"
)

// newIter iterates pieces in order. A span of one engine is that engine's
// own iterator. Across engines, the parts' iterators are opened holding
// mu (nil for a snapshot's parts, already taken together), so they see
// the same commits.
func newIter(ps []piece, reader func(int) storage.Reader, mu *sync.RWMutex) (storage.Iterator, error) {
	if len(ps) == 1 {
		return reader(ps[0].eng).NewIter(ps[0].lo, ps[0].hi)
	}
	if err := storage.CheckIterBounds(ps[0].lo, ps[len(ps)-1].hi); err != nil {
		return nil, err
	}
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	c := &concatIter{cur: -1, his: make([][]byte, len(ps))}
	for i, p := range ps {
		it, err := reader(p.eng).NewIter(p.lo, p.hi)
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.its = append(c.its, it)
		if i < len(ps)-1 {
			c.his[i] = p.hi // a part's bound, not the caller's slice
		}
	}
	return c, nil
}

// concatIter joins iterators over consecutive spans.
type concatIter struct {
	its []storage.Iterator
	his [][]byte // each span's end but the last, which SeekGE needs not

	cur int // the positioned iterator; -1: none
}

// from positions at the first key of iterators i onwards.
func (c *concatIter) from(i int) bool {
	for ; i < len(c.its); i++ {
		if c.its[i].First() {
			c.cur = i
			return true
		}
	}
	c.cur = -1
	return false
}

func (c *concatIter) First() bool { return c.from(0) }

func (c *concatIter) SeekGE(key []byte) bool {
	i := 0
	for i < len(c.its)-1 && bytes.Compare(key, c.his[i]) >= 0 {
		i++
	}
	if c.its[i].SeekGE(key) {
		c.cur = i
		return true
	}
	return c.from(i + 1)
}

func (c *concatIter) Next() bool {
	if c.cur < 0 {
		return false
	}
	if c.its[c.cur].Next() {
		return true
	}
	return c.from(c.cur + 1)
}

func (c *concatIter) Valid() bool { return c.cur >= 0 && c.its[c.cur].Valid() }

func (c *concatIter) Key() []byte {
	if c.cur < 0 {
		return nil
	}
	return c.its[c.cur].Key()
}

func (c *concatIter) Value() []byte {
	if c.cur < 0 {
		return nil
	}
	return c.its[c.cur].Value()
}

func (c *concatIter) Close() error {
	var errs []error
	for _, it := range c.its {
		errs = append(errs, it.Close())
	}
	c.its, c.cur = nil, -1
	return errors.Join(errs...)
}

// getFirst finds the first key of the pieces, with the owner's GetFirst
// where it has one.
func getFirst(ps []piece, reader func(int) storage.Reader, mu *sync.RWMutex, kdst []byte) ([]byte, []byte, bool, error) {
	if len(ps) == 1 {
		if fg, ok := reader(ps[0].eng).(storage.FirstGetter); ok {
			return fg.GetFirst(ps[0].lo, ps[0].hi, kdst)
		}
	}
	it, err := newIter(ps, reader, mu)
	if err != nil {
		return nil, nil, false, err
	}
	if !it.First() {
		return nil, nil, false, it.Close()
	}
	k, v := append(kdst, it.Key()...), bytes.Clone(it.Value())
	return k, v, true, it.Close()
}
