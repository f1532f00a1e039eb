package client

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kvbatch"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// fakeCluster is an in-process stand-in for a TideKV cluster: one gRPC server
// per node, an authoritative range map that decides which node answers what
// (and with which routing error), a single shared store, and per-node hooks
// for scripted failures.
type fakeCluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes map[uint64]*fakeNode
	// ranges is the truth, sorted by start key.
	ranges []*fakeRange
	// meta, when set, is what Admin.Ranges reports instead of the truth
	// (the meta range lagging behind).
	meta []*tidekvpb.RangeInfo
	data map[string][]byte
	// loads are what NodeLoads reports: node -> score and sample age.
	loads map[uint64]fakeLoad
	// noGenerations: reads report no range generation, as older nodes.
	noGenerations bool
}

type fakeLoad struct {
	score float64
	age   time.Duration
}

type fakeRange struct {
	desc   *tidekvpb.RangeDescriptor
	leader uint64 // 0: election in progress
}

// hookFunc may fail a call before the fake evaluates it; returning nil lets it
// through. It runs without the cluster lock, so it may block or reconfigure.
type hookFunc func(ctx context.Context, method string, key []byte) error

type fakeNode struct {
	c    *fakeCluster
	id   uint64
	addr string
	srv  *grpc.Server

	mu      sync.Mutex
	noBatch bool           // serve no Batch stream (a node older than it)
	streams int            // Batch streams opened
	rpcs    map[string]int // KV handler entries by gRPC method (a stream's requests count as Batch)
	calls   map[string]int
	modes   map[string]int // "Get BOUNDED 500": reads by method, mode and bound
	hook    hookFunc
	// hlc is the HLC the node's Batch answers carry (zero: none, as from
	// a node before HLC); sawHLC the newest a request message carried.
	hlc, sawHLC hlc.Timestamp
}

func newFakeCluster(t *testing.T, numNodes int) *fakeCluster {
	t.Helper()
	c := &fakeCluster{t: t, nodes: map[uint64]*fakeNode{}, data: map[string][]byte{}}
	for id := uint64(1); id <= uint64(numNodes); id++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := &fakeNode{c: c, id: id, addr: lis.Addr().String(), srv: grpc.NewServer(), calls: map[string]int{}, rpcs: map[string]int{}, modes: map[string]int{}}
		tidekvpb.RegisterKVServer(n.srv, fakeKV{n: n})
		tidekvpb.RegisterAdminServer(n.srv, fakeAdmin{n: n})
		go func() { _ = n.srv.Serve(lis) }()
		c.nodes[id] = n
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.srv.Stop()
		}
	})
	return c
}

// rng builds a range: id, [start, end), leaseholder, voters.
func rng(id uint64, start, end string, leader uint64, voters ...uint64) *fakeRange {
	d := &tidekvpb.RangeDescriptor{RangeId: id, StartKey: []byte(start), EndKey: []byte(end), Generation: 1}
	for i, n := range voters {
		d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: n, ReplicaId: uint64(i + 1)})
	}
	if len(end) == 0 {
		d.EndKey = nil
	}
	return &fakeRange{desc: d, leader: leader}
}

func (c *fakeCluster) setRanges(rs ...*fakeRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ranges = rs
	sort.Slice(c.ranges, func(i, j int) bool {
		return bytes.Compare(c.ranges[i].desc.StartKey, c.ranges[j].desc.StartKey) < 0
	})
}

// freezeMeta makes Admin.Ranges keep reporting the current truth from now on.
func (c *fakeCluster) freezeMeta() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.meta = c.rangeInfosLocked()
}

func (c *fakeCluster) rangeInfosLocked() []*tidekvpb.RangeInfo {
	var out []*tidekvpb.RangeInfo
	for _, r := range c.ranges {
		out = append(out, &tidekvpb.RangeInfo{Desc: proto.Clone(r.desc).(*tidekvpb.RangeDescriptor), LeaderNodeId: r.leader})
	}
	return out
}

