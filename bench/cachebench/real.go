package cachebench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	elasticbench "github.com/tidekv/tidekv/bench/elastic"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/launcher"
)

// RealOptions are what a run on real processes needs beyond its
// experiment's config.
type RealOptions struct {
	// Binary is the tidekv executable; Dir holds the clusters' data, one
	// directory per variant.
	Binary, Dir string
	// NodeCPUs, when positive, sizes every node, those the autoscaler
	// starts included: a cgroup of its own with a quota of this many
	// CPUs. 0: unsized, the nodes share the machine's cores.
	NodeCPUs float64
	// Workers bound the requests in flight; one offered while every worker
	// is busy fails at once (the load stays open-loop).
	Workers int
	// NodeStart is what the growing key space's controller is told a new
	// node takes to join (autoscale.node-start-time): local processes
	// start in seconds, not the default's 10 s, which would make the
	// threshold wait until nodes are nearly full.
	NodeStart time.Duration
	Progress  io.Writer
}

// DefaultRealOptions: unsized nodes, 128 workers, nodes that start in 3 s
// (sized nodes of a quarter CPU on this machine print their ready line in
// 1 to 3 s; joining takes the rest).
func DefaultRealOptions() RealOptions {
	return RealOptions{Workers: 128, NodeStart: 3 * time.Second, Progress: io.Discard}
}

// cacheName is the key space every real-process run creates.
const cacheName = "cache"

// cacheSpec is one variant's cluster: nodes to start with, its key
// space's capacity per node, and for a growing one the most nodes the
// local actuator may run and the cluster settings the variant needs.
type cacheSpec struct {
	nodes, maxNodes int
	capacity        uint64
	grow            bool
	missHandler     string
	settings        map[string]string
}

// cacheCluster is a running variant: its client, the key space's view and
// span, and what stops every process it started.
type cacheCluster struct {
	cl     *client.Client
	ks     *client.KeySpace
	lo, hi []byte
	stop   func()
}

// startCache starts s's cluster in dir, creates the key space (hashed,
// memory, RF 1, as the paper's cache: one copy of each value) and lays
// its hash slices out over the nodes as the model does (place).
func startCache(ctx context.Context, o RealOptions, dir string, s cacheSpec) (*cacheCluster, error) {
	// Replication factor 1 for the whole cluster, not only the key space:
	// with the default 3, the autoscaler's floor (the replication factor)
	// started a third node before the load, and a static cluster of 2 held
	// the meta range on both.
	extra := []string{"--replication-factor", "1"}
	if s.grow {
		extra = append(extra, launcher.AutoscaleArgs(s.maxNodes, o.NodeCPUs)...)
	}
	cl, stop, err := elasticbench.StartCluster(ctx, o.Binary, dir, s.nodes, o.NodeCPUs, 0, extra, o.Progress)
	if err != nil {
		return nil, err
	}
	c := &cacheCluster{cl: cl, stop: stop}
	fail := func(err error) (*cacheCluster, error) { stop(); return nil, err }
	if len(s.settings) > 0 {
		if err := elasticbench.Retry(ctx, func(ctx context.Context) error { _, err := cl.Settings(ctx, s.settings); return err }); err != nil {
			return fail(fmt.Errorf("settings %v: %w", s.settings, err))
		}
	}
	onFull := "evict"
	if s.grow {
		onFull = "grow"
	}
	var created *tidekvpb.KeySpace
	if err := elasticbench.Retry(ctx, func(ctx context.Context) error {
		var err error
		created, err = cl.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: cacheName, Mode: "hashed", Rf: 1, Engine: "memory",
			CapacityPerNode: s.capacity, OnFull: onFull, MissHandler: s.missHandler})
		return err
	}); err != nil {
		return fail(fmt.Errorf("creating the key space: %w", err))
	}
	if c.ks, err = cl.KeySpace(ctx, cacheName); err != nil {
		return fail(err)
	}
	c.lo, c.hi = keyspace.Span(keyspace.ID(created.GetId()))
	if err := c.place(ctx, s.nodes, o.Progress); err != nil {
		return fail(err)
	}
	return c, nil
}

