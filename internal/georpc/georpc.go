package georpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/geo"
)

// Config turns on geo transactions on a node.
type Config struct {
	// KeySpace names the geo key space; "" turns the geo mode off.
	KeySpace string
	// Localities lists the data centres, one node locality each, in DC id
	// order; every node must list the same ones in the same order.
	Localities []string
	// CommitTimeout bounds how long Commit waits for a decision (a DC cut
	// off from the majority waits until then).
	CommitTimeout time.Duration
	// Protocol holds the epoch protocol's knobs.
	Protocol geo.Config
	// Now is the clock the DC reads (nil: time.Now). Tests pace it so
	// that a DC starved of CPU does not fall behind its epochs (which
	// leaves its input out, a definite outcome but not the one a test of
	// something else sets up).
	Now func() time.Time
}

// DefaultConfig: off; 10 s to decide; the protocol's defaults.
func DefaultConfig() Config {
	return Config{CommitTimeout: 10 * time.Second, Protocol: geo.DefaultConfig()}
}

// Validate refuses a configuration in one sentence.
func (c Config) Validate() error {
	if c.KeySpace == "" {
		return nil
	}
	switch {
	case len(c.Localities) < 1 || len(c.Localities) > 64:
		return fmt.Errorf("server: the geo mode needs 1 to 64 localities, not %d", len(c.Localities))
	case c.CommitTimeout <= 0:
		return fmt.Errorf("server: the geo commit timeout must be positive, not %v", c.CommitTimeout)
	}
	seen := map[string]bool{}
	for _, l := range c.Localities {
		if seen[l] {
			return fmt.Errorf("server: geo locality %q is listed twice", l)
		}
		seen[l] = true
	}
	return c.Protocol.Validate()
}

// Node is what the geo mode needs of the node it runs on.
type Node interface {
	// ID is the node's id (0 before it joined).
	ID() uint64
	// Ready reports whether the node serves requests.
	Ready() bool
	// Nodes lists the directory's nodes; Addr is one node's gRPC address.
	Nodes() []*tidekvpb.NodeDescriptor
	Addr(node uint64) (string, bool)
	// Blocked: an injected partition cuts this node off from peer; Delay
	// is the emulated one-way latency to it.
	Blocked(peer uint64) bool
	Delay(peer uint64) time.Duration
	// Conn is a connection to the node at addr.
	Conn(addr string) grpc.ClientConnInterface
	// RanGateway reports whether this node ran a data centre before (a
	// restart since); MarkGateway persists that it runs one.
	RanGateway() (bool, error)
	MarkGateway() error
}

// Service is the node's part in the geo mode, set once the gateways are
// known, and its Geo gRPC service.
type Service struct {
	tidekvpb.UnimplementedGeoServer
	cfg Config
	n   Node

	mu       sync.Mutex
	node     *geo.Node // nil unless this node is a gateway and started
	gateways []uint64  // node id of each DC's gateway
	refused  bool      // a gateway that restarted: it does not rejoin
}

// New is the geo mode of node n (off when cfg.KeySpace is "").
func New(cfg Config, n Node) *Service { return &Service{cfg: cfg, n: n} }

// Running is this node's DC, or nil if it runs none (yet).
func (g *Service) Running() *geo.Node {
	node, _, _ := g.get()
	return node
}

func (g *Service) get() (*geo.Node, []uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.node, g.gateways, g.refused
}

// Start waits, in the background (tasks started by spawn, until stop
// closes), until every listed locality has a node in the directory, then
// starts this node's DC if it is a gateway. The gateways are fixed from
// then on.
func (g *Service) Start(stop <-chan struct{}, spawn func(func())) {
	if g.cfg.KeySpace == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	spawn(func() {
		defer cancel()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if gws, ok := g.gatewayIDs(); ok {
				if err := g.run(ctx, gws, stop); err != nil {
					log.Printf("geo: %v", err)
				}
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	spawn(func() { <-stop; cancel() })
}

// gatewayIDs picks each locality's node with the lowest id.
func (g *Service) gatewayIDs() ([]uint64, bool) {
	gws := make([]uint64, len(g.cfg.Localities))
	nodes := g.n.Nodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].GetNodeId() < nodes[j].GetNodeId() })
	for i, l := range g.cfg.Localities {
		for _, n := range nodes {
			if n.GetLocality() == l && n.GetGrpcAddr() != "" {
				gws[i] = n.GetNodeId()
				break
			}
		}
		if gws[i] == 0 {
			return nil, false
		}
	}
	return gws, true
}

