package raftstore

import (
	"strings"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
)

// Breaks read back as they were written; client-clock is refused until
// the cluster owns read timestamps, and unknown modes are refused.
func TestParseBreaks(t *testing.T) {
	b, err := ParseBreaks("skip-tscache,skip-refresh")
	if err != nil || b != (Breaks{SkipRefresh: true, SkipTSCache: true}) || b.String() != "skip-refresh,skip-tscache" {
		t.Fatalf("%+v %v", b, err)
	}
	for in, want := range map[string]string{"client-clock": "no cluster-owned timestamp", "skip-it": "unknown break"} {
		if _, err := ParseBreaks(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// With SkipTSCache a write is stamped where it was asked, below a read
// of its key already served; without, just above that read.
func TestSkipTSCache(t *testing.T) {
	k := []keySpan{pointSpan([]byte("k"))}
	read, asked := hlc.Timestamp{WallTime: 10}, hlc.Timestamp{WallTime: 5}
	for _, skip := range []bool{false, true} {
		o := newReadOrder()
		o.skipCache = skip
		o.read(k, read, "")
		want := read.Next()
		if skip {
			want = asked
		}
		if l := o.stamp(k, asked, "other"); l.ts != want {
			t.Errorf("skip %v: stamped at %s, want %s", skip, l.ts, want)
		}
	}
}
