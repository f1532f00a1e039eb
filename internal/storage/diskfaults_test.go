package storage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// A synced commit on a slowed disk takes at least the delay (the WAL sync
// waits it), and is fast again once the delay is removed; the data written
// meanwhile is intact.
func TestSlowDiskDelaysSyncedCommits(t *testing.T) {
	disk := &storage.SlowDisk{}
	o := enginetest.PebbleOptions()
	o.FS = disk.Wrap(vfs.Default)
	e, err := storage.OpenPebbleEngine(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	commit := func(k string) time.Duration {
		t.Helper()
		b := e.NewBatch()
		if err := b.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	const delay = 150 * time.Millisecond
	disk.SetDelay(delay)
	if took := commit("slow"); took < delay {
		t.Fatalf("a synced commit on a disk slowed by %v took %v", delay, took)
	}
	disk.SetDelay(0)
	if took := commit("fast"); took >= delay {
		t.Fatalf("a synced commit after the disk recovered took %v", took)
	}
	for _, k := range []string{"slow", "fast"} {
		if v, ok, err := e.Get([]byte(k)); err != nil || !ok || string(v) != "v" {
			t.Fatalf("get %s: %q %v %v", k, v, ok, err)
		}
	}
}
