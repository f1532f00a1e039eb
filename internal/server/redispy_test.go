package server

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestNodeRedisPy: redis-py (PyPI's redis, which .ci/run installs for
// python3) with no special options connects to a node in RESP2 and RESP3
// and pipelines, runs MULTI/EXEC (collections inside, WATCH with a
// conflict) and iterates SCAN, HSCAN: testdata/redispy.py. It skips,
// saying why, when python3 or its redis package is absent.
func TestNodeRedisPy(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: no redis-py to try")
	}
	if out, err := exec.Command(py, "-c", "import redis").CombinedOutput(); err != nil {
		t.Skipf("python3 has no redis package (pip install redis, as .ci/run does): %s", strings.TrimSpace(string(out)))
	}
	host, port, ok := strings.Cut(startRedisNode(t).RedisAddr(), ":")
	if !ok {
		t.Fatal("no port in the Redis address")
	}
	for _, proto := range []int{2, 3} {
		out, err := exec.Command(py, "testdata/redispy.py", host, port, strconv.Itoa(proto)).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("redis-py, protocol %d: %v\n%s", proto, err, out)
		}
	}
}
