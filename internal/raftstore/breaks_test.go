package raftstore

import (
	"strings"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
)

// Breaks read back as they were written; unknown modes are refused.
func TestParseBreaks(t *testing.T) {
	b, err := ParseBreaks("client-clock,skip-tscache,skip-refresh")
	if err != nil || b != (Breaks{SkipRefresh: true, SkipTSCache: true, ClientClock: true}) || b.String() != "skip-refresh,skip-tscache,client-clock" {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := ParseBreaks("skip-it"); err == nil || !strings.Contains(err.Error(), "unknown break") {
		t.Errorf("skip-it: %v, want an unknown break", err)
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
