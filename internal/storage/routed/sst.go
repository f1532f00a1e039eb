package routed

import (
	"errors"
	"os"

	"github.com/tidekv/tidekv/internal/storage"
)

// WriteSST writes a span of one engine in that engine's format, so a Pebble
// range still ships as a Pebble file and a memory range as a MemEngine one
// (storage.WriteMemSST). A span across engines (a range not yet split at a
// key space's bounds) ships in the MemEngine format, which any key can use.
func (e *Engine) WriteSST(r storage.Reader, lower, upper []byte, path string) (storage.SSTStats, error) {
	if e.closed.Load() {
		return storage.SSTStats{}, storage.ErrClosed
	}
	// Not held while writing: r may be e, whose reads take it again.
	e.routeMu.RLock()
	t := e.tbl
	e.routeMu.RUnlock()
	if ps := t.pieces(lower, upper); len(ps) == 1 {
		return e.engine(t, ps[0].eng).WriteSST(r, lower, upper, path)
	}
	return storage.WriteMemSST(r, lower, upper, path)
}

// IngestSST hands a span of one engine to that engine. A span across
// engines, or a MemEngine-format file for the base (a memory range's
// snapshot reaching a node that has not yet learnt its key space: the data
// waits in the base until AddPart copies it), is read whole: each engine's
// piece is cleared and filled by one batch, all committed with no snapshot
// or iterator across engines taken in between.
func (e *Engine) IngestSST(path string, lower, upper []byte) error {
	if e.closed.Load() {
		return storage.ErrClosed
	}
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	t := e.tbl
	ps := t.pieces(lower, upper)
	if len(ps) == 1 && ps[0].eng != baseIdx {
		return e.engine(t, ps[0].eng).IngestSST(path, lower, upper)
	}
	if len(ps) == 1 {
		if mem, err := storage.IsMemSST(path); err != nil || !mem {
			return errors.Join(err, e.base.IngestSST(path, lower, upper))
		}
	}
	kvs, err := storage.ReadMemSST(path, lower, upper)
	if err != nil {
		return err
	}
	b := &batch{e: e}
	for _, p := range ps {
		if lo, empty, _ := storage.CheckDeleteSpan(p.lo, p.hi); !empty {
			b.ops = append(b.ops, op{opDeleteRange, lo, p.hi})
		}
	}
	for _, kv := range kvs {
		b.ops = append(b.ops, op{opSet, kv.Key, kv.Value})
	}
	if err := b.commitLocked(t, true); err != nil {
		return err
	}
	return os.Remove(path)
}