// setLeader moves the lease of range id (0: no leaseholder).
func (c *fakeCluster) setLeader(rangeID, leader uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.ranges {
		if r.desc.RangeId == rangeID {
			r.leader = leader
		}
	}
}

// split splits the range containing key; the right half gets newID, the given
// leaseholder and voters (nil: same as the left).
func (c *fakeCluster) split(key string, newID, rightLeader uint64, rightVoters ...uint64) (*tidekvpb.RangeDescriptor, *tidekvpb.RangeDescriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rangeForLocked([]byte(key))
	left := proto.Clone(r.desc).(*tidekvpb.RangeDescriptor)
	left.EndKey = []byte(key)
	left.Generation++
	right := proto.Clone(r.desc).(*tidekvpb.RangeDescriptor)
	right.RangeId = newID
	right.StartKey = []byte(key)
	right.Generation = 1
	if rightVoters != nil {
		right.Replicas = nil
		for i, n := range rightVoters {
			right.Replicas = append(right.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: n, ReplicaId: uint64(i + 1)})
		}
	}
	r.desc = left
	c.ranges = append(c.ranges, &fakeRange{desc: right, leader: rightLeader})
	sort.Slice(c.ranges, func(i, j int) bool {
		return bytes.Compare(c.ranges[i].desc.StartKey, c.ranges[j].desc.StartKey) < 0
	})
	return left, right
}

func (c *fakeCluster) rangeForLocked(key []byte) *fakeRange {
	for _, r := range c.ranges {
		if bytes.Compare(key, r.desc.StartKey) >= 0 && (len(r.desc.EndKey) == 0 || bytes.Compare(key, r.desc.EndKey) < 0) {
			return r
		}
	}
	return nil
}

func (c *fakeCluster) addrs() []string {
	var out []string
	for id := uint64(1); id <= uint64(len(c.nodes)); id++ {
		out = append(out, c.nodes[id].addr)
	}
	return out
}

func (c *fakeCluster) node(id uint64) *fakeNode { return c.nodes[id] }

// newClient returns a client seeded with node 1 only, so the rest of the
// cluster must be learned from Admin.Ranges.
func (c *fakeCluster) newClient(mod func(*Config)) *Client {
	c.t.Helper()
	cfg := Config{Addrs: []string{c.nodes[1].addr}, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	cl, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// recordPauses makes cl's pauses between attempts visible: the returned
// function gives the pauses requests took since its last call. A test that
// a request did not back off asks for none, rather than timing the request
// against a bound that a loaded machine's scheduling delays can exceed.
func recordPauses(cl *Client) func() []time.Duration {
	var (
		mu     sync.Mutex
		paused []time.Duration
	)
	cl.pause = func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		paused = append(paused, d)
		mu.Unlock()
		return sleep(ctx, d)
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		p := paused
		paused = nil
		return p
	}
}

// resetCalls zeroes every node's call counters.
func (c *fakeCluster) resetCalls() {
	for _, n := range c.nodes {
		n.mu.Lock()
		n.calls = map[string]int{}
		n.modes = map[string]int{}
		n.mu.Unlock()
	}
}

// setLoad sets the score NodeLoads reports for node id, sampled age ago.
func (c *fakeCluster) setLoad(id uint64, score float64, age time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loads == nil {
		c.loads = map[uint64]fakeLoad{}
	}
	c.loads[id] = fakeLoad{score: score, age: age}
}

// methodCounts renders "n1=2 n3=1" for one method (nodes with calls only).
func (c *fakeCluster) methodCounts(method string) string {
	var parts []string
	for id := uint64(1); id <= uint64(len(c.nodes)); id++ {
		if k := c.nodes[id].count(method); k > 0 {
			parts = append(parts, fmt.Sprintf("n%d=%d", id, k))
		}
	}
	return strings.Join(parts, " ")
}

// modeCount is how many reads of method with this mode and bound (ms) n
// received.
func (n *fakeNode) modeCount(method string, mode tidekvpb.ReadMode, ms uint32) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.modes[fmt.Sprintf("%s %s %d", method, mode, ms)]
}

