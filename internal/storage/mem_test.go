package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMemCommitError(t *testing.T) {
	e := NewMem()
	defer e.Close()
	setAll(t, e, kv{"a", "1"})

	boom := errors.New("boom")
	e.SetCommitError(boom)
	batch := e.NewBatch()
	_ = batch.Set(b("a"), b("2"))
	_ = batch.Set(b("b"), b("2"))
	if err := batch.Commit(true); !errors.Is(err, boom) {
		t.Fatalf("Commit = %v, want injected error", err)
	}
	// A failed commit applies nothing and uses up the batch.
	if got := scan(t, e, nil, nil); !slices.Equal(got, []kv{{"a", "1"}}) {
		t.Fatalf("failed commit applied writes: %v", got)
	}
	if err := batch.Commit(true); !errors.Is(err, ErrBatchCommitted) {
		t.Fatalf("retry of failed batch: %v", err)
	}
	_ = batch.Close()
	// Sticky until cleared, empty batches included.
	empty := e.NewBatch()
	if err := empty.Commit(false); !errors.Is(err, boom) {
		t.Fatalf("empty batch Commit = %v, want injected error", err)
	}

	e.SetCommitError(nil)
	setAll(t, e, kv{"b", "2"})
	wantGet(t, e, "b", "2", true)
}

func TestMemIngestError(t *testing.T) {
	src, dst := NewMem(), NewMem()
	defer src.Close()
	defer dst.Close()
	setAll(t, src, kv{"m", "new"})
	setAll(t, dst, kv{"a", "keep"}, kv{"m", "old"}, kv{"n", "old"}, kv{"z", "keep"})
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
	want := []kv{{"a", "keep"}, {"z", "keep"}}
	if got := scan(t, dst, nil, nil); !slices.Equal(got, want) {
		t.Fatalf("after failed ingest: %v, want %v", got, want)
	}
	crashed := dst.CrashClone()
	defer crashed.Close()
	if got := scan(t, crashed, nil, nil); !slices.Equal(got, want) {
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
	if got := scan(t, dst, nil, nil); !slices.Equal(got, []kv{{"a", "keep"}, {"m", "new"}, {"z", "keep"}}) {
		t.Fatalf("after retry: %v", got)
	}
}

func TestMemCrashClone(t *testing.T) {
	e := NewMem()
	defer e.Close()
	apply(t, e, set("synced", "1"))
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
	nosync(set("unsynced", "1"))

	c1 := e.CrashClone()
	defer c1.Close()
	if got := scanKeys(t, c1, nil, nil); !slices.Equal(got, []string{"synced"}) {
		t.Fatalf("crash lost synced data or kept unsynced: %q", got)
	}

	// A later synced commit makes every earlier write durable (WAL order).
	nosync(set("unsynced2", "1"))
	apply(t, e, set("synced2", "1"))
	c2 := e.CrashClone()
	defer c2.Close()
	if got := scanKeys(t, c2, nil, nil); !slices.Equal(got, []string{"synced", "synced2", "unsynced", "unsynced2"}) {
		t.Fatalf("after synced commit: %q", got)
	}

	// So does Sync.
	nosync(set("viasync", "1"))
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	c3 := e.CrashClone()
	defer c3.Close()
	wantGet(t, c3, "viasync", "1", true)

	// Clones are independent engines.
	setAll(t, c3, kv{"only-in-clone", "1"})
	wantGet(t, e, "only-in-clone", "", false)
	wantGet(t, c1, "only-in-clone", "", false)

	// An empty synced commit is not a sync point (matches Pebble, which skips
	// the WAL write entirely).
	nosync(set("lost", "1"))
	empty := e.NewBatch()
	if err := empty.Commit(true); err != nil {
		t.Fatal(err)
	}
	c4 := e.CrashClone()
	defer c4.Close()
	wantGet(t, c4, "lost", "", false)
}

func TestMemSSTCorruption(t *testing.T) {
	e := NewMem()
	defer e.Close()
	setAll(t, e, kv{"a", "1"}, kv{"b", "2"}, kv{"c", "3"})
	dir := t.TempDir()
	path := filepath.Join(dir, "good.sst")
	if _, err := e.WriteSST(e, nil, nil, path); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if items, err := parseMemSST(good); err != nil || len(items) != 3 {
		t.Fatalf("good file: %d items, %v", len(items), err)
	}

	// withCRC re-seals a body so the test reaches checks past the checksum.
	withCRC := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
	}
	body := good[:len(good)-4]
	flipped := slices.Clone(good)
	flipped[len(memSSTMagic)+3] ^= 0x40
	outOfOrder := slices.Clone(body)
	// Swap the first two one-byte keys ("a" <-> "b") in place.
	ia := len(memSSTMagic) + 2
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
		if err := e.IngestSST(p, nil, b("z")); !errors.Is(err, ErrInvalidSST) {
			t.Errorf("%s: IngestSST = %v, want ErrInvalidSST", name, err)
		}
	}
	if got := scanKeys(t, e, nil, nil); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("rejected files changed data: %q", got)
	}
}

func TestMemCrashCloneKeepsAPrefixOfUnsyncedBatches(t *testing.T) {
	e := NewMem()
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
	has := func(c *MemEngine, k string) bool { _, ok, _ := c.Get([]byte(k)); return ok }
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
