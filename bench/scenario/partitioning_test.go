package scenario

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// plTestWriter sends progress lines to the test log.
type plTestWriter struct{ t *testing.T }

func (w plTestWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The quick partitioning scenario (the cheapest of the placement
// scenarios) runs end to end against real processes and is judged on what
// its report claims for every Θmax: no range measured above Θmax at any
// look or at the end, the ranges splitting in step (as many as halving at
// the split line gives, all about as full), and no range, at any look,
// emptier than a half of a range at its split line.
func TestPartitioningQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidekv processes and loads ~40 MiB twice (about 45 s, plus a build without $TIDEKV_BINARY)")
	}
	// A prebuilt binary ($TIDEKV_BINARY, as in CI), or the scenario builds
	// one into its directory, which the test removes.
	bin := os.Getenv(testcluster.BinaryEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := Options{Binary: bin, Quick: true, Dir: t.TempDir(), Progress: plTestWriter{t}}
	m, err := measurePartitioning(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := m.report(opts, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	if len(m.results) != 2 {
		t.Fatalf("want 2 Θmax results, got %d", len(m.results))
	}
	for _, r := range m.results {
		c := m.claims(r)
		name := plMiB(float64(r.maxBytes)) + " MiB"
		if len(r.samples) == 0 {
			t.Errorf("Θmax %s: no look while loading", name)
		}
		// Writes wait for a range's split before it passes Θmax, however
		// fast they come.
		if c.fullest > 1 || c.over > 0 || c.endOver > 0 {
			t.Errorf("Θmax %s: fullest range %.1f%% of Θmax, %d looks and %d ranges at the end above it", name, 100*c.fullest, c.over, c.endOver)
		}
		// Hashed inserts split every range in the same wave: the count is
		// what halving gives and the ranges end about equally full.
		if r.ranges != c.inStep.ranges || c.endSigma > 0.05 {
			t.Errorf("Θmax %s: %d ranges at %.0f%% ± %.0f%%, splits in step would leave %d at %.0f%%",
				name, r.ranges, 100*c.end, 100*c.endSigma, c.inStep.ranges, 100*c.inStep.fullness)
		}
		// No sparse range: a split in halves (by size, of a range past its
		// split line) leaves each at least half the line; 0.9 of that for
		// a split point that falls between keys. (ElasCass's 60–80% band
		// over the load is not judged here: weighted by time it measures
		// how fast splits come on this machine, weighted by data it is set
		// by where the load stops; the report gives both.)
		if floor := 0.9 * m.fill / 2; c.sparsest < floor {
			t.Errorf("Θmax %s: a range at %.1f%% of Θmax at a look, want ≥ %.1f%% (halves of a range at its split line)", name, 100*c.sparsest, 100*floor)
		}
	}
}

// Splits in step halve every range at once: from one range, a range's
// share is data / 2^k for the fewest k that bring it to the split line.
func TestSplitInStep(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		data, max uint64
		fill      float64
		want      inStep
	}{
		{"under the line, one range", 10 * mib, 16 * mib, 0.875, inStep{1, 0.625}},
		{"on the line, not split", 14 * mib, 16 * mib, 0.875, inStep{1, 0.875}},
		{"just over the line, halves", 14*mib + 1, 16 * mib, 0.875, inStep{2, (14*mib + 1) / 2.0 / (16 * mib)}},
		// The full run: 1,100,000 records of 1,033 bytes.
		{"1.1M records at 16 MiB", 1_100_000 * 1033, 16 * mib, 0.875, inStep{128, 1_100_000 * 1033 / 128.0 / (16 * mib)}},
		{"1.1M records at 64 MiB", 1_100_000 * 1033, 64 * mib, 0.875, inStep{32, 1_100_000 * 1033 / 32.0 / (64 * mib)}},
		// ElasCass's 100 GB at Θmax 1 GB, split at Θmax: 78% in step.
		{"ElasCass 100 GB at 1 GB", 100 << 30, 1 << 30, 1, inStep{128, 100.0 / 128}},
	} {
		if got := splitInStep(tc.data, tc.max, tc.fill); got.ranges != tc.want.ranges || math.Abs(got.fullness-tc.want.fullness) > 1e-9 {
			t.Errorf("%s: got %d ranges at %.4f, want %d at %.4f", tc.name, got.ranges, got.fullness, tc.want.ranges, tc.want.fullness)
		}
	}
}

// Each look counts for the time until the next one, the last until the
// load ends; a look that ended after the load counts for nothing.
func TestTimeWeighted(t *testing.T) {
	looks := []fullnessSample{
		{at: 1, exact: []float64{0.5, 0.5}},
		{at: 2, exact: []float64{0.6, 0.8}}, // mean 0.7, σ 0.1
		{at: 5, exact: []float64{0.9}},
		{at: 7, exact: []float64{0.3}},
	}
	mean, sigma := timeWeighted(looks, 6)
	// Weights 1, 3, 1, 0.
	if want := (0.5 + 3*0.7 + 0.9) / 5; math.Abs(mean-want) > 1e-9 {
		t.Errorf("mean %.4f, want %.4f", mean, want)
	}
	if want := 3 * 0.1 / 5; math.Abs(sigma-want) > 1e-9 {
		t.Errorf("σ %.4f, want %.4f", sigma, want)
	}
	if mean, sigma := timeWeighted(nil, 6); mean != 0 || sigma != 0 {
		t.Errorf("no looks: %v, %v", mean, sigma)
	}
}

// Each look counts for the bytes loaded until the next one, the last until
// the load's end; a look while writes waited (no bytes until the next)
// counts for nothing.
func TestDataWeighted(t *testing.T) {
	looks := []fullnessSample{
		{data: 100, exact: []float64{0.5, 0.5}},
		{data: 200, exact: []float64{0.6, 0.8}}, // mean 0.7, σ 0.1
		{data: 500, exact: []float64{0.95}},     // waiting for a split
		{data: 500, exact: []float64{0.5, 0.5}},
	}
	mean, sigma := dataWeighted(looks, 600)
	// Weights 100, 300, 0, 100.
	if want := (100*0.5 + 300*0.7 + 100*0.5) / 500; math.Abs(mean-want) > 1e-9 {
		t.Errorf("mean %.4f, want %.4f", mean, want)
	}
	if want := 300 * 0.1 / 500; math.Abs(sigma-want) > 1e-9 {
		t.Errorf("σ %.4f, want %.4f", sigma, want)
	}
	if mean, sigma := dataWeighted(nil, 600); mean != 0 || sigma != 0 {
		t.Errorf("no looks: %v, %v", mean, sigma)
	}
}

func TestZipfShape(t *testing.T) {
	z := plNewZipf(1000, 1.0)
	counts := make([]int, 1000)
	rng := plTestRand()
	for range 200_000 {
		counts[z.next(rng)]++
	}
	// P(rank 0) = 1/H(1000) ≈ 0.1336; P(rank 1) half of it.
	if p0 := float64(counts[0]) / 200_000; p0 < 0.125 || p0 > 0.142 {
		t.Errorf("P(0) = %.3f, want ≈ 0.134", p0)
	}
	if r := float64(counts[0]) / float64(counts[1]); r < 1.8 || r > 2.2 {
		t.Errorf("P(0)/P(1) = %.2f, want ≈ 2", r)
	}
}

func plTestRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// The emptiest range counts only looks with more than one range: before
// the first split the one range starts empty.
func TestClaimsSparsest(t *testing.T) {
	m := partitioningMeasured{fill: 0.875}
	r := partitioningResult{maxBytes: 1 << 20, samples: []fullnessSample{
		{data: 1, exact: []float64{0.05}},
		{data: 2, exact: []float64{0.2, 0.7}},
		{data: 3, exact: []float64{0.5, 0.5}},
	}}
	if got := m.claims(r).sparsest; got != 0.2 {
		t.Errorf("sparsest %v, want 0.2", got)
	}
}

// A look counts keys only against a directory that covers the key space
// once: while a split is reported it can miss the right half or list the
// parent beside it.
func TestTiles(t *testing.T) {
	r := func(start, end string) *tidekvpb.RangeInfo {
		return &tidekvpb.RangeInfo{Desc: &tidekvpb.RangeDescriptor{StartKey: []byte(start), EndKey: []byte(end)}}
	}
	for _, tc := range []struct {
		name   string
		ranges []*tidekvpb.RangeInfo
		want   bool
	}{
		{"one", []*tidekvpb.RangeInfo{r("", "")}, true},
		{"three", []*tidekvpb.RangeInfo{r("", "b"), r("b", "d"), r("d", "")}, true},
		{"right half missing", []*tidekvpb.RangeInfo{r("", "b"), r("b", "c"), r("d", "")}, false},
		{"parent beside its half", []*tidekvpb.RangeInfo{r("", "b"), r("b", "d"), r("c", "d"), r("d", "")}, false},
		{"ends early", []*tidekvpb.RangeInfo{r("", "b"), r("b", "d")}, false},
		{"open end before the last", []*tidekvpb.RangeInfo{r("", ""), r("b", "")}, false},
		{"none", nil, false},
	} {
		if got := tiles(tc.ranges); got != tc.want {
			t.Errorf("%s: tiles %v, want %v", tc.name, got, tc.want)
		}
	}
}
