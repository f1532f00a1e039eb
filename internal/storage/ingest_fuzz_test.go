package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// FuzzIngestSST feeds arbitrary bytes to the snapshot ingestion path of
// both engines (a received SST file, as the store hands it over). A file
// that is not a valid SST of keys inside the span must be refused with
// ErrInvalidSST and change nothing; one that is accepted must leave the
// span fully readable and the data outside it untouched.
func FuzzIngestSST(f *testing.F) {
	// Seeds: a valid SST of the span, and damaged copies of it.
	src := storage.NewMem()
	enginetest.SetAll(f, src, enginetest.KV{K: "k1", V: "v1"}, enginetest.KV{K: "k2", V: "v2"}, enginetest.KV{K: "k3", V: "a longer value to fill a block"})
	path := filepath.Join(f.TempDir(), "seed.sst")
	pe, err := storage.OpenPebble(f.TempDir(), enginetest.PebbleOptions())
	if err != nil {
		f.Fatal(err)
	}
	if _, err := pe.WriteSST(src, b("k"), b("l"), path); err != nil {
		f.Fatal(err)
	}
	pe.Close()
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	flipped := append([]byte(nil), valid...)
	flipped[len(flipped)/3] ^= 0x10
	f.Add(flipped)
	f.Add([]byte{})
	f.Add([]byte("not an sst at all"))

	// Pebble, the production engine (the mem twin has its own SST format
	// and checks, memsst.go).
	k := enginetest.Pebble
	e := k.Open(f)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		enginetest.SetAll(t, e, enginetest.KV{K: "a-outside", V: "x"}, enginetest.KV{K: "k0", V: "before"}, enginetest.KV{K: "z-outside", V: "y"})
		p := filepath.Join(dir, "in.sst")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		before := enginetest.Scan(t, e, nil, nil)
		err := e.IngestSST(p, b("k"), b("l"))
		if err != nil {
			if !errors.Is(err, storage.ErrInvalidSST) {
				t.Fatalf("%s: refused with %v, want ErrInvalidSST", k.Name, err)
			}
			if after := enginetest.Scan(t, e, nil, nil); !equalKVs(before, after) {
				t.Fatalf("%s: refused ingestion changed the engine: %v -> %v", k.Name, before, after)
			}
			return
		}
		// Accepted: outside untouched, inside readable end to end.
		enginetest.WantGet(t, e, "a-outside", "x", true)
		enginetest.WantGet(t, e, "z-outside", "y", true)
		enginetest.Scan(t, e, b("k"), b("l"))
	})
}

func equalKVs(a, b []enginetest.KV) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A bit flipped inside a data block is caught at ingestion (every block's
// checksum is read), not by a later read of live data.
func TestIngestRefusesCorruptBlock(t *testing.T) {
	src := storage.NewMem()
	var kvs []enginetest.KV
	for i := range 2000 {
		kvs = append(kvs, enginetest.KV{K: fmt.Sprintf("k%05d", i), V: fmt.Sprintf("value-%d", i)})
	}
	enginetest.SetAll(t, src, kvs...)
	e := enginetest.Pebble.Open(t)
	path := filepath.Join(t.TempDir(), "snap.sst")
	if _, err := e.WriteSST(src, b("k"), b("l"), path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/4] ^= 0x01 // inside the data blocks, far from the footer and index
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.IngestSST(path, b("k"), b("l")); !errors.Is(err, storage.ErrInvalidSST) {
		t.Fatalf("ingesting an SST with a corrupt data block: %v, want ErrInvalidSST", err)
	}
}
