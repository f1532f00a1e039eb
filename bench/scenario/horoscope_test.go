package scenario

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// The scenario's claim, on its quick run: with two CPU-starved nodes, the
// client's load-aware replica choice serves more reads than
// leaseholder-only reads and uniformly random replicas, for point reads
// and scans. Each comparison is within one run, between modes that took
// turns in the same seconds, so background load hits them alike. Six runs
// on 2026-12-05 (2 cores shared with other test runs, load 5-12) had
// load-aware at 1.32-3.41× the leaseholder's and 1.46-2.98× random's
// throughput for gets, 1.13-1.87× and 1.08-1.59× for scans. Its p99 is
// logged, not asserted: the same runs had it at 0.31-1.01 of the
// leaseholder's for gets and 0.41-0.87 for scans (0.35-0.98 of random's),
// so the report's target (30% lower) held in two runs of six for both
// workloads on that machine. It takes about 50 s, pins processes to CPUs
// and runs CPU hogs: it is in the long tier.
func TestHoroscopeQuick(t *testing.T) {
	tier.RequireLong(t, "about 50 s over real processes, with CPU hogs")
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs Linux with 2 CPUs")
	}
	bin := lrTestBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rows, err := horoscope(ctx, Options{Quick: true, Seed: 1, Binary: bin, Progress: lrTestWriter{t}}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, w := range []string{"get", "scan"} {
		la := hsFindRow(rows, true, w, hsLoadAware)
		for _, mode := range []string{hsLeaseholder, hsRandom} {
			base := hsFindRow(rows, true, w, mode)
			if la == nil || base == nil {
				t.Fatalf("no %s row for %s or %s with the hogs", w, hsLoadAware, mode)
			}
			t.Logf("hogs, %s: load-aware %.0f ops/s against %s's %.0f (%.2f×); p99 %v against %v (%.2f)", w, la.res.Rate(), mode, base.res.Rate(),
				la.res.Rate()/base.res.Rate(), la.res.Q(0.99), base.res.Q(0.99), float64(la.res.Q(0.99))/float64(base.res.Q(0.99)))
			if la.res.Rate() <= base.res.Rate() {
				t.Errorf("hogs, %s: load-aware %.0f ops/s, not above %s's %.0f", w, la.res.Rate(), mode, base.res.Rate())
			}
		}
	}
}
