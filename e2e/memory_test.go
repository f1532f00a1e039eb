package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/testcluster"
)

// attackBudget is how far above its resting RSS a node may grow while it
// is attacked: oversize frames are never buffered, connections are capped,
// and a client that does not read holds about twice the 16 MiB output
// buffer (its replies and one read batch of values).
const attackBudget = 256 << 20

// TestMemoryBoundedUnderAttack attacks one real node over RESP: oversize
// frames, connections beyond --max-connections, and clients that pipeline
// GETs of 512 KiB values and never read. Its RSS stays within
// attackBudget of where it started, each attack is refused as documented
// (and counted in tidekv_redis_disconnects_total), and it still answers a
// normal GET afterwards.
func TestMemoryBoundedUnderAttack(t *testing.T) {
	const maxConns = 200
	tc := testcluster.Start(t, testcluster.Options{Nodes: 1, ExtraArgs: []string{"--replication-factor", "1",
		"--max-connections", strconv.Itoa(maxConns), "--redis-output-timeout", "2s"}})
	ctx := testCtx(t, time.Minute)
	pid, addr := tc.Node(1).Pid(), tc.RedisAddr(1)
	opts := redisOptions(t, addr)
	opts.MaxRetries, opts.PoolSize = 5, 1
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	value := strings.Repeat("v", 512<<10)
	for i := range 16 {
		if err := rdb.Set(ctx, fmt.Sprint("big", i), value, 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	base := rss(t, pid)
	peak := watchRSS(t, pid)
	t.Logf("RSS at rest %d MiB; budget %d MiB", base>>20, (base+attackBudget)>>20)

	oversizeFrames(t, addr)
	t.Logf("after oversize frames: peak RSS %d MiB", peak.Load()>>20)
	tooManyConns(t, addr, maxConns, 2*maxConns)
	t.Logf("after %d connections: peak RSS %d MiB", 2*maxConns, peak.Load()>>20)
	slowReaders(ctx, t, addr, tc.HTTPAddr(1), 8)
	t.Logf("after slow readers: peak RSS %d MiB", peak.Load()>>20)

	if v, err := rdb.Get(ctx, "big3").Result(); err != nil || v != value {
		t.Fatalf("GET after the attacks: %d bytes, %v", len(v), err)
	}
	if p := peak.Load(); p > base+attackBudget {
		t.Fatalf("peak RSS %d MiB, over the budget of %d MiB (at rest %d MiB + %d MiB)", p>>20, (base+attackBudget)>>20, base>>20, attackBudget>>20)
	}
	want := map[string]int{"request_limit": 20, "max_connections": maxConns + 1, "output_buffer": 8}
	for reason, n := range disconnects(t, tc.HTTPAddr(1)) {
		if n < want[reason] {
			t.Errorf("tidekv_redis_disconnects_total{reason=%q} = %d, want at least %d", reason, n, want[reason])
		}
	}
}

// oversizeFrames sends 10 SETs announcing 64 MiB values (and sending them)
// and 10 bulk headers of 2^40 bytes; each gets the bulk-length error.
func oversizeFrames(t *testing.T, addr string) {
	t.Helper()
	for i := range 20 {
		size, send := int64(64<<20), int64(64<<20)
		if i%2 == 1 {
			size, send = 1<<40, 0
		}
		c, r, refused := dialRESP(t, addr, 0)
		if refused != "" {
			t.Fatalf("oversize SET %d: login refused: %q", i, refused)
		}
		go func() {
			fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", size)
			chunk := make([]byte, 1<<20)
			for ; send > 0; send -= int64(len(chunk)) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
		line, err := r.ReadString('\n')
		c.Close()
		want := fmt.Sprintf("-ERR Protocol error: bulk string of %d bytes is too large (the maximum is 1048576 bytes)\r\n", size)
		if line != want {
			t.Fatalf("oversize SET %d: got %q (%v), want %q", i, line, err, want)
		}
	}
}

// tooManyConns opens attempts connections at once, each sending PING: at
// most limit are served (the test's own client holds one), the rest refused.
func tooManyConns(t *testing.T, addr string, limit, attempts int) {
	t.Helper()
	var served, refused int
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range attempts {
		c, r, line := dialRESP(t, addr, 0)
		conns = append(conns, c)
		var err error
		if line == "" { // a refusal answers the login, when there is one
			io.WriteString(c, "PING\r\n")
			line, err = r.ReadString('\n')
		}
		switch line {
		case "+PONG\r\n":
			served++
		case fmt.Sprintf("-ERR max number of clients reached (the maximum is %d connections)\r\n", limit):
			refused++
		default:
			t.Fatalf("connection %d: %q, %v", len(conns), line, err)
		}
	}
	// Up to limit-1 besides the test's client; a few fewer while the node
	// is still closing the oversize frames' connections.
	if served > limit-1 || served < limit-21 || refused != attempts-served {
		t.Fatalf("%d of %d connections served and %d refused; want %d served", served, attempts, refused, limit-1)
	}
}

// slowReaders starts n clients that each pipeline 2,000 GETs of 512 KiB
// values (1 GB of replies) and never read, and waits until the node has
// disconnected them all.
func slowReaders(ctx context.Context, t *testing.T, addr, httpAddr string, n int) {
	t.Helper()
	var pipeline strings.Builder
	for i := range 2000 {
		key := fmt.Sprint("big", i%16)
		fmt.Fprintf(&pipeline, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
	}
	before := disconnects(t, httpAddr)["output_buffer"]
	var wg sync.WaitGroup
	for range n {
		c, _, refused := dialRESP(t, addr, 64<<10)
		if refused != "" {
			t.Fatalf("slow reader: login refused: %q", refused)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(c, pipeline.String())
		}()
	}
	defer wg.Wait()
	for disconnects(t, httpAddr)["output_buffer"] < before+n {
		select {
		case <-ctx.Done():
			t.Fatalf("the node disconnected %d of %d clients that do not read", disconnects(t, httpAddr)["output_buffer"]-before, n)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var disconnectLine = regexp.MustCompile(`(?m)^tidekv_redis_disconnects_total\{reason="(\w+)"\} (\d+)`)

// disconnects reads tidekv_redis_disconnects_total by reason from /metrics.
func disconnects(t *testing.T, httpAddr string) map[string]int {
	t.Helper()
	resp, err := testcluster.HTTPClient(t, 5*time.Second).Get(testcluster.HTTPURL(httpAddr, "/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]int{}
	for _, m := range disconnectLine.FindAllStringSubmatch(string(body), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(out) != 3 {
		t.Fatalf("/metrics has %d tidekv_redis_disconnects_total series, want 3", len(out))
	}
	return out
}

// rss returns a process's resident set size (VmRSS) in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	n, err := readRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// watchRSS samples pid's RSS every 20 ms until the test ends and keeps the
// highest.
func watchRSS(t *testing.T, pid int) *atomic.Int64 {
	var peak atomic.Int64
	peak.Store(rss(t, pid))
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n, err := readRSS(pid)
			if err != nil {
				return
			}
			if n > peak.Load() {
				peak.Store(n)
			}
		}
	}()
	return &peak
}
