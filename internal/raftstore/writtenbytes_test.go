package raftstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// WrittenBytes moves only once the engine holds what it counts: a range's
// size is an exact count of its data plus what WrittenBytes grew since, so
// a count taken while a write is applied but its batch not yet committed
// must still bound the range after the write. Counted when the command
// was applied, the count missed the write's bytes and the counter had
// them already: the estimate read low, and a held range passed Θmax
// (65,715 bytes stored in a range of Θmax 65,536 once).
func TestWrittenBytesCountedAtCommit(t *testing.T) {
	type count struct{ written, stored uint64 }
	var (
		armed  atomic.Pointer[Replica]
		mu     sync.Mutex
		counts []count
	)
	tc := newTestCluster(t, 1, func(c *Config) {
		// Called as each entry is applied, before its batch is committed.
		c.testingApplied = func(_, rangeID, _ uint64) {
			r := armed.Load()
			if r == nil || rangeID != r.RangeID() {
				return
			}
			n, err := r.DataSize(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts = append(counts, count{r.WrittenBytes(), n.Stored})
			mu.Unlock()
		}
	})
	tc.put("a", "first")
	r := tc.leader(testRangeID)
	armed.Store(r)
	tc.put("b", strings.Repeat("v", 1000))
	armed.Store(nil)
	n, err := r.DataSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := r.WrittenBytes()
	mu.Lock()
	defer mu.Unlock()
	if len(counts) == 0 {
		t.Fatal("no count taken while the write was applied")
	}
	for _, c := range counts {
		if bound := c.stored + (w - c.written); n.Stored > bound {
			t.Fatalf("the range stores %d bytes after the write, above %d: counted %d with WrittenBytes %d while it was applied, %d after", n.Stored, bound, c.stored, c.written, w)
		}
	}
}
