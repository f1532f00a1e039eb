package storage

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// SlowDisk makes a Pebble engine's disk slow on demand, for fault
// injection: while its delay is set, every sync of an engine file (WAL,
// SSTs, manifest) waits that long first, as a disk with a long flush
// latency would. Syncs are where a Raft node waits for its disk, so that
// is where the delay goes. The zero value adds none.
type SlowDisk struct {
	delay atomic.Int64
}

// SetDelay sets the wait before each sync (0 restores the disk).
func (d *SlowDisk) SetDelay(delay time.Duration) { d.delay.Store(int64(delay)) }

// Delay returns the wait before each sync.
func (d *SlowDisk) Delay() time.Duration { return time.Duration(d.delay.Load()) }

// Wrap returns fs with d's delay in front of every sync; PebbleOptions.FS
// takes it.
func (d *SlowDisk) Wrap(fs vfs.FS) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if delay := d.Delay(); delay > 0 {
				time.Sleep(delay)
			}
		}
		return nil
	}))
}
