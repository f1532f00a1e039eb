package raftstore

import (
	"bytes"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A staged snapshot file is checked against the checksum of the bytes that
// arrived before it is ingested: a byte changed on disk is caught.
func TestStagedSSTVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recv.sst")
	data := bytes.Repeat([]byte("sst-bytes "), 1000)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	st := stagedSST{path: path, crc: crc32.Checksum(data, castagnoli)}
	if err := st.verify(); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	data[500] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.verify(); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupted file: %v, want it refused as corrupt", err)
	}
	os.Remove(path)
	if err := st.verify(); err == nil {
		t.Fatal("missing file verified")
	}
}
