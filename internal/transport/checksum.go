package transport

import (
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// A snapshot is checked end to end: the sender counts the bytes it streams
// and their CRC-32C and sends both in the final chunk; the receiver counts
// what it hands on and fails the stream, before its end, if they differ.
// The store then writes the SST to disk with its own checksum, which it
// checks again before ingesting (raftstore/snapshot.go).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// summer counts and checksums the bytes written to it.
type summer struct {
	h hash.Hash32
	n uint64
}

func newSummer() *summer { return &summer{h: crc32.New(castagnoli)} }

func (s *summer) Write(p []byte) (int, error) {
	s.n += uint64(len(p))
	return s.h.Write(p)
}

// check compares what was summed with what the sender says it sent.
func (s *summer) check(length uint64, sum uint32) error {
	if got := s.h.Sum32(); s.n != length || got != sum {
		return fmt.Errorf("snapshot data is corrupt: received %d bytes with CRC-32C %08x, the sender sent %d bytes with %08x", s.n, got, length, sum)
	}
	return nil
}

// summingReader sums what is read through it.
type summingReader struct {
	r io.Reader
	s *summer
}

func (r summingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.s.Write(p[:n])
	return n, err
}
