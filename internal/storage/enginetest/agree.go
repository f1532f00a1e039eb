package enginetest

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

var agreeSeed = flag.Uint64("agree-seed", 1, "random seed for enginetest.Agree")

// Agree drives an engine of each kind and a trivial model with the same
// random operations and checks every read agrees. Small key space, so
// overwrites, deletes of present keys and overlapping range deletes are
// common. The -agree-seed flag picks the sequence.
func Agree(t *testing.T, kinds ...Kind) {
	rng := rand.New(rand.NewPCG(*agreeSeed, 2))
	var es []storage.Engine
	for _, k := range kinds {
		es = append(es, k.Open(t))
	}
	model := map[string]string{}

	alphabet := []string{"", "a", "b", "c", "\x00", "\xff"}
	randKey := func() string {
		n := rng.IntN(3)
		s := ""
		for range n {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		return s
	}
	writeKey := func() string {
		for {
			if k := randKey(); k != "" {
				return k
			}
		}
	}
	type snapState struct {
		snaps []storage.Snapshot
		model map[string]string
	}
	var snaps []snapState

	modelScan := func(m map[string]string, lower, upper []byte) []KV {
		var out []KV
		for k, v := range m {
			if k >= string(lower) && (upper == nil || k < string(upper)) {
				out = append(out, KV{k, v})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
		return out
	}
	randBounds := func() (lower, upper []byte) {
		if rng.IntN(3) > 0 {
			lower = b(randKey())
		}
		if rng.IntN(3) > 0 {
			upper = b(randKey())
		}
		if upper != nil && string(lower) > string(upper) {
			lower, upper = upper, lower
			if lower == nil {
				lower = []byte{}
			}
		}
		return lower, upper
	}
	// checkReader compares r to the model with a full scan, random Gets and
	// a random SeekGE/Next walk.
	checkReader := func(step int, name string, r storage.Reader, m map[string]string) {
		t.Helper()
		lower, upper := randBounds()
		if got, want := Scan(t, r, lower, upper), modelScan(m, lower, upper); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("step %d %s: scan [%q,%q) = %q, want %q", step, name, lower, upper, got, want)
		}
		for range 3 {
			key := randKey()
			v, ok := MustGet(t, r, key)
			mv, mok := m[key]
			if v != mv || ok != mok {
				t.Fatalf("step %d %s: Get(%q) = %q,%v want %q,%v", step, name, key, v, ok, mv, mok)
			}
		}
		it, err := r.NewIter(lower, upper)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		want := modelScan(m, lower, upper)
		seek := randKey()
		i := sort.Search(len(want), func(i int) bool { return want[i].K >= seek })
		for ok := it.SeekGE(b(seek)); ; ok = it.Next() {
			if ok != (i < len(want)) {
				t.Fatalf("step %d %s: SeekGE(%q)/Next in [%q,%q): valid=%v, want index %d of %d", step, name, seek, lower, upper, ok, i, len(want))
			}
			if !ok {
				break
			}
			if string(it.Key()) != want[i].K || string(it.Value()) != want[i].V {
				t.Fatalf("step %d %s: at %q=%q, want %v", step, name, it.Key(), it.Value(), want[i])
			}
			i++
		}
		if it.Next() {
			t.Fatalf("step %d %s: Next after exhaustion", step, name)
		}
	}

	ingestDir := t.TempDir()
	// ingestRandom replaces a random span on every engine with random data
	// via WriteSST + IngestSST, each engine writing its own file format.
	ingestRandom := func(step int) {
		lower, upper := randKey(), randKey()
		if lower > upper {
			lower, upper = upper, lower
		}
		scratch := storage.NewMem()
		defer scratch.Close()
		sb := scratch.NewBatch()
		for k := range model {
			if k >= lower && k < upper {
				delete(model, k)
			}
		}
		for range rng.IntN(4) {
			k := lower + randKey()
			if k >= upper || k == "" {
				continue
			}
			v := fmt.Sprint("sst", rng.IntN(100))
			model[k] = v
			_ = sb.Set(b(k), b(v))
		}
		if err := sb.Commit(false); err != nil {
			t.Fatal(err)
		}
		for i, e := range es {
			path := filepath.Join(ingestDir, fmt.Sprintf("%d-%d.sst", step, i))
			if _, err := e.WriteSST(scratch, b(lower), b(upper), path); err != nil {
				t.Fatal(err)
			}
			if err := e.IngestSST(path, b(lower), b(upper)); err != nil {
				t.Fatalf("step %d %s: ingest [%q,%q): %v", step, kinds[i].Name, lower, upper, err)
			}
		}
	}

	for step := range 400 {
		if rng.IntN(15) == 0 {
			ingestRandom(step)
		}
		if rng.IntN(8) == 0 {
			// Flush engines that buffer writes (Pebble into SSTs) so reads
			// also cover their at-rest paths, not just the memtable.
			for i, e := range es {
				kinds[i].flush(t, e)
			}
		}
		// One random batch applied identically to every engine and the model.
		batches := make([]storage.Batch, len(es))
		for i, e := range es {
			batches[i] = e.NewBatch()
		}
		for range 1 + rng.IntN(5) {
			switch op := rng.IntN(10); {
			case op < 6:
				key, val := writeKey(), fmt.Sprint(rng.IntN(100))
				if rng.IntN(10) == 0 {
					val = ""
				}
				model[key] = val
				for _, bt := range batches {
					_ = bt.Set(b(key), b(val))
				}
			case op < 8:
				key := writeKey()
				delete(model, key)
				for _, bt := range batches {
					_ = bt.Delete(b(key))
				}
			default:
				start, end := randKey(), randKey()
				if start > end {
					start, end = end, start
				}
				for k := range model {
					if k >= start && k < end {
						delete(model, k)
					}
				}
				for _, bt := range batches {
					if err := bt.DeleteRange(b(start), b(end)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		sync := rng.IntN(2) == 0
		// Compared before any commit: Count after Close is unspecified (a
		// MemEngine batch forgets its operations), so comparing against
		// a closed first batch fails unless it is Pebble's.
		for _, bt := range batches {
			if bt.Count() != batches[0].Count() {
				t.Fatalf("step %d: batch counts differ", step)
			}
		}
		for _, bt := range batches {
			if err := bt.Commit(sync); err != nil {
				t.Fatal(err)
			}
			_ = bt.Close()
		}

		for i, e := range es {
			checkReader(step, kinds[i].Name, e, model)
		}
		if rng.IntN(20) == 0 {
			st := snapState{model: maps.Clone(model)}
			for _, e := range es {
				st.snaps = append(st.snaps, e.NewSnapshot())
			}
			snaps = append(snaps, st)
		}
		for _, st := range snaps {
			for i, s := range st.snaps {
				checkReader(step, kinds[i].Name+"-snapshot", s, st.model)
			}
		}
	}
	for _, st := range snaps {
		for _, s := range st.snaps {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
