package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/launcher"
)

// Options configures Start. Zero fields take the defaults noted.
type Options struct {
	// Nodes is the number of servers; default 3.
	Nodes int
	// ExtraArgs are appended to every server's arguments.
	ExtraArgs []string
	// Env entries ("K=V") are added to every server's environment.
	Env []string
	// Security, when set, starts the servers with its certificates and
	// users (and reaches their HTTP ports over HTTPS); nil takes secure
	// mode's (Secured), which is none in insecure mode.
	Security *Security
	// ReadyTimeout bounds how long one node may take to become ready after
	// a start or restart; default 45 s.
	ReadyTimeout time.Duration
	// StopTimeout is the SIGTERM-to-SIGKILL grace period; default 10 s.
	StopTimeout time.Duration
	// LogLines is how many lines of each node's log to print when the test
	// fails; default 60.
	LogLines int
	// MaxNodes, when above Nodes, reserves ports (and node slots) for nodes
	// Nodes+1..MaxNodes, which AddNode starts later, joining the running
	// cluster; default Nodes (no room to grow).
	MaxNodes int
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 45 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 10 * time.Second
	}
	if o.LogLines == 0 {
		o.LogLines = 60
	}
	if o.MaxNodes < o.Nodes {
		o.MaxNodes = o.Nodes
	}
	return o
}

// Cluster is a running test cluster. Nodes are numbered 1..N. Methods that
// fail call t.Fatal, so call them from the test's goroutine.
type Cluster struct {
	t    testing.TB
	opts Options
	lc   *launcher.Cluster

	mu  sync.Mutex
	ids []uint64 // ids[i-1]: node i's last announced node id
	n   int      // nodes started so far (Nodes, then one more per AddNode)
}

// Start starts an N-node cluster (node 1 bootstraps it, the others join in
// order, so node ids follow node order) and waits until every node is
// ready. Cleanup stops every node, fails the test if a node exited without
// being asked to or did not stop cleanly, and on failure logs the tail of
// every node's log. In secure mode ($TIDEKV_E2E_SECURE=1) the nodes run
// with secure mode's certificates and users unless Options.Security names
// others.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults()
	bin := Binary(t)

	dir := t.TempDir()
	if os.Getenv(KeepEnv) == "1" {
		var err error
		if dir, err = os.MkdirTemp("", "tidekv-e2e-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("testcluster: data in %s (kept)", dir)
	}
	cfg := launcher.DefaultConfig()
	cfg.Nodes = opts.MaxNodes
	cfg.DataDir = dir
	cfg.Host = host
	cfg.BasePort = FreeBasePort(t, opts.MaxNodes)
	cfg.Binary = bin
	cfg.ExtraArgs = opts.ExtraArgs
	cfg.Env = opts.Env
	sec := opts.Security
	if sec == nil {
		sec = Secured(t)
	}
	if sec != nil {
		cfg.ExtraArgs = append(sec.ServerArgs(), opts.ExtraArgs...)
		cfg.HTTPTLS = sec.ClientTLS(t, "")
	}
	cfg.ReadyTimeout = opts.ReadyTimeout
	cfg.StopTimeout = opts.StopTimeout
	lc, err := launcher.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, opts: opts, lc: lc, ids: make([]uint64, opts.MaxNodes), n: opts.Nodes}
	// Cleanups run last-registered first: stop the nodes, then dump logs
	// (so the dump includes shutdown), then remove the temp dir.
	t.Cleanup(c.dumpLogsIfFailed)
	t.Cleanup(c.shutdown)

	start := time.Now()
	if opts.MaxNodes == opts.Nodes {
		if err := lc.Start(c.ctx(), c.record); err != nil {
			t.Fatalf("testcluster: starting %d nodes: %v", opts.Nodes, err)
		}
	} else {
		// Only the first Nodes of the reserved slots: node 1 bootstraps,
		// the others join in order (so node ids still follow node order).
		for i := 1; i <= opts.Nodes; i++ {
			p, err := lc.StartNode(c.ctx(), i)
			if err != nil {
				t.Fatalf("testcluster: starting node %d of %d: %v", i, opts.Nodes, err)
			}
			c.record(i, p)
		}
	}
	t.Logf("testcluster: %d nodes ready in %v (base port %d)", opts.Nodes, time.Since(start).Round(time.Millisecond), cfg.BasePort)
	return c
}

