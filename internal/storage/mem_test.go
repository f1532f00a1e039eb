package storage_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

func TestMemCommitError(t *testing.T) {
	e := storage.NewMem()
	defer e.Close()
	enginetest.SetAll(t, e, enginetest.KV{K: "a", V: "1"})

	boom := errors.New("boom")
	e.SetCommitError(boom)
	batch := e.NewBatch()
	_ = batch.Set(b("a"), b("2"))
	_ = batch.Set(b("b"), b("2"))
	if err := batch.Commit(true); !errors.Is(err, boom) {
		t.Fatalf("Commit = %v, want injected error", err)
	}
	// A failed commit applies nothing and uses up the batch.
	if got := enginetest.Scan(t, e, nil, nil); !slices.Equal(got, []enginetest.KV{{K: "a", V: "1"}}) {
		t.Fatalf("failed commit applied writes: %v", got)
	}
	if err := batch.Commit(true); !errors.Is(err, storage.ErrBatchCommitted) {
		t.Fatalf("retry of failed batch: %v", err)
	}
	_ = batch.Close()
	// Sticky until cleared, empty batches included.
	empty := e.NewBatch()
	if err := empty.Commit(false); !errors.Is(err, boom) {
		t.Fatalf("empty batch Commit = %v, want injected error", err)
	}

	e.SetCommitError(nil)
	enginetest.SetAll(t, e, enginetest.KV{K: "b", V: "2"})
	enginetest.WantGet(t, e, "b", "2", true)
}

