package scenario

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"testing"
	"time"
)

// The quick horoscope takes about 50 s, pins processes to CPUs and runs CPU
// hogs, so it only runs when asked: TIDEKV_SCENARIO_HOROSCOPE=1.
func TestHoroscopeQuick(t *testing.T) {
	if testing.Short() || os.Getenv("TIDEKV_SCENARIO_HOROSCOPE") != "1" {
		t.Skip("set TIDEKV_SCENARIO_HOROSCOPE=1 to run (about 50 s, CPU hogs)")
	}
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs Linux with 2 CPUs")
	}
	bin := lrTestBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := Run(ctx, "horoscope", Options{Quick: true, Seed: 1, Binary: bin, Progress: lrTestWriter{t}}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	if n := len(lrTableRows(&out, "none", 0)) + len(lrTableRows(&out, "6 on CPU 1", 0)); n != 16 {
		t.Errorf("%d rows reported, want 12 runs + 4 comparisons", n)
	}
}
