package memengine

import (
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// kinds are an engine of each index, with buckets and a filter small enough
// that the suite's keys (up to a thousand) split buckets, double the
// directory and share filter counters.
var kinds = []enginetest.Kind{
	kind(BTree),
	kind(ExtendibleHash),
	kind(CountingBloom),
}

func testConfig(idx Index) Config {
	c := DefaultConfig()
	c.Index = idx
	c.BucketRecords = 16
	c.CBFCounters = 1 << 12
	return c
}

func kind(idx Index) enginetest.Kind {
	return enginetest.Kind{
		Name: string(idx),
		New: func(tb testing.TB) storage.Engine {
			e, err := New(testConfig(idx))
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
