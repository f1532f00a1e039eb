package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BinaryEnv names a prebuilt tidekv binary to use instead of building one
// (e.g. in CI, where the binary under test is built once for every package).
const BinaryEnv = "TIDEKV_BINARY"

// KeepEnv, when set to 1, keeps clusters' data directories after the test
// (their paths are logged) for post-mortems.
const KeepEnv = "TIDEKV_E2E_KEEP"

const pkgPath = "github.com/tidekv/tidekv/cmd/tidekv"

var build struct {
	once sync.Once
	dir  string // temporary directory holding the built binary
	path string
	err  error
}

// Binary returns the path of the tidekv binary under test: $TIDEKV_BINARY if
// set, otherwise one built from the current module the first time any test
// in this test binary asks (later calls reuse it). A build failure fails
// every test that needs the binary.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := binary(t.Logf)
	if err != nil {
		t.Fatalf("testcluster: no tidekv binary: %v", err)
	}
	return path
}

// binary builds the binary once; logf reports how long that took.
func binary(logf func(format string, args ...any)) (string, error) {
	build.once.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			build.path, build.err = filepath.Abs(p)
			return
		}
		build.dir, build.err = os.MkdirTemp("", "tidekv-e2e-bin-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "tidekv")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", build.path, pkgPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build %s: %v\n%s", pkgPath, err, out)
			return
		}
		logf("testcluster: built %s in %v", build.path, time.Since(start).Round(time.Millisecond))
	})
	return build.path, build.err
}

// Main makes secure mode's certificates and users when $TIDEKV_E2E_SECURE
// is 1 (see Secured), runs the tests, and then removes them and the binary
// Binary built. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testcluster.Main(m) }
func Main(m *testing.M) {
	code := 1
	if err := makeSecured(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: secure mode: %v\n", err)
	} else {
		code = m.Run()
	}
	removeSecured()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}
