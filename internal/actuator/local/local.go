// Package local is the actuator that runs TideKV nodes as processes on this
// machine: `tidekv server --join ...` with a data directory and a free port
// block of its own, detached from the process that started it, recorded in
// a pidfile so that `tidekv up` can stop it and a controller on any node
// sharing the directory can find it.
//
// Layout under Config.Dir: node<N>/ is node N's data directory (its output
// goes to node<N>/tidekv.log), node<N>.pid its JSON record (see Node).
// Indexes only grow. Remove deletes a drained node's data but keeps its
// directory and log, so the log stays available and the index is never
// reused.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/launcher"
)

// Config configures the local actuator.
type Config struct {
	// Dir holds the launched nodes' data directories and pidfiles. Every
	// node that may run the controller must use the same Dir (DirBeside
	// gives the conventional one).
	Dir string
	// Binary is the tidekv executable; "" means this executable.
	Binary string
	// Host is the IP address the launched nodes listen on and advertise.
	Host string
	// ExtraArgs are appended to each launched node's `server` arguments
	// (e.g. the cluster's --replication-factor).
	ExtraArgs []string
	// Env entries ("K=V") are added to each launched node's environment.
	Env []string
	// MaxNodes bounds the launched nodes running at once, a guard for the
	// machine on top of the controller's own policy.
	MaxNodes int
	// StartCheck is how long ScaleOut watches new processes before it
	// reports success, to turn an immediate exit (bad flags, port taken)
	// into an error; 0 skips the check.
	StartCheck time.Duration
	// StopGrace is how long a node may take to exit after SIGTERM before it
	// is sent SIGKILL.
	StopGrace time.Duration
	// NodeCPUs, when positive, is each launched node's CPU size
	// (launcher.NodeSpec.CPUs).
	NodeCPUs float64
}

// DefaultConfig returns 127.0.0.1, at most 8 launched nodes, a 500 ms
// start check and a 10 s stop grace. Dir is left empty: the caller knows
// where the cluster keeps its data (see DirBeside).
func DefaultConfig() Config {
	return Config{
		Host:       "127.0.0.1",
		MaxNodes:   8,
		StartCheck: 500 * time.Millisecond,
		StopGrace:  10 * time.Second,
	}
}

// DirBeside returns the conventional Dir for a server whose data directory
// is dataDir: "autoscaled" next to it. For `tidekv up`, whose nodes live in
// <data-dir>/node<i>, every node then shares <data-dir>/autoscaled.
func DirBeside(dataDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(dataDir)), "autoscaled")
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("local actuator: Dir is empty")
	case c.Host == "":
		return errors.New("local actuator: Host is empty")
	case c.MaxNodes < 1:
		return fmt.Errorf("local actuator: MaxNodes must be >= 1, got %d", c.MaxNodes)
	case c.StartCheck < 0:
		return fmt.Errorf("local actuator: StartCheck must be >= 0, got %v", c.StartCheck)
	case c.StopGrace <= 0:
		return fmt.Errorf("local actuator: StopGrace must be > 0, got %v", c.StopGrace)
	case c.NodeCPUs != 0:
		if err := cgroup.CheckCPUs(c.NodeCPUs); err != nil {
			return fmt.Errorf("local actuator: %w", err)
		}
	}
	return nil
}

// Actuator launches and stops local server processes.
type Actuator struct {
	cfg   Config
	procs Procs
	mu    sync.Mutex // serialises ScaleOut and Remove within this process
}

var _ control.Actuator = (*Actuator)(nil)

// New validates cfg, resolves the binary and, for sized nodes, checks that
// this process can create their cgroups.
func New(cfg Config) (*Actuator, error) {
	if cfg.NodeCPUs > 0 {
		if _, err := cgroup.Open(); err != nil {
			return nil, fmt.Errorf("local actuator: cannot size nodes to %v CPUs: %w", cfg.NodeCPUs, err)
		}
	}
	return newActuator(cfg, OSProcs{})
}

func newActuator(cfg Config, p Procs) (*Actuator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Absolute, so the data directory in a node's command line (which Alive
	// matches) is the same whichever process reads it.
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("local actuator: %w", err)
	}
	cfg.Dir = dir
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("local actuator: finding the tidekv binary (set Binary): %w", err)
		}
		cfg.Binary = exe
	}
	return &Actuator{cfg: cfg, procs: p}, nil
}

// Name returns "local".
func (a *Actuator) Name() string { return "local" }

// Nodes returns the recorded nodes, by index, with Alive filled in.
func (a *Actuator) Nodes() ([]Node, error) {
	nodes, err := readRecords(a.cfg.Dir, pidSuffix)
	for i := range nodes {
		nodes[i].Alive = a.procs.Alive(nodes[i].PID, nodes[i].DataDir)
	}
	return nodes, err
}

