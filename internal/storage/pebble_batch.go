package storage

import "github.com/cockroachdb/pebble/v2"

// pebbleBatch wraps pebble.Batch, adding the at-most-once Commit rule and
// use-after-Close protection (a closed pebble.Batch goes back to a pool).
type pebbleBatch struct {
	e         *pebbleEngine
	b         *pebble.Batch
	count     int
	committed bool
	closed    bool
}

func (b *pebbleBatch) writable() error {
	switch {
	case b.closed:
		return ErrClosed
	case b.committed:
		return ErrBatchCommitted
	}
	return nil
}

func (b *pebbleBatch) Set(key, value []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := b.b.Set(key, value, nil); err != nil {
		return err
	}
	b.count++
	return nil
}

func (b *pebbleBatch) Delete(key []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := b.b.Delete(key, nil); err != nil {
		return err
	}
	b.count++
	return nil
}

func (b *pebbleBatch) DeleteRange(start, end []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	start, empty, err := CheckDeleteSpan(start, end)
	if err != nil || empty {
		// An empty span is dropped rather than handed to Pebble, whose
		// fragmenter treats start >= end as an invariant violation.
		return err
	}
	if err := b.b.DeleteRange(start, end, nil); err != nil {
		return err
	}
	b.count++
	return nil
}

func (b *pebbleBatch) Commit(sync bool) error {
	if err := b.writable(); err != nil {
		return err
	}
	if b.e.closed.Load() {
		return ErrClosed
	}
	b.committed = true
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	return b.b.Commit(opt)
}

func (b *pebbleBatch) Empty() bool { return b.count == 0 }
func (b *pebbleBatch) Count() int  { return b.count }

func (b *pebbleBatch) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	// Close returns the batch to Pebble's pool; the guard above keeps a
	// second Close from recycling it twice.
	return b.b.Close()
}
