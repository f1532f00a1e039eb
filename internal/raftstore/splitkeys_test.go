package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// detachedReplica is a replica of range 2 = [start, end) on an engine,
// outside any running store: enough for the split key finders. lead makes
// it claim the lease.
func detachedReplica(eng storage.Engine, start, end string, lead bool) *Replica {
	s := &Store{eng: eng, nodeID: 1}
	r := s.newReplica(testRangeID)
	r.desc.Store(&tidekvpb.RangeDescriptor{RangeId: testRangeID, StartKey: []byte(start), EndKey: []byte(end), Generation: 1})
	r.isLeader.Store(lead)
	return r
}

func putRaw(t *testing.T, eng storage.Engine, kvs map[string][]byte) {
	t.Helper()
	b := eng.NewBatch()
	defer b.Close()
	for k, v := range kvs {
		if err := b.Set(keys.DataKey(testRangeID, []byte(k)), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

// sizeBefore returns the user bytes of the keys in [start, k) and in all
// of [start, end).
func sizeBefore(t *testing.T, eng storage.Engine, start, end string, k []byte) (before, total uint64) {
	t.Helper()
	lo, hi := keys.DataSpan(testRangeID, []byte(start), []byte(end))
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		n := uint64(len(keys.UserKey(it.Key())) + len(it.Value()))
		if bytes.Compare(keys.UserKey(it.Key()), k) < 0 {
			before += n
		}
		total += n
	}
	return before, total
}

func TestSizeSplitKeySmall(t *testing.T) {
	ctx := context.Background()
	eng := storage.NewMem()
	// Keys outside the range's span are never considered.
	putRaw(t, eng, map[string][]byte{"a": []byte("outside"), "z": []byte("outside")})
	r := detachedReplica(eng, "b", "y", true)
	for _, n := range []int{0, 1} {
		if n == 1 {
			putRaw(t, eng, map[string][]byte{"c": []byte("x")})
		}
		if _, err := r.SizeSplitKey(ctx); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%d keys: err %v, want ErrInvalidRequest", n, err)
		}
	}
	// Two keys: the only possible split is at the second, even when the
	// first holds nearly everything.
	putRaw(t, eng, map[string][]byte{"c": bytes.Repeat([]byte("x"), 1000), "d": []byte("x")})
	if k, err := r.SizeSplitKey(ctx); err != nil || string(k) != "d" {
		t.Fatalf("two keys: %q %v, want d", k, err)
	}
	// Equal sizes: the middle key.
	kvs := map[string][]byte{}
	for i := range 100 {
		kvs[fmt.Sprintf("k%03d", i)] = bytes.Repeat([]byte("v"), 96)
	}
	eng2 := storage.NewMem()
	putRaw(t, eng2, kvs)
	if k, err := detachedReplica(eng2, "", "", true).SizeSplitKey(ctx); err != nil || string(k) != "k050" {
		t.Fatalf("100 equal keys: %q %v, want k050", k, err)
	}
	// One heavy key in the middle: the split lands next to it.
	kvs["k070"] = bytes.Repeat([]byte("v"), 100*100)
	eng3 := storage.NewMem()
	putRaw(t, eng3, kvs)
	if k, err := detachedReplica(eng3, "", "", true).SizeSplitKey(ctx); err != nil || (string(k) != "k070" && string(k) != "k071") {
		t.Fatalf("heavy key k070: %q %v", k, err)
	}
	// Only the leaseholder answers.
	var nl *NotLeaderError
	if _, err := detachedReplica(eng2, "", "", false).SizeSplitKey(ctx); !errors.As(err, &nl) {
		t.Fatalf("follower: %v, want NotLeaderError", err)
	}
}

// Many keys of random sizes: the candidates are thinned out while
// scanning, and the chosen key still halves the data closely.
func TestSizeSplitKeyManyKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1023, 1024, 1025, 5000, 40000} {
		eng := storage.NewMem()
		kvs := map[string][]byte{}
		for i := range n {
			kvs[fmt.Sprintf("key%08d", i)] = make([]byte, rng.IntN(400))
		}
		putRaw(t, eng, kvs)
		k, err := detachedReplica(eng, "key", "kez", true).SizeSplitKey(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		before, total := sizeBefore(t, eng, "key", "kez", k)
		if bytes.Equal(k, []byte("key00000000")) {
			t.Fatalf("%d keys: split at the first key", n)
		}
		// Candidates are at most 2·(n/1024)+1 keys apart, each < 412 bytes.
		slack := uint64(412 * (2*n/1024 + 1)) // 1024 candidates at most (mvcc.SplitPoints)
		if half := total / 2; before+slack < half || before > half+slack {
			t.Fatalf("%d keys: %q has %d of %d bytes before it (slack %d)", n, k, before, total, slack)
		}
	}
}

