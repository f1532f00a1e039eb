package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// TestLeasesHoldStillUnderSteadyLoad runs YCSB-A (zipfian, 16 threads) with
// `tidekv bench` against a fresh default 3-node cluster and counts the
// lease-transfer events of the run's second half: placement may move leases
// and split hot ranges while the load ramps up, but under steady load it
// must hold still (it used to pass leases around every ~2 s, acting on the
// new holder's partial first sample). It asserts a count of events, not a
// timing: a 90 s run, at most 6 transfers in its last 60 s (the stability
// target). It is in the long tier; the 24 s default variant it had allowed
// 3 transfers in 12 s, 2.5 times the target, and is gone.
func TestLeasesHoldStillUnderSteadyLoad(t *testing.T) {
	tier.RequireLong(t, "90 s of steady YCSB-A load through tidekv bench")
	const run, window, maxTransfers, records = 90 * time.Second, 60 * time.Second, 6, "50000"
	bin := testcluster.Binary(t)
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, LogLines: 100})
	ctx := testCtx(t, run+2*time.Minute)
	waitReplicated(ctx, t, newClient(t, tc.Addrs()), 3)

	args := append([]string{"bench", "--addr", strings.Join(tc.Addrs(), ","), "--workload", "a",
		"--records", records, "--threads", "16", "--ops", "0", "--duration", run.String(), "--seed", "1", "--out", t.TempDir()},
		testcluster.CLIArgs()...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	end := time.Now()
	evs, err := plCtlEvents(ctx, bin, tc.Addrs()...)
	if err != nil {
		t.Fatal(err)
	}
	var all, last []plEvent
	for _, e := range evs {
		if e.Kind != "lease-transfer" {
			continue
		}
		all = append(all, e)
		if end.Sub(e.Time) <= window {
			last = append(last, e)
		}
	}
	var b strings.Builder
	for _, e := range evs {
		if e.Kind == "lease-transfer" || e.Kind == "split" {
			fmt.Fprintln(&b, e)
		}
	}
	t.Logf("%d lease transfers, %d in the last %v\n%s", len(all), len(last), window, b.String())
	if len(last) > maxTransfers {
		t.Errorf("%d lease transfers in the last %v of steady load, want at most %d", len(last), window, maxTransfers)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "run: ") && !strings.Contains(line, " 0 errors") {
			t.Errorf("bench reported errors: %s", line)
		}
	}
}
