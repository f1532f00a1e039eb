package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/chromium"
)

// TestOperatorView checks what an operator sees of a live 3-node cluster of
// the real binary: `ctl status --json` and `ctl events`, and the dashboard
// rendered by headless Chromium (screenshot kept in TIDEKV_SCREENSHOT_DIR
// when set).
func TestOperatorView(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	bin := testcluster.Binary(t)
	ctx := testCtx(t, 2*time.Minute)
	cl := newClient(t, tc.Addrs())
	for i := range 100 {
		k := []byte(fmt.Sprintf("user%03d", i))
		if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error { return cl.Put(ctx, k, k) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		_, err := cl.Split(ctx, []byte("user050"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Some reads so the dashboard has load to show.
	for i := range 500 {
		cl.Get(ctx, []byte(fmt.Sprintf("user%03d", i%100)))
	}

	// ctl status --json: every node live with its load; imbalance present.
	var status struct {
		Nodes []struct {
			ID       uint64  `json:"id"`
			Addr     string  `json:"addr"`
			State    string  `json:"state"`
			Replicas int     `json:"replicas"`
			Score    float64 `json:"score"`
		} `json:"nodes"`
		Imbalance map[string]float64 `json:"imbalance"`
	}
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		out, code, err := ctl(ctx, bin, tc.Addr(2), "status", "--json")
		if err != nil {
			return fmt.Errorf("exit %d: %v", code, err)
		}
		if err := json.Unmarshal([]byte(out), &status); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(status.Nodes) != 3 || len(status.Imbalance) != 4 {
			return fmt.Errorf("status: %s", out)
		}
		for _, n := range status.Nodes {
			if n.State != "live" || n.Replicas == 0 || n.Score <= 0 || n.Addr == "" {
				return fmt.Errorf("node not live with replicas and a score yet: %s", out)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	out, _, err := ctl(ctx, bin, tc.Addr(3), "status")
	if err != nil || !strings.Contains(out, "imbalance (stddev/mean)") || !strings.Contains(out, "STATE") {
		t.Fatalf("ctl status: %v\n%s", err, out)
	}

	// ctl events names the split and the up-replication with their reasons.
	out, _, err = ctl(ctx, bin, tc.Addr(1), "events")
	if err != nil {
		t.Fatalf("ctl events: %v", err)
	}
	for _, want := range []string{"split at user050", "replication: 1 of 3 voters", "node-start"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl events lacks %q:\n%s", want, out)
		}
	}

	if _, ok := chromium.Path(); !ok {
		t.Skip("chromium not installed (.ci/run installs it): dashboard not checked")
	}
	b, err := chromium.Launch(ctx, testcluster.BrowserTrust(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Navigate(testcluster.HTTPURL(tc.HTTPAddr(2), "/")); err != nil {
		t.Fatal(err)
	}
	// A secure node shows its login page first.
	if user, password, ok := testcluster.BrowserLogin(t); ok {
		if err := b.Submit(ctx, "#login-form", map[string]string{"user": user, "password": password}); err != nil {
			t.Fatal(err)
		}
	}
	var dom string
	if err := b.WaitFor(ctx, `document.body.dataset.ready === "1"`); err != nil {
		_ = b.Eval("document.documentElement.outerHTML", &dom)
		t.Fatalf("dashboard never finished its first render: %v\n%s", err, dom)
	}
	if err := b.Eval("document.documentElement.outerHTML", &dom); err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= 3; id++ {
		if !strings.Contains(dom, fmt.Sprintf(`data-node-id="%d"`, id)) {
			t.Errorf("dashboard lacks node %d", id)
		}
	}
	if n := strings.Count(dom, `class="range-seg`); n < 2 {
		t.Errorf("dashboard shows %d ranges, want at least 2", n)
	}
	if !strings.Contains(dom, "split at user050") {
		t.Errorf("dashboard event log lacks the split")
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if dir := os.Getenv("TIDEKV_SCREENSHOT_DIR"); dir != "" {
		shot = filepath.Join(dir, "dashboard-e2e.png")
	}
	if err := b.Screenshot(shot, 1440, 1200); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("dashboard screenshot: %s", shot)
}

// TestRedisTools runs Debian's redis-cli and redis-benchmark, unmodified,
// against the real binary's Redis port.
func TestRedisTools(t *testing.T) {
	cli, err1 := exec.LookPath("redis-cli")
	bench, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		t.Skip("redis-tools not installed (.ci/run installs them)")
	}
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx := testCtx(t, 2*time.Minute)
	host, port, _ := strings.Cut(tc.RedisAddr(2), ":")
	run := func(bin string, args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		argv := append(append([]string{"-h", host, "-p", port}, redisToolArgs(t, bin)...), args...)
		out, err := exec.CommandContext(cctx, bin, argv...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(cli, "SET", "tool:a", "1"); got != "OK" {
		t.Fatalf("redis-cli SET: %q", got)
	}
	run(cli, "HSET", "tool:h", "f", "v")
	if got := run(cli, "INCRBY", "tool:a", "41"); got != "42" {
		t.Fatalf("redis-cli INCRBY: %q", got)
	}
	if got := run(cli, "--scan", "--pattern", "tool:*"); got != "tool:a\ntool:h" && got != "tool:h\ntool:a" {
		t.Fatalf("redis-cli --scan: %q", got)
	}
	out := run(bench, "-t", "set,get", "-n", "2000", "-c", "10", "-P", "4", "-q")
	for _, want := range []string{"SET:", "GET:", "requests per second"} {
		if !strings.Contains(out, want) {
			t.Fatalf("redis-benchmark output lacks %q:\n%s", want, out)
		}
	}
	// redis-benchmark wrote key:__rand_int__, a 3-byte value (-d 3).
	if got := run(cli, "GET", "key:__rand_int__"); len(got) != 3 {
		t.Fatalf("redis-cli GET of redis-benchmark's key: %q", got)
	}
}
