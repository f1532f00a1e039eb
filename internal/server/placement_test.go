package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/placement"
)

// sawEvent reports whether any node recorded an event of kind whose reason
// contains part (and whose subject is subject, unless "").
func (tc *testCluster) sawEvent(kind, part, subject string) bool {
	for _, s := range tc.nodes {
		if s == nil {
			continue
		}
		for _, e := range s.events.List(0) {
			if e.GetKind() == kind && strings.Contains(e.GetReason(), part) && (subject == "" || e.GetSubject() == subject) {
				return true
			}
		}
	}
	return false
}

// waitEvents waits until every wanted {kind, reason part, subject ("" for
// any)} was recorded:
// an operator's event is recorded when its admin call returns, which can
// be a little after its effect is visible.
func (tc *testCluster) waitEvents(t *testing.T, want ...[3]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, w := range want {
		for !tc.sawEvent(w[0], w[1], w[2]) {
			if time.Now().After(deadline) {
				tc.logEvents(t)
				t.Fatalf("no %s event mentioning %q", w[0], w[1])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (tc *testCluster) logEvents(t *testing.T) {
	for _, s := range tc.nodes {
		if s == nil {
			continue
		}
		for _, e := range s.events.List(0) {
			t.Logf("n%d %s %s: %s", e.GetNodeId(), e.GetKind(), e.GetSubject(), e.GetReason())
		}
	}
}

// replicaCounts counts the directory's replicas per node (meta range
// included).
func replicaCounts(ctx context.Context, tc *testCluster, c *client.Client) (map[uint64]int, *tidekvpb.RangesResponse, error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return nil, nil, err
	}
	counts := map[uint64]int{}
	descs := []*tidekvpb.RangeDescriptor{}
	for _, ri := range resp.GetRanges() {
		descs = append(descs, ri.GetDesc())
	}
	for _, s := range tc.nodes {
		if s != nil {
			if m := s.metaLeader(); m != nil {
				descs = append(descs, m.Desc())
			}
		}
	}
	for _, d := range descs {
		for _, rd := range d.GetReplicas() {
			counts[rd.GetNodeId()]++
		}
	}
	return counts, resp, nil
}

// fourNodesWithKeys starts four nodes, waits for 3-way replication and
// writes keys 0..n-1; the context ends with the test (60 s at most).
func fourNodesWithKeys(t *testing.T, n int) (*testCluster, *client.Client, context.Context) {
	t.Helper()
	tc := startCluster(t, 4)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	for i := range n {
		if err := c.Put(ctx, replicaKey(i), replicaValue(i)); err != nil {
			t.Fatal(err)
		}
	}
	return tc, c, ctx
}

// A node that stays silent beyond DeadNodeGrace is dead: its replicas are
// re-created on live nodes and nothing acknowledged is lost.
func TestRepairAfterNodeDeath(t *testing.T) {
	tc, c, ctx := fourNodesWithKeys(t, 100)
	d := userRange(t, c)
	var victim *Server
	for _, s := range tc.nodes {
		if replicaOf(d, s.NodeID()) != nil && s.metaLeader() == nil {
			victim = s
			break
		}
	}
	dead := victim.NodeID()
	victim.Stop()
	for i, s := range tc.nodes {
		if s == victim {
			tc.nodes[i] = nil
		}
	}
	eventually(t, 45*time.Second, "ranges repaired off the dead node", func() error {
		counts, resp, err := replicaCounts(ctx, tc, c)
		if err != nil {
			return err
		}
		if counts[dead] != 0 {
			return fmt.Errorf("node %d still holds %d replicas", dead, counts[dead])
		}
		for _, ri := range resp.GetRanges() {
			if v := len(voterNodes(ri.GetDesc())); v != 3 {
				return fmt.Errorf("range %d has %d voters", ri.GetDesc().GetRangeId(), v)
			}
		}
		return nil
	})
	tc.waitEvents(t, [3]string{"node-dead", "replaced", ""}, [3]string{"replica-move", "repair:", ""})
	checkAllKeys(t, c, 0, 100)
}

// A decommissioned node drains to zero replicas without the ranges ever
// going below three voters, and says so; recommission cancels.
func TestDecommissionDrains(t *testing.T) {
	tc, c, ctx := fourNodesWithKeys(t, 50)
	d := userRange(t, c)
	var node uint64
	for _, rd := range d.GetReplicas() {
		node = rd.GetNodeId()
	}
	left, err := c.Decommission(ctx, node, true)
	if err != nil || left == 0 {
		t.Fatalf("decommission: %d left, %v", left, err)
	}
	eventually(t, 45*time.Second, "node drained", func() error {
		_, resp, err := replicaCounts(ctx, tc, c)
		if err != nil {
			return err
		}
		for _, ri := range resp.GetRanges() {
			// In a joint configuration each half has its own voters.
			in, out := 0, 0
			for _, rd := range ri.GetDesc().GetReplicas() {
				switch rd.GetType() {
				case tidekvpb.ReplicaType_VOTER:
					in++
					out++
				case tidekvpb.ReplicaType_VOTER_INCOMING:
					in++
				case tidekvpb.ReplicaType_VOTER_OUTGOING:
					out++
				}
			}
			if in < 3 || out < 3 {
				t.Errorf("range %d went down to %d/%d voters: %v", ri.GetDesc().GetRangeId(), in, out, ri.GetDesc())
			}
		}
		if left, err = c.Decommission(ctx, node, true); err != nil || left != 0 {
			return fmt.Errorf("%d replicas left (%v)", left, err)
		}
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, ns := range st.GetNodes() {
			if ns.GetNode().GetNodeId() == node && ns.GetState() != meta.StateDrained {
				return fmt.Errorf("state %q", ns.GetState())
			}
		}
		return nil
	})
	checkAllKeys(t, c, 0, 50)
	tc.waitEvents(t, [3]string{"replica-move", "decommission:", ""})
	if _, err := c.Decommission(ctx, node, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "recommissioned node live", func() error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, ns := range st.GetNodes() {
			if ns.GetNode().GetNodeId() == node && ns.GetState() != meta.StateLive {
				return fmt.Errorf("state %q", ns.GetState())
			}
		}
		return nil
	})
}

// A node joining a cluster with data goes through both bootstrap phases
// and ends with its share of replicas.
func TestScaleOutBootstrap(t *testing.T) {
	// Cool-downs shrink by the control interval's factor (1 s in
	// production, 100 ms here): the new node's later moves otherwise wait
	// out a 30-s range cool-down, which is most of the test's time.
	cooled := func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.RangeCooldown, c.Placement.NodeCooldown = 3*time.Second, time.Second
	}
	tc := startClusterWith(t, 3, cooled)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range 60 {
		if err := c.Put(ctx, replicaKey(i), replicaValue(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []int{10, 20, 30, 40, 50} {
		if _, err := c.Split(ctx, replicaKey(k)); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitReplicated(c, 3)
	cfg := testConfig(t)
	cooled(&cfg)
	cfg.Join = []string{tc.nodes[0].Addr()}
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.nodes = append(tc.nodes, s)
	newID := s.NodeID()
	eventually(t, 60*time.Second, "the new node balanced", func() error {
		counts, _, err := replicaCounts(ctx, tc, c)
		if err != nil {
			return err
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		mean := float64(total) / 4
		for _, srv := range tc.nodes {
			if math.Abs(float64(counts[srv.NodeID()])-mean) > math.Max(1, 0.05*mean) {
				return fmt.Errorf("replica counts %v (mean %.2f)", counts, mean)
			}
		}
		return nil
	})
	subject := events.NodeSubject(newID)
	tc.waitEvents(t, [3]string{"bootstrap", "bootstrap phase 1", subject},
		[3]string{"bootstrap", "bootstrap phase 2", subject}, [3]string{"bootstrap", "bootstrap done", subject})
	checkAllKeys(t, c, 0, 60)
}

// Ranges above Θmax split at the key halving their data.
func TestSizeSplits(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = 64<<10, 16<<10
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	fillAndWaitSplits(t, c, 30*time.Second)
	tc.waitEvents(t, [3]string{"split", "size-split:", ""})
}

// A split decided on a range's old span (its descriptor generation) is not
// made on the range it has become: placement's split of a range that split
// since would cut the left half again, into quarters of what Θmax calls for.
func TestSplitAtExpectedGeneration(t *testing.T) {
	tc := startCluster(t, 1)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := c.Put(ctx, []byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.Split(ctx, []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	left := first.GetLeft()
	admin := &adminService{s: tc.nodes[0]}
	_, err = admin.Split(ctx, &tidekvpb.SplitRequest{RangeId: left.GetRangeId(), ExpectedGeneration: left.GetGeneration() - 1})
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "changed since the split was decided") {
		t.Fatalf("split at an old generation: %v, want ABORTED saying the range changed", err)
	}
	// The directory learns of the first split from its report, at its
	// own pace: it must come to hold its two ranges and no third.
	eventually(t, 10*time.Second, "the 2 ranges of the first split", func() error {
		resp, err := c.Ranges(ctx)
		if err != nil || len(resp.GetRanges()) != 2 {
			return fmt.Errorf("%d ranges, %v", len(resp.GetRanges()), err)
		}
		return nil
	})
	if _, err := admin.Split(ctx, &tidekvpb.SplitRequest{RangeId: left.GetRangeId(), ExpectedGeneration: left.GetGeneration()}); err != nil {
		t.Fatalf("split at the current generation: %v", err)
	}
}

// fillAndWaitSplits writes 300 KB into a cluster whose Θmax is 64 KiB and
// waits (up to within) until the ranges have split down to Θmax.
func fillAndWaitSplits(t *testing.T, c *client.Client, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	val := strings.Repeat("x", 1000)
	for i := range 300 {
		if err := c.Put(ctx, replicaKey(i), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, within, "ranges split down to at most Θmax", func() error {
		resp, err := c.Ranges(ctx)
		if err != nil {
			return err
		}
		if n := len(resp.GetRanges()); n < 4 {
			return fmt.Errorf("%d ranges", n)
		}
		for _, ri := range resp.GetRanges() {
			if ri.GetBytes() > 64<<10 {
				return fmt.Errorf("range %d holds %d bytes", ri.GetDesc().GetRangeId(), ri.GetBytes())
			}
		}
		return nil
	})
	checkAllKeysValue(t, c, 300, val)
}

// A range that outgrows Θmax is split within moments, not after the next
// periodic report and control round: here both are a minute apart, so only
// the size watch and the early round it wakes can split in time.
func TestSizeWatchSplitsBetweenReports(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = 64<<10, 16<<10
		c.ReportInterval, c.Control.Interval = time.Minute, time.Minute
		c.Control.DeadNodeGrace = 2 * time.Minute
	})
	c := tc.client()
	// An early round before the meta leaseholder has learnt liveness
	// decides nothing; the split would then wait for the periodic round.
	eventually(t, 10*time.Second, "liveness learnt", func() error {
		if len(tc.nodes[0].liveNodes()) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	fillAndWaitSplits(t, c, 20*time.Second)
}

func checkAllKeysValue(t *testing.T, c *client.Client, n int, val string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kvs, err := c.Scan(ctx, replicaKey(0), nil, 0)
	if err != nil || len(kvs) != n {
		t.Fatalf("scan: %d keys, %v", len(kvs), err)
	}
	for _, kv := range kvs {
		if string(kv.Value) != val {
			t.Fatalf("key %s has a %d-byte value", kv.Key, len(kv.Value))
		}
	}
}

// readLoad reads keys in a loop until stop is closed.
func readLoad(c *client.Client, keys func(i int) []byte, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.Get(ctx, keys(i))
		}
	}()
	return done
}

// hotRange is a 4-node cluster with one hot key read in a loop through
// the client until stopLoad, and the adaptive learner its reads earned.
type hotRange struct {
	tc      *testCluster
	c       *client.Client
	ctx     context.Context
	learner uint64 // the node of the adaptive learner
	stop    chan struct{}
	done    <-chan struct{}
}

// startHotRange reads one key hard (adaptive learners above 100 reads/s,
// at most one, load splits above splitQPS, range cool-down 3 s) until the
// range has an adaptive learner.
func startHotRange(t *testing.T, splitQPS float64, timeout time.Duration) *hotRange {
	t.Helper()
	tc := startClusterWith(t, 4, func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.AdaptiveReadQPS = 100
		c.Placement.SplitQPS = splitQPS
		c.Placement.MaxAdaptiveReplicas = 1
		c.Placement.RangeCooldown = 3 * time.Second
	})
	h := &hotRange{tc: tc, c: tc.client(), stop: make(chan struct{})}
	tc.waitReplicated(h.c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	h.ctx = ctx
	if err := h.c.Put(ctx, []byte("hot"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	h.done = readLoad(h.c, func(int) []byte { return []byte("hot") }, h.stop)
	eventually(t, 30*time.Second, "an adaptive learner", func() error {
		var err error
		if h.learner, err = adaptiveLearner(ctx, h.c); h.learner == 0 {
			return fmt.Errorf("none yet (%v)", err)
		}
		return nil
	})
	return h
}

// stopLoad ends the client's reads of the hot key.
func (h *hotRange) stopLoad() {
	close(h.stop)
	<-h.done
}

// waitLearnerGone waits until the range has no adaptive learner.
func (h *hotRange) waitLearnerGone(t *testing.T, what string) {
	t.Helper()
	eventually(t, 30*time.Second, what, func() error {
		if n, err := adaptiveLearner(h.ctx, h.c); n != 0 || err != nil {
			return fmt.Errorf("still on node %d (%v)", n, err)
		}
		return nil
	})
}

// adaptiveLearner is the node of the first adaptive learner in the
// directory (0: none).
func adaptiveLearner(ctx context.Context, c *client.Client) (uint64, error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return 0, err
	}
	for _, ri := range resp.GetRanges() {
		for _, rd := range ri.GetDesc().GetReplicas() {
			if rd.GetAdaptive() {
				return rd.GetNodeId(), nil
			}
		}
	}
	return 0, nil
}

// A range under heavy reads gets an adaptive learner replica, which goes
// again once the range cools; one hot key is reported, not split.
func TestAdaptiveReplicas(t *testing.T) {
	h := startHotRange(t, 150, 60*time.Second)
	eventually(t, 10*time.Second, "a hot-key note", func() error {
		if !h.tc.sawEvent("placement", "on one key: no split", "") {
			return fmt.Errorf("no note")
		}
		return nil
	})
	h.stopLoad()
	h.waitLearnerGone(t, "the learner removed after cooling")
	h.tc.waitEvents(t, [3]string{"learner-add", "adaptive-replicas:", ""}, [3]string{"replica-remove", "cooled", ""})
}

// An adaptive learner that serves a range's reads is kept while it does:
// its node reports the reads it serves for the range (the leaseholder
// then reads little), and placement counts them as the range's. Once they
// stop, the learner goes.
func TestAdaptiveLearnerKeptWhileItServes(t *testing.T) {
	h := startHotRange(t, 1e9, 90*time.Second)
	h.stopLoad()
	// Every read now goes to the learner's node, served by its replica.
	var addr string
	for _, n := range h.tc.nodes {
		if n.NodeID() == h.learner {
			addr = n.Addr()
		}
	}
	kv := kvClient(t, addr)
	stop := make(chan struct{})
	served := make(chan int)
	go func() {
		n := 0
		defer func() { served <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := kv.Get(h.ctx, &tidekvpb.GetRequest{Key: []byte("hot"), ReadMode: tidekvpb.ReadMode_ANY}); err == nil {
				n++
			}
		}
	}()
	// Past the range cool-down after the learner's addition, and many
	// report windows: the leaseholder's near-zero reads reach placement.
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if n, err := adaptiveLearner(h.ctx, h.c); err == nil && n == 0 {
			close(stop)
			h.tc.logEvents(t)
			t.Fatalf("the learner on node %d was removed while it served the range's reads (%d served)", h.learner, <-served)
		}
	}
	close(stop)
	if n := <-served; n < 1000 {
		t.Fatalf("the learner's node served only %d reads", n)
	}
	h.waitLearnerGone(t, "the learner removed once its reads stopped")
}

// A range whose load stays above the threshold splits at the median of its
// sampled requests.
func TestLoadSplit(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.SplitQPS = 150
		c.Placement.AdaptiveReadQPS = 1e9
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 100 {
		if err := c.Put(ctx, replicaKey(i), replicaValue(i)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := readLoad(c, func(i int) []byte { return replicaKey(i % 100) }, stop)
	eventually(t, 30*time.Second, "a load split", func() error {
		if !tc.sawEvent("split", "load-split:", "") {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	close(stop)
	<-done
	checkAllKeys(t, c, 0, 100)
}

// Cluster settings change placement at runtime; invalid ones are refused
// and change nothing.
func TestRuntimeSettings(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Placement.Rebalance = true })
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	val := strings.Repeat("x", 1000)
	for i := range 200 {
		if err := c.Put(ctx, replicaKey(i), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Settings(ctx, map[string]string{"range-max-bytes": "10KiB"}); err == nil || !strings.Contains(err.Error(), "oscillate") {
		t.Fatalf("range-max below 2 × range-min accepted: %v", err)
	}
	if _, err := c.Settings(ctx, map[string]string{"no-such-setting": "1"}); err == nil || !strings.Contains(err.Error(), "unknown setting") {
		t.Fatalf("unknown setting: %v", err)
	}
	if got, err := c.Settings(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("refused changes stuck: %v %v", got, err)
	}
	resp, err := c.Ranges(ctx)
	if err != nil || len(resp.GetRanges()) != 1 {
		t.Fatalf("ranges before: %v %v", resp, err)
	}
	got, err := c.Settings(ctx, map[string]string{"range-max-bytes": "64KiB", "range-min-bytes": "16KiB"})
	if err != nil || got["range-max-bytes"] != "64KiB" || got["range-min-bytes"] != "16KiB" {
		t.Fatalf("settings: %v %v", got, err)
	}
	eventually(t, 30*time.Second, "splits under the new Θmax", func() error {
		resp, err := c.Ranges(ctx)
		if err != nil {
			return err
		}
		if n := len(resp.GetRanges()); n < 3 {
			return fmt.Errorf("%d ranges", n)
		}
		return nil
	})
	tc.waitEvents(t, [3]string{"setting", "range-max-bytes set to 64KiB", ""})
	if got, err := c.Settings(ctx, map[string]string{"range-max-bytes": "", "range-min-bytes": ""}); err != nil || len(got) != 0 {
		t.Fatalf("reset: %v %v", got, err)
	}
}

// Small adjacent ranges merge back (freeze, confirm, merge) while clients
// keep writing; nothing acknowledged is lost.
func TestMerges(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.MergeCooldown = 0
		// The writer below makes its range hot; splits for load would
		// fight the merges this test is about.
		c.Placement.LoadSplitSlack, c.Placement.SplitQPS = 0, 1e9
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range 40 {
		if err := c.Put(ctx, replicaKey(i), replicaValue(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Pause placement while splitting, so the splits are not merged away
	// before they are all made.
	if _, err := c.Settings(ctx, map[string]string{"merges": "false"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{10, 20, 30} {
		if _, err := c.Split(ctx, replicaKey(k)); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitReplicated(c, 3)
	before, err := c.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	written := make(chan int, 1)
	go func() {
		n := 0
		defer func() { written <- n }()
		for i := 40; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.Put(ctx, replicaKey(i), replicaValue(i)); err != nil {
				t.Errorf("put during merges: %v", err)
				return
			}
			n = i + 1
		}
	}()
	if _, err := c.Settings(ctx, map[string]string{"merges": ""}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the ranges merged back into one", func() error {
		resp, err := c.Ranges(ctx)
		if err != nil {
			return err
		}
		if n := len(resp.GetRanges()); n != 1 {
			return fmt.Errorf("%d ranges", n)
		}
		return nil
	})
	close(stop)
	n := <-written
	tc.waitEvents(t, [3]string{"merge", "merged range", ""})
	// A range's report that reaches the meta range after the range was
	// merged away must not bring it back: clients would be routed to it
	// for good.
	for _, r := range before.GetRanges() {
		tc.nodes[0].report.Report(r.GetDesc())
	}
	if resp, err := c.Ranges(ctx); err != nil || len(resp.GetRanges()) != 1 {
		t.Fatalf("after late reports of the merged ranges: %d ranges, %v; want 1", len(resp.GetRanges()), err)
	}
	checkAllKeys(t, c, 0, n)
	for _, s := range tc.nodes {
		if got := len(s.Store().Replicas()); got != 2 {
			t.Errorf("node %d holds %d replicas, want 2 (meta and the one user range)", s.NodeID(), got)
		}
	}
}

// The adaptive learners one decision adds to a range run side by side
// (placement.Together): both operators, started at once through the
// executor, succeed; the leaseholder applies the changes one at a time.
func TestAdaptiveLearnersAddedTogether(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Placement.ReplicationFactor = 1 })
	c := tc.client()
	tc.waitReplicated(c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var d *tidekvpb.RangeDescriptor
	for _, ri := range resp.GetRanges() {
		if ri.GetDesc().GetRangeId() != keys.MetaRangeID {
			d = ri.GetDesc()
		}
	}
	if d == nil || len(d.GetReplicas()) != 1 {
		t.Fatalf("want a data range with one replica, got %v", d)
	}
	// The joining nodes become members as the meta range learns of them.
	eventually(t, 10*time.Second, "every node a member", func() error {
		for _, s := range tc.nodes {
			if !(rangeNode{tc.nodes[0]}).IsMember(s.NodeID()) {
				return fmt.Errorf("node %d is not yet", s.NodeID())
			}
		}
		return nil
	})
	errs := make(chan error, 2)
	exec := opExecutor{tc.nodes[0]}
	for _, s := range tc.nodes {
		if n := s.NodeID(); n != d.GetReplicas()[0].GetNodeId() {
			exec.Execute(placement.Operator{Kind: placement.OpAddLearner, Range: d.GetRangeId(), Target: n, Policy: "test", Reason: "together"},
				func(err error) { errs <- err })
		}
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	resp, err = c.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ri := range resp.GetRanges() {
		if ri.GetDesc().GetRangeId() != d.GetRangeId() {
			continue
		}
		adaptive := 0
		for _, rd := range ri.GetDesc().GetReplicas() {
			if rd.GetAdaptive() {
				adaptive++
			}
		}
		if adaptive != 2 {
			t.Fatalf("range %d has %d adaptive learners, want 2: %v", d.GetRangeId(), adaptive, ri.GetDesc())
		}
	}
}
