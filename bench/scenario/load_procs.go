package scenario

// Real-process clusters for the load-routing scenarios: nodes are `tidekv
// server` processes started through internal/launcher (optionally pinned to
// a CPU with taskset), read back through /proc and /metrics, and stopped by
// PID.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/launcher"
)

// lrBinary returns the tidekv binary to run: opts.Binary, else this
// executable if it is tidekv (`tidekv bench scenario`, also under go run),
// else one built into dir (needs the go tool and this module's source).
func lrBinary(opts Options, dir string) (string, error) {
	if opts.Binary != "" {
		return filepath.Abs(opts.Binary)
	}
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "tidekv" {
		return exe, nil
	}
	out := filepath.Join(dir, "tidekv")
	cmd := exec.Command("go", "build", "-o", out, "github.com/tidekv/tidekv/cmd/tidekv")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no tidekv binary (pass --binary): go build: %v\n%s", err, b)
	}
	return out, nil
}

// lrProcs is a local cluster of tidekv server processes.
type lrProcs struct {
	procs []*launcher.Process
	ids   []uint64
}

// lrStartProcs starts n nodes under dir (node<i>), node 1 creating the
// cluster and the others joining through it, one at a time, so node IDs
// follow indexes. If cpus[i] is not "", node i+1 runs under `taskset -c
// cpus[i]` from its first instruction (so its Go runtime sizes GOMAXPROCS
// to the pinned set). nodeCPUs sizes every node (0: unsized). extra is
// appended to every node's arguments. On error the nodes already started
// are stopped.
func lrStartProcs(ctx context.Context, binary, dir string, n int, cpus []string, nodeCPUs float64, extra []string) (*lrProcs, error) {
	base, err := launcher.FreeBasePort("127.0.0.1", n)
	if err != nil {
		return nil, err
	}
	cfg := launcher.Config{Nodes: n, DataDir: dir, Host: "127.0.0.1", BasePort: base, Binary: binary, ExtraArgs: extra, NodeCPUs: nodeCPUs}
	c := &lrProcs{}
	for i := 1; i <= n; i++ {
		spec := cfg.Node(i)
		if i > 1 {
			spec.Join = []string{cfg.Node(1).GRPCAddr}
		}
		bin := binary
		if len(cpus) >= i && cpus[i-1] != "" {
			if bin, err = lrPinnedWrapper(dir, binary, cpus[i-1]); err != nil {
				c.Stop()
				return nil, err
			}
		}
		p, err := launcher.Start(bin, spec)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.procs = append(c.procs, p)
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = p.Ready(rctx)
		cancel()
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.ids = append(c.ids, p.NodeID())
	}
	return c, nil
}

// lrPinnedWrapper writes (once) a script that execs binary under taskset
// -c cpu. exec keeps the PID, so the launcher's PID is the server's.
func lrPinnedWrapper(dir, binary, cpu string) (string, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return "", fmt.Errorf("pinning nodes to CPUs needs taskset (util-linux): %w", err)
	}
	path := filepath.Join(dir, "taskset-cpu"+cpu+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec taskset -c %s %s \"$@\"\n", cpu, strconv.Quote(binary))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}

// Addrs returns the nodes' gRPC addresses.
func (c *lrProcs) Addrs() []string {
	out := make([]string, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.Spec().GRPCAddr
	}
	return out
}

// HTTPAddr returns node i's (0-based) HTTP address.
func (c *lrProcs) HTTPAddr(i int) string { return c.procs[i].Spec().HTTPAddr }

// Pid returns node i's (0-based) process ID.
func (c *lrProcs) Pid(i int) int { return c.procs[i].Pid() }

// ID returns node i's (0-based) node ID.
func (c *lrProcs) ID(i int) uint64 { return c.ids[i] }

// Index returns the 0-based index of node id, or -1.
func (c *lrProcs) Index(id uint64) int {
	for i, x := range c.ids {
		if x == id {
			return i
		}
	}
	return -1
}

// Stop stops every node (SIGTERM to its PID, SIGKILL after 10 s) in
// parallel.
func (c *lrProcs) Stop() error {
	errs := make([]error, len(c.procs))
	var wg sync.WaitGroup
	for i, p := range c.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Stop(10 * time.Second)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lrScrape fetches a node's /metrics and sums each metric over its labels.
func lrScrape(ctx context.Context, httpAddr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := line[:sp]
		if b := strings.IndexByte(name, '{'); b >= 0 {
			name = name[:b]
		}
		out[name] += v
	}
	return out, sc.Err()
}

// RedisAddr returns node i's Redis-protocol address.
func (c *lrProcs) RedisAddr(i int) string { return c.procs[i].Spec().RedisAddr }