// run runs this node's DC until ctx ends, if it is a gateway.
func (g *Service) run(ctx context.Context, gws []uint64, stop <-chan struct{}) error {
	self := g.n.ID()
	id := slices.Index(gws, self)
	if id < 0 {
		g.mu.Lock()
		g.gateways = gws
		g.mu.Unlock()
		return nil
	}
	// The copy lives in memory only: a gateway that ran before lost it and
	// its place in the epoch log, and rejoining would stall or corrupt
	// its DC's answers, so it stays out and the others go on as a majority.
	if ran, err := g.n.RanGateway(); err != nil || ran {
		g.mu.Lock()
		g.gateways, g.refused = gws, true
		g.mu.Unlock()
		return errors.Join(err, fmt.Errorf("node %d ran data centre %d before this restart and does not rejoin: a geo gateway does not recover its copy (docs/transactions.md, \"Geo mode\")", self, id))
	}
	if err := g.n.MarkGateway(); err != nil {
		return err
	}
	now := g.cfg.Now
	if now == nil {
		now = time.Now
	}
	node, err := geo.NewNode(g.cfg.Protocol, id, len(gws), newSender(g.n, gws, id, stop), now)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.node, g.gateways = node, gws
	g.mu.Unlock()
	node.Run(ctx)
	return nil
}

// sender sends epoch messages to the other gateways: one queue and one
// goroutine per peer, which sends everything due to it in one call.
//
// A goroutine and a call per message, as it was, has no limit: a gateway
// sends about four messages an epoch to each peer, and a process short of
// CPU (TestGeoBankAcrossRegions at a fifth of a CPU, or beside other test
// binaries) fell behind its own sends, thousands of calls in flight, each
// timing out and lost, sent again by the DC, and never caught up. Now the
// calls to a peer are one at a time, and what queues meanwhile goes in the
// next: the cost per message drops as the backlog grows instead of
// adding to it.
type sender struct {
	n        Node
	gateways []uint64
	stop     <-chan struct{}
	peers    []*peerQueue // by DC id; nil for this node's own DC
}

// peerQueue holds one peer's encoded messages until they are due.
type peerQueue struct {
	mu    sync.Mutex
	q     []queued
	bytes int // of the queued bodies
	wake  chan struct{}
}

type queued struct {
	due  time.Time
	body []byte
}

// maxBatch bounds the bytes of one call (gRPC refuses messages over 4 MiB);
// what is left goes in the next.
const maxBatch = 1 << 20

// maxQueued bounds the bytes queued for one peer. A peer that does not
// answer drains at most maxBatch per call's 1 s timeout while its DC keeps
// sending; past the bound the oldest messages go, which is safe because
// a DC sends again what its peer has not acknowledged.
const maxQueued = 16 << 20

// newSender starts one goroutine per peer (until stop closes).
func newSender(n Node, gateways []uint64, self int, stop <-chan struct{}) *sender {
	t := &sender{n: n, gateways: gateways, stop: stop, peers: make([]*peerQueue, len(gateways))}
	for to := range gateways {
		if to != self {
			t.peers[to] = &peerQueue{wake: make(chan struct{}, 1)}
			go t.run(to)
		}
	}
	return t
}

// Send queues m for peer to after the emulated WAN latency, like Raft and
// closed-timestamp traffic, so the protocol sees the round trips the
// benchmarks set; a lost message is sent again by the DC.
func (t *sender) Send(to int, m *geo.Message) {
	peer := t.gateways[to]
	if t.n.Blocked(peer) {
		return
	}
	body, err := geo.EncodeMessage(m)
	if err != nil {
		log.Printf("geo: %v", err)
		return
	}
	q := t.peers[to]
	q.add(queued{due: time.Now().Add(t.n.Delay(peer)), body: body})
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// add queues m, dropping the oldest messages while the queue holds more
// than maxQueued bytes (never m itself).
func (q *peerQueue) add(m queued) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q = append(q.q, m)
	q.bytes += len(m.body)
	drop := 0
	for ; q.bytes > maxQueued && drop < len(q.q)-1; drop++ {
		q.bytes -= len(q.q[drop].body)
	}
	q.q = slices.Delete(q.q, 0, drop)
}

// run sends peer to's messages as they fall due, in batches.
func (t *sender) run(to int) {
	q := t.peers[to]
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch, wait := q.take(time.Now())
		if batch != nil {
			t.call(to, batch)
			continue
		}
		var fire <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-t.stop:
			return
		case <-q.wake:
		case <-fire:
		}
	}
}

// take returns the messages due by now, in the order sent, framed as one
// request body (at most maxBatch bytes unless one message is larger), or
// nil and how long until the first is due (0: none is queued).
func (q *peerQueue) take(now time.Time) ([]byte, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []byte
	i := 0
	for ; i < len(q.q) && !q.q[i].due.After(now); i++ {
		if batch != nil && len(batch)+len(q.q[i].body) > maxBatch {
			break
		}
		batch = binary.AppendUvarint(batch, uint64(len(q.q[i].body)))
		batch = append(batch, q.q[i].body...)
		q.bytes -= len(q.q[i].body)
	}
	q.q = slices.Delete(q.q, 0, i)
	if batch == nil && len(q.q) > 0 {
		return nil, q.q[0].due.Sub(now)
	}
	return batch, 0
}

