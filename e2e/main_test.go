// Package e2e holds end-to-end tests: they build the tidekv binary, run real
// multi-process clusters through internal/testcluster (or `tidekv up`), and
// talk to them only through the public client package and the CLI.
//
// The README's command runs a chosen subset of these, each under about half
// a minute; TIDEKV_E2E_LONG=1 adds the long tier (the tests that call
// tier.RequireLong) and runs the longer variants (docs/testing.md). TIDEKV_E2E_SECURE=1 runs every test against secure
// clusters (TLS, users; docs/security.md, "The end-to-end suite in secure
// mode"). TIDEKV_BINARY runs an existing binary instead of
// building one; TIDEKV_E2E_KEEP=1 keeps the clusters' data directories.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// long reports whether to run the long variants.
func long() bool { return tier.Long() }

// testCtx returns a context that ends after d or when the test ends.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, addrs []string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Addrs = addrs
	cfg.TLS = testcluster.ClientTLS(t)
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// eventually calls f until it returns nil, giving up after d (or when ctx
// ends) with f's last error. Failover, lease moves and restarts make
// individual requests fail for a while; what the tests check is that they
// succeed eventually and that nothing acknowledged is lost.
func eventually(ctx context.Context, d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var err error
	for {
		if err = f(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rangeFor returns the range of resp that covers key.
func rangeFor(resp *tidekvpb.RangesResponse, key []byte) *tidekvpb.RangeInfo {
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		if bytes.Compare(key, d.GetStartKey()) >= 0 &&
			(len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0) {
			return r
		}
	}
	return nil
}

func voters(d *tidekvpb.RangeDescriptor) int {
	n := 0
	for _, r := range d.GetReplicas() {
		if r.GetType() == tidekvpb.ReplicaType_VOTER {
			n++
		}
	}
	return n
}

// waitReplicated waits until every range has at least n voters and a known
// leaseholder: only then does losing one node leave a quorum everywhere.
func waitReplicated(ctx context.Context, t *testing.T, cl *client.Client, n int) {
	t.Helper()
	start := time.Now()
	err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		resp, err := cl.Ranges(ctx)
		if err != nil {
			return err
		}
		if len(resp.GetRanges()) == 0 {
			return errors.New("no ranges reported")
		}
		for _, r := range resp.GetRanges() {
			if v := voters(r.GetDesc()); v < n {
				return fmt.Errorf("range %d has %d voters, want %d", r.GetDesc().GetRangeId(), v, n)
			}
			if r.GetLeaderNodeId() == 0 {
				return fmt.Errorf("range %d has no known leaseholder", r.GetDesc().GetRangeId())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ranges never reached %d voters: %v", n, err)
	}
	t.Logf("every range has %d voters after %v", n, time.Since(start).Round(time.Millisecond))
}

// ctl runs `tidekv ctl --addr addr args...` (as root in secure mode) and
// returns its trimmed stdout and exit code; stderr is folded into err for
// messages.
func ctl(ctx context.Context, bin, addr string, args ...string) (stdout string, code int, err error) {
	argv := append(append([]string{"ctl", "--addr", addr}, testcluster.CLIArgs()...), args...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
		err = fmt.Errorf("tidekv ctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	default:
		return "", -1, err
	}
	return strings.TrimSpace(out.String()), code, err
}
