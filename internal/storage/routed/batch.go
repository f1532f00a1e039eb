package routed

import (
	"bytes"
	"errors"

	"github.com/tidekv/tidekv/internal/storage"
)

type opKind uint8

const (
	opSet opKind = iota
	opDelete
	opDeleteRange
)

// op is one write; for opDeleteRange, val is the end.
type op struct {
	kind     opKind
	key, val []byte
}

// batch routes its writes at commit, with the table of that moment: a part
// added in between owns its keys by then. So it records them, but only
// from its first write that may be routed: until then (Raft state, other
// ranges' data) they go straight into a base batch, which the recorded
// writes then follow in order.
type batch struct {
	e         *Engine
	direct    storage.Batch // nil until the first direct write
	ops       []op
	committed bool
	closed    bool
}

// directBatch is the base batch for a write outside the routable spans (of
// key start, or of [start, end) if end is set), or nil if the write must be
// recorded.
func (b *batch) directBatch(start, end []byte) storage.Batch {
	if len(b.ops) > 0 || end == nil && b.e.keyMayRoute(start) || end != nil && b.e.spanMayRoute(start, end) {
		return nil
	}
	if b.direct == nil {
		b.direct = b.e.base.NewBatch()
	}
	return b.direct
}

func (b *batch) writable() error {
	switch {
	case b.closed || b.e.closed.Load():
		return storage.ErrClosed
	case b.committed:
		return storage.ErrBatchCommitted
	}
	return nil
}

func (b *batch) Set(key, value []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := storage.CheckKey(key); err != nil {
		return err
	}
	if d := b.directBatch(key, nil); d != nil {
		return d.Set(key, value)
	}
	b.ops = append(b.ops, op{opSet, bytes.Clone(key), append([]byte{}, value...)})
	return nil
}

func (b *batch) Delete(key []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := storage.CheckKey(key); err != nil {
		return err
	}
	if d := b.directBatch(key, nil); d != nil {
		return d.Delete(key)
	}
	b.ops = append(b.ops, op{kind: opDelete, key: bytes.Clone(key)})
	return nil
}

func (b *batch) DeleteRange(start, end []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	start, empty, err := storage.CheckDeleteSpan(start, end)
	if err != nil || empty {
		return err
	}
	if d := b.directBatch(start, end); d != nil {
		return d.DeleteRange(start, end)
	}
	b.ops = append(b.ops, op{opDeleteRange, bytes.Clone(start), bytes.Clone(end)})
	return nil
}

func (b *batch) Empty() bool { return b.Count() == 0 }

func (b *batch) Count() int {
	if b.direct == nil {
		return len(b.ops)
	}
	return b.direct.Count() + len(b.ops)
}

func (b *batch) Close() error {
	b.closed, b.ops = true, nil
	if b.direct != nil {
		return b.direct.Close()
	}
	return nil
}

// Commit splits the batch between the engines it touches and commits each
// part, the base (which holds the Raft state claiming the data) last.
func (b *batch) Commit(sync bool) error {
	if err := b.writable(); err != nil {
		return err
	}
	b.committed = true
	if len(b.ops) == 0 && b.direct != nil {
		// Nothing routable: no table to consult, no other engine to wait for.
		d := b.direct
		b.direct = nil
		defer d.Close()
		return d.Commit(sync)
	}
	b.e.routeMu.RLock()
	defer b.e.routeMu.RUnlock()
	return b.commitLocked(b.e.tbl, sync)
}

// commitLocked commits under routeMu (shared), with t the current table.
func (b *batch) commitLocked(t *table, sync bool) error {
	parts := make([]storage.Batch, len(t.engs)+1) // [0]: base
	parts[0], b.direct = b.direct, nil
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.Close()
			}
		}
	}()
	if err := b.route(t, parts); err != nil {
		return err
	}
	touched := 0
	for _, p := range parts {
		if p != nil {
			touched++
		}
	}
	if touched > 1 {
		b.e.mixMu.RLock()
		defer b.e.mixMu.RUnlock()
	}
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] != nil {
			errs = append(errs, parts[i].Commit(sync))
		}
	}
	return errors.Join(errs...)
}

// route writes each op into the batch of the engine owning it.
func (b *batch) route(t *table, parts []storage.Batch) error {
	get := func(i int) storage.Batch {
		if parts[i+1] == nil {
			parts[i+1] = b.e.engine(t, i).NewBatch()
		}
		return parts[i+1]
	}
	if len(b.ops) == 0 {
		get(baseIdx) // an empty commit still reports a closed engine
	}
	for _, o := range b.ops {
		var err error
		switch o.kind {
		case opSet:
			err = get(t.engineOf(o.key)).Set(o.key, o.val)
		case opDelete:
			err = get(t.engineOf(o.key)).Delete(o.key)
		case opDeleteRange:
			for _, p := range t.pieces(o.key, o.val) {
				if err == nil {
					err = get(p.eng).DeleteRange(p.lo, p.hi)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
