package hlc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

var edgeTimestamps = []Timestamp{
	{}, ts(0, 1), ts(1, 0), ts(-1, 0), ts(-1, math.MaxUint32), ts(1_700_000_000_123_456_789, 42),
	ts(math.MaxInt64, 0), MaxTimestamp, ts(math.MinInt64, 0), ts(math.MinInt64, 5), ts(255, 256),
}

func randTimestamp(rng *rand.Rand) Timestamp {
	w := rng.Int64()
	if rng.IntN(2) == 0 {
		w = -w
	}
	if rng.IntN(3) == 0 {
		w %= 1000 // collisions in the wall time, so the logical part decides
	}
	l := rng.Uint32()
	if rng.IntN(3) == 0 {
		l %= 4
	}
	return ts(w, l)
}

func TestEncodingSortsLikeTimestamps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	all := append([]Timestamp(nil), edgeTimestamps...)
	for range 2000 {
		all = append(all, randTimestamp(rng))
	}
	for i, a := range all {
		ea := a.AppendEncoded(nil)
		if len(ea) != EncodedLen {
			t.Fatalf("%s encodes to %d bytes", a, len(ea))
		}
		if got, err := Decode(ea); err != nil || got != a {
			t.Fatalf("Decode(encode(%s)) = %s, %v", a, got, err)
		}
		b := all[(i*7+3)%len(all)]
		if got, want := bytes.Compare(ea, b.AppendEncoded(nil)), a.Compare(b); got != want {
			t.Fatalf("%s vs %s: encodings compare %d, timestamps %d", a, b, got, want)
		}
	}
	if _, err := Decode(make([]byte, 11)); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("Decode of 11 bytes: err = %v", err)
	}
}

func TestTextRoundTrips(t *testing.T) {
	if got, want := ts(1_700_000_000_000_000_123, 4).String(), "1700000000.000000123,4"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if got, want := ts(-1_500_000_000, 0).String(), "-1.500000000,0"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	all := append([]Timestamp(nil), edgeTimestamps...)
	for range 2000 {
		all = append(all, randTimestamp(rng))
	}
	for _, x := range all {
		got, err := Parse(x.String())
		if err != nil || got != x {
			t.Fatalf("Parse(%q) = %s, %v; want %s", x.String(), got, err, x)
		}
	}
	for _, bad := range []string{
		"", "1.000000000", "1,2", "1.0,2", "1.0000000000,2", "a.000000000,0", "1.000000000,x",
		"1.000000000,4294967296", "9223372036.854775808,0", "+1.000000000,0", "1.000000000,-1",
		"-9223372036.854775809,0",
	} {
		if _, err := Parse(bad); !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("Parse(%q): err = %v, want ErrInvalidTimestamp", bad, err)
		}
	}
}

func TestCompareAndNext(t *testing.T) {
	if !ts(1, 5).Less(ts(2, 0)) || !ts(2, 0).Less(ts(2, 1)) || ts(2, 1).Less(ts(2, 1)) {
		t.Fatal("Less does not order by wall time, then logical")
	}
	for _, x := range edgeTimestamps {
		if x == MaxTimestamp {
			continue
		}
		if n := x.Next(); !x.Less(n) {
			t.Fatalf("Next(%s) = %s, not after it", x, n)
		}
	}
	if !(Timestamp{}).IsZero() || ts(0, 1).IsZero() {
		t.Fatal("IsZero")
	}
}