// call sends one batch; a batch lost is sent again message by message by
// the DC (it retransmits what the peer does not acknowledge).
func (t *sender) call(to int, batch []byte) {
	addr, ok := t.n.Addr(t.gateways[to])
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = tidekvpb.NewGeoClient(t.n.Conn(addr)).Epoch(ctx, &tidekvpb.GeoEpochRequest{FromNodeId: t.n.ID(), Body: batch})
}

// unframe splits a request body into its messages.
func unframe(body []byte) ([]*geo.Message, error) {
	var out []*geo.Message
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return nil, errors.New("geo: malformed batch of epoch messages")
		}
		m, err := geo.DecodeMessage(body[k : k+int(n)])
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		body = body[k+int(n):]
	}
	return out, nil
}

// gateway checks the node serves keySpace as a gateway.
func (g *Service) gateway(keySpace string) (*geo.Node, error) {
	if !g.n.Ready() {
		return nil, status.Error(codes.Unavailable, "node is not ready")
	}
	want := g.cfg.KeySpace
	if want == "" {
		return nil, status.Error(codes.FailedPrecondition, "the geo mode is off on this cluster")
	}
	if keySpace != want {
		return nil, status.Errorf(codes.InvalidArgument, "unknown geo key space %q: this cluster's is %q", keySpace, want)
	}
	node, gws, refused := g.get()
	if node == nil {
		if refused {
			return nil, status.Errorf(codes.Unavailable, "node %d is a geo gateway that restarted and does not rejoin (the geo mode keeps its data in memory); the other data centres go on", g.n.ID())
		}
		if gws == nil {
			return nil, status.Error(codes.Unavailable, "the geo gateways are not known yet: not every data centre has a node")
		}
		return nil, status.Errorf(codes.FailedPrecondition, "node %d is not a geo gateway; the gateways are nodes %v (one per data centre)", g.n.ID(), gws)
	}
	return node, nil
}

func (g *Service) Commit(ctx context.Context, req *tidekvpb.GeoCommitRequest) (*tidekvpb.GeoCommitResponse, error) {
	node, err := g.gateway(req.GetKeySpace())
	if err != nil {
		return nil, err
	}
	ops, err := ops(req.GetOps())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CommitTimeout)
	defer cancel()
	d, err := node.Commit(ctx, ops)
	switch {
	case errors.Is(err, geo.ErrInvalid):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, geo.ErrUndecided):
		return nil, status.Error(codes.DeadlineExceeded, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	case d.Retry:
		return nil, status.Error(codes.Aborted, "geo transaction not run: its data centre's epoch input was left out (cut off from the majority); nothing changed, retry")
	}
	resp := &tidekvpb.GeoCommitResponse{Committed: d.Result.Committed, Reason: d.Result.Reason}
	for _, r := range d.Result.Reads {
		resp.Reads = append(resp.Reads, &tidekvpb.GeoRead{Key: []byte(r.Key), Value: r.Value, Found: r.Found})
	}
	return resp, nil
}

// ops converts a request's operations; an unknown kind is refused.
func ops(in []*tidekvpb.GeoOp) ([]geo.Op, error) {
	out := make([]geo.Op, len(in))
	for i, op := range in {
		k := geo.OpKind(op.GetKind())
		if op.GetKind() == tidekvpb.GeoOp_KIND_UNSPECIFIED || k > geo.OpCompare {
			return nil, status.Errorf(codes.InvalidArgument, "%v: operation %d has kind %v", geo.ErrInvalid, i, op.GetKind())
		}
		out[i] = geo.Op{Kind: k, Key: string(op.GetKey()), Value: op.GetValue(), Delta: op.GetDelta(),
			Floor: op.GetFloor(), Floored: op.GetFloored(), Absent: op.GetAbsentValue()}
	}
	return out, nil
}

func (g *Service) Scan(ctx context.Context, req *tidekvpb.GeoScanRequest) (*tidekvpb.GeoScanResponse, error) {
	node, err := g.gateway(req.GetKeySpace())
	if err != nil {
		return nil, err
	}
	all, epoch := node.Validated()
	resp := &tidekvpb.GeoScanResponse{Epoch: epoch}
	for k, v := range all {
		if k >= string(req.GetStart()) && (len(req.GetEnd()) == 0 || k < string(req.GetEnd())) {
			resp.Kvs = append(resp.Kvs, &tidekvpb.GeoRead{Key: []byte(k), Value: v, Found: true})
		}
	}
	slices.SortFunc(resp.Kvs, func(a, b *tidekvpb.GeoRead) int { return bytes.Compare(a.Key, b.Key) })
	return resp, nil
}

func (g *Service) Epoch(ctx context.Context, req *tidekvpb.GeoEpochRequest) (*tidekvpb.GeoEpochResponse, error) {
	if g.n.Blocked(req.GetFromNodeId()) {
		return nil, status.Error(codes.Unavailable, "cut off by an injected partition")
	}
	node := g.Running()
	if node == nil {
		return nil, status.Error(codes.Unavailable, "this node runs no geo data centre")
	}
	ms, err := unframe(req.GetBody())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, m := range ms {
		node.Receive(m)
	}
	return &tidekvpb.GeoEpochResponse{}, nil
}
