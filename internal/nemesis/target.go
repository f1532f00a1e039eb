package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/launcher"
)

// launcherTarget does faults to a launcher cluster's processes: signals,
// and partitions through each node's fault-injection endpoint; and
// operations through the cluster's admin RPCs.
type launcherTarget struct {
	lc     *launcher.Cluster
	cl     *client.Client
	faults FaultEndpoint
	ids    *nodeIDs // launcher index -> node ID, for cutting links
	ops    *opCounts
	// keys are the workload's, among which layout operations split,
	// merge and transfer leases.
	keys []string
	// recommissionWithin bounds the retries of a recommission, which the
	// run needs to recover.
	recommissionWithin time.Duration
	logf               func(string, ...any)
}

// opCounts counts moves by outcome; a refusal is no failure (a fault may
// explain it), but its reason is logged.
type opCounts struct {
	mu             sync.Mutex
	moves, movesOK int
	// diskFails are the disk failures done, diskStops those that stopped
	// their node by themselves; replaced the nodes wiped.
	diskFails, diskStops, replaced int
	// layout counts RangeSplit, Merge and LeaseTransfer operations.
	layout map[Kind]LayoutCounts
	// skewsBeyond are the skews beyond the max offset, skewsRefused those
	// whose node the cluster showed untrusted and then leading no range;
	// skewWatch watches each node's current one.
	skewsBeyond, skewsRefused int
	skewWatch                 map[int]skewWatch
}

// skewWatch is a watch of a skew beyond the max offset: closing stop ends
// it, and refused then says what it saw.
type skewWatch struct {
	stop    chan struct{}
	refused chan bool
}

// newLauncherTarget also learns each node's ID from the cluster's node
// list: a partition names peers by node ID, which join order decides.
func newLauncherTarget(ctx context.Context, lc *launcher.Cluster, cl *client.Client, c ChaosConfig, keys []string, logf func(string, ...any)) (launcherTarget, error) {
	t := launcherTarget{lc: lc, cl: cl, faults: NewFaultEndpoint(lc.Config().HTTPTLS), ids: &nodeIDs{m: map[int]uint64{}},
		ops: &opCounts{layout: map[Kind]LayoutCounts{}, skewWatch: map[int]skewWatch{}}, keys: keys, recommissionWithin: c.ConvergeWithin, logf: logf}
	resp, err := cl.Ranges(ctx)
	if err != nil {
		return t, fmt.Errorf("reading the node list: %w", err)
	}
	for i := 1; i <= lc.Config().Nodes; i++ {
		for _, n := range resp.GetNodes() {
			if n.GetGrpcAddr() == lc.Config().Node(i).GRPCAddr {
				t.ids.set(i, n.GetNodeId())
			}
		}
	}
	return t, nil
}

// nodeIDs maps launcher indexes to node IDs; a replaced node's changes
// while operations read it, and the ID it had is kept until its replicas
// are re-created.
type nodeIDs struct {
	mu  sync.Mutex
	m   map[int]uint64
	old map[int]uint64
}

// wipe notes that node i's current ID is about to lose its data.
func (n *nodeIDs) wipe(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.old == nil {
		n.old = map[int]uint64{}
	}
	n.old[i] = n.m[i]
}

// wiped is the ID node i had when it was last wiped.
func (n *nodeIDs) wiped(i int) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.old[i]
}

func (n *nodeIDs) get(i int) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[i]
}

// set records id for i unless i already has a newer (higher) one.
func (n *nodeIDs) set(i int, id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[i] = max(n.m[i], id)
}

// CutLinks has every node of a drop its Raft traffic with the nodes of b
// and every node of b with those of a, so the cut holds both ways whoever
// sends.
func (t launcherTarget) CutLinks(a, b []int) error {
	if b == nil {
		for i := 1; i <= t.lc.Config().Nodes; i++ {
			if !slices.Contains(a, i) {
				b = append(b, i)
			}
		}
	}
	var errs []error
	for _, side := range [][2][]int{{a, b}, {b, a}} {
		peers, err := t.nodeIDs(side[1])
		if err != nil {
			return err
		}
		for _, i := range side[0] {
			errs = append(errs, t.partition(i, peers))
		}
	}
	return errors.Join(errs...)
}

// HealLinks heals every node the cut touched: a node has one cut set, so
// healing it heals all its links.
func (t launcherTarget) HealLinks(a, b []int) error {
	var errs []error
	for i := 1; i <= t.lc.Config().Nodes; i++ {
		if slices.Contains(a, i) || b == nil || slices.Contains(b, i) {
			errs = append(errs, t.Heal(i))
		}
	}
	return errors.Join(errs...)
}

// nodeIDs is the fault endpoint's peers parameter for launcher nodes.
func (t launcherTarget) nodeIDs(nodes []int) (string, error) {
	ids := make([]string, len(nodes))
	for k, i := range nodes {
		if t.ids.get(i) == 0 {
			return "", fmt.Errorf("node %d is not in the cluster's node list", i)
		}
		ids[k] = fmt.Sprint(t.ids.get(i))
	}
	return strings.Join(ids, ","), nil
}

