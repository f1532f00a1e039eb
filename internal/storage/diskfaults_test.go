package storage_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
	disk := &storage.DiskFaults{}
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
	// No sync waits once the delay is removed. (The commit used to be
	// timed against the delay, which a real sync on a loaded machine can
	// exceed without waiting for it.)
	slowed := disk.Slowed()
	if took := commit("fast"); disk.Slowed() != slowed {
		t.Fatalf("a synced commit after the disk recovered waited for the delay (%v)", took)
	}
	for _, k := range []string{"slow", "fast"} {
		if v, ok, err := e.Get([]byte(k)); err != nil || !ok || string(v) != "v" {
			t.Fatalf("get %s: %q %v %v", k, v, ok, err)
		}
	}
}

// A commit on a failing disk stops the process (Pebble's commit error is
// fatal: a node must not go on once its disk lost a write) and leaves
// what was committed before intact; the commit that failed is not there.
// The engine runs in a child process, which is expected to die.
func TestFailingDiskStopsTheProcess(t *testing.T) {
	if dir := os.Getenv("TIDEKV_FAILING_DISK_DIR"); dir != "" {
		failingDiskChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailingDiskStopsTheProcess$")
	cmd.Env = append(os.Environ(), "TIDEKV_FAILING_DISK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), storage.ErrDiskFailed.Error()) {
		t.Fatalf("the process committing on a failed disk: %v, output:\n%s", err, out)
	}
	e, err := storage.OpenPebbleEngine(dir, enginetest.PebbleOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if v, ok, err := e.Get([]byte("before")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("what was committed before the failure: %q %v %v", v, ok, err)
	}
	if _, ok, err := e.Get([]byte("after")); err != nil || ok {
		t.Fatalf("the failed commit is there after a restart: %v %v", ok, err)
	}
}

func failingDiskChild(dir string) {
	disk := &storage.DiskFaults{}
	o := enginetest.PebbleOptions()
	o.FS = disk.Wrap(vfs.Default)
	e, err := storage.OpenPebbleEngine(dir, o)
	if err != nil {
		panic(err)
	}
	for _, k := range []string{"before", "after"} {
		b := e.NewBatch()
		if err := b.Set([]byte(k), []byte("v")); err != nil {
			panic(err)
		}
		if err := b.Commit(true); err != nil {
			fmt.Println("commit returned:", err)
		}
		disk.SetFailing(true)
	}
	fmt.Println("the process survived a commit on a failed disk")
	os.Exit(0)
}
