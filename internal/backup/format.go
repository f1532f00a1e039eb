package backup

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/memengine"
)

// FormatVersion is the version of the manifest and data file layout this
// package writes; it reads versions 1 and 2. Version 2 added each value's
// expiry to its record.
const FormatVersion = 2

// ManifestName is the manifest's file name in a backup directory.
const ManifestName = "MANIFEST.json"

// fileMagic opens every data file; the version follows it (4 bytes, big
// endian), then records: key length and value length (4 bytes each, big
// endian), the key, the value, and (version 2) the value's expiry in Unix
// milliseconds (8 bytes, big endian; 0: none).
var fileMagic = []byte("TIDEKVBK")

const headerLen = 8 + 4

// maxKeyLen bounds a key length read from a data file, so that a corrupt
// length is refused rather than allocated.
const maxKeyLen = 1 << 20

// Manifest describes a complete backup.
type Manifest struct {
	FormatVersion int `json:"format_version"`
	// ClusterID is the backed-up cluster's ID (0: unknown).
	ClusterID uint64 `json:"cluster_id,omitempty"`
	// Timestamp is the HLC timestamp every key was read at (text form).
	Timestamp string `json:"timestamp"`
	// KeySpaces is the catalogue of named key spaces at backup time.
	KeySpaces []KeySpace `json:"keyspaces"`
	Files     []File     `json:"files"`
	// Pairs and Bytes total the data files' records (headers not counted).
	Pairs int64 `json:"pairs"`
	Bytes int64 `json:"bytes"`
}

// KeySpace is a named key space's settings as a manifest records them.
type KeySpace struct {
	Name            string `json:"name"`
	Mode            string `json:"mode"`
	RF              int    `json:"rf,omitempty"`
	Engine          string `json:"engine"`
	Index           string `json:"index,omitempty"`
	CapacityPerNode uint64 `json:"capacity_per_node,omitempty"`
	TTLMs           int64  `json:"ttl_ms,omitempty"`
	// MissHandler is absent from manifests written before read-through.
	MissHandler string `json:"miss_handler,omitempty"`
	// OnFull is absent from manifests written before it existed (evict).
	OnFull string `json:"on_full,omitempty"`
	// GCTTLMs is absent from manifests written before it existed, and
	// when 0 (the engine's default).
	GCTTLMs int64 `json:"gc_ttl_ms,omitempty"`
}

func keySpaceOf(s ksconfig.Settings) KeySpace {
	return KeySpace{Name: s.Name, Mode: string(s.Mode), RF: s.RF, Engine: string(s.Engine), Index: string(s.Index),
		CapacityPerNode: s.CapacityPerNode, TTLMs: s.TTL.Milliseconds(), MissHandler: s.MissHandler, OnFull: string(s.OnFull),
		GCTTLMs: s.GCTTL.Milliseconds()}
}

// Settings are the key space's settings.
func (k KeySpace) Settings() ksconfig.Settings {
	s := ksconfig.Settings{Name: k.Name, Mode: keyspace.Mode(k.Mode), RF: k.RF, Engine: ksconfig.Engine(k.Engine),
		Index: memengine.Index(k.Index), CapacityPerNode: k.CapacityPerNode, TTL: time.Duration(k.TTLMs) * time.Millisecond,
		MissHandler: k.MissHandler, OnFull: ksconfig.OnFull(k.OnFull), GCTTL: time.Duration(k.GCTTLMs) * time.Millisecond}
	if s.OnFull == "" {
		s.OnFull = ksconfig.Evict
	}
	return s
}