// MoveReplica moves node from's voter of the range pick chooses; a
// failure is counted and logged, not returned: the fault it meets may
// refuse it.
func (t launcherTarget) MoveReplica(ctx context.Context, from int, pick uint64) error {
	resp, err := t.cl.Ranges(ctx)
	if err == nil {
		rangeID, to, ok := pickMove(resp, t.ids.get(from), pick)
		if !ok {
			t.logf("    move off node %d: it has no voter to move", from)
			return nil
		}
		_, err = t.cl.ChangeReplicas(ctx, rangeID, to, t.ids.get(from))
		t.logf("    move of range %d from node ID %d to node ID %d: %v", rangeID, t.ids.get(from), to, orOK(err))
	}
	t.ops.mu.Lock()
	defer t.ops.mu.Unlock()
	t.ops.moves++
	if err == nil {
		t.ops.movesOK++
	}
	return nil
}

// pickMove chooses, by pick, one of the ranges with a voter on node from
// and a node without a replica (in range ID order), and one such node
// (in node ID order) to move that voter to.
func pickMove(resp *tidekvpb.RangesResponse, from uint64, pick uint64) (rangeID, to uint64, ok bool) {
	type cand struct {
		rangeID uint64
		to      []uint64
	}
	var cands []cand
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		holds := func(n uint64) bool {
			return slices.ContainsFunc(d.GetReplicas(), func(rd *tidekvpb.ReplicaDescriptor) bool { return rd.GetNodeId() == n })
		}
		if !slices.ContainsFunc(d.GetReplicas(), func(rd *tidekvpb.ReplicaDescriptor) bool {
			return rd.GetNodeId() == from && rd.GetType() == tidekvpb.ReplicaType_VOTER
		}) {
			continue
		}
		c := cand{rangeID: d.GetRangeId()}
		for _, n := range resp.GetNodes() {
			if !holds(n.GetNodeId()) {
				c.to = append(c.to, n.GetNodeId())
			}
		}
		if len(c.to) > 0 {
			slices.Sort(c.to)
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return 0, 0, false
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.rangeID, b.rangeID) })
	c := cands[pick%uint64(len(cands))]
	return c.rangeID, c.to[pick/uint64(len(cands))%uint64(len(c.to))], true
}

// Decommission starts node i's drain, logging a refusal, or cancels it,
// retrying for up to recommissionWithin: a node left draining is a
// cluster that did not recover, so that failure is an error.
func (t launcherTarget) Decommission(ctx context.Context, i int, drain bool) error {
	if drain {
		left, err := t.cl.Decommission(ctx, t.ids.get(i), true)
		t.logf("    decommission node %d (%d replicas): %v", i, left, orOK(err))
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.recommissionWithin)
	defer cancel()
	if _, err := t.cl.Decommission(ctx, t.ids.get(i), false); err != nil {
		return fmt.Errorf("recommissioning node %d: %w", i, err)
	}
	return nil
}

func orOK(err error) any {
	if err == nil {
		return "ok"
	}
	return err
}

func (t launcherTarget) Kill(i int) error { return t.lc.KillNode(i) }

func (t launcherTarget) Restart(ctx context.Context, i int) error {
	_, err := t.lc.StartNode(ctx, i)
	return err
}

// AwaitRepair waits, up to recommissionWithin, until no range has a
// replica on the node ID node i had before it was wiped, and every range
// has its voters on live nodes. It learns node i's new ID on the way, for
// later cuts and operations.
func (t launcherTarget) AwaitRepair(ctx context.Context, i int) error {
	old := t.ids.wiped(i)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, t.recommissionWithin)
	defer cancel()
	for {
		resp, err := t.cl.Ranges(ctx)
		if err == nil {
			for _, n := range resp.GetNodes() {
				if n.GetGrpcAddr() == t.lc.Config().Node(i).GRPCAddr {
					t.ids.set(i, n.GetNodeId())
				}
			}
			if err = replicasOn(resp, old); err == nil {
				break
			}
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			return fmt.Errorf("node %d's replicas (node ID %d before it was wiped) were not re-created within %v: %w", i, old, t.recommissionWithin, err)
		}
	}
	if _, err := awaitReplicated(ctx, t.cl, start, t.recommissionWithin, false); err != nil {
		return fmt.Errorf("after node %d was replaced: %w", i, err)
	}
	t.logf("    node ID %d's replicas re-created %.1f s after the new node started", old, time.Since(start).Seconds())
	return nil
}

// replicasOn is an error while a range has a replica on node.
func replicasOn(resp *tidekvpb.RangesResponse, node uint64) error {
	for _, r := range resp.GetRanges() {
		for _, rd := range r.GetDesc().GetReplicas() {
			if rd.GetNodeId() == node {
				return fmt.Errorf("range %d still has a replica on node %d", r.GetDesc().GetRangeId(), node)
			}
		}
	}
	return nil
}

