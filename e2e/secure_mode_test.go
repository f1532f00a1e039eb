package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// secureSubset are the tests `go test ./...` also runs in secure mode: the
// whole suite in secure mode takes about seven minutes more than the
// README's command should, so these cover each client the tests use and
// each path a secure cluster has broken before (docs/security.md, "The
// end-to-end suite in secure mode").
var secureSubset = []string{
	"TestKeySpaceCLI",                              // ctl admin calls (CreateKeySpace had no role)
	"TestCtlMoveReplica",                           // admin calls forwarded between nodes
	"TestInjectedDiskFailure",                      // fault endpoint over HTTPS
	"TestOperatorView",                             // ctl status and events; the dashboard over HTTPS
	"TestRedisTools",                               // redis-cli and redis-benchmark with --tls and AUTH
	"TestMemoryBoundedUnderAttack",                 // raw RESP over TLS; /metrics over HTTPS
	"TestLinearizabilityNegativeControlStaleReads", // a raw gRPC connection
	"TestTransfersBetweenRanges",                   // transactions: coordinators' range-level steps between nodes
}

// secureSubsetLong are added to secureSubset in the long tier: each takes
// half a minute or more.
var secureSubsetLong = []string{
	"TestBackupRestoreUnderLoad",              // ctl backup and restore as root
	"TestAutoscaleResumesAfterControllerKill", // nodes the local actuator starts inherit the certificates
	"TestBenchChaos",                          // bench chaos --certs-dir: faults, moves, churn
}

// TestSecureModeSubset runs secureSubset again, in a child test process
// with TIDEKV_E2E_SECURE=1, and fails unless each of them ran and none
// failed. In secure mode it skips: the run it is part of already is one.
func TestSecureModeSubset(t *testing.T) {
	if testcluster.Secure() {
		t.Skip("already in secure mode: every test runs secure")
	}
	subset := secureSubset
	if tier.Long() {
		subset = append(slices.Clone(subset), secureSubsetLong...)
	}
	pattern := "^(" + strings.Join(subset, "|") + ")$"
	cmd := exec.CommandContext(testCtx(t, 10*time.Minute), os.Args[0], "-test.run", pattern, "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), testcluster.SecureEnv+"=1", testcluster.BinaryEnv+"="+testcluster.Binary(t))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%d tests in secure mode in %v", len(subset), time.Since(start).Round(time.Second))
	results := regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (\w+) \(([^)]*)\)`).FindAllStringSubmatch(string(out), -1)
	ran := map[string]string{}
	for _, r := range results {
		ran[r[2]] = r[1]
		t.Logf("secure %s: %s (%s)", r[2], r[1], r[3])
	}
	for _, name := range subset {
		if ran[name] == "" {
			t.Errorf("%s did not run in secure mode", name)
		}
	}
	if err != nil || t.Failed() {
		t.Fatalf("secure mode: %v\n%s", err, out)
	}
}
