package scenario

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// The quick ecstore runs end to end against real processes and reports
// every step.
func TestECStoreQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("scenario benchmark (about 25 s, starts processes)")
	}
	bin := lrTestBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	if err := Run(ctx, "ecstore", Options{Quick: true, Seed: 1, Binary: bin, Progress: lrTestWriter{t}}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("took %v\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if n := len(lrTableRows(&out, "reads", 0)); n != 3 {
		t.Errorf("%d read steps reported, want 3", n)
	}
	if n := len(lrTableRows(&out, "writes", 0)); n != 3 {
		t.Errorf("%d write steps reported, want 3", n)
	}
	if n := len(lrTableRows(&out, "3", 8)); n != 1 {
		t.Errorf("no memory row for node 3")
	}
}
