package backup

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tidekv/tidekv/api/keyspace"

	"github.com/tidekv/tidekv/internal/ksconfig"
)

// Sink is the cluster a restore writes to.
type Sink interface {
	// KeySpaces are the named key spaces (not the default one).
	KeySpaces(ctx context.Context) ([]ksconfig.Settings, error)
	// StageKeySpace creates key space s under its staging name
	// (keyspace.StagingName), where Write reaches it and no reader asks
	// for it.
	StageKeySpace(ctx context.Context, s ksconfig.Settings) error
	// Publish gives staged key spaces their names, all at once.
	Publish(ctx context.Context, names []string) error
	// Empty reports whether the cluster holds no key (a one-key scan of
	// each key space it has).
	Empty(ctx context.Context) (bool, error)
	// Write puts pairs (user keys of key space ks, "": the default one).
	Write(ctx context.Context, ks string, pairs []Pair) error
}

// Verify checks the backup in dir: the manifest, and every data file's
// size, SHA-256, framing, key order, first and last key and pair count.
// It writes nothing.
func Verify(dir string) (*Manifest, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{"": true}
	for _, k := range m.KeySpaces {
		if err := k.Settings().Validate(); err != nil {
			return nil, corrupt("the manifest's key space %q has invalid settings: %v", k.Name, err)
		}
		known[k.Name] = true
	}
	var pairs int64
	for _, f := range m.Files {
		if !known[f.KeySpace] {
			return nil, corrupt("data file %s belongs to key space %q, which the manifest's catalogue lacks", f.Name, f.KeySpace)
		}
		if err := readFile(dir, f, m.order(f.KeySpace), nil); err != nil {
			return nil, err
		}
		pairs += f.Pairs
	}
	if pairs != m.Pairs {
		return nil, corrupt("the data files hold %d pairs, the manifest's total says %d", pairs, m.Pairs)
	}
	return m, nil
}

// Restore verifies the backup in dir and loads it into dst: it recreates
// the named key spaces and writes every pair. Unless force, dst must hold
// no key. A backup that fails verification, a key space of the same name
// with other settings, or a non-empty dst is refused before anything is
// written. The key spaces it creates are staged: written under their
// staging names and published together once every pair is written, so a
// reader finds each either absent or whole.
func Restore(ctx context.Context, dst Sink, dir string, force bool, opts Options) (*Manifest, error) {
	opts = opts.withDefaults()
	m, err := Verify(dir)
	if err != nil {
		return nil, err
	}
	if !force {
		empty, err := dst.Empty(ctx)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, fmt.Errorf("restore refused: the cluster already holds data (give --force to write over it)")
		}
	}
	create, staged, err := keySpacesToCreate(ctx, dst, m.KeySpaces)
	if err != nil {
		return nil, err
	}
	for _, s := range create {
		if err := dst.StageKeySpace(ctx, s); err != nil {
			return nil, err
		}
		staged = append(staged, s.Name)
	}
	if err := writeAll(ctx, dst, dir, m, opts, staged); err != nil {
		return nil, err
	}
	if len(staged) > 0 {
		if err := dst.Publish(ctx, staged); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// keySpacesToCreate are the manifest's key spaces dst lacks, and those
// staged already by an earlier restore that failed (found under their
// staging names: written into there and published with the others). One
// dst has with other settings is refused.
func keySpacesToCreate(ctx context.Context, dst Sink, want []KeySpace) (create []ksconfig.Settings, staged []string, err error) {
	have, err := dst.KeySpaces(ctx)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]ksconfig.Settings{}
	for _, s := range have {
		byName[s.Name] = s
	}
	for _, k := range want {
		s := k.Settings()
		got, ok := byName[s.Name]
		if st, isStaged := byName[keyspace.StagingName(s.Name)]; !ok && isStaged {
			got, ok = st, true
			got.Name = s.Name
			staged = append(staged, s.Name)
		}
		switch {
		case !ok:
			create = append(create, s)
		case got != s:
			return nil, nil, fmt.Errorf("restore refused: key space %q exists with settings %s, the backup's are %s", s.Name, got, s)
		}
	}
	return create, staged, nil
}

// writeAll writes every data file's pairs in batches, InFlight at a time;
// the first failure stops it.
// Pairs of a key space in staged go to its staging name.
func writeAll(ctx context.Context, dst Sink, dir string, m *Manifest, opts Options, staged []string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type batch struct {
		ks    string
		pairs []Pair
		bytes int64
	}
	work := make(chan batch)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var pairs, bytes int64
	for range opts.InFlight {
		wg.Go(func() {
			for b := range work {
				if err := dst.Write(ctx, b.ks, b.pairs); err != nil {
					cancel(err)
					continue
				}
				mu.Lock()
				pairs, bytes = pairs+int64(len(b.pairs)), bytes+b.bytes
				opts.Progress(pairs, bytes)
				mu.Unlock()
			}
		})
	}
	err := func() error {
		defer close(work)
		for _, f := range m.Files {
			ks := f.KeySpace
			if slices.Contains(staged, ks) {
				ks = keyspace.StagingName(ks)
			}
			var cur batch
			send := func() error {
				select {
				case work <- cur:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				cur = batch{ks: ks}
				return nil
			}
			cur.ks = ks
			err := readFile(dir, f, m.order(f.KeySpace), func(p Pair) error {
				cur.pairs = append(cur.pairs, p)
				cur.bytes += int64(8 + len(p.Key) + len(p.Value))
				if len(cur.pairs) >= opts.BatchPairs || cur.bytes >= int64(opts.BatchBytes) {
					return send()
				}
				return nil
			})
			if err == nil && len(cur.pairs) > 0 {
				err = send()
			}
			if err != nil {
				return err
			}
		}
		return nil
	}()
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx)
	}
	return err
}
