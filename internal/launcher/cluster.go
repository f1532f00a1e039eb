package launcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
)

// Config describes a local cluster: Nodes servers on one host, each with its
// own data directory and port block.
type Config struct {
	// Nodes is the number of servers, at least 1.
	Nodes int
	// DataDir is the cluster's parent directory; node i (1-based) uses
	// <DataDir>/node<i>.
	DataDir string
	// Host is the IP address every node listens on (and so advertises).
	Host string
	// BasePort is the first port of node 1's block; node i's block starts
	// at BasePort + PortsPerNode*(i-1) (see Ports).
	BasePort int
	// Binary is the path of the tidekv executable to run.
	Binary string
	// ExtraArgs are appended to every node's `server` arguments.
	ExtraArgs []string
	// HTTPTLS reaches the nodes' HTTP ports over HTTPS (NodeSpec.HTTPTLS).
	HTTPTLS *tls.Config
	// Env entries ("K=V") are added to every node's environment.
	Env []string
	// ReadyTimeout bounds how long one node may take, from its start, to
	// print its ready line and answer /health.
	ReadyTimeout time.Duration
	// StopTimeout is how long a node may take to exit after SIGTERM before
	// it is sent SIGKILL.
	StopTimeout time.Duration
	// NodeCPUs, when positive, sizes every node (NodeSpec.CPUs).
	NodeCPUs float64
	// Hog, when positive, is the share of node 1's quota a co-located
	// busy process takes (NodeSpec.Hog); it needs NodeCPUs.
	Hog float64
}

// DefaultConfig returns a 3-node cluster in ./tidekv-data on 127.0.0.1 from
// port 7400, with a 60 s ready timeout and a 10 s stop grace period. Binary
// is left empty: the caller knows which executable to run.
func DefaultConfig() Config {
	return Config{
		Nodes:        3,
		DataDir:      "./tidekv-data",
		Host:         "127.0.0.1",
		BasePort:     7400,
		ReadyTimeout: 60 * time.Second,
		StopTimeout:  10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("launcher: Nodes must be >= 1, got %d", c.Nodes)
	case c.DataDir == "":
		return errors.New("launcher: DataDir is empty")
	case c.Host == "":
		return errors.New("launcher: Host is empty")
	case c.BasePort < 1:
		return fmt.Errorf("launcher: BasePort must be >= 1, got %d", c.BasePort)
	case Port(c.BasePort, c.Nodes, PortsPerNode-1) > 65535:
		return fmt.Errorf("launcher: %d nodes from base port %d need ports up to %d (> 65535)",
			c.Nodes, c.BasePort, Port(c.BasePort, c.Nodes, PortsPerNode-1))
	case c.Binary == "":
		return errors.New("launcher: Binary is empty")
	case c.ReadyTimeout <= 0:
		return fmt.Errorf("launcher: ReadyTimeout must be > 0, got %v", c.ReadyTimeout)
	case c.StopTimeout <= 0:
		return fmt.Errorf("launcher: StopTimeout must be > 0, got %v", c.StopTimeout)
	case c.NodeCPUs != 0:
		if err := cgroup.CheckCPUs(c.NodeCPUs); err != nil {
			return fmt.Errorf("launcher: %w", err)
		}
	}
	return checkHog(c.Hog, c.NodeCPUs)
}

// Node returns the spec of node i (1-based) without a join list:
// addresses from the port layout, data directory <DataDir>/node<i>, the
// shared extra arguments and environment, and for node 1 the co-runner
// (Hog).
func (c Config) Node(i int) NodeSpec {
	grpc, http := Ports(c.BasePort, i)
	hog := 0.0
	if i == 1 {
		hog = c.Hog
	}
	return NodeSpec{
		Index:      i,
		DataDir:    filepath.Join(c.DataDir, fmt.Sprintf("node%d", i)),
		GRPCAddr:   HostPort(c.Host, grpc),
		HTTPAddr:   HostPort(c.Host, http),
		RedisAddr:  HostPort(c.Host, Port(c.BasePort, i, OffsetRedis)),
		GossipAddr: HostPort(c.Host, Port(c.BasePort, i, OffsetGossip)),
		ExtraArgs:  c.ExtraArgs,
		Env:        c.Env,
		HTTPTLS:    c.HTTPTLS,
		CPUs:       c.NodeCPUs,
		Hog:        hog,
	}
}

// Cluster runs the nodes of a Config. Its methods are safe for concurrent
// use, but starting and stopping the same node concurrently is the
// caller's race to avoid.
type Cluster struct {
	cfg Config

	mu    sync.Mutex
	procs []*Process // procs[i-1] is node i's latest process, nil if never started
}

// AutoscaleArgs are the server arguments that let a cluster add and
// remove nodes itself with the local actuator, up to maxNodes, sizing the
// nodes it starts to nodeCPUs (0: unsized).
func AutoscaleArgs(maxNodes int, nodeCPUs float64) []string {
	args := []string{"--autoscale", "--autoscale-max-nodes", fmt.Sprint(maxNodes)}
	if nodeCPUs > 0 {
		args = append(args, "--autoscale-node-cpus", fmt.Sprint(nodeCPUs))
	}
	return args
}

// NewCluster validates cfg and, for sized nodes, that this process can
// create their cgroups; it starts nothing.
func NewCluster(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NodeCPUs > 0 {
		if _, err := cgroup.Open(); err != nil {
			return nil, fmt.Errorf("launcher: cannot size nodes to %v CPUs: %w", cfg.NodeCPUs, err)
		}
	}
	return &Cluster{cfg: cfg, procs: make([]*Process, cfg.Nodes)}, nil
}

