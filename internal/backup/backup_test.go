package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/ksconfig"
)

// memCluster is the in-memory twin of a cluster: key spaces by name ("":
// the default one), each a map of user keys to versions by timestamp.
type memCluster struct {
	mu      sync.Mutex // Restore writes from several goroutines
	clock   hlc.Timestamp
	named   []ksconfig.Settings
	data    map[string]map[string][]version
	writes  int
	scanErr error
}

type version struct {
	ts       hlc.Timestamp
	value    []byte
	expireAt int64 // Unix ms; 0: none
}

func newMem() *memCluster { return &memCluster{data: map[string]map[string][]version{"": {}}} }

func (m *memCluster) tick() hlc.Timestamp {
	m.clock = hlc.Timestamp{WallTime: m.clock.WallTime + 1}
	return m.clock
}

func (m *memCluster) put(ks, k, v string) { m.putExpiring(ks, k, v, 0) }

func (m *memCluster) putExpiring(ks, k, v string, expireAt int64) {
	m.data[ks][k] = append(m.data[ks][k], version{m.tick(), []byte(v), expireAt})
}

func (m *memCluster) Hold(ctx context.Context) (hlc.Timestamp, context.Context, func(), error) {
	return m.tick(), ctx, func() {}, nil
}
func (m *memCluster) ClusterID(context.Context) (uint64, error) { return 7, nil }
func (m *memCluster) KeySpaces(context.Context) ([]ksconfig.Settings, error) {
	return slices.Clone(m.named), nil
}

func (m *memCluster) Scan(_ context.Context, ks string, after []byte, limit int, ts hlc.Timestamp) ([]Pair, error) {
	if m.scanErr != nil {
		return nil, m.scanErr
	}
	order := bytes.Compare
	for _, s := range m.named {
		if s.Name == ks && s.Mode == keyspace.Hashed {
			order = hashOrder
		}
	}
	keys := slices.SortedFunc(maps.Keys(m.data[ks]), func(a, b string) int { return order([]byte(a), []byte(b)) })
	var out []Pair
	for _, k := range keys {
		if after != nil && order([]byte(k), after) <= 0 {
			continue
		}
		var at *version
		for _, v := range m.data[ks][k] {
			if !ts.Less(v.ts) {
				at = &v
			}
		}
		if at != nil && len(out) < limit {
			out = append(out, Pair{Key: []byte(k), Value: at.value, ExpireAtMs: at.expireAt})
		}
	}
	return out, nil
}

func (m *memCluster) StageKeySpace(_ context.Context, s ksconfig.Settings) error {
	m.writes++
	s.Name = keyspace.StagingName(s.Name)
	m.named = append(m.named, s)
	m.data[s.Name] = map[string][]version{}
	return nil
}

func (m *memCluster) Publish(_ context.Context, names []string) error {
	for _, n := range names {
		i := slices.IndexFunc(m.named, func(s ksconfig.Settings) bool { return s.Name == keyspace.StagingName(n) })
		if i < 0 {
			return fmt.Errorf("no staged key space %q", n)
		}
		m.named[i].Name = n
		m.data[n] = m.data[keyspace.StagingName(n)]
		delete(m.data, keyspace.StagingName(n))
	}
	return nil
}

func (m *memCluster) Empty(context.Context) (bool, error) {
	for _, d := range m.data {
		if len(d) > 0 {
			return false, nil
		}
	}
	return true, nil
}

func (m *memCluster) Write(_ context.Context, ks string, pairs []Pair) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	for _, p := range pairs {
		m.putExpiring(ks, string(p.Key), string(p.Value), p.ExpireAtMs)
	}
	return nil
}

// latest is every key's newest value, by key space.
func (m *memCluster) latest() map[string]map[string]string {
	out := map[string]map[string]string{}
	for ks, d := range m.data {
		out[ks] = map[string]string{}
		for k, vs := range d {
			out[ks][k] = string(vs[len(vs)-1].value)
		}
	}
	return out
}

// source builds a cluster with a named key space and enough pairs for
// several data files and pages.
func source() *memCluster {
	m := newMem()
	m.named = []ksconfig.Settings{{Name: "users", Mode: keyspace.Ordered, Engine: ksconfig.Pebble, RF: 3, OnFull: ksconfig.Evict, GCTTL: 90 * time.Second}}
	m.data["users"] = map[string][]version{}
	for i := range 500 {
		m.put("", fmt.Sprintf("k%04d", i), strings.Repeat("v", i%50))
	}
	for i := range 30 {
		m.put("users", fmt.Sprintf("u%02d", i), fmt.Sprint(i))
	}
	return m
}

var small = Options{MaxFileBytes: 4096, PageSize: 64, BatchPairs: 10, BatchBytes: 512, InFlight: 3}