// ctx is the test's context: it ends when the test finishes.
func (c *Cluster) ctx() context.Context { return c.t.Context() }

// record notes node i's announced id; a node restarted on its data
// directory must come back under the same id.
func (c *Cluster) record(i int, p *launcher.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := p.NodeID()
	if old := c.ids[i-1]; old != 0 && old != id {
		c.t.Errorf("testcluster: node %d restarted as node id %d, was %d", i, id, old)
	}
	c.ids[i-1] = id
}

// N returns the number of nodes: Options.Nodes plus those AddNode added.
func (c *Cluster) N() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// AddNode starts node N()+1, one of the slots Options.MaxNodes reserved,
// joining the running cluster (through the other nodes), waits until it is
// ready and returns its index. It fails the test when no slot is left.
func (c *Cluster) AddNode() int {
	c.t.Helper()
	c.mu.Lock()
	i := c.n + 1
	c.mu.Unlock()
	if i > c.opts.MaxNodes {
		c.t.Fatalf("testcluster: AddNode: all %d reserved nodes are started (raise Options.MaxNodes)", c.opts.MaxNodes)
	}
	start := time.Now()
	p, err := c.lc.StartNode(c.ctx(), i)
	// Count the node even when it failed to become ready, so that its log
	// is dumped and its process stopped with the others.
	c.mu.Lock()
	c.n = i
	c.mu.Unlock()
	if err != nil {
		c.t.Fatalf("testcluster: adding node %d: %v", i, err)
	}
	c.record(i, p)
	c.t.Logf("testcluster: node %d (id %d) joined in %v", i, p.NodeID(), time.Since(start).Round(time.Millisecond))
	return i
}

// Launcher returns the underlying launcher.Cluster for what this package
// does not wrap.
func (c *Cluster) Launcher() *launcher.Cluster { return c.lc }

// Addrs returns every node's gRPC address, running or not, in node order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, c.N())
	for i := range addrs {
		addrs[i] = c.Addr(i + 1)
	}
	return addrs
}

// Addr returns node i's gRPC address.
func (c *Cluster) Addr(i int) string { return c.lc.Config().Node(i).GRPCAddr }

// HTTPAddr returns node i's HTTP address.
func (c *Cluster) HTTPAddr(i int) string { return c.lc.Config().Node(i).HTTPAddr }

// RedisAddr is node i's Redis-protocol address.
func (c *Cluster) RedisAddr(i int) string { return c.lc.Config().Node(i).RedisAddr }

// DataDir returns node i's data directory.
func (c *Cluster) DataDir(i int) string { return c.lc.Config().Node(i).DataDir }

// NodeID returns the node id node i last announced in its ready line.
func (c *Cluster) NodeID(i int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[i-1]
}

// IndexOf returns the index of the node with the given node id, or 0 if no
// node has announced it.
func (c *Cluster) IndexOf(nodeID uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range c.ids {
		if id == nodeID && id != 0 {
			return i + 1
		}
	}
	return 0
}

// Kill SIGKILLs node i (a crash) and waits until it is gone.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	if err := c.lc.KillNode(i); err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
}

// Pause stops node i with SIGSTOP; Resume continues it with SIGCONT.
func (c *Cluster) Pause(i int) { c.signal(i, syscall.SIGSTOP) }