// place lays the key space's hash slices out as the model does (slice i
// on the (i·nodes/slices)-th node), by hand: placement, left to itself,
// had them at 1 and 7 on 2 nodes and 1, 1, 2 and 4 on 4 after a minute
// (a new range sits out balancing for its cool-down, 30 s, and a move
// of a single-voter range is one at a time), so a static cache of n
// nodes held the key space on fewer.
func (c *cacheCluster) place(ctx context.Context, nodes int, progress io.Writer) error {
	var slots []*tidekvpb.RangeInfo
	deadline := time.Now().Add(time.Minute)
	for len(slots) != keyspace.HashSlices {
		if time.Now().After(deadline) {
			return fmt.Errorf("the key space has %d ranges after a minute, want its %d hash slices", len(slots), keyspace.HashSlices)
		}
		time.Sleep(time.Second)
		var err error
		if slots, err = c.ranges(ctx); err != nil {
			slots = nil
		}
	}
	st, err := c.cl.Status(ctx)
	if err != nil {
		return err
	}
	var ids []uint64
	for _, n := range st.GetNodes() {
		if n.GetLive() {
			ids = append(ids, n.GetNode().GetNodeId())
		}
	}
	if len(ids) != nodes {
		return fmt.Errorf("%d live nodes, want %d", len(ids), nodes)
	}
	slices.Sort(ids)
	moved := 0
	for i, r := range slots {
		to, from := ids[i*nodes/len(slots)], r.GetDesc().GetReplicas()[0].GetNodeId()
		if to == from {
			continue
		}
		if err := elasticbench.Retry(ctx, func(ctx context.Context) error {
			_, err := c.cl.ChangeReplicas(ctx, r.GetDesc().GetRangeId(), to, from)
			return err
		}); err != nil {
			return fmt.Errorf("moving hash slice %d from node %d to %d: %w", i, from, to, err)
		}
		moved++
	}
	per, _, err := c.shares(ctx)
	counts := map[uint64]int{}
	for id, n := range per {
		counts[id] = n.ranges
	}
	fmt.Fprintf(progress, "%d nodes: %d of the key space's %d slices moved by hand; slices per node %v (%v)\n", nodes, moved, len(slots), counts, err)
	return err
}

// ranges are the key space's ranges in key order.
func (c *cacheCluster) ranges(ctx context.Context) ([]*tidekvpb.RangeInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.cl.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	var out []*tidekvpb.RangeInfo
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		if bytes.Compare(d.GetStartKey(), c.hi) >= 0 || (len(d.GetEndKey()) > 0 && bytes.Compare(d.GetEndKey(), c.lo) <= 0) {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *tidekvpb.RangeInfo) int {
		return bytes.Compare(a.GetDesc().GetStartKey(), b.GetDesc().GetStartKey())
	})
	return out, nil
}

// nodeShare is what one node holds of the key space.
type nodeShare struct {
	bytes  uint64
	ranges int
}

// shares is each node's share of the key space as the range reports
// (every 3 s) have it, and the live nodes' count.
func (c *cacheCluster) shares(ctx context.Context) (map[uint64]nodeShare, int, error) {
	rs, err := c.ranges(ctx)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	per := map[uint64]nodeShare{}
	for _, r := range rs {
		for _, rd := range r.GetDesc().GetReplicas() {
			s := per[rd.GetNodeId()]
			s.bytes += r.GetBytes()
			s.ranges++
			per[rd.GetNodeId()] = s
		}
	}
	st, err := c.cl.Status(ctx)
	if err != nil {
		return per, 0, err
	}
	live := 0
	for _, n := range st.GetNodes() {
		if n.GetLive() {
			live++
		}
	}
	return per, live, nil
}

// record is the key space's entry in the catalogue: keys, bytes and the
// evictions summed over the nodes' heartbeats.
func (c *cacheCluster) record(ctx context.Context) (*tidekvpb.KeySpace, error) {
	all, err := c.cl.KeySpaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range all {
		if k.GetName() == cacheName {
			return k, nil
		}
	}
	return nil, fmt.Errorf("key space %q not listed", cacheName)
}

func mib(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