// Wipe removes node i's data (not its log); it must be stopped.
func (t launcherTarget) Wipe(i int) error {
	if t.lc.Running(i) {
		return fmt.Errorf("node %d still runs: its data cannot be wiped", i)
	}
	t.ops.mu.Lock()
	t.ops.replaced++
	t.ops.mu.Unlock()
	t.ids.wipe(i)
	return launcher.WipeState(t.lc.Config().Node(i).DataDir)
}

func (t launcherTarget) Pause(i int) error  { return t.signal(i, syscall.SIGSTOP) }
func (t launcherTarget) Resume(i int) error { return t.signal(i, syscall.SIGCONT) }

func (t launcherTarget) signal(i int, sig syscall.Signal) error {
	p := t.lc.Process(i)
	if p == nil || p.Exited() {
		return fmt.Errorf("node %d is not running", i)
	}
	return p.Signal(sig)
}

func (t launcherTarget) Isolate(i int) error { return t.partition(i, "all") }
func (t launcherTarget) Heal(i int) error    { return t.partition(i, "none") }

func (t launcherTarget) partition(i int, peers string) error {
	return t.faults.SetPartition(t.lc.Config().Node(i).HTTPAddr, peers)
}

// Skew offsets node i's clock by d (0 removes the offset). An offset
// beyond the nodes' max offset must make the node refuse to serve (its
// offset monitor stops trusting its clock, and it gives up its leases),
// not produce anomalies: such a skew is watched until it is removed, and
// counted refused if the cluster's status showed the node untrusted and
// then holding no lease.
func (t launcherTarget) Skew(i int, d time.Duration) error {
	if d == 0 {
		t.endSkewWatch(i)
	}
	err := t.faults.post(t.lc.Config().Node(i).HTTPAddr, "skew?offset="+d.String())
	if err == nil && (d > hlc.DefaultMaxOffset || d < -hlc.DefaultMaxOffset) {
		t.startSkewWatch(i)
	}
	return err
}

// startSkewWatch polls the cluster's status and ranges every 200 ms until
// endSkewWatch, noting whether node i was untrusted and afterwards led no
// range.
func (t launcherTarget) startSkewWatch(i int) {
	stop, refused := make(chan struct{}), make(chan bool, 1)
	t.ops.mu.Lock()
	t.ops.skewsBeyond++
	t.ops.skewWatch[i] = skewWatch{stop: stop, refused: refused}
	t.ops.mu.Unlock()
	id := t.ids.get(i)
	go func() {
		untrusted, leaderless := false, false
		for !leaderless {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := t.cl.Status(ctx)
			if err == nil && slices.ContainsFunc(st.GetNodes(), func(n *tidekvpb.NodeStatus) bool {
				return n.GetNode().GetNodeId() == id && n.GetClockUntrusted()
			}) {
				untrusted = true
			}
			if untrusted {
				rs, err := t.cl.Ranges(ctx)
				leaderless = err == nil && !slices.ContainsFunc(rs.GetRanges(), func(ri *tidekvpb.RangeInfo) bool { return ri.GetLeaderNodeId() == id })
			}
			cancel()
			select {
			case <-stop:
				refused <- leaderless
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		<-stop
		refused <- true
	}()
}

// endSkewWatch ends node i's skew watch, if any, and counts what it saw.
func (t launcherTarget) endSkewWatch(i int) {
	t.ops.mu.Lock()
	w, ok := t.ops.skewWatch[i]
	delete(t.ops.skewWatch, i)
	t.ops.mu.Unlock()
	if !ok {
		return
	}
	close(w.stop)
	refused := <-w.refused
	t.logf("    node %d, its clock beyond the max offset: untrusted and holding no lease: %v", i, refused)
	if refused {
		t.ops.mu.Lock()
		t.ops.skewsRefused++
		t.ops.mu.Unlock()
	}
}

func (t launcherTarget) SlowDisk(i int, d time.Duration) error {
	return t.faults.post(t.lc.Config().Node(i).HTTPAddr, "disk?delay="+d.String())
}

// FailDisk makes node i's engine fail every write: the node stops at its
// next one.
func (t launcherTarget) FailDisk(i int) error {
	return t.faults.FailDisk(t.lc.Config().Node(i).HTTPAddr)
}

// RecoverDisk restarts node i, which its failed disk stopped; one still
// running wrote nothing since (no range of it took a write), and is
// killed first. Either is counted: a disk failure that stopped no node
// tested nothing.
func (t launcherTarget) RecoverDisk(ctx context.Context, i int) error {
	stopped := t.lc.Process(i) == nil || t.lc.Process(i).Exited()
	t.ops.mu.Lock()
	t.ops.diskFails++
	if stopped {
		t.ops.diskStops++
	}
	t.ops.mu.Unlock()
	if !stopped {
		t.logf("    node %d still ran on its failed disk (it wrote nothing): killed", i)
		if err := t.Kill(i); err != nil {
			return err
		}
	}
	return t.Restart(ctx, i)
}