func (n *fakeNode) noteMode(method string, mode tidekvpb.ReadMode, ms uint32) {
	n.mu.Lock()
	n.modes[fmt.Sprintf("%s %s %d", method, mode, ms)]++
	n.mu.Unlock()
}

// callCounts renders "n1:Get=2 n3:Put=1" for the KV/admin methods called.
func (c *fakeCluster) callCounts() string {
	var parts []string
	for id := uint64(1); id <= uint64(len(c.nodes)); id++ {
		n := c.nodes[id]
		n.mu.Lock()
		var ms []string
		for m, k := range n.calls {
			ms = append(ms, fmt.Sprintf("%s=%d", m, k))
		}
		n.mu.Unlock()
		sort.Strings(ms)
		for _, m := range ms {
			parts = append(parts, fmt.Sprintf("n%d:%s", id, m))
		}
	}
	return strings.Join(parts, " ")
}

func (n *fakeNode) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[method]
}

func (n *fakeNode) setHook(h hookFunc) {
	n.mu.Lock()
	n.hook = h
	n.mu.Unlock()
}

// enter records a call and runs the hook.
func (n *fakeNode) enter(ctx context.Context, method string, key []byte) error {
	n.mu.Lock()
	n.calls[method]++
	if m, ok := grpc.Method(ctx); ok {
		n.rpcs[m]++
	}
	h := n.hook
	n.mu.Unlock()
	if h != nil {
		return h(ctx, method, key)
	}
	return nil
}

func statusWith(code codes.Code, msg string, d *tidekvpb.ErrorDetail) error {
	st, err := status.New(code, msg).WithDetails(d)
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// route decides, like a real node, whether n may evaluate a request on keys:
// it must hold a replica of the first key's range, hold its lease, and the
// other keys must lie in that range.
func (n *fakeNode) route(keys ...[]byte) error {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rangeForLocked(keys[0])
	if r == nil || !hasReplica(r.desc, n.id) {
		return statusWith(codes.FailedPrecondition, "no replica", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_NOT_FOUND})
	}
	desc := proto.Clone(r.desc).(*tidekvpb.RangeDescriptor)
	if r.leader != n.id {
		d := &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_NOT_LEASEHOLDER, Range: desc}
		if l := c.nodes[r.leader]; l != nil {
			d.LeaderNodeId, d.LeaderAddr = l.id, l.addr
		}
		return statusWith(codes.FailedPrecondition, "not leaseholder", d)
	}
	for _, k := range keys[1:] {
		if bytes.Compare(k, r.desc.StartKey) < 0 || (len(r.desc.EndKey) > 0 && bytes.Compare(k, r.desc.EndKey) >= 0) {
			return statusWith(codes.FailedPrecondition, "key outside range", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_KEY_MISMATCH, Range: desc})
		}
	}
	return nil
}

// routeRead is route for reads: LINEARIZABLE ones need the lease, BOUNDED
// and ANY ones any replica (a scripted hook plays a stale replica).
func (n *fakeNode) routeRead(mode tidekvpb.ReadMode, keys ...[]byte) error {
	if mode == tidekvpb.ReadMode_LINEARIZABLE {
		return n.route(keys...)
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rangeForLocked(keys[0])
	if r == nil || !hasReplica(r.desc, n.id) {
		return statusWith(codes.FailedPrecondition, "no replica", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_NOT_FOUND})
	}
	for _, k := range keys[1:] {
		if bytes.Compare(k, r.desc.StartKey) < 0 || (len(r.desc.EndKey) > 0 && bytes.Compare(k, r.desc.EndKey) >= 0) {
			return statusWith(codes.FailedPrecondition, "key outside range", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_KEY_MISMATCH, Range: proto.Clone(r.desc).(*tidekvpb.RangeDescriptor)})
		}
	}
	return nil
}