// File is one data file: the pairs of one key space (empty: the default
// one) with user keys in [FirstKey, LastKey], in key order.
type File struct {
	Name     string `json:"name"`
	KeySpace string `json:"keyspace,omitempty"`
	FirstKey []byte `json:"first_key"`
	LastKey  []byte `json:"last_key"`
	Pairs    int64  `json:"pairs"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
}

// Pair is one key and its value, with the value's expiry in Unix
// milliseconds (0: none).
type Pair struct {
	Key, Value []byte
	ExpireAtMs int64
}

// recordLen is the size of p's record in a data file of version v.
func recordLen(p Pair, v uint32) int64 {
	n := int64(8 + len(p.Key) + len(p.Value))
	if v >= 2 {
		n += 8
	}
	return n
}

// fileWriter writes one data file and hashes it as it goes.
type fileWriter struct {
	f    *os.File
	w    *bufio.Writer
	h    hash.Hash
	meta File
}

func createFile(dir, name, ks string) (*fileWriter, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	fw := &fileWriter{f: f, h: sha256.New(), meta: File{Name: name, KeySpace: ks}}
	fw.w = bufio.NewWriterSize(io.MultiWriter(f, fw.h), 1<<20)
	hdr := binary.BigEndian.AppendUint32(append([]byte(nil), fileMagic...), FormatVersion)
	if _, err := fw.w.Write(hdr); err != nil {
		f.Close()
		return nil, err
	}
	fw.meta.Bytes = headerLen
	return fw, nil
}

func (fw *fileWriter) add(p Pair) error {
	var lens, exp [8]byte
	binary.BigEndian.PutUint32(lens[:4], uint32(len(p.Key)))
	binary.BigEndian.PutUint32(lens[4:], uint32(len(p.Value)))
	binary.BigEndian.PutUint64(exp[:], uint64(p.ExpireAtMs))
	for _, b := range [][]byte{lens[:], p.Key, p.Value, exp[:]} {
		if _, err := fw.w.Write(b); err != nil {
			return err
		}
	}
	if fw.meta.Pairs == 0 {
		fw.meta.FirstKey = bytes.Clone(p.Key)
	}
	fw.meta.LastKey = bytes.Clone(p.Key)
	fw.meta.Pairs++
	fw.meta.Bytes += recordLen(p, FormatVersion)
	return nil
}

// finish flushes and syncs the file and returns its manifest entry.
func (fw *fileWriter) finish() (File, error) {
	err := fw.w.Flush()
	if err == nil {
		err = fw.f.Sync()
	}
	if cerr := fw.f.Close(); err == nil {
		err = cerr
	}
	fw.meta.SHA256 = hex.EncodeToString(fw.h.Sum(nil))
	return fw.meta, err
}

// errCorrupt marks a backup that fails verification.
var errCorrupt = errors.New("backup refused")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
}

// order compares user keys of key space ks ("": the default one) in the
// order it stores them, which its data files keep: by key, or in a hashed
// key space by the key's hash first.
func (m *Manifest) order(ks string) func(a, b []byte) int {
	for _, k := range m.KeySpaces {
		if k.Name == ks && keyspace.Mode(k.Mode) == keyspace.Hashed {
			return hashOrder
		}
	}
	return bytes.Compare
}

func hashOrder(a, b []byte) int {
	return cmp.Or(cmp.Compare(keyspace.Hash(a), keyspace.Hash(b)), bytes.Compare(a, b))
}

// readFile reads data file f of dir, checking its size, SHA-256 and framing
// against the manifest entry (keys in strictly increasing order by order),
// and calls each (if not nil) with every pair in order. A caller that
// writes must verify first (each nil): each sees pairs before the checksum
// at the end is known.
func readFile(dir string, f File, order func(a, b []byte) int, each func(Pair) error) error {
	path := filepath.Join(dir, f.Name)
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return corrupt("data file %s named in the manifest is missing", f.Name)
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil {
		return err
	} else if st.Size() != f.Bytes {
		return corrupt("data file %s has %d bytes, the manifest says %d (truncated or altered)", f.Name, st.Size(), f.Bytes)
	}
	h := sha256.New()
	r := bufio.NewReaderSize(io.TeeReader(fh, h), 1<<20)
	if err := readPairs(r, f, order, each); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return corrupt("data file %s has SHA-256 %s, the manifest says %s", f.Name, got, f.SHA256)
	}
	return nil
}

// readPairs parses a data file's header and records, checking them against f.
func readPairs(r io.Reader, f File, order func(a, b []byte) int, each func(Pair) error) error {
	hdr := make([]byte, headerLen)
	if _, err := io.ReadFull(r, hdr); err != nil || !bytes.Equal(hdr[:8], fileMagic) {
		return corrupt("data file %s does not start with a TideKV backup header", f.Name)
	}
	v := binary.BigEndian.Uint32(hdr[8:])
	if v < 1 || v > FormatVersion {
		return corrupt("data file %s has format version %d, this binary reads versions 1 to %d", f.Name, v, FormatVersion)
	}
	var prev []byte
	var n int64
	left := f.Bytes - headerLen // readFile checked the size: no length may exceed it
	for ; ; n++ {
		p, err := readPair(r, left, v)
		if err == io.EOF {
			break
		}
		if err != nil {
			return corrupt("data file %s: record %d: %v", f.Name, n+1, err)
		}
		if n > 0 && order(prev, p.Key) >= 0 {
			return corrupt("data file %s: record %d: keys out of order", f.Name, n+1)
		}
		if n == 0 && !bytes.Equal(p.Key, f.FirstKey) {
			return corrupt("data file %s: first key differs from the manifest's", f.Name)
		}
		if each != nil {
			if err := each(p); err != nil {
				return err
			}
		}
		prev = p.Key
		left -= recordLen(p, v)
	}
	if n != f.Pairs {
		return corrupt("data file %s holds %d pairs, the manifest says %d", f.Name, n, f.Pairs)
	}
	if n > 0 && !bytes.Equal(prev, f.LastKey) {
		return corrupt("data file %s: last key differs from the manifest's", f.Name)
	}
	return nil
}

// readPair reads one record of version v of at most left bytes: io.EOF at
// a clean end, an error for a truncated or implausible one (never a large
// allocation for a corrupt length).
func readPair(r io.Reader, left int64, v uint32) (Pair, error) {
	var lens [8]byte
	if _, err := io.ReadFull(r, lens[:]); err != nil {
		if err == io.EOF {
			return Pair{}, io.EOF
		}
		return Pair{}, errors.New("truncated record header")
	}
	kl, vl := binary.BigEndian.Uint32(lens[:4]), binary.BigEndian.Uint32(lens[4:])
	if kl == 0 || kl > maxKeyLen {
		return Pair{}, fmt.Errorf("implausible key length %d", kl)
	}
	tail := 0
	if v >= 2 {
		tail = 8
	}
	if 8+int64(kl)+int64(vl)+int64(tail) > left {
		return Pair{}, fmt.Errorf("lengths %d and %d run past the end of the file", kl, vl)
	}
	buf := make([]byte, int(kl)+int(vl)+tail)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Pair{}, errors.New("truncated record")
	}
	p := Pair{Key: buf[:kl:kl], Value: buf[kl : kl+vl : kl+vl]}
	if tail > 0 {
		p.ExpireAtMs = int64(binary.BigEndian.Uint64(buf[kl+vl:]))
		if p.ExpireAtMs < 0 {
			return Pair{}, fmt.Errorf("implausible expiry %d", p.ExpireAtMs)
		}
	}
	return p, nil
}

// writeManifest writes m to dir atomically: a temporary file, synced, then
// renamed, then the directory synced, so a manifest is whole or absent.
func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ManifestName))
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readManifest reads and checks dir's manifest.
func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, corrupt("%s has no %s: the backup is incomplete or this is not a backup directory", dir, ManifestName)
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, corrupt("%s is not a valid manifest: %v", ManifestName, err)
	}
	if m.FormatVersion < 1 || m.FormatVersion > FormatVersion {
		return nil, corrupt("the manifest has format version %d, this binary reads versions 1 to %d", m.FormatVersion, FormatVersion)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if f.Name == "" || filepath.Base(f.Name) != f.Name || f.Name == ManifestName || seen[f.Name] {
			return nil, corrupt("the manifest names an invalid or repeated data file %q", f.Name)
		}
		seen[f.Name] = true
	}
	return &m, nil
}
