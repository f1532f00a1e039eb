package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
)

// Up runs a local cluster in the foreground; it is `tidekv up`.
//
// It starts every node (see Cluster.Start), printing to out, as each
// becomes ready,
//
//	node <i> grpc=<addr> http=<addr> redis=<addr> cpus=<F>
//
// (space-separated key=value fields; new listeners add fields, so parse by
// key; cpus only for sized nodes), then, once the nodes' GET /ready says that the meta range and every
// range have their replication factor, one hint line starting
// "cluster up: ". Until then each new reason for not being ready is
// reported on errOut. A node that exits unexpectedly is reported on errOut
// with the tail of its log, and the others keep running. When ctx ends, Up
// stops every node (SIGTERM, then SIGKILL after cfg.StopTimeout) and
// returns nil. It returns an error if the cluster fails to start or if
// every node has died.
func Up(ctx context.Context, cfg Config, out, errOut io.Writer) error {
	c, err := NewCluster(cfg)
	if err != nil {
		return err
	}
	out, errOut = &lockedWriter{w: out}, &lockedWriter{w: errOut}
	fmt.Fprintf(errOut, "starting %d nodes in %s (logs: %s)\n",
		cfg.Nodes, cfg.DataDir, filepath.Join(cfg.DataDir, "node<i>", LogName))

	startErr := c.Start(ctx, func(i int, p *Process) {
		s := p.Spec()
		line := fmt.Sprintf("node %d grpc=%s http=%s", i, s.GRPCAddr, s.HTTPAddr)
		if s.RedisAddr != "" {
			line += " redis=" + s.RedisAddr
		}
		if s.CPUs > 0 {
			line += fmt.Sprintf(" cpus=%v", s.CPUs)
		}
		fmt.Fprintln(out, line)
	})
	if startErr != nil {
		stopErr := c.Stop()
		if ctx.Err() != nil {
			// Interrupted while starting: the user asked to stop.
			reportStop(errOut, stopErr)
			return nil
		}
		return errors.Join(startErr, stopErr)
	}
	rctx, cancel := context.WithCancel(ctx) // ends the wait if every node dies
	defer cancel()
	go announceReady(rctx, cfg, out, errOut)
	return watch(ctx, c, errOut)
}

// announceReady prints the "cluster up" line once the cluster is fully
// replicated: only then can any one node die without a range losing its
// quorum.
func announceReady(ctx context.Context, cfg Config, out, errOut io.Writer) {
	addrs := make([]string, cfg.Nodes)
	for i := range addrs {
		addrs[i] = cfg.Node(i + 1).HTTPAddr
	}
	r, err := WaitReady(ctx, addrs, func(reason string) {
		fmt.Fprintf(errOut, "waiting for replication: %s\n", reason)
	})
	if err != nil {
		return // stopping
	}
	fmt.Fprintf(out, "cluster up: %d nodes, %d ranges with %d voters each; try: tidekv ctl --addr %s status\n",
		cfg.Nodes, r.Ranges, min(r.ReplicationFactor, r.LiveNodes), cfg.Node(1).GRPCAddr)
}

// watch reports nodes that exit unexpectedly until ctx ends (then it stops
// the cluster) or every node has exited.
func watch(ctx context.Context, c *Cluster, errOut io.Writer) error {
	n := c.Config().Nodes
	exited := make(chan *Process, n)
	for i := 1; i <= n; i++ {
		p := c.Process(i)
		go func() {
			<-p.Done()
			if !p.StopRequested() {
				exited <- p
			}
		}()
	}
	alive := n
	for alive > 0 {
		select {
		case <-ctx.Done():
			fmt.Fprintf(errOut, "stopping %d nodes...\n", alive)
			reportStop(errOut, c.Stop())
			return nil
		case p := <-exited:
			alive--
			fmt.Fprintf(errOut, "node %d exited unexpectedly (%s); %d nodes still running; last lines of %s:\n%s\n",
				p.Spec().Index, exitString(p.ExitErr()), alive, p.Spec().Log(), indent(p.LogTail(20)))
		}
	}
	return errors.New("every node has exited")
}

func reportStop(w io.Writer, err error) {
	if err != nil {
		fmt.Fprintf(w, "warning: %v\n", err)
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// lockedWriter serialises writes from the per-node goroutines so lines do
// not interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