// generationLocked is what a read of key reports as its range's generation.
func (c *fakeCluster) generationLocked(key []byte) uint64 {
	if c.noGenerations {
		return 0
	}
	return c.rangeForLocked(key).desc.Generation
}

func hasReplica(d *tidekvpb.RangeDescriptor, node uint64) bool {
	for _, r := range d.Replicas {
		if r.NodeId == node {
			return true
		}
	}
	return false
}

type fakeKV struct {
	tidekvpb.UnimplementedKVServer
	n *fakeNode
}

// Batch serves the stream as a node does, each request through the fake's
// unary method (hooks included), unless the node plays an older binary
// without it.
func (s fakeKV) Batch(stream tidekvpb.KV_BatchServer) error {
	s.n.mu.Lock()
	noBatch := s.n.noBatch
	s.n.streams++
	s.n.mu.Unlock()
	if noBatch {
		return s.UnimplementedKVServer.Batch(stream)
	}
	var (
		sendMu sync.Mutex
		wg     sync.WaitGroup
	)
	defer wg.Wait()
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		s.n.mu.Lock()
		if ts := msg.GetHlc().HLC(); s.n.sawHLC.Less(ts) {
			s.n.sawHLC = ts
		}
		var answerHLC *tidekvpb.Timestamp
		if !s.n.hlc.IsZero() {
			answerHLC = tidekvpb.FromHLC(s.n.hlc)
		}
		s.n.mu.Unlock()
		for _, req := range msg.Requests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := kvbatch.Dispatch(stream.Context(), s, req)
				sendMu.Lock()
				defer sendMu.Unlock()
				_ = stream.Send(&tidekvpb.KVBatchResponse{Responses: []*tidekvpb.KVResponse{resp}, Hlc: answerHLC})
			}()
		}
	}
}

func (s fakeKV) Get(ctx context.Context, req *tidekvpb.GetRequest) (*tidekvpb.GetResponse, error) {
	s.n.noteMode("Get", req.ReadMode, req.MaxStalenessMs)
	if err := s.n.enter(ctx, "Get", req.Key); err != nil {
		return nil, err
	}
	if err := s.n.routeRead(req.ReadMode, req.Key); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.data[string(req.Key)]
	return &tidekvpb.GetResponse{Found: ok, Value: v, RangeGeneration: c.generationLocked(req.Key)}, nil
}

func (s fakeKV) Put(ctx context.Context, req *tidekvpb.PutRequest) (*tidekvpb.PutResponse, error) {
	if err := s.n.enter(ctx, "Put", req.Key); err != nil {
		return nil, err
	}
	if err := s.n.route(req.Key); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data[string(req.Key)] = req.Value
	return &tidekvpb.PutResponse{}, nil
}

func (s fakeKV) Delete(ctx context.Context, req *tidekvpb.DeleteRequest) (*tidekvpb.DeleteResponse, error) {
	if err := s.n.enter(ctx, "Delete", req.Key); err != nil {
		return nil, err
	}
	if err := s.n.route(req.Key); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.data[string(req.Key)]
	delete(c.data, string(req.Key))
	return &tidekvpb.DeleteResponse{Deleted: ok}, nil
}

