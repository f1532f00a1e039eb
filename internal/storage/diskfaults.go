package storage

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// ErrDiskFailed is what a failed disk (DiskFaults.SetFailing) answers
// every write with.
var ErrDiskFailed = errors.New("injected disk failure: the disk refuses every write")

// DiskFaults makes a Pebble engine's disk slow or failing on demand, for
// fault injection. While its delay is set, every sync of an engine file
// (WAL, SSTs, manifest) waits that long first, as a disk with a long
// flush latency would: syncs are where a Raft node waits for its disk.
// While it is failing, every write, sync, create, rename or removal
// fails with ErrDiskFailed, as a dead disk's would; reads still work.
// The zero value adds nothing.
type DiskFaults struct {
	delay   atomic.Int64
	failing atomic.Bool
	slowed  atomic.Uint64
}

// SetDelay sets the wait before each sync (0 restores the disk).
func (d *DiskFaults) SetDelay(delay time.Duration) { d.delay.Store(int64(delay)) }

// Delay returns the wait before each sync.
func (d *DiskFaults) Delay() time.Duration { return time.Duration(d.delay.Load()) }

// Slowed counts the syncs that waited for a delay: whether a sync was
// slowed, which its duration tells only on an otherwise idle machine.
func (d *DiskFaults) Slowed() uint64 { return d.slowed.Load() }

// SetFailing makes every write fail (true) or go through again (false).
func (d *DiskFaults) SetFailing(failing bool) { d.failing.Store(failing) }

// Failing reports whether writes fail.
func (d *DiskFaults) Failing() bool { return d.failing.Load() }

// Wrap returns fs with d's faults in front of it; PebbleOptions.FS takes
// it.
func (d *DiskFaults) Wrap(fs vfs.FS) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if d.Failing() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return ErrDiskFailed
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if delay := d.Delay(); delay > 0 {
				d.slowed.Add(1)
				time.Sleep(delay)
			}
		}
		return nil
	}))
}
