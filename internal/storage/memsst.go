package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// The MemEngine's SST format. It is deliberately simple but self-describing
// and checksummed, so a truncated, corrupted or wrong-kind file (e.g. a
// Pebble SST) is rejected rather than half-ingested:
//
//	file  = magic entry* end
//	magic = "TKVMSST1"                        (last byte is the format version)
//	entry = 0x01 uvarint(len(key)) key uvarint(len(value)) value
//	end   = 0x00 uvarint(count) crc32c(every preceding byte, big-endian uint32)
//
// Keys are strictly ascending. The in-memory cache engine
// (internal/memengine) shares the format through WriteMemSST and ReadMemSST,
// so a range moves between any two memory engines as one file.
const memSSTMagic = "TKVMSST1"

const (
	memSSTEntry byte = 0x01
	memSSTEnd   byte = 0x00
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// KeyValue is one pair read from a MemEngine-format SST.
type KeyValue struct {
	Key, Value []byte
}

// WriteMemSST writes every key of r in [lower, upper) (nil upper: no bound)
// into a new MemEngine-format SST at path; Engine.WriteSST describes the
// contract.
func WriteMemSST(r Reader, lower, upper []byte, path string) (stats SSTStats, err error) {
	if err := CheckIterBounds(lower, upper); err != nil {
		return SSTStats{}, err
	}
	f, err := os.Create(path)
	if err != nil {
		return SSTStats{}, fmt.Errorf("storage: create sst: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(path)
			err = fmt.Errorf("storage: write sst %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriter(f)
	crc := crc32.New(castagnoli)
	cw := &countingWriter{w: io.MultiWriter(bw, crc)}
	var scratch [binary.MaxVarintLen64]byte
	putUvarint := func(x uint64) {
		_, _ = cw.Write(scratch[:binary.PutUvarint(scratch[:], x)])
	}

	_, _ = cw.Write([]byte(memSSTMagic))
	n, err := copySpan(r, lower, upper, func(k, v []byte) error {
		_, _ = cw.Write([]byte{memSSTEntry})
		putUvarint(uint64(len(k)))
		_, _ = cw.Write(k)
		putUvarint(uint64(len(v)))
		_, err := cw.Write(v)
		return err // bufio errors are sticky, so checking the last write suffices
	})
	if err != nil {
		return SSTStats{}, err
	}
	_, _ = cw.Write([]byte{memSSTEnd})
	putUvarint(uint64(n))
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc.Sum32())
	if _, err := bw.Write(sum[:]); err != nil {
		return SSTStats{}, err
	}
	if err := bw.Flush(); err != nil {
		return SSTStats{}, err
	}
	// Same durability as Pebble's writer, which fsyncs on Close.
	if err := f.Sync(); err != nil {
		return SSTStats{}, err
	}
	if err := f.Close(); err != nil {
		return SSTStats{}, err // the deferred cleanup's second Close is harmless
	}
	return SSTStats{Keys: n, Bytes: cw.n + int64(len(sum))}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// IsMemSST reports whether the file at path starts as a MemEngine-format
// SST does (its contents are checked when it is read).
func IsMemSST(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	magic := make([]byte, len(memSSTMagic))
	if _, err := io.ReadFull(f, magic); err != nil {
		return false, nil
	}
	return string(magic) == memSSTMagic, nil
}

// ReadMemSST reads a MemEngine-format SST for ingestion into [lower, upper)
// and returns its pairs in ascending key order, owning their memory. It
// refuses a span IngestSST cannot clear (ErrInvalidSpan) and a file that is
// unreadable, corrupt, of another format or holding keys outside the span
// (ErrInvalidSST), so a caller that gets pairs can clear the span and insert
// them without further checks.
func ReadMemSST(path string, lower, upper []byte) ([]KeyValue, error) {
	clearFrom, _, err := CheckDeleteSpan(lower, upper)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("storage: read sst: %w", err)
	}
	items, err := parseMemSST(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidSST, path, err)
	}
	var first, last []byte
	if len(items) > 0 {
		first, last = items[0].Key, items[len(items)-1].Key
	}
	if err := checkSSTBounds(path, len(items) == 0, first, last, clearFrom, upper); err != nil {
		return nil, err
	}
	return items, nil
}

func parseMemSST(data []byte) ([]KeyValue, error) {
	if len(data) < len(memSSTMagic) || string(data[:len(memSSTMagic)]) != memSSTMagic {
		return nil, errors.New("not a MemEngine sst (bad magic; Pebble SSTs only ingest into Pebble engines)")
	}
	if len(data) < len(memSSTMagic)+2+4 {
		return nil, errors.New("truncated")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, errors.New("checksum mismatch")
	}
	p := body[len(memSSTMagic):]
	readBytes := func() ([]byte, error) {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return nil, errors.New("bad length")
		}
		b := p[n : n+int(l)]
		p = p[n+int(l):]
		return b, nil
	}
	var items []KeyValue
	for {
		if len(p) == 0 {
			return nil, errors.New("missing end marker")
		}
		tag := p[0]
		p = p[1:]
		if tag == memSSTEnd {
			break
		}
		if tag != memSSTEntry {
			return nil, fmt.Errorf("unknown record tag %#x", tag)
		}
		k, err := readBytes()
		if err != nil {
			return nil, err
		}
		v, err := readBytes()
		if err != nil {
			return nil, err
		}
		if len(items) > 0 && bytes.Compare(items[len(items)-1].Key, k) >= 0 {
			return nil, fmt.Errorf("keys out of order at %q", k)
		}
		// Items alias data, which nothing else references; non-nil empty
		// values keep Get reporting them as found.
		if v == nil {
			v = []byte{}
		}
		items = append(items, KeyValue{Key: k, Value: v})
	}
	count, n := binary.Uvarint(p)
	if n <= 0 || n != len(p) {
		return nil, errors.New("bad trailer")
	}
	if count != uint64(len(items)) {
		return nil, fmt.Errorf("count mismatch: trailer says %d, found %d", count, len(items))
	}
	return items, nil
}