func TestRoundTrip(t *testing.T) {
	src := source()
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Backup(t.Context(), src, dir, small)
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the backup's timestamp are not in it.
	src.put("", "k0001", "later")
	src.put("", "zzz", "later")
	if len(m.Files) < 3 || m.Pairs != 530 || m.ClusterID != 7 || len(m.KeySpaces) != 1 {
		t.Fatalf("manifest: %d files, %d pairs, cluster %d, key spaces %v", len(m.Files), m.Pairs, m.ClusterID, m.KeySpaces)
	}
	for _, f := range m.Files {
		if f.Bytes > small.MaxFileBytes+100 {
			t.Errorf("file %s has %d bytes, above the bound", f.Name, f.Bytes)
		}
	}
	dst := newMem()
	if _, err := Restore(t.Context(), dst, dir, false, small); err != nil {
		t.Fatal(err)
	}
	want := source().latest()
	if got := dst.latest(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored data differs from the source at the backup timestamp:\n got %v\nwant %v", got, want)
	}
	if !slices.Equal(dst.named, src.named) {
		t.Fatalf("key spaces: got %v, want %v", dst.named, src.named)
	}
}

func TestBackupRefuses(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := Backup(t.Context(), source(), dir, small); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("non-empty directory: %v", err)
	}
	src := source()
	src.scanErr = fmt.Errorf("read is below the GC threshold")
	dir = t.TempDir()
	if _, err := Backup(t.Context(), src, dir, small); err == nil {
		t.Error("a failing scan made a backup")
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		t.Error("a failed backup wrote a manifest")
	}
}

// TestRestoreRefusesCorruption damages a good backup in each way and checks
// the sentence and that nothing was written.
func TestRestoreRefusesCorruption(t *testing.T) {
	cases := []struct {
		name, want string
		damage     func(t *testing.T, dir string, m *Manifest)
	}{
		{"missing manifest", "has no MANIFEST.json", func(t *testing.T, dir string, _ *Manifest) {
			rm(t, filepath.Join(dir, ManifestName))
		}},
		{"missing file", "is missing", func(t *testing.T, dir string, m *Manifest) {
			rm(t, filepath.Join(dir, m.Files[1].Name))
		}},
		{"truncated file", "truncated or altered", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, m.Files[len(m.Files)-1].Name)
			b, _ := os.ReadFile(p)
			write(t, p, b[:len(b)-3])
		}},
		{"flipped byte", "SHA-256", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, m.Files[2].Name)
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			write(t, p, b)
		}},
		{"bad framing", "implausible key length", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, m.Files[0].Name)
			b, _ := os.ReadFile(p)
			copy(b[headerLen:], []byte{0xff, 0xff, 0xff, 0xff})
			write(t, p, b)
		}},
		{"length past the end", "run past the end of the file", func(t *testing.T, dir string, m *Manifest) {
			p := filepath.Join(dir, m.Files[0].Name)
			b, _ := os.ReadFile(p)
			copy(b[headerLen+4:], []byte{0x7f, 0xff, 0xff, 0xff})
			write(t, p, b)
		}},
		{"unknown version", "format version 3", func(t *testing.T, dir string, _ *Manifest) {
			editManifest(t, dir, `"format_version": 2`, `"format_version": 3`)
		}},
		{"pair count", "the manifest says 1", func(t *testing.T, dir string, m *Manifest) {
			editManifest(t, dir, fmt.Sprintf(`"pairs": %d,`, m.Files[0].Pairs), `"pairs": 1,`)
		}},
		{"garbled manifest", "not a valid manifest", func(t *testing.T, dir string, _ *Manifest) {
			write(t, filepath.Join(dir, ManifestName), []byte("{"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			m, err := Backup(t.Context(), source(), dir, small)
			if err != nil {
				t.Fatal(err)
			}
			c.damage(t, dir, m)
			dst := newMem()
			_, err = Restore(t.Context(), dst, dir, false, small)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "backup refused: ") {
				t.Fatalf("got %v, want a refusal naming %q", err, c.want)
			}
			if dst.writes != 0 {
				t.Fatalf("a refused restore made %d writes", dst.writes)
			}
		})
	}
}

func TestRestoreRefusesTarget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Backup(t.Context(), source(), dir, small); err != nil {
		t.Fatal(err)
	}
	dst := newMem()
	dst.put("", "x", "y")
	if _, err := Restore(t.Context(), dst, dir, false, small); err == nil || !strings.Contains(err.Error(), "already holds data") {
		t.Errorf("non-empty cluster: %v", err)
	}
	if dst.writes != 0 {
		t.Errorf("refused restore wrote")
	}
	if _, err := Restore(t.Context(), dst, dir, true, small); err != nil {
		t.Errorf("--force: %v", err)
	}

	dst = newMem()
	dst.named = []ksconfig.Settings{{Name: "users", Mode: keyspace.Ordered, Engine: ksconfig.Pebble, RF: 5, OnFull: ksconfig.Evict}}
	if _, err := Restore(t.Context(), dst, dir, false, small); err == nil || !strings.Contains(err.Error(), `key space "users" exists with settings`) {
		t.Errorf("key space with other settings: %v", err)
	}
	if dst.writes != 0 {
		t.Errorf("refused restore wrote")
	}
}

