package enginetest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

func testSnapshotIsolation(t *testing.T, k, foreign Kind) {
	e := k.Open(t)
	src := k.Open(t)
	SetAll(t, e, KV{"a", "1"}, KV{"b", "1"}, KV{"m", "1"}, KV{"n", "1"})
	snap1 := e.NewSnapshot()
	defer snap1.Close()

	Apply(t, e, Set("a", "2"), Del("b"), Set("c", "2"))
	snap2 := e.NewSnapshot()
	defer snap2.Close()

	Apply(t, e, DelRange("a", "c"))
	// An ingest after the snapshots must not show through either.
	SetAll(t, src, KV{"m", "ingested"}, KV{"mm", "ingested"})
	path := filepath.Join(t.TempDir(), "x.sst")
	if _, err := e.WriteSST(src, b("m"), b("o"), path); err != nil {
		t.Fatal(err)
	}
	if err := e.IngestSST(path, b("m"), b("o")); err != nil {
		t.Fatal(err)
	}

	if got, want := Scan(t, snap1, nil, nil), []KV{{"a", "1"}, {"b", "1"}, {"m", "1"}, {"n", "1"}}; !slices.Equal(got, want) {
		t.Errorf("snap1 = %v, want %v", got, want)
	}
	if got, want := Scan(t, snap2, nil, nil), []KV{{"a", "2"}, {"c", "2"}, {"m", "1"}, {"n", "1"}}; !slices.Equal(got, want) {
		t.Errorf("snap2 = %v, want %v", got, want)
	}
	if got, want := Scan(t, e, nil, nil), []KV{{"c", "2"}, {"m", "ingested"}, {"mm", "ingested"}}; !slices.Equal(got, want) {
		t.Errorf("engine = %v, want %v", got, want)
	}
	WantGet(t, snap1, "b", "1", true)
	WantGet(t, snap2, "b", "", false)
	WantGet(t, snap2, "m", "1", true)

	// Snapshot iterators honour bounds and SeekGE like engine iterators.
	it, err := snap1.NewIter(b("b"), b("n"))
	if err != nil {
		t.Fatal(err)
	}
	if !it.SeekGE(b("a")) || string(it.Key()) != "b" || !it.Next() || string(it.Key()) != "m" || it.Next() {
		t.Error("snapshot iterator bounds")
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}

	if err := snap1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := snap1.Get(b("a")); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Get on closed snapshot: %v", err)
	}
	if _, err := snap1.NewIter(nil, nil); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("NewIter on closed snapshot: %v", err)
	}
}

