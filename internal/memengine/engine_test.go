package memengine

import (
	"testing"

	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// kinds are an engine of each index, with buckets and a filter small enough
// that the suite's keys (up to a thousand) split buckets, double the
// directory and share filter counters; and the unordered ones grouping keys
// as TideKV's versioned keys do (the suite's keys with a 0x00 group by what
// comes before it, and its spans inside one group read one bucket).
var kinds = []enginetest.Kind{
	kind(BTree, nil),
	kind(ExtendibleHash, nil),
	kind(CountingBloom, nil),
	kind(ExtendibleHash, mvcc.KeyGroups{}),
	kind(CountingBloom, mvcc.KeyGroups{}),
}

func testConfig(idx Index) Config {
	c := DefaultConfig()
	c.Index = idx
	c.BucketRecords = 16
	c.CBFCounters = 1 << 12
	return c
}

func kind(idx Index, g Grouping) enginetest.Kind {
	name := string(idx)
	if g != nil {
		name += "-grouped"
	}
	return enginetest.Kind{
		Name: name,
		New: func(tb testing.TB) storage.Engine {
			c := testConfig(idx)
			c.Group = g
			e, err := New(c)
			if err != nil {
				tb.Fatal(err)
			}
			return e
		},
	}
}

// The storage engines' conformance suite, for each index; Pebble is the
// foreign kind whose SST files a memory engine must refuse.
func TestConformance(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) { enginetest.Run(t, k, enginetest.Pebble) })
	}
}

func TestEnginesAgree(t *testing.T) {
	enginetest.Agree(t, kinds...)
}

// ApproximateSize reads no key for the whole engine, whatever its index.
func TestApproximateSizeTally(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			enginetest.TallySize(t, k, func(e storage.Engine) uint64 { return e.(*Engine).size.Visits() }, k.Name == string(BTree))
		})
	}
}
