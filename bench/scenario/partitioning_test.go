package scenario

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testcluster"
)

// plTestWriter sends progress lines to the test log.
type plTestWriter struct{ t *testing.T }

func (w plTestWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The quick partitioning scenario (the cheapest of the placement
// scenarios) runs end to end against real processes: the ranges split and
// the report has a row per Θmax.
func TestPartitioningQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidekv processes and loads ~40 MiB twice (about 45 s, plus a build without $TIDEKV_BINARY)")
	}
	// A prebuilt binary ($TIDEKV_BINARY, as in CI), or the scenario builds
	// one into its directory, which the test removes.
	bin := os.Getenv(testcluster.BinaryEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, "partitioning", Options{Binary: bin, Quick: true, Dir: t.TempDir(), Progress: plTestWriter{t}}, &out)
	t.Logf("report:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	settled, during, ok := strings.Cut(out.String(), "While loading")
	if !ok {
		t.Fatal("no samples taken while loading in the report")
	}
	row := regexp.MustCompile(`(?m)^\| ([0-9.]+) \| ([0-9]+) \|`)
	rows := row.FindAllStringSubmatch(settled, -1)
	if len(rows) != 2 {
		t.Fatalf("want 2 Θmax rows, got %d", len(rows))
	}
	for _, r := range rows {
		if n, _ := strconv.Atoi(r[2]); n < 2 {
			t.Errorf("Θmax %s MiB: %d ranges, want splits", r[1], n)
		}
	}
	// The second number of a row while loading is its sample count.
	rows = row.FindAllStringSubmatch(during, -1)
	if len(rows) != 2 {
		t.Fatalf("want 2 Θmax rows while loading, got %d", len(rows))
	}
	for _, r := range rows {
		if n, _ := strconv.Atoi(r[2]); n < 1 {
			t.Errorf("Θmax %s MiB: no sample taken while loading", r[1])
		}
	}
	// Writes wait for a range's split before it passes Θmax, however fast
	// they come: no look finds a range above it.
	over := regexp.MustCompile(`(?m)^\| ([0-9.]+) \|(?: [^|]* \|){6} ([0-9]+) \|`)
	for _, r := range over.FindAllStringSubmatch(during, -1) {
		if r[2] != "0" {
			t.Errorf("Θmax %s MiB: %s looks found a range above Θmax", r[1], r[2])
		}
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
