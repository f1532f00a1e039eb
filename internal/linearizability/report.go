package linearizability

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Helpers for tests that check recorded histories: where their nemesis
// duration comes from, and what a failing check leaves behind.

// DurationEnv names the environment variable (a Go duration, e.g. 5m) that
// sets how long the linearizability tests' nemesis runs.
const DurationEnv = "TIDEKV_LINZ_DURATION"

// NemesisDuration returns $TIDEKV_LINZ_DURATION, or def if it is unset; it
// fails t if the variable is not a positive duration.
func NemesisDuration(t testing.TB, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(DurationEnv)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", DurationEnv, s)
	}
	return d
}

// CheckWithArtifacts checks h with the given timeout, logs the verdict, and
// fails t if the check timed out. On a violation it writes the porcupine
// visualization and the failing keys' operations (FormatHistory) to
// $TIDEKV_ARTIFACTS, or else to a directory kept only if the test fails,
// and logs where. Whether a violation fails the test is up to the caller.
func CheckWithArtifacts(t testing.TB, h History, timeout time.Duration) Result {
	t.Helper()
	viz := VisualizationPath(artifactDir(t), t.Name())
	start := time.Now()
	res := Check(h, timeout, WithVisualization(viz))
	t.Logf("%s (checked in %v)", res.Describe, time.Since(start).Round(time.Millisecond))
	if res.Unknown {
		t.Fatalf("linearizability check timed out")
	}
	if !res.Ok {
		path := strings.TrimSuffix(viz, ".html") + ".history.txt"
		if err := os.WriteFile(path, []byte(FormatHistory(h, res.FailedKeys)), 0o644); err == nil {
			t.Logf("operations on the failing keys: %s", path)
		}
	}
	return res
}

// WantViolation is the check of a negative control: h must not be
// linearizable, and key, the key the control made certain to fail, must be
// among the failing keys. It logs the verdict and fails t otherwise,
// showing the operations on key when the check passed.
func WantViolation(t testing.TB, h History, key string, timeout time.Duration) Result {
	t.Helper()
	res := Check(h, timeout)
	t.Logf("%s", res.Describe)
	switch {
	case res.Unknown:
		t.Fatal("check timed out")
	case res.Ok:
		t.Fatalf("negative control passed the check: the violation went unnoticed; operations on %s:\n%s", key, FormatHistory(h, []string{key}))
	case !slices.Contains(res.FailedKeys, key):
		t.Errorf("failing keys %q do not include %q", res.FailedKeys, key)
	}
	return res
}

// artifactDir returns $TIDEKV_ARTIFACTS, or a fresh directory that is
// removed unless the test fails.
func artifactDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(ArtifactsEnv); d != "" {
		return d
	}
	d, err := os.MkdirTemp("", "tidekv-linz-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(d)
		}
	})
	return d
}

// FormatHistory lists the operations on keys (on every key if keys is
// empty) in invocation order, one per line, for humans.
func FormatHistory(h History, keys []string) string {
	ops := slices.Clone(h)
	slices.SortStableFunc(ops, func(a, b Op) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	var b strings.Builder
	for _, op := range ops {
		if len(keys) > 0 && !slices.Contains(keys, op.Input.Key) {
			continue
		}
		b.WriteString(FormatOp(op))
		b.WriteByte('\n')
	}
	return b.String()
}

// FormatOp formats one operation: client, [call, return] in milliseconds
// on the recorder's clock, and what was invoked and observed.
func FormatOp(op Op) string {
	if op.Output.Unknown {
		return fmt.Sprintf("client %3d  [%12.6fms, ?]  %s", op.ClientID, float64(op.Call)/1e6, describeOperation(op.Input, op.Output))
	}
	return fmt.Sprintf("client %3d  [%12.6fms, %12.6fms]  %s", op.ClientID, float64(op.Call)/1e6, float64(op.Return)/1e6,
		describeOperation(op.Input, op.Output))
}