// A range several times maxBytes is cut in one step into the power of two
// of equal pieces that repeated halving would reach; a few keys give fewer.
func TestSizeSplitKeysPieces(t *testing.T) {
	ctx := context.Background()
	kvs := map[string][]byte{}
	for i := range 1000 {
		kvs[fmt.Sprintf("k%04d", i)] = bytes.Repeat([]byte("v"), 95) // 100 bytes a key
	}
	eng := storage.NewMem()
	putRaw(t, eng, kvs)
	r := detachedReplica(eng, "", "", true)
	for _, c := range []struct {
		maxBytes uint64
		want     []string
	}{
		{0, []string{"k0500"}},
		{60_000, []string{"k0500"}},
		{50_000, []string{"k0500"}},
		{49_999, []string{"k0250", "k0500", "k0750"}},
		{13_000, []string{"k0125", "k0250", "k0375", "k0500", "k0625", "k0750", "k0875"}},
	} {
		ks, err := r.SizeSplitKeys(ctx, c.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range ks {
			got = append(got, string(k))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("maxBytes %d: %v, want %v", c.maxBytes, got, c.want)
		}
	}
	// 100 KB at 1 byte a piece would be 100,000 pieces: capped, and each
	// key appears once.
	ks, err := r.SizeSplitKeys(ctx, 1)
	if err != nil || len(ks) != maxSizePieces-1 {
		t.Fatalf("maxBytes 1: %d keys, %v; want %d", len(ks), err, maxSizePieces-1)
	}
	three := storage.NewMem()
	putRaw(t, three, map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")})
	ks, err = detachedReplica(three, "", "", true).SizeSplitKeys(ctx, 1)
	if err != nil || len(ks) != 2 || string(ks[0]) != "b" || string(ks[1]) != "c" {
		t.Fatalf("three keys: %q %v, want [b c]", ks, err)
	}
}

func TestSizeSplitKeyOnCluster(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := range 20 {
		tc.put(fmt.Sprintf("k%02d", i), "value")
	}
	ctx := context.Background()
	ld := tc.leader(testRangeID)
	k, err := ld.SizeSplitKey(ctx)
	if err != nil || string(k) != "k10" {
		t.Fatalf("SizeSplitKey = %q, %v; want k10", k, err)
	}
	for _, id := range tc.nodes {
		if r := tc.stores[id].GetReplica(testRangeID); r != ld {
			var nl *NotLeaderError
			if _, err := r.SizeSplitKey(ctx); !errors.As(err, &nl) {
				t.Fatalf("follower n%d: %v", id, err)
			}
		}
	}
	// After a split each half looks at its own data only.
	if _, err := ld.Split(ctx, k, 3); err != nil {
		t.Fatal(err)
	}
	if k2, err := ld.SizeSplitKey(ctx); err != nil || string(k2) != "k05" {
		t.Fatalf("left half: %q %v, want k05", k2, err)
	}
	if k3, err := tc.leader(3).SizeSplitKey(ctx); err != nil || string(k3) != "k15" {
		t.Fatalf("right half: %q %v, want k15", k3, err)
	}
}

// countKeys counts n requests, cycling through ks.
func countKeys(r *Replica, n int, ks ...string) {
	for i := range n {
		r.CountRequest([]byte(ks[i%len(ks)]))
	}
}

func TestLoadSplitKey(t *testing.T) {
	r := detachedReplica(storage.NewMem(), "b", "y", false)
	// Uniform load over c00..c99: the median is in the middle.
	var uniform []string
	for i := range 100 {
		uniform = append(uniform, fmt.Sprintf("c%02d", i))
	}
	countKeys(r, 8*loadMinSamples-1, uniform...)
	if _, _, ok := r.LoadSplitKey(); ok {
		t.Fatal("decided on fewer than the minimum samples")
	}
	if r.HotKeyShare() != 0 {
		t.Fatal("hot share with too few samples")
	}
	countKeys(r, 8*loadSampleSize, uniform...)
	k, share, ok := r.LoadSplitKey()
	if !ok || bytes.Compare(k, []byte("c40")) < 0 || bytes.Compare(k, []byte("c60")) > 0 {
		t.Fatalf("uniform load: split %q ok=%v", k, ok)
	}
	if share > 0.05 {
		t.Fatalf("uniform load: hot share %.2f", share)
	}
	if r.Requests() != uint64(8*loadMinSamples-1+8*loadSampleSize) {
		t.Fatalf("requests = %d", r.Requests())
	}

	// The ring holds only the latest samples: load moved to x00..x09.
	countKeys(r, 8*loadSampleSize, "x00", "x01", "x02", "x03", "x04", "x05", "x06", "x07", "x08", "x09")
	if k, _, ok := r.LoadSplitKey(); !ok || !bytes.HasPrefix(k, []byte("x0")) {
		t.Fatalf("after the load moved: %q ok=%v", k, ok)
	}

	// One hot key takes most requests: it is the median, and its share
	// shows. (Every 8th request is sampled: cycles of keys whose length is
	// prime to 8 are sampled evenly.)
	countKeys(r, 8*loadSampleSize, "m", "m", "m", "m", "m", "m", "m", "m", "d")
	k, share, ok = r.LoadSplitKey()
	if !ok || string(k) != "m" || share < 0.8 {
		t.Fatalf("hot key: %q share %.2f ok=%v", k, share, ok)
	}
	if got := r.HotKeyShare(); got != share {
		t.Fatalf("HotKeyShare %.3f, LoadSplitKey's %.3f", got, share)
	}

	// A hot start key: no split there, but the share is reported.
	countKeys(r, 8*loadSampleSize, "b")
	if k, share, ok := r.LoadSplitKey(); ok || share != 1 {
		t.Fatalf("hot start key: %q share %.2f ok=%v", k, share, ok)
	}

	// Samples outside the span (from before a split) are ignored.
	countKeys(r, 8*loadSampleSize, "c", "e", "f", "g", "t", "u", "w")
	r.desc.Store(&tidekvpb.RangeDescriptor{RangeId: testRangeID, StartKey: []byte("b"), EndKey: []byte("h")})
	if k, share, ok := r.LoadSplitKey(); !ok || (string(k) != "e" && string(k) != "f") || share > 0.3 {
		t.Fatalf("after a split: %q share %.2f ok=%v", k, share, ok)
	}
	r.desc.Store(&tidekvpb.RangeDescriptor{RangeId: testRangeID, StartKey: []byte("x"), EndKey: []byte("y")})
	if _, _, ok := r.LoadSplitKey(); ok {
		t.Fatal("decided on samples outside the span")
	}
}

// The sampler copies keys: callers may reuse their buffers.
func TestCountRequestCopiesKey(t *testing.T) {
	r := detachedReplica(storage.NewMem(), "", "", false)
	buf := []byte("k1")
	for range 8 * loadSampleSize {
		r.CountRequest(buf)
	}
	copy(buf, "zz")
	if k, _, ok := r.LoadSplitKey(); !ok || string(k) != "k1" {
		t.Fatalf("split %q ok=%v after the caller reused its buffer", k, ok)
	}
}

// Concurrent counting and reading (run with -race).
func TestLoadSamplerConcurrent(t *testing.T) {
	r := detachedReplica(storage.NewMem(), "", "", false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			key := []byte(fmt.Sprintf("g%d-", g))
			for i := range 20000 {
				r.CountRequest(append(key[:3], byte(i)))
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			r.LoadSplitKey()
		}
	})
	wg.Wait()
	if r.Requests() != 8*20000 {
		t.Fatalf("requests = %d", r.Requests())
	}
	k, _, ok := r.LoadSplitKey()
	if !ok {
		t.Fatal("no split key")
	}
	ks := r.load.inSpan(nil, nil)
	if len(ks) != loadSampleSize {
		t.Fatalf("%d samples held", len(ks))
	}
	sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i], ks[j]) < 0 })
	if !bytes.Equal(k, ks[len(ks)/2]) {
		t.Fatalf("split %q is not the median", k)
	}
}

func BenchmarkCountRequest(b *testing.B) {
	key := []byte("user00000000000012345")
	b.Run("serial", func(b *testing.B) {
		r := detachedReplica(storage.NewMem(), "", "", true)
		for b.Loop() {
			r.CountRequest(key)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		r := detachedReplica(storage.NewMem(), "", "", true)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.CountRequest(key)
			}
		})
	})
}
