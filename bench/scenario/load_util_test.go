package scenario

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLrZipfFollowsItsLaw(t *testing.T) {
	const n, draws = 1000, 200000
	z := newLrZipf(n, 1.0, 7)
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	seen := map[int]bool{}
	for range draws {
		counts[z.Rank(r)]++
		item := z.Next(r)
		if item < 0 || item >= n {
			t.Fatalf("item %d out of range", item)
		}
		seen[item] = true
	}
	h := 0.0
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
	}
	for _, k := range []int{0, 1, 9} {
		want := draws / (float64(k+1) * h)
		if got := float64(counts[k]); math.Abs(got-want) > 0.1*want {
			t.Errorf("rank %d drawn %v times, want about %.0f", k, got, want)
		}
	}
	// The permutation spreads ranks over items: the hottest item is not 0.
	if z.perm[0] == 0 && z.perm[1] == 1 {
		t.Errorf("ranks not scrambled")
	}
	if len(seen) < n/2 {
		t.Errorf("only %d distinct items drawn", len(seen))
	}
}

func TestLrQuantile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := lrQuantile(lat, q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	if lrQuantile(nil, 0.5) != 0 {
		t.Errorf("empty quantile not 0")
	}
	if got := lrThousands(1234567.4); got != "1,234,567" {
		t.Errorf("lrThousands = %q", got)
	}
}

func TestMeteorStaleness(t *testing.T) {
	t0 := time.Now()
	a := &meteorAcks{byKey: make([][]meteorAck, 1)}
	a.add(0, 0, t0)
	a.add(0, 5, t0.Add(100*time.Millisecond))
	a.add(0, 9, t0.Add(300*time.Millisecond))
	for _, c := range []struct {
		seq   int64
		began time.Time
		want  time.Duration
	}{
		{9, t0.Add(time.Second), 0},                                 // newest
		{5, t0.Add(200 * time.Millisecond), 0},                      // 9 not acknowledged yet
		{5, t0.Add(400 * time.Millisecond), 100 * time.Millisecond}, // missed 9, acked 100ms before
		{0, t0.Add(400 * time.Millisecond), 300 * time.Millisecond}, // missed 5 (and 9)
		{7, t0.Add(400 * time.Millisecond), 100 * time.Millisecond}, // an unacknowledged write in between
		{0, t0.Add(100 * time.Millisecond), 0},                      // 5 acked exactly when the read began
	} {
		if got := a.staleness(0, c.seq, c.began); got != c.want {
			t.Errorf("read of %d at +%v: staleness %v, want %v", c.seq, c.began.Sub(t0), got, c.want)
		}
	}
	if n, ok := meteorSeq(lrValue("v42;", 100)); !ok || n != 42 {
		t.Errorf("meteorSeq = %d, %v", n, ok)
	}
}

func TestLoadScenariosRegistered(t *testing.T) {
	names := map[string]bool{}
	for _, s := range All() {
		names[s.Name] = true
	}
	for _, n := range []string{"meteorshower", "horoscope", "ecstore"} {
		if !names[n] {
			t.Errorf("scenario %s not registered", n)
		}
	}
}

// lrTestWriter sends progress lines to the test log.
type lrTestWriter struct{ t *testing.T }

func (w lrTestWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// lrTestBinary returns a tidekv binary for scenarios that start processes:
// $TIDEKV_BINARY, or one built into the test's temporary directory.
func lrTestBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TIDEKV_BINARY"); p != "" {
		return p
	}
	start := time.Now()
	bin, err := lrBinary(Options{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// lrTableRows returns the cells of the markdown table rows of out whose
// first cell is first and that have n cells (any number if n is 0).
func lrTableRows(out *bytes.Buffer, first string, n int) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == first && (n == 0 || len(cells) == n) {
			rows = append(rows, cells)
		}
	}
	return rows
}