// Resume continues a paused node.
func (c *Cluster) Resume(i int) { c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	p := c.lc.Process(i)
	if p == nil {
		c.t.Fatalf("testcluster: node %d was never started", i)
	}
	if err := p.Signal(sig); err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
}

// Stop shuts node i down with SIGTERM and fails the test if it does not
// exit 0 within the stop timeout.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if err := c.lc.StopNode(i); err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
}

// Restart starts node i again on its data directory (stopping it first if
// it runs) and waits until it is ready.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.lc.Running(i) {
		c.Stop(i)
	}
	p, err := c.lc.StartNode(c.ctx(), i)
	if err != nil {
		c.t.Fatalf("testcluster: restarting node %d: %v", i, err)
	}
	c.record(i, p)
}

// KillAll SIGKILLs every node at once.
func (c *Cluster) KillAll() {
	c.t.Helper()
	if err := c.lc.Kill(); err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
}

// StopAll stops every node with SIGTERM and fails the test unless each
// exits 0 within the stop timeout.
func (c *Cluster) StopAll() {
	c.t.Helper()
	if err := c.lc.Stop(); err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
}

// RestartAll starts every node that is not running, together (a cluster
// restarted from scratch needs a quorum before anyone serves), and waits
// until all are ready.
func (c *Cluster) RestartAll() {
	c.t.Helper()
	if c.opts.MaxNodes == c.opts.Nodes {
		if err := c.lc.Start(c.ctx(), c.record); err != nil {
			c.t.Fatalf("testcluster: restarting: %v", err)
		}
		return
	}
	// Some reserved slots may never have been started: restart only the
	// nodes 1..N() that are down, together, as the launcher would.
	n := c.N()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		if c.lc.Running(i) {
			continue
		}
		wg.Go(func() {
			p, err := c.lc.StartNode(c.ctx(), i)
			if err != nil {
				errs[i-1] = err
				return
			}
			c.record(i, p)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("testcluster: restarting: %v", err)
	}
}

// Node returns a handle on node i.
func (c *Cluster) Node(i int) *Node {
	if i < 1 || i > c.N() {
		c.t.Fatalf("testcluster: no node %d in a %d-node cluster", i, c.N())
	}
	return &Node{c: c, i: i}
}

// Node is one node of a Cluster, whichever process currently runs it.
type Node struct {
	c *Cluster
	i int
}

// Index returns the node's 1-based index.
func (n *Node) Index() int { return n.i }

// Running reports whether the node's process is alive.
func (n *Node) Running() bool { return n.c.lc.Running(n.i) }

// Pid returns the pid of the node's latest process, or 0 if never started.
func (n *Node) Pid() int {
	if p := n.c.lc.Process(n.i); p != nil {
		return p.Pid()
	}
	return 0
}

// LogTail returns the last lines of the node's log (all of its runs).
func (n *Node) LogTail() string {
	return launcher.LogTail(n.c.lc.Config().Node(n.i).Log(), n.c.opts.LogLines)
}

func (c *Cluster) shutdown() {
	for i := 1; i <= c.N(); i++ {
		if p := c.lc.Process(i); p != nil && p.Exited() && !p.StopRequested() {
			c.t.Errorf("testcluster: node %d exited unexpectedly: %v", i, p.ExitErr())
		}
	}
	if err := c.lc.Stop(); err != nil {
		c.t.Errorf("testcluster: unclean shutdown: %v", err)
	}
}

func (c *Cluster) dumpLogsIfFailed() {
	if !c.t.Failed() {
		return
	}
	for i := 1; i <= c.N(); i++ {
		n := c.Node(i)
		c.t.Logf("--- node %d (id %d) %s: last %d lines ---\n%s",
			i, c.NodeID(i), c.lc.Config().Node(i).Log(), c.opts.LogLines, n.LogTail())
	}
}

// String describes the cluster for messages.
func (c *Cluster) String() string {
	return fmt.Sprintf("%d-node cluster at %v", c.N(), c.Addrs())
}
