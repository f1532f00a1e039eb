// Package tier says which tier of the test suite a run is in.
//
// The README's test command (`go test -timeout 20m ./...`) runs the default
// tier: unit, data-driven, in-process multi-node and a chosen subset of the
// end-to-end tests, within ten minutes on two cores. TIDEKV_E2E_LONG=1 adds
// the long tier: the tests whose claim needs minutes of load, several
// scale events or many fault schedules, and the longer variants of tests
// that also run by default. docs/testing.md lists both tiers and how long
// each takes. It imports only the standard library.
package tier

import (
	"os"
	"testing"
)

// LongEnv is the variable that turns the long tier on when it is "1".
const LongEnv = "TIDEKV_E2E_LONG"

// Long reports whether this run includes the long tier.
func Long() bool { return os.Getenv(LongEnv) == "1" }

// RequireLong skips t unless the long tier is on. why says what makes the
// test long, so that a skipped run says what it left out.
func RequireLong(t testing.TB, why string) {
	t.Helper()
	if !Long() {
		t.Skipf("long tier (%s=1): %s", LongEnv, why)
	}
}
