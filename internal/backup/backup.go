package backup

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/ksconfig"
)

// Source is the cluster a backup reads.
type Source interface {
	// Hold takes the timestamp ts the backup reads at, at or above every
	// write acknowledged before it was asked for, and keeps what a read at
	// ts sees from GC until release is called. held is ctx, cancelled
	// (with the cause) if the hold is lost before release.
	Hold(ctx context.Context) (ts hlc.Timestamp, held context.Context, release func(), err error)
	// ClusterID is the cluster's ID (0: unknown).
	ClusterID(ctx context.Context) (uint64, error)
	// KeySpaces are the named key spaces (not the default one).
	KeySpaces(ctx context.Context) ([]ksconfig.Settings, error)
	// Scan returns at most limit pairs of key space ks ("": the default
	// one) after user key after (nil: from the first), as of ts, in the
	// order the key space stores them (by key, or in a hashed key space by
	// the key's hash: Manifest.order). Fewer than limit: it holds no more.
	Scan(ctx context.Context, ks string, after []byte, limit int, ts hlc.Timestamp) ([]Pair, error)
}

// Options tune Backup and Restore; zero fields take the defaults.
type Options struct {
	// MaxFileBytes rolls a data file once it holds this many bytes
	// (default 64 MiB).
	MaxFileBytes int64
	// PageSize is the pairs one scan request asks for (default 1000).
	PageSize int
	// BatchPairs and BatchBytes bound one restore write (default 256
	// pairs, 1 MiB); InFlight is how many are outstanding (default 4).
	BatchPairs int
	BatchBytes int
	InFlight   int
	// Progress, if set, is called with the running totals after every
	// page (Backup) or batch (Restore).
	Progress func(pairs, bytes int64)
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 64 << 20
	}
	def(&o.PageSize, 1000)
	def(&o.BatchPairs, 256)
	def(&o.BatchBytes, 1<<20)
	def(&o.InFlight, 4)
	if o.Progress == nil {
		o.Progress = func(int64, int64) {}
	}
	return o
}

// Backup writes a backup of src to dir, which must be empty or absent, and
// returns its manifest.
func Backup(ctx context.Context, src Source, dir string, opts Options) (*Manifest, error) {
	opts = opts.withDefaults()
	if err := emptyDir(dir); err != nil {
		return nil, err
	}
	named, err := src.KeySpaces(ctx)
	if err != nil {
		return nil, err
	}
	id, err := src.ClusterID(ctx)
	if err != nil {
		return nil, err
	}
	ts, held, release, err := src.Hold(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	m := &Manifest{FormatVersion: FormatVersion, ClusterID: id, Timestamp: ts.String(), KeySpaces: []KeySpace{}, Files: []File{}}
	b := &writer{dir: dir, m: m, opts: opts}
	names := []string{""}
	for _, s := range named {
		m.KeySpaces = append(m.KeySpaces, keySpaceOf(s))
		names = append(names, s.Name)
	}
	for _, ks := range names {
		if err := b.keySpace(held, src, ks, ts); err != nil {
			b.abort()
			if cause := context.Cause(held); cause != nil && ctx.Err() == nil {
				err = cause
			}
			return nil, err
		}
	}
	if err := writeManifest(dir, m); err != nil {
		return nil, err
	}
	return m, nil
}

// emptyDir creates dir or checks that it is empty.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("backup refused: %s is not empty (a backup needs an empty or new directory)", dir)
	}
	return nil
}

// writer writes one backup's data files.
type writer struct {
	dir  string
	m    *Manifest
	opts Options
	cur  *fileWriter
}

// keySpace copies key space ks, page by page, into data files.
func (b *writer) keySpace(ctx context.Context, src Source, ks string, ts hlc.Timestamp) error {
	var after []byte
	for {
		page, err := src.Scan(ctx, ks, after, b.opts.PageSize, ts)
		if err != nil {
			return err
		}
		for _, p := range page {
			if err := b.add(ks, p); err != nil {
				return err
			}
		}
		b.opts.Progress(b.m.Pairs, b.m.Bytes)
		if len(page) < b.opts.PageSize {
			return b.roll()
		}
		after = page[len(page)-1].Key
	}
}

func (b *writer) add(ks string, p Pair) error {
	if b.cur == nil {
		fw, err := createFile(b.dir, fmt.Sprintf("data-%06d.tkb", len(b.m.Files)+1), ks)
		if err != nil {
			return err
		}
		b.cur = fw
	}
	before := b.cur.meta.Bytes
	if err := b.cur.add(p); err != nil {
		return err
	}
	b.m.Pairs++
	b.m.Bytes += b.cur.meta.Bytes - before
	if b.cur.meta.Bytes >= b.opts.MaxFileBytes {
		return b.roll()
	}
	return nil
}

// roll finishes the current data file, if any.
func (b *writer) roll() error {
	if b.cur == nil {
		return nil
	}
	f, err := b.cur.finish()
	b.cur = nil
	if err != nil {
		return err
	}
	b.m.Files = append(b.m.Files, f)
	return nil
}

// abort closes a half-written file; without a manifest the directory is
// an incomplete backup, which Restore refuses.
func (b *writer) abort() {
	if b.cur != nil {
		b.cur.finish()
		b.cur = nil
	}
}
