package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// stockUnits are the units of Redis's own test suite that run to their end
// against a node (docs/redis.md, "Redis's own test suite", has their
// counts). unit/type/list and unit/type/zset are not among them yet. list
// runs to its end now that the blocking pops are served, but not every
// time: a few of its tests race a push against another connection's
// blocking pop without waiting for it to block, which TideKV, serving
// connections concurrently, can lose, hanging the harness to its TIMEOUT
// (docs/redis.md). zset's ZDIFF fuzzing takes the harness's 120 s on a
// loaded machine (the script leaves it out with --skiptest, which this
// test does not).
const stockUnits = "unit/keyspace unit/type/string unit/type/incr unit/type/hash unit/type/set unit/expire unit/multi unit/info-command unit/scan unit/quit unit/protocol unit/dump"

// TestNodeRunsRedisStockSuite runs redis-server's own Tcl test suite in
// external mode (an unpacked tests tree of a Redis release at
// $REDIS_TESTS_DIR, e.g. `git archive 7.0.15 runtest tests` of redis/redis;
// this repository holds none of its files) against a one-node cluster,
// and requires each unit to run to its end: the harness stops at no
// error (no exception, no server block left half run). Failed assertions
// are Redis behaviour TideKV does not have, counted in the log and in
// docs/redis.md, not here. $REDIS_TESTS_UNITS replaces the units.
// scripts/redis-stock-suite.sh does the same against `tidekv up` and
// prints the counts.
func TestNodeRunsRedisStockSuite(t *testing.T) {
	tier.RequireLong(t, "runs twelve units of Redis's test suite, several minutes")
	dir := os.Getenv("REDIS_TESTS_DIR")
	if dir == "" {
		t.Skip("REDIS_TESTS_DIR is not set: no unpacked Redis tests tree (the directory holding runtest and tests/) to run")
	}
	if _, err := os.Stat(filepath.Join(dir, "tests", "test_helper.tcl")); err != nil {
		t.Skipf("REDIS_TESTS_DIR=%s holds no tests/test_helper.tcl: %v", dir, err)
	}
	if _, err := exec.LookPath("tclsh"); err != nil {
		t.Skip("tclsh is not installed (Debian package tcl): the Redis harness cannot run")
	}
	units := stockUnits
	if u := os.Getenv("REDIS_TESTS_UNITS"); u != "" {
		units = u
	}
	host, port, _ := strings.Cut(startRedisNode(t).RedisAddr(), ":")
	abandoned := regexp.MustCompile(`(?m)^\[err\]: (.*)$`)
	for _, unit := range strings.Fields(units) {
		cmd := exec.Command("./runtest", "--host", host, "--port", port, "--singledb", "--ignore-encoding",
			"--durable", "--timeout", "120", "--clients", "1",
			"--tags", "-needs:repl", "--tags", "-needs:debug", "--tags", "-needs:config-maxmemory",
			"--tags", "-needs:save", "--tags", "-needs:reset", "--single", unit)
		cmd.Dir = dir
		raw, _ := cmd.CombinedOutput()
		out := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(raw), "")
		ok := strings.Count(out, "\n[ok]:")
		failed := strings.Count(out, "\n[err]:")
		t.Logf("%s: %d passed, %d failed", unit, ok, failed)
		if i := strings.Index(out, "[exception]:"); i >= 0 {
			t.Errorf("%s stopped: %s", unit, firstLines(out[i:], 2))
		}
		if !strings.Contains(out, "The End") && !strings.Contains(out, "All tests passed") {
			t.Errorf("%s did not reach its end:\n%s", unit, lastLines(out, 15))
		}
		for _, m := range abandoned.FindAllStringSubmatch(out, -1) {
			if !strings.Contains(m[1], " in tests/") {
				t.Errorf("%s left a server block at an error between tests: %s", unit, m[1])
			}
		}
	}
}

func firstLines(s string, n int) string {
	return strings.Join(strings.SplitN(s, "\n", n+1)[:min(n, strings.Count(s, "\n")+1)], "\n")
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