// ScaleOut starts count nodes joining through join and returns once they
// have survived the start check.
func (a *Actuator) ScaleOut(ctx context.Context, count int, join []string) (string, error) {
	if count < 1 {
		return "", fmt.Errorf("local actuator: scale-out count must be >= 1, got %d", count)
	}
	if len(join) == 0 {
		return "", errors.New("local actuator: scale-out needs at least one live member to join through (a node started without --join would create a new cluster)")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	nodes, err := a.Nodes()
	if err != nil {
		return "", err
	}
	if live := countAlive(nodes); live+count > a.cfg.MaxNodes {
		return "", fmt.Errorf("local actuator: %d launched node(s) running, %d more would exceed MaxNodes %d", live, count, a.cfg.MaxNodes)
	}
	var started []Node
	for len(started) < count {
		if err := ctx.Err(); err != nil {
			return "", startErr(started, count, err)
		}
		n, err := a.launch(join)
		if err != nil {
			return "", startErr(started, count, err)
		}
		started = append(started, n)
	}
	if err := a.checkStarted(ctx, started); err != nil {
		return "", err
	}
	return fmt.Sprintf("local: started %d node(s) joining through %s: %s",
		count, strings.Join(join, ","), describe(started)), nil
}

func countAlive(nodes []Node) int {
	n := 0
	for _, x := range nodes {
		if x.Alive {
			n++
		}
	}
	return n
}

func describe(nodes []Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("node%d pid %d grpc=%s log=%s", n.Index, n.PID, n.GRPCAddr, n.Log)
		if n.Cgroup != "" {
			parts[i] += " cgroup=" + n.Cgroup
		}
	}
	return strings.Join(parts, "; ")
}

func startErr(started []Node, count int, err error) error {
	if len(started) == 0 {
		return fmt.Errorf("local actuator: starting a node: %w", err)
	}
	return fmt.Errorf("local actuator: started %d of %d node(s) (%s), then: %w",
		len(started), count, describe(started), err)
}

// launch reserves an index and a port block, starts one node and records
// it.
func (a *Actuator) launch(join []string) (Node, error) {
	index, err := reserveIndex(a.cfg.Dir)
	if err != nil {
		return Node{}, err
	}
	base, err := launcher.FreeBasePort(a.cfg.Host, 1)
	if err != nil {
		return Node{}, err
	}
	// The launcher's layout gives the node all its listeners from one
	// block, as `tidekv up` does; only the directory differs.
	spec := launcher.Config{Host: a.cfg.Host, BasePort: base, ExtraArgs: a.cfg.ExtraArgs, Env: a.cfg.Env}.Node(1)
	spec.Index = index
	spec.DataDir = filepath.Join(a.cfg.Dir, nodeName(index))
	spec.Join = join
	spec.CPUs = a.cfg.NodeCPUs
	if err := spec.Validate(); err != nil {
		return Node{}, err
	}
	pid, group, err := a.procs.Start(a.cfg.Binary, spec)
	if err != nil {
		return Node{}, fmt.Errorf("node%d: %w", index, err)
	}
	n := Node{Index: index, PID: pid, DataDir: spec.DataDir, GRPCAddr: spec.GRPCAddr,
		HTTPAddr: spec.HTTPAddr, Log: spec.Log(), Started: time.Now().UTC(), Cgroup: group, Alive: true}
	if err := writeRecord(a.cfg.Dir, n); err != nil {
		// A node nobody can find again must not run.
		_ = a.procs.Signal(pid, syscall.SIGKILL)
		return Node{}, fmt.Errorf("node%d: recording pid %d: %w", index, pid, err)
	}
	return n, nil
}

