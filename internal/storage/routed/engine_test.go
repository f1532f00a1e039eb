package routed_test

import (
	"testing"

	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
	"github.com/tidekv/tidekv/internal/storage/routed"
)

func mem(tb testing.TB, idx memengine.Index) storage.Engine {
	c := memengine.DefaultConfig()
	c.Index, c.BucketRecords, c.CBFCounters = idx, 16, 1<<12
	e, err := memengine.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func span(lo, hi string) routed.Span { return routed.Span{Lo: []byte(lo), Hi: []byte(hi)} }

// withParts routes spans the suite's keys fall in, either side, and
// across to memory engines: batches, iterators, snapshots and SSTs then
// cross engines. Keys before "b" (but "acct/") are outside the routable
// spans, so batches write some keys straight to the base.
func withParts(name string, base enginetest.Kind) enginetest.Kind {
	return enginetest.Kind{
		Name: name,
		New: func(tb testing.TB) storage.Engine {
			e := routed.New(base.New(tb), span("acct/", "acct0"), span("b", "n"))
			if err := e.AddPart(mem(tb, memengine.BTree), span("acct/2", "acct/3"), span("h", "k")); err != nil {
				tb.Fatal(err)
			}
			if err := e.AddPart(mem(tb, memengine.ExtendibleHash), span("b", "c"), span("m", "m1")); err != nil {
				tb.Fatal(err)
			}
			return e
		},
	}
}

var (
	overPebble = withParts("routed-pebble", enginetest.Pebble)
	overMem    = withParts("routed-mem", enginetest.Mem)
)

// Pebble's files are foreign across engines (a span of several ships in
// the MemEngine format) and inside a memory part; over the MemEngine base,
// everywhere.
func TestConformance(t *testing.T) {
	for _, k := range []enginetest.Kind{overPebble, overMem} {
		t.Run(k.Name, func(t *testing.T) { enginetest.Run(t, k, enginetest.Pebble) })
	}
}

func TestAgrees(t *testing.T) {
	enginetest.Agree(t, enginetest.Mem, overMem)
}

// A part added while running takes over what the base held in its spans
// (keys written before the node knew the key space); one reopened after a
// restart starts empty, and a leftover in the base is cleared.
func TestAddAndReopenPart(t *testing.T) {
	base := enginetest.Mem.Open(t)
	e := routed.New(base, span("k", "l"))
	enginetest.SetAll(t, e, enginetest.KV{K: "a", V: "base"}, enginetest.KV{K: "k1", V: "early"})
	if e.Volatile([]byte("a"), nil) {
		t.Fatal("no part, yet volatile")
	}
	snap := e.NewSnapshot()
	defer snap.Close()
	if err := e.AddPart(mem(t, memengine.BTree), span("k", "l")); err != nil {
		t.Fatal(err)
	}
	if err := e.AddPart(mem(t, memengine.BTree), span("k0", "k5")); err == nil {
		t.Fatal("overlapping part added")
	}
	if err := e.AddPart(mem(t, memengine.BTree), span("m", "n")); err == nil {
		t.Fatal("part added outside the routable spans")
	}
	enginetest.SetAll(t, e, enginetest.KV{K: "k2", V: "late"})
	if got := enginetest.Scan(t, e, nil, nil); len(got) != 3 || got[1].V != "early" || got[2].V != "late" {
		t.Fatalf("after AddPart: %v", got)
	}
	enginetest.WantGet(t, snap, "k2", "", false) // the snapshot predates it
	if !e.Volatile([]byte("a"), []byte("k0")) || e.Volatile([]byte("a"), []byte("k")) {
		t.Fatal("Volatile does not follow the part")
	}

	enginetest.WantGet(t, base, "k1", "", false) // moved, not copied
	// A restart: the same base, a fresh part that lost everything; the
	// base holds a leftover of an AddPart that stopped half done.
	enginetest.SetAll(t, base, enginetest.KV{K: "k3", V: "leftover"})
	re := routed.New(base, span("k", "l"))
	if err := re.ReopenPart(mem(t, memengine.BTree), span("k", "l")); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Scan(t, re, nil, nil); len(got) != 1 || got[0].K != "a" {
		t.Fatalf("after reopening: %v", got)
	}
	enginetest.WantGet(t, base, "k3", "", false)
}