func testSSTRoundTrip(t *testing.T, k, foreign Kind) {
	src := k.Open(t)
	var srcKVs []KV
	for c := 'a'; c <= 'z'; c++ {
		srcKVs = append(srcKVs, KV{string(c), "src-" + string(c)}, KV{string(c) + "1", ""})
	}
	SetAll(t, src, srcKVs...)
	Apply(t, src, Del("g"))

	dir := t.TempDir()
	for _, reader := range []string{"engine", "snapshot", "other-kind"} {
		t.Run(reader, func(t *testing.T) {
			want := Scan(t, src, b("f"), b("p"))
			var r storage.Reader = src
			switch reader {
			case "snapshot":
				snap := src.NewSnapshot()
				defer snap.Close()
				r = snap
				Apply(t, src, Set("h", "after-snapshot")) // must not be shipped
				defer Apply(t, src, Set("h", "src-h"))
			case "other-kind":
				// WriteSST takes any Reader, including the other engine kind.
				o := foreign.Open(t)
				SetAll(t, o, srcKVs...)
				Apply(t, o, Del("g"))
				r = o
			}
			path := filepath.Join(dir, reader+".sst")
			stats, err := src.WriteSST(r, b("f"), b("p"), path)
			if err != nil {
				t.Fatal(err)
			}
			if stats.Keys != len(want) || stats.Bytes <= 0 {
				t.Fatalf("stats = %+v, want %d keys", stats, len(want))
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() != stats.Bytes {
				t.Fatalf("file size %v (%v), stats say %d", fi, err, stats.Bytes)
			}

			dst := k.Open(t)
			SetAll(t, dst,
				KV{"a", "dst"}, KV{"f", "dst-doomed"}, KV{"g", "dst-doomed"}, KV{"o9", "dst-doomed"},
				KV{"p", "dst"}, KV{"zz", "dst"})
			if err := dst.IngestSST(path, b("f"), b("p")); err != nil {
				t.Fatal(err)
			}
			wantAll := append([]KV{{"a", "dst"}}, want...)
			wantAll = append(wantAll, KV{"p", "dst"}, KV{"zz", "dst"})
			if got := Scan(t, dst, nil, nil); !slices.Equal(got, wantAll) {
				t.Fatalf("after ingest:\n got %v\nwant %v", got, wantAll)
			}
			WantGet(t, dst, "g", "", false)
			WantGet(t, dst, "f1", "", true)
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("ingested file still present (stat err %v)", err)
			}
		})
	}

	t.Run("empty-span", func(t *testing.T) {
		path := filepath.Join(dir, "empty.sst")
		stats, err := src.WriteSST(src, b("0"), b("1"), path)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Keys != 0 || stats.Bytes <= 0 {
			t.Fatalf("stats = %+v", stats)
		}
		dst := k.Open(t)
		SetAll(t, dst, KV{"0", "x"}, KV{"05", "x"}, KV{"1", "keep"})
		if err := dst.IngestSST(path, b("0"), b("1")); err != nil {
			t.Fatal(err)
		}
		if got := Scan(t, dst, nil, nil); !slices.Equal(got, []KV{{"1", "keep"}}) {
			t.Fatalf("after empty ingest: %v", got)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("ingested empty file still present (stat err %v)", err)
		}
	})

	t.Run("unbounded-write", func(t *testing.T) {
		path := filepath.Join(dir, "tail.sst")
		stats, err := src.WriteSST(src, b("y"), nil, path)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(Scan(t, src, b("y"), nil)); stats.Keys != want {
			t.Fatalf("Keys = %d, want %d", stats.Keys, want)
		}
		dst := k.Open(t)
		if err := dst.IngestSST(path, b("y"), nil); !errors.Is(err, storage.ErrInvalidSpan) {
			t.Fatalf("ingest with nil upper: %v", err)
		}
		if err := dst.IngestSST(path, b("y"), b("\xff")); err != nil {
			t.Fatal(err)
		}
		if got := ScanKeys(t, dst, nil, nil); !slices.Equal(got, []string{"y", "y1", "z", "z1"}) {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("rejects", func(t *testing.T) {
		path := filepath.Join(dir, "reject.sst")
		if _, err := src.WriteSST(src, b("f"), b("p"), path); err != nil {
			t.Fatal(err)
		}
		dst := k.Open(t)
		SetAll(t, dst, KV{"f", "keep"}, KV{"h", "keep"})
		// File holds keys outside the span being replaced.
		for _, span := range [][2]string{{"g", "p"}, {"f", "o"}, {"a", "b"}} {
			err := dst.IngestSST(path, b(span[0]), b(span[1]))
			if !errors.Is(err, storage.ErrInvalidSST) {
				t.Errorf("span %q: err = %v, want ErrInvalidSST", span, err)
			}
		}
		if got := Scan(t, dst, nil, nil); !slices.Equal(got, []KV{{"f", "keep"}, {"h", "keep"}}) {
			t.Fatalf("rejected ingest changed data: %v", got)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("rejected file consumed: %v", err)
		}

		// The other engine kind's file format.
		otherPath := filepath.Join(dir, "other.sst")
		if _, err := foreign.Open(t).WriteSST(src, b("f"), b("p"), otherPath); err != nil {
			t.Fatal(err)
		}
		if err := dst.IngestSST(otherPath, b("f"), b("p")); !errors.Is(err, storage.ErrInvalidSST) {
			t.Errorf("other kind's sst: %v", err)
		}

		// Garbage and truncation.
		garbage := filepath.Join(dir, "garbage.sst")
		_ = os.WriteFile(garbage, []byte("definitely not an sst"), 0o644)
		if err := dst.IngestSST(garbage, b("a"), b("z")); !errors.Is(err, storage.ErrInvalidSST) {
			t.Errorf("garbage: %v", err)
		}
		data, _ := os.ReadFile(path)
		_ = os.WriteFile(garbage, data[:len(data)-10], 0o644)
		if err := dst.IngestSST(garbage, b("a"), b("z")); !errors.Is(err, storage.ErrInvalidSST) {
			t.Errorf("truncated: %v", err)
		}
		if err := dst.IngestSST(filepath.Join(dir, "missing.sst"), b("a"), b("z")); err == nil {
			t.Error("missing file: no error")
		}
		if got := Scan(t, dst, nil, nil); !slices.Equal(got, []KV{{"f", "keep"}, {"h", "keep"}}) {
			t.Fatalf("rejected ingest changed data: %v", got)
		}
	})
}

func testUseAfterClose(t *testing.T, k, foreign Kind) {
	e := k.Open(t)
	SetAll(t, e, KV{"a", "1"})
	path := filepath.Join(t.TempDir(), "x.sst")
	if _, err := e.WriteSST(e, nil, nil, path); err != nil {
		t.Fatal(err)
	}
	batch := e.NewBatch()
	_ = batch.Set(b("b"), b("2"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{
		"Close":  e.Close(),
		"Commit": batch.Commit(true),
		"Sync":   e.Sync(),
		"Ingest": e.IngestSST(path, b("a"), b("z")),
	}
	checks["NewBatch.Set"] = e.NewBatch().Set(b("a"), b("1"))
	checks["NewBatch.Commit"] = e.NewBatch().Commit(false)
	_, _, checks["Get"] = e.Get(b("a"))
	_, checks["NewIter"] = e.NewIter(nil, nil)
	_, _, checks["Snapshot.Get"] = e.NewSnapshot().Get(b("a"))
	_, checks["WriteSST"] = e.WriteSST(e, nil, nil, path+"2")
	_, checks["ApproximateSize"] = e.ApproximateSize(nil, nil)
	for op, err := range checks {
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
	_ = batch.Close()
}

func testCloseReportsLeaks(t *testing.T, k, foreign Kind) {
	for _, leak := range []string{"iterator", "snapshot"} {
		t.Run(leak, func(t *testing.T) {
			e := k.Open(t)
			SetAll(t, e, KV{"a", "1"})
			if leak == "iterator" {
				it, err := e.NewIter(nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				it.First()
			} else {
				e.NewSnapshot()
			}
			if err := e.Close(); err == nil {
				t.Errorf("Close with leaked %s: no error", leak)
			}
		})
	}
}

func testApproximateSizeBasics(t *testing.T, k, foreign Kind) {
	e := k.Open(t)
	if n, err := e.ApproximateSize(nil, nil); err != nil || n != 0 {
		t.Fatalf("empty engine: %d, %v", n, err)
	}
	if _, err := e.ApproximateSize(b("b"), b("a")); !errors.Is(err, storage.ErrInvalidSpan) {
		t.Fatalf("lower > upper: %v", err)
	}
	if n, err := e.ApproximateSize(b("a"), b("a")); err != nil || n != 0 {
		t.Fatalf("empty span: %d, %v", n, err)
	}
}