func (s fakeKV) Scan(ctx context.Context, req *tidekvpb.ScanRequest) (*tidekvpb.ScanResponse, error) {
	s.n.noteMode("Scan", req.ReadMode, req.MaxStalenessMs)
	if err := s.n.enter(ctx, "Scan", req.StartKey); err != nil {
		return nil, err
	}
	if err := s.n.routeRead(req.ReadMode, req.StartKey); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rangeForLocked(req.StartKey)
	end := req.EndKey
	var resume []byte
	if len(r.desc.EndKey) > 0 && (len(end) == 0 || bytes.Compare(r.desc.EndKey, end) < 0) {
		end, resume = r.desc.EndKey, r.desc.EndKey
	}
	var keys []string
	for k := range c.data {
		if k >= string(req.StartKey) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	const serverMax = 1000
	limit := int(req.Limit)
	if limit == 0 || limit > serverMax {
		limit = serverMax
	}
	if len(keys) > limit {
		keys = keys[:limit]
		resume = []byte(keys[limit-1] + "\x00")
	}
	resp := &tidekvpb.ScanResponse{ResumeKey: resume, RangeGeneration: c.generationLocked(req.StartKey)}
	for _, k := range keys {
		resp.Kvs = append(resp.Kvs, &tidekvpb.KeyValue{Key: []byte(k), Value: c.data[k]})
	}
	return resp, nil
}

func (s fakeKV) BatchGet(ctx context.Context, req *tidekvpb.BatchGetRequest) (*tidekvpb.BatchGetResponse, error) {
	s.n.noteMode("BatchGet", req.ReadMode, req.MaxStalenessMs)
	if err := s.n.enter(ctx, "BatchGet", req.Keys[0]); err != nil {
		return nil, err
	}
	if err := s.n.routeRead(req.ReadMode, req.Keys...); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tidekvpb.BatchGetResponse{RangeGeneration: c.generationLocked(req.Keys[0])}
	for _, k := range req.Keys {
		v, ok := c.data[string(k)]
		resp.Results = append(resp.Results, &tidekvpb.GetResponse{Found: ok, Value: v})
	}
	return resp, nil
}

func (s fakeKV) Write(ctx context.Context, req *tidekvpb.WriteRequest) (*tidekvpb.WriteResponse, error) {
	keys := make([][]byte, len(req.Ops))
	for i, op := range req.Ops {
		keys[i] = op.Key
	}
	if err := s.n.enter(ctx, "Write", keys[0]); err != nil {
		return nil, err
	}
	if err := s.n.route(keys...); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tidekvpb.WriteResponse{}
	for _, op := range req.Ops {
		if req.WantExisted {
			_, ok := c.data[string(op.Key)]
			resp.Existed = append(resp.Existed, ok)
		}
		if op.Kind == tidekvpb.WriteOp_DELETE {
			delete(c.data, string(op.Key))
		} else {
			c.data[string(op.Key)] = op.Value
		}
	}
	return resp, nil
}

func (s fakeKV) CompareAndSet(ctx context.Context, req *tidekvpb.CompareAndSetRequest) (*tidekvpb.CompareAndSetResponse, error) {
	if err := s.n.enter(ctx, "CompareAndSet", req.Key); err != nil {
		return nil, err
	}
	if err := s.n.route(req.Key); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, exists := c.data[string(req.Key)]
	resp := &tidekvpb.CompareAndSetResponse{CurrentExists: exists, CurrentValue: cur}
	if exists == req.ExpectExists && (!exists || bytes.Equal(cur, req.ExpectedValue)) {
		resp.Succeeded = true
		if req.Delete {
			delete(c.data, string(req.Key))
		} else {
			c.data[string(req.Key)] = req.NewValue
		}
	}
	return resp, nil
}

type fakeAdmin struct {
	tidekvpb.UnimplementedAdminServer
	n *fakeNode
}

func (s fakeAdmin) Ranges(ctx context.Context, _ *tidekvpb.RangesRequest) (*tidekvpb.RangesResponse, error) {
	if err := s.n.enter(ctx, "Ranges", nil); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tidekvpb.RangesResponse{Ranges: c.meta}
	if resp.Ranges == nil {
		resp.Ranges = c.rangeInfosLocked()
	}
	for id := uint64(1); id <= uint64(len(c.nodes)); id++ {
		resp.Nodes = append(resp.Nodes, &tidekvpb.NodeDescriptor{NodeId: id, GrpcAddr: c.nodes[id].addr})
	}
	return resp, nil
}

func (s fakeAdmin) NodeLoads(ctx context.Context, _ *tidekvpb.NodeLoadsRequest) (*tidekvpb.NodeLoadsResponse, error) {
	if err := s.n.enter(ctx, "NodeLoads", nil); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	resp := &tidekvpb.NodeLoadsResponse{}
	for id, l := range c.loads {
		resp.Loads = append(resp.Loads, &tidekvpb.NodeLoad{NodeId: id, Score: l.score, UnixNanos: now.Add(-l.age).UnixNano()})
	}
	return resp, nil
}

func (s fakeAdmin) Status(ctx context.Context, _ *tidekvpb.StatusRequest) (*tidekvpb.StatusResponse, error) {
	if err := s.n.enter(ctx, "Status", nil); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tidekvpb.StatusResponse{NodeId: s.n.id, RangeCount: uint32(len(c.ranges))}
	for id := uint64(1); id <= uint64(len(c.nodes)); id++ {
		resp.Nodes = append(resp.Nodes, &tidekvpb.NodeStatus{Node: &tidekvpb.NodeDescriptor{NodeId: id, GrpcAddr: c.nodes[id].addr}, Live: true})
	}
	return resp, nil
}

func (s fakeAdmin) LocalStatus(ctx context.Context, _ *tidekvpb.LocalStatusRequest) (*tidekvpb.LocalStatusResponse, error) {
	if err := s.n.enter(ctx, "LocalStatus", nil); err != nil {
		return nil, err
	}
	return &tidekvpb.LocalStatusResponse{Node: &tidekvpb.NodeDescriptor{NodeId: s.n.id, GrpcAddr: s.n.addr}}, nil
}

func (s fakeAdmin) Split(ctx context.Context, req *tidekvpb.SplitRequest) (*tidekvpb.SplitResponse, error) {
	if err := s.n.enter(ctx, "Split", req.SplitKey); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	var maxID uint64
	for _, r := range c.ranges {
		maxID = max(maxID, r.desc.RangeId)
	}
	r := c.rangeForLocked(req.SplitKey)
	if bytes.Equal(r.desc.StartKey, req.SplitKey) {
		c.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "already split at that key")
	}
	leader := r.leader
	c.mu.Unlock()
	left, right := c.split(string(req.SplitKey), maxID+1, leader)
	return &tidekvpb.SplitResponse{Left: left, Right: right}, nil
}

