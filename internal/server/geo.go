package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/geo"
	"github.com/tidekv/tidekv/internal/keys"
)

// Geo transactions (internal/geo, docs/transactions.md "Geo mode"): each
// locality listed in GeoConfig.Localities is a data centre whose gateway
// is its node with the lowest id. A gateway runs a geo.Node over the geo
// key space's copy it keeps in memory, sends its epoch messages to the
// other gateways over gRPC (with the same emulated WAN delays as Raft
// traffic) and answers Geo.Commit once its transaction is decided.

// GeoConfig turns on geo transactions on a node.
type GeoConfig struct {
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
}

// DefaultGeoConfig: off; 10 s to decide; the protocol's defaults.
func DefaultGeoConfig() GeoConfig {
	return GeoConfig{CommitTimeout: 10 * time.Second, Protocol: geo.DefaultConfig()}
}

// Validate refuses a configuration in one sentence.
func (c GeoConfig) Validate() error {
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

// geoState is the node's part in the geo mode, set once the gateways are
// known.
type geoState struct {
	mu       sync.Mutex
	node     *geo.Node // nil unless this node is a gateway and started
	gateways []uint64  // node id of each DC's gateway
	refused  bool      // a gateway that restarted: it does not rejoin
}

func (g *geoState) get() (*geo.Node, []uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.node, g.gateways, g.refused
}

// startGeo waits, in the background, until every listed locality has a
// node in the directory, then starts this node's DC if it is a gateway.
// The gateways are fixed from then on.
func (s *Server) startGeo() {
	if s.cfg.Geo.KeySpace == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.wg.Go(func() {
		defer cancel()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if gws, ok := s.geoGateways(); ok {
				if err := s.runGeo(ctx, gws); err != nil {
					log.Printf("geo: %v", err)
				}
				return
			}
			select {
			case <-s.stopper:
				return
			case <-t.C:
			}
		}
	})
	s.wg.Go(func() { <-s.stopper; cancel() })
}

// geoGateways picks each locality's node with the lowest id.
func (s *Server) geoGateways() ([]uint64, bool) {
	gws := make([]uint64, len(s.cfg.Geo.Localities))
	nodes := s.dir.List()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].GetNodeId() < nodes[j].GetNodeId() })
	for i, l := range s.cfg.Geo.Localities {
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

// runGeo runs this node's DC until ctx ends, if it is a gateway.
func (s *Server) runGeo(ctx context.Context, gws []uint64) error {
	id := slices.Index(gws, s.nodeID)
	if id < 0 {
		s.geo.mu.Lock()
		s.geo.gateways = gws
		s.geo.mu.Unlock()
		return nil
	}
	// The copy lives in memory only: a gateway that ran before lost it and
	// its place in the epoch log, and rejoining would stall or corrupt
	// its DC's answers, so it stays out and the others go on as a majority.
	if _, ran, err := s.eng.Get(keys.GeoGatewayKey); err != nil || ran {
		s.geo.mu.Lock()
		s.geo.gateways, s.geo.refused = gws, true
		s.geo.mu.Unlock()
		return errors.Join(err, fmt.Errorf("node %d ran data centre %d before this restart and does not rejoin: a geo gateway does not recover its copy (docs/transactions.md, \"Geo mode\")", s.nodeID, id))
	}
	b := s.eng.NewBatch()
	defer b.Close()
	if err := errors.Join(b.Set(keys.GeoGatewayKey, []byte{1}), b.Commit(true)); err != nil {
		return err
	}
	node, err := geo.NewNode(s.cfg.Geo.Protocol, id, len(gws), &geoTransport{s: s, gateways: gws}, time.Now)
	if err != nil {
		return err
	}
	s.geo.mu.Lock()
	s.geo.node, s.geo.gateways = node, gws
	s.geo.mu.Unlock()
	node.Run(ctx)
	return nil
}

// geoTransport sends epoch messages to the other gateways.
type geoTransport struct {
	s        *Server
	gateways []uint64
}

// Send delays each message by the emulated WAN latency, like Raft and
// closed-timestamp traffic, so the protocol sees the round trips the
// benchmarks set; a lost message is sent again by the DC.
func (t *geoTransport) Send(to int, m *geo.Message) {
	s, peer := t.s, t.gateways[to]
	if s.cfg.Transport.Partition.Blocked(peer) {
		return
	}
	body, err := geo.EncodeMessage(m)
	if err != nil {
		log.Printf("geo: %v", err)
		return
	}
	go func() {
		if d := s.cfg.Transport.Delays.Get(s.nodeID, peer); d > 0 {
			select {
			case <-time.After(d):
			case <-s.stopper:
				return
			}
		}
		addr, ok := s.dir.Addr(peer)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = tidekvpb.NewGeoClient(s.conn(addr)).Epoch(ctx, &tidekvpb.GeoEpochRequest{FromNodeId: s.nodeID, Body: body})
	}()
}

type geoService struct {
	tidekvpb.UnimplementedGeoServer
	s *Server
}

// gateway checks the node serves keySpace as a gateway.
func (g *geoService) gateway(keySpace string) (*geo.Node, error) {
	if !g.s.ready.Load() {
		return nil, status.Error(codes.Unavailable, "node is not ready")
	}
	want := g.s.cfg.Geo.KeySpace
	if want == "" {
		return nil, status.Error(codes.FailedPrecondition, "the geo mode is off on this cluster")
	}
	if keySpace != want {
		return nil, status.Errorf(codes.InvalidArgument, "unknown geo key space %q: this cluster's is %q", keySpace, want)
	}
	node, gws, refused := g.s.geo.get()
	if node == nil {
		if refused {
			return nil, status.Errorf(codes.Unavailable, "node %d is a geo gateway that restarted and does not rejoin (the geo mode keeps its data in memory); the other data centres go on", g.s.nodeID)
		}
		if gws == nil {
			return nil, status.Error(codes.Unavailable, "the geo gateways are not known yet: not every data centre has a node")
		}
		return nil, status.Errorf(codes.FailedPrecondition, "node %d is not a geo gateway; the gateways are nodes %v (one per data centre)", g.s.nodeID, gws)
	}
	return node, nil
}

func (g *geoService) Commit(ctx context.Context, req *tidekvpb.GeoCommitRequest) (*tidekvpb.GeoCommitResponse, error) {
	node, err := g.gateway(req.GetKeySpace())
	if err != nil {
		return nil, err
	}
	ops, err := geoOps(req.GetOps())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.s.cfg.Geo.CommitTimeout)
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

// geoOps converts a request's operations; an unknown kind is refused.
func geoOps(in []*tidekvpb.GeoOp) ([]geo.Op, error) {
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

func (g *geoService) Scan(ctx context.Context, req *tidekvpb.GeoScanRequest) (*tidekvpb.GeoScanResponse, error) {
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

func (g *geoService) Epoch(ctx context.Context, req *tidekvpb.GeoEpochRequest) (*tidekvpb.GeoEpochResponse, error) {
	if g.s.cfg.Transport.Partition.Blocked(req.GetFromNodeId()) {
		return nil, status.Error(codes.Unavailable, "cut off by an injected partition")
	}
	node, _, _ := g.s.geo.get()
	if node == nil {
		return nil, status.Error(codes.Unavailable, "this node runs no geo data centre")
	}
	m, err := geo.DecodeMessage(req.GetBody())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	node.Receive(m)
	return &tidekvpb.GeoEpochResponse{}, nil
}
