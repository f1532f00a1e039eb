package memengine

import (
	"bytes"

	"github.com/tidekv/tidekv/internal/storage"
)

// batch buffers writes until Commit applies them under the engine's write
// lock, all at one sequence number.
type batch struct {
	e         *Engine
	ops       []op
	committed bool
	closed    bool
}

type op struct {
	kind       opKind
	key, value []byte // for a range deletion: start, end
}

type opKind uint8

const (
	opSet opKind = iota
	opDelete
	opDeleteRange
)

func (b *batch) writable() error {
	switch {
	case b.closed:
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
	// The value copy is non-nil even when empty: nil marks a deletion.
	b.ops = append(b.ops, op{kind: opSet, key: bytes.Clone(key), value: append([]byte{}, value...)})
	return nil
}

func (b *batch) Delete(key []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := storage.CheckKey(key); err != nil {
		return err
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
		return err // empty spans are dropped, as in the other engines
	}
	b.ops = append(b.ops, op{kind: opDeleteRange, key: bytes.Clone(start), value: bytes.Clone(end)})
	return nil
}

// Commit applies the batch. sync changes nothing: nothing here is durable.
func (b *batch) Commit(bool) error {
	if err := b.writable(); err != nil {
		return err
	}
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return storage.ErrClosed
	}
	b.committed = true
	if len(b.ops) == 0 {
		return nil
	}
	seq, pins := e.beginWriteLocked()
	for _, o := range b.ops {
		switch o.kind {
		case opSet:
			e.setLocked(o.key, o.value, seq, pins)
		case opDelete:
			if en := e.idx.get(o.key); en != nil {
				e.deleteLocked(en, seq, pins)
			}
		case opDeleteRange:
			e.deleteRangeLocked(o.key, o.value, seq, pins)
		}
	}
	e.seq = seq
	return nil
}

func (b *batch) Empty() bool { return len(b.ops) == 0 }
func (b *batch) Count() int  { return len(b.ops) }

func (b *batch) Close() error {
	b.closed = true
	b.ops = nil
	return nil
}