func (s fakeAdmin) TransferLease(ctx context.Context, req *tidekvpb.TransferLeaseRequest) (*tidekvpb.TransferLeaseResponse, error) {
	if err := s.n.enter(ctx, "TransferLease", nil); err != nil {
		return nil, err
	}
	s.n.c.setLeader(req.RangeId, req.TargetNodeId)
	return &tidekvpb.TransferLeaseResponse{}, nil
}

func (s fakeAdmin) ChangeReplicas(ctx context.Context, req *tidekvpb.ChangeReplicasRequest) (*tidekvpb.ChangeReplicasResponse, error) {
	if err := s.n.enter(ctx, "ChangeReplicas", nil); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.ranges {
		if r.desc.RangeId != req.RangeId {
			continue
		}
		d := proto.Clone(r.desc).(*tidekvpb.RangeDescriptor)
		if req.AddNodeId != 0 {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: req.AddNodeId, ReplicaId: uint64(len(d.Replicas) + 1)})
		}
		if req.RemoveNodeId != 0 {
			var keep []*tidekvpb.ReplicaDescriptor
			for _, rd := range d.Replicas {
				if rd.NodeId != req.RemoveNodeId {
					keep = append(keep, rd)
				}
			}
			d.Replicas = keep
		}
		d.Generation++
		r.desc = d
		return &tidekvpb.ChangeReplicasResponse{Desc: proto.Clone(d).(*tidekvpb.RangeDescriptor)}, nil
	}
	return nil, status.Errorf(codes.NotFound, "range %d not found", req.RangeId)
}