// Config returns the cluster's configuration.
func (c *Cluster) Config() Config { return c.cfg }

// Process returns node i's latest process (possibly exited), or nil if it
// was never started.
func (c *Cluster) Process(i int) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i-1]
}

// Running reports whether node i has a process that has not exited.
func (c *Cluster) Running(i int) bool {
	p := c.Process(i)
	return p != nil && !p.Exited()
}

// Start starts every node that is not running and waits until each is
// ready, calling onReady (if non-nil, never concurrently) as each becomes
// ready.
//
// If no node has state, the cluster is new: node 1 starts without --join
// and bootstraps it, then nodes 2..N start one at a time joining through
// node 1, so node IDs follow node indexes. Otherwise the nodes that have
// state start together (a restarted range may need a quorum before any of
// them serves) with --join listing every other node, and nodes without
// state then join one at a time.
//
// On error, nodes already started keep running; call Stop.
func (c *Cluster) Start(ctx context.Context, onReady func(i int, p *Process)) error {
	var cbMu sync.Mutex
	ready := func(i int, p *Process) {
		if onReady != nil {
			cbMu.Lock()
			defer cbMu.Unlock()
			onReady(i, p)
		}
	}
	var withState, fresh []int
	anyState := false
	for i := 1; i <= c.cfg.Nodes; i++ {
		has, err := HasState(c.cfg.Node(i).DataDir)
		if err != nil {
			return err
		}
		anyState = anyState || has || c.Running(i)
		switch {
		case c.Running(i):
		case has:
			withState = append(withState, i)
		default:
			fresh = append(fresh, i)
		}
	}

	if !anyState {
		for _, i := range fresh {
			var join []string
			if i != 1 {
				join = []string{c.cfg.Node(1).GRPCAddr}
			}
			p, err := c.startAndWait(ctx, i, join)
			if err != nil {
				return err
			}
			ready(i, p)
		}
		return nil
	}

	errs := make([]error, len(withState))
	var wg sync.WaitGroup
	for k, i := range withState {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.startAndWait(ctx, i, c.others(i))
			if err != nil {
				errs[k] = err
				return
			}
			ready(i, p)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, i := range fresh {
		p, err := c.startAndWait(ctx, i, c.others(i))
		if err != nil {
			return err
		}
		ready(i, p)
	}
	return nil
}

// StartNode starts node i, which must not be running, and waits until it is
// ready. It joins through every other node, unless no node has any state
// yet and i is 1, in which case it bootstraps a new cluster.
func (c *Cluster) StartNode(ctx context.Context, i int) (*Process, error) {
	if err := c.checkIndex(i); err != nil {
		return nil, err
	}
	if c.Running(i) {
		return nil, fmt.Errorf("launcher: node %d is already running", i)
	}
	bootstrap := i == 1
	for j := 1; j <= c.cfg.Nodes && bootstrap; j++ {
		has, err := HasState(c.cfg.Node(j).DataDir)
		if err != nil {
			return nil, err
		}
		bootstrap = !has && !c.Running(j)
	}
	var join []string
	if !bootstrap {
		join = c.others(i)
	}
	return c.startAndWait(ctx, i, join)
}

// StopNode stops node i (SIGTERM, then SIGKILL after StopTimeout); see
// Process.Stop. It is a no-op for a node that is not running.
func (c *Cluster) StopNode(i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	if p := c.Process(i); p != nil {
		return p.Stop(c.cfg.StopTimeout)
	}
	return nil
}

// KillNode SIGKILLs node i and waits until it is gone. It is a no-op for a
// node that is not running.
func (c *Cluster) KillNode(i int) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	if p := c.Process(i); p != nil {
		return p.Kill()
	}
	return nil
}

// Stop stops every running node in parallel and returns their stop errors.
func (c *Cluster) Stop() error { return c.eachNode(c.StopNode) }

// Kill SIGKILLs every running node in parallel.
func (c *Cluster) Kill() error { return c.eachNode(c.KillNode) }

func (c *Cluster) eachNode(fn func(i int) error) error {
	errs := make([]error, c.cfg.Nodes)
	var wg sync.WaitGroup
	for i := 1; i <= c.cfg.Nodes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i-1] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) checkIndex(i int) error {
	if i < 1 || i > c.cfg.Nodes {
		return fmt.Errorf("launcher: node index %d out of range 1..%d", i, c.cfg.Nodes)
	}
	return nil
}

// others returns the gRPC addresses of every node but i.
func (c *Cluster) others(i int) []string {
	var addrs []string
	for j := 1; j <= c.cfg.Nodes; j++ {
		if j != i {
			addrs = append(addrs, c.cfg.Node(j).GRPCAddr)
		}
	}
	return addrs
}

func (c *Cluster) startAndWait(ctx context.Context, i int, join []string) (*Process, error) {
	spec := c.cfg.Node(i)
	spec.Join = join
	grpc, http := Ports(c.cfg.BasePort, i)
	// Fail with a clear message rather than a server bind error buried in
	// its log, typically when an earlier `tidekv up` is still running.
	if err := PortsFree(c.cfg.Host, grpc, http, Port(c.cfg.BasePort, i, OffsetRedis), Port(c.cfg.BasePort, i, OffsetGossip)); err != nil {
		return nil, fmt.Errorf("launcher: node %d: %w", i, err)
	}
	p, err := Start(c.cfg.Binary, spec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs[i-1] = p
	c.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	if err := p.Ready(rctx); err != nil {
		return p, err
	}
	return p, nil
}