func TestEmptyClusterBackup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Backup(t.Context(), newMem(), dir, small)
	if err != nil || len(m.Files) != 0 {
		t.Fatalf("empty cluster: %v, %d files", err, len(m.Files))
	}
	dst := newMem()
	if _, err := Restore(t.Context(), dst, dir, false, small); err != nil || dst.writes != 0 {
		t.Fatalf("restore of an empty backup: %v, %d writes", err, dst.writes)
	}
}

func rm(t *testing.T, p string) {
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string, b []byte) {
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func editManifest(t *testing.T, dir, old, new string) {
	p := filepath.Join(dir, ManifestName)
	b, _ := os.ReadFile(p)
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("manifest lacks %q", old)
	}
	write(t, p, bytes.Replace(b, []byte(old), []byte(new), 1))
}

// Expiries go into the backup and come back with the restore.
func TestRoundTripKeepsExpiry(t *testing.T) {
	src := source()
	src.putExpiring("", "session", "s", 1_900_000_000_123)
	src.putExpiring("users", "u-temp", "t", 1_900_000_000_456)
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Backup(t.Context(), src, dir, small); err != nil {
		t.Fatal(err)
	}
	dst := newMem()
	if _, err := Restore(t.Context(), dst, dir, false, small); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ks, key string
		want    int64
	}{{"", "session", 1_900_000_000_123}, {"users", "u-temp", 1_900_000_000_456}, {"", "k0001", 0}} {
		vs := dst.data[c.ks][c.key]
		if len(vs) == 0 || vs[len(vs)-1].expireAt != c.want {
			t.Errorf("%s/%s restored as %+v, want expiry %d", c.ks, c.key, vs, c.want)
		}
	}
}

// A backup of format version 1 (records without expiry) still restores.
func TestRestoreReadsFormatVersion1(t *testing.T) {
	dir := t.TempDir()
	rec := func(k, v string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(k)))
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		return append(append(b, k...), v...)
	}
	data := binary.BigEndian.AppendUint32(append([]byte(nil), fileMagic...), 1)
	data = append(append(data, rec("a", "1")...), rec("b", "22")...)
	write(t, filepath.Join(dir, "data-000001.tkb"), data)
	sum := sha256.Sum256(data)
	manifest := fmt.Sprintf(`{"format_version": 1, "timestamp": "1.000000000,0", "keyspaces": [],
		"files": [{"name": "data-000001.tkb", "first_key": "YQ==", "last_key": "Yg==", "pairs": 2, "bytes": %d, "sha256": %q}],
		"pairs": 2, "bytes": 5}`, len(data), hex.EncodeToString(sum[:]))
	write(t, filepath.Join(dir, ManifestName), []byte(manifest))
	dst := newMem()
	if _, err := Restore(t.Context(), dst, dir, false, small); err != nil {
		t.Fatal(err)
	}
	if got := dst.latest()[""]; got["a"] != "1" || got["b"] != "22" || len(got) != 2 {
		t.Fatalf("restored %v from a version 1 backup, want a=1 b=22", got)
	}
}

// A hashed key space is backed up in hash order and restored whole; a data
// file of it whose keys are in key order instead is refused.
func TestHashedKeySpaceRoundTrip(t *testing.T) {
	src := source()
	src.named = append(src.named, ksconfig.Settings{Name: "cache", Mode: keyspace.Hashed, Engine: ksconfig.Pebble, OnFull: ksconfig.Evict})
	src.data["cache"] = map[string][]version{}
	for i := range 100 {
		src.put("cache", fmt.Sprintf("c%03d", i), fmt.Sprint(i))
	}
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Backup(t.Context(), src, dir, small)
	if err != nil {
		t.Fatal(err)
	}
	dst := newMem()
	if _, err := Restore(t.Context(), dst, dir, false, small); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.latest(), src.latest(); !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("restored %d cache keys, want %d", len(got["cache"]), len(want["cache"]))
	}
	// The same pairs written in key order are not a hashed key space's file.
	var f File
	for _, mf := range m.Files {
		if mf.KeySpace == "cache" {
			f = mf
		}
	}
	var pairs []Pair
	if err := readFile(dir, f, hashOrder, func(p Pair) error { pairs = append(pairs, p); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(pairs, func(a, b Pair) int { return bytes.Compare(a.Key, b.Key) })
	sorted := filepath.Join(t.TempDir(), "b")
	os.MkdirAll(sorted, 0o755)
	fw, err := createFile(sorted, f.Name, "cache")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		fw.add(p)
	}
	bad, err := fw.finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := readFile(sorted, bad, m.order("cache"), nil); err == nil || !strings.Contains(err.Error(), "keys out of order") {
		t.Fatalf("a hashed key space's file in key order: %v", err)
	}
}