// checkStarted waits StartCheck and fails, with the log's tail, if a new
// node has already exited.
func (a *Actuator) checkStarted(ctx context.Context, started []Node) error {
	if a.cfg.StartCheck == 0 {
		return nil
	}
	if err := sleep(ctx, a.cfg.StartCheck); err != nil {
		return startErr(started, len(started), err)
	}
	for _, n := range started {
		if !a.procs.Alive(n.PID, n.DataDir) {
			return fmt.Errorf("local actuator: node%d (pid %d) exited within %v of its start; last lines of %s:\n%s",
				n.Index, n.PID, a.cfg.StartCheck, n.Log, launcher.LogTail(n.Log, 10))
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Victim picks, among members, the running node this actuator launched
// most recently (the highest index).
func (a *Actuator) Victim(members []control.Member) (control.Member, error) {
	nodes, err := a.Nodes()
	if err != nil {
		return control.Member{}, err
	}
	best, bestIndex := control.Member{}, 0
	for _, m := range members {
		if n, ok := findAddr(nodes, m.Addr); ok && n.Alive && n.Index > bestIndex {
			best, bestIndex = m, n.Index
		}
	}
	if bestIndex == 0 {
		return control.Member{}, fmt.Errorf("local actuator: none of the %d member(s) is a running node launched from %s; only those may be removed", len(members), a.cfg.Dir)
	}
	return best, nil
}

func findAddr(nodes []Node, addr string) (Node, bool) {
	for _, n := range nodes {
		if n.GRPCAddr == addr {
			return n, true
		}
	}
	return Node{}, false
}

// Remove stops m's process (SIGTERM, SIGKILL after StopGrace), deletes its
// data but keeps its log, and marks its record removed. The caller has
// drained and decommissioned m, so its data is of no further use. Removing
// a member again succeeds without doing anything.
func (a *Actuator) Remove(ctx context.Context, m control.Member) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	nodes, err := a.Nodes()
	if err != nil {
		return "", err
	}
	n, ok := findAddr(nodes, m.Addr)
	if !ok {
		return a.removedBefore(m)
	}
	how := "had already exited"
	if n.Alive {
		if how, err = a.stop(ctx, n); err != nil {
			return "", err
		}
	} else if err := a.release(n); err != nil {
		return "", err
	}
	if err := clearData(n.DataDir, n.Log); err != nil {
		return "", fmt.Errorf("local actuator: node%d stopped but its data is not fully deleted: %w", n.Index, err)
	}
	if err := os.Rename(pidPath(a.cfg.Dir, n.Index), removedPath(a.cfg.Dir, n.Index)); err != nil {
		return "", err
	}
	return fmt.Sprintf("local: node %d (node%d, pid %d, %s) %s; data deleted, log kept at %s",
		m.ID, n.Index, n.PID, n.GRPCAddr, how, n.Log), nil
}

// removedBefore answers a Remove of a member with no pidfile: done already
// if an earlier Remove recorded it (a retry after a lost reply), refused
// otherwise.
func (a *Actuator) removedBefore(m control.Member) (string, error) {
	removed, err := readRecords(a.cfg.Dir, removedSuffix)
	if err != nil {
		return "", err
	}
	// The newest first: a port can be reused by a later node.
	for i := len(removed) - 1; i >= 0; i-- {
		if n := removed[i]; n.GRPCAddr == m.Addr {
			return fmt.Sprintf("local: node %d (node%d, %s) was already removed", m.ID, n.Index, n.GRPCAddr), nil
		}
	}
	return "", fmt.Errorf("local actuator: node %d (%s) was not launched from %s; refusing to stop it", m.ID, m.Addr, a.cfg.Dir)
}

// stop ends n's process and says how.
func (a *Actuator) stop(ctx context.Context, n Node) (string, error) {
	if err := a.procs.Signal(n.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("local actuator: SIGTERM to node%d (pid %d): %w", n.Index, n.PID, err)
	}
	if a.waitGone(ctx, n, a.cfg.StopGrace) {
		return "stopped", a.release(n)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("local actuator: stopping node%d (pid %d): %w", n.Index, n.PID, err)
	}
	_ = a.procs.Signal(n.PID, syscall.SIGKILL)
	if !a.waitGone(ctx, n, 5*time.Second) {
		return "", fmt.Errorf("local actuator: node%d (pid %d) survived SIGKILL", n.Index, n.PID)
	}
	return fmt.Sprintf("killed (no exit within %v of SIGTERM)", a.cfg.StopGrace), a.release(n)
}

// release removes the cgroup of n, whose process is gone.
func (a *Actuator) release(n Node) error {
	if n.Cgroup == "" {
		return nil
	}
	if err := a.procs.RemoveCgroup(n.Cgroup); err != nil {
		return fmt.Errorf("local actuator: node%d (pid %d) stopped but its cgroup remains: %w", n.Index, n.PID, err)
	}
	return nil
}

// waitGone polls until n's process is gone, d passes or ctx ends.
func (a *Actuator) waitGone(ctx context.Context, n Node, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !a.procs.Alive(n.PID, n.DataDir) {
			return true
		}
		if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
}

// StopAll stops every running launched node (for `tidekv up` on exit) and
// keeps their data and pidfiles: they are members of the cluster, unlike
// the drained nodes Remove deletes. It returns how many it stopped.
func (a *Actuator) StopAll(ctx context.Context) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	nodes, err := a.Nodes()
	if err != nil {
		return 0, err
	}
	// SIGTERM every node first so they shut down in parallel; stop then
	// waits for each (a second SIGTERM is harmless).
	for _, n := range nodes {
		if n.Alive {
			_ = a.procs.Signal(n.PID, syscall.SIGTERM)
		}
	}
	stopped := 0
	var errs []error
	for _, n := range nodes {
		if !n.Alive {
			continue
		}
		if _, err := a.stop(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		stopped++
	}
	return stopped, errors.Join(errs...)
}
