package scenario

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// The quick ecstore runs end to end against real processes and reports
// every step.
func TestECStoreQuick(t *testing.T) {
	tier.RequireLong(t, "scenario benchmark over real processes, 2-4 min")
	bin := lrTestBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	if err := Run(ctx, "ecstore", Options{Quick: true, Seed: 1, Binary: bin, Progress: lrTestWriter{t}}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("took %v\n%s", time.Since(start).Round(time.Millisecond), out.String())
	steps := lrTableRows(&out, "admission", 23)
	if len(steps) != 24 {
		t.Fatalf("%d steps reported, want 4 protocols x 3 workloads x 2 rates", len(steps))
	}
	if n := len(lrTableRows(&out, "admission", 9)); n != 24 {
		t.Errorf("%d verdicts, want one per step", n)
	}
	// Three times what the nodes sustain is overload: over gRPC, raw or
	// through the Go client, and from the pipelining Redis client, some of
	// it must be refused, and no node's memory may run away. (The pool of
	// Redis clients holds one request per connection, so its own
	// connection count bounds what it sends.)
	for _, proto := range []string{"grpc", "client", "resp-pipe"} {
		refused := false
		for _, row := range steps {
			if row[1] == proto && row[3] == "3.0" && row[9] != "0.0%" {
				refused = true
			}
		}
		if !refused {
			t.Errorf("%s: nothing refused at 3x the peak", proto)
		}
	}
	for _, row := range steps {
		if rss, _ := strconv.ParseFloat(row[19], 64); rss > 1024 {
			t.Errorf("node RSS %s MiB in step %v", row[19], row[:4])
		}
	}
}
