package resp

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestRedisTools runs redis-cli and redis-benchmark (Debian redis-tools)
// unmodified against the server, when they are installed.
func TestRedisTools(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed")
	}
	s, _ := start(t, newFakeKV(), nil, nil)
	p := s.Addr().String()[strings.LastIndexByte(s.Addr().String(), ':')+1:]
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, append([]string{"-h", "127.0.0.1", "-p", p}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	eq(t, run(cli, "SET", "greeting", "hello"), "OK")
	eq(t, run(cli, "GET", "greeting"), "hello")
	eq(t, run(cli, "HSET", "h", "f", "v"), "1")
	eq(t, run(cli, "HGETALL", "h"), "f\nv")
	eq(t, run(cli, "GET", "h"), "WRONGTYPE Operation against a key holding the wrong kind of value")
	for i := range 30 {
		run(cli, "SET", "k"+strconv.Itoa(i), "v")
	}
	keys := strings.Fields(run(cli, "--scan"))
	eq(t, len(keys), 32)
	eq(t, run(cli, "--scan", "--pattern", "gre*"), "greeting")

	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return
	}
	for _, pl := range []string{"1", "16"} {
		out := run(bench, "-t", "set,get", "-n", "2000", "-c", "8", "-P", pl, "-q")
		if !strings.Contains(out, "SET:") || !strings.Contains(out, "GET:") {
			t.Fatalf("redis-benchmark -P %s:\n%s", pl, out)
		}
		t.Logf("redis-benchmark -P %s (fake KV): %s", pl, strings.ReplaceAll(out, "\n", " | "))
	}
}