func TestMemIngestError(t *testing.T) {
	src, dst := storage.NewMem(), storage.NewMem()
	defer src.Close()
	defer dst.Close()
	enginetest.SetAll(t, src, enginetest.KV{K: "m", V: "new"})
	enginetest.SetAll(t, dst, enginetest.KV{K: "a", V: "keep"}, enginetest.KV{K: "m", V: "old"}, enginetest.KV{K: "n", V: "old"}, enginetest.KV{K: "z", V: "keep"})
	path := filepath.Join(t.TempDir(), "x.sst")
	if _, err := src.WriteSST(src, b("m"), b("o"), path); err != nil {
		t.Fatal(err)
	}

	boom := errors.New("disk on fire")
	dst.SetIngestError(boom)
	if err := dst.IngestSST(path, b("m"), b("o")); !errors.Is(err, boom) {
		t.Fatalf("IngestSST = %v, want injected error", err)
	}
	// The worst case Pebble allows: span durably cleared, file not ingested.
	want := []enginetest.KV{{K: "a", V: "keep"}, {K: "z", V: "keep"}}
	if got := enginetest.Scan(t, dst, nil, nil); !slices.Equal(got, want) {
		t.Fatalf("after failed ingest: %v, want %v", got, want)
	}
	crashed := dst.CrashClone()
	defer crashed.Close()
	if got := enginetest.Scan(t, crashed, nil, nil); !slices.Equal(got, want) {
		t.Fatalf("span clear not durable: %v", got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("failed ingest consumed the file: %v", err)
	}

	// Retrying after the fault clears completes the job.
	dst.SetIngestError(nil)
	if err := dst.IngestSST(path, b("m"), b("o")); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Scan(t, dst, nil, nil); !slices.Equal(got, []enginetest.KV{{K: "a", V: "keep"}, {K: "m", V: "new"}, {K: "z", V: "keep"}}) {
		t.Fatalf("after retry: %v", got)
	}
}

func TestMemCrashClone(t *testing.T) {
	e := storage.NewMem()
	defer e.Close()
	enginetest.Apply(t, e, enginetest.Set("synced", "1"))
	nosync := func(ops ...[]string) {
		batch := e.NewBatch()
		defer batch.Close()
		for _, op := range ops {
			_ = batch.Set(b(op[1]), b(op[2]))
		}
		if err := batch.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	nosync(enginetest.Set("unsynced", "1"))

	c1 := e.CrashClone()
	defer c1.Close()
	if got := enginetest.ScanKeys(t, c1, nil, nil); !slices.Equal(got, []string{"synced"}) {
		t.Fatalf("crash lost synced data or kept unsynced: %q", got)
	}

	// A later synced commit makes every earlier write durable (WAL order).
	nosync(enginetest.Set("unsynced2", "1"))
	enginetest.Apply(t, e, enginetest.Set("synced2", "1"))
	c2 := e.CrashClone()
	defer c2.Close()
	if got := enginetest.ScanKeys(t, c2, nil, nil); !slices.Equal(got, []string{"synced", "synced2", "unsynced", "unsynced2"}) {
		t.Fatalf("after synced commit: %q", got)
	}

	// So does Sync.
	nosync(enginetest.Set("viasync", "1"))
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	c3 := e.CrashClone()
	defer c3.Close()
	enginetest.WantGet(t, c3, "viasync", "1", true)

	// Clones are independent engines.
	enginetest.SetAll(t, c3, enginetest.KV{K: "only-in-clone", V: "1"})
	enginetest.WantGet(t, e, "only-in-clone", "", false)
	enginetest.WantGet(t, c1, "only-in-clone", "", false)

	// An empty synced commit is not a sync point (matches Pebble, which skips
	// the WAL write entirely).
	nosync(enginetest.Set("lost", "1"))
	empty := e.NewBatch()
	if err := empty.Commit(true); err != nil {
		t.Fatal(err)
	}
	c4 := e.CrashClone()
	defer c4.Close()
	enginetest.WantGet(t, c4, "lost", "", false)
}

func TestMemSSTCorruption(t *testing.T) {
	e := storage.NewMem()
	defer e.Close()
	enginetest.SetAll(t, e, enginetest.KV{K: "a", V: "1"}, enginetest.KV{K: "b", V: "2"}, enginetest.KV{K: "c", V: "3"})
	dir := t.TempDir()
	path := filepath.Join(dir, "good.sst")
	if _, err := e.WriteSST(e, nil, nil, path); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if items, err := storage.ParseMemSST(good); err != nil || len(items) != 3 {
		t.Fatalf("good file: %d items, %v", len(items), err)
	}

	// withCRC re-seals a body so the test reaches checks past the checksum.
	withCRC := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, storage.Castagnoli))
	}
	body := good[:len(good)-4]
	flipped := slices.Clone(good)
	flipped[len(storage.MemSSTMagic)+3] ^= 0x40
	outOfOrder := slices.Clone(body)
	// Swap the first two one-byte keys ("a" <-> "b") in place.
	ia := len(storage.MemSSTMagic) + 2
	ib := ia + 1 + 1 + 1 + 1 + 1
	outOfOrder[ia], outOfOrder[ib] = outOfOrder[ib], outOfOrder[ia]
	wrongCount := slices.Clone(body)
	wrongCount[len(wrongCount)-1] = 7

	for name, data := range map[string][]byte{
		"empty":        {},
		"bad magic":    append([]byte("XXXXXXXX"), good[8:]...),
		"bit flip":     flipped,
		"truncated":    good[:len(good)-1],
		"out of order": withCRC(outOfOrder),
		"wrong count":  withCRC(wrongCount),
		"no end":       withCRC(body[:len(body)-2]),
		"trailing":     withCRC(append(slices.Clone(body), 0)),
	} {
		p := filepath.Join(dir, "bad.sst")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := e.IngestSST(p, nil, b("z")); !errors.Is(err, storage.ErrInvalidSST) {
			t.Errorf("%s: IngestSST = %v, want ErrInvalidSST", name, err)
		}
	}
	if got := enginetest.ScanKeys(t, e, nil, nil); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("rejected files changed data: %q", got)
	}
}

func TestMemCrashCloneKeepsAPrefixOfUnsyncedBatches(t *testing.T) {
	e := storage.NewMem()
	commit := func(k string, sync bool) {
		b := e.NewBatch()
		if err := b.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(sync); err != nil {
			t.Fatal(err)
		}
	}
	commit("synced", true)
	commit("u1", false)
	commit("u2", false)
	if n := e.UnsyncedBatches(); n != 2 {
		t.Fatalf("UnsyncedBatches = %d, want 2", n)
	}
	has := func(c *storage.MemEngine, k string) bool { _, ok, _ := c.Get([]byte(k)); return ok }
	for n, want := range map[int][3]bool{0: {true, false, false}, 1: {true, true, false}, 2: {true, true, true}, 5: {true, true, true}} {
		c := e.CrashCloneKeeping(n)
		got := [3]bool{has(c, "synced"), has(c, "u1"), has(c, "u2")}
		if got != want {
			t.Errorf("keeping %d: synced,u1,u2 present = %v, want %v", n, got, want)
		}
	}
	commit("s2", true)
	if n := e.UnsyncedBatches(); n != 0 {
		t.Fatalf("a sync point must make earlier batches durable; %d still unsynced", n)
	}
}

func TestMemApproximateSizeTally(t *testing.T) {
	enginetest.TallySize(t, enginetest.Mem, func(e storage.Engine) uint64 { return e.(*storage.MemEngine).SizeVisits() }, true)
}
