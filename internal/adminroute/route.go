package adminroute

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Node is the node as its admin routing sees it.
type Node interface {
	// Replica is the local replica of range id, nil if there is none
	// (or the store is not open yet).
	Replica(id uint64) *raftstore.Replica
	// Self is this node's gRPC address, ID its node ID.
	Self() string
	ID() uint64
	// Addr is node id's gRPC address, if the directory knows it.
	Addr(id uint64) (string, bool)
	// Members are the gRPC addresses of the nodes in the directory.
	Members() []string
	// Directory is the range directory, from the meta leaseholder.
	Directory(ctx context.Context) (*tidekvpb.RangesResponse, error)
	// Status is err in its wire form (a gRPC status with its detail).
	Status(err error) error
	// Detail is the error detail a peer's answer carries, nil if none.
	Detail(err error) *tidekvpb.ErrorDetail
}

// Router routes a node's admin calls and holds its connections to peers.
type Router struct {
	node    Node
	join    []string // the addresses the node was told to join through
	dial    func(addr string) (*grpc.ClientConn, error)
	stopper <-chan struct{}

	// metaLeader is the meta leaseholder's address as last learnt.
	metaLeader atomic.Pointer[string]

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// New routes through node's view of the cluster, dialling peers with dial
// and giving up waiting for a leaseholder once stopper closes.
func New(node Node, join []string, dial func(addr string) (*grpc.ClientConn, error), stopper <-chan struct{}) *Router {
	return &Router{node: node, join: join, dial: dial, stopper: stopper, conns: map[string]*grpc.ClientConn{}}
}

// Conn is the node's connection to the peer at addr, made on first use.
func (r *Router) Conn(addr string) *grpc.ClientConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[addr]; c != nil {
		return c
	}
	c, err := r.dial(addr)
	if err != nil {
		// NewClient only fails on malformed targets; callers see the error
		// on their first RPC through a closed placeholder.
		log.Printf("dial %s: %v", addr, err)
		c, _ = grpc.NewClient("passthrough:///invalid", grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	r.conns[addr] = c
	return c
}

// Close closes the connections to peers.
func (r *Router) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

const forwardedKey = "tidekv-forwarded"

func isForwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

func forwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, "1")
}

// local strips the forwarded mark: it applies to the hop that received it,
// not to the calls that hop makes while serving the request.
func local(ctx context.Context) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.MD{})
}

// MetaLeader returns the local meta replica if it holds the lease.
func (r *Router) MetaLeader() *raftstore.Replica {
	m := r.node.Replica(keys.MetaRangeID)
	if m == nil || !m.IsLeader() {
		return nil
	}
	return m
}

// Meta runs an operation on the meta range's leaseholder: locally when
// this node holds it, otherwise on the node that does, found by following
// NOT_LEASEHOLDER hints from any node we know.
func Meta[T any](ctx context.Context, r *Router, localFn func(context.Context, *raftstore.Replica) (T, error), remote func(context.Context, tidekvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	if m := r.MetaLeader(); m != nil {
		return localFn(local(ctx), m)
	}
	if isForwarded(ctx) {
		// Forwarded here by a node that thought we lead: let it follow the hint.
		if m := r.node.Replica(keys.MetaRangeID); m != nil {
			return zero, r.node.Status(&raftstore.NotLeaderError{RangeID: keys.MetaRangeID, LeaderNodeID: m.LeaderNodeID()})
		}
		return zero, r.node.Status(&raftstore.NotLeaderError{RangeID: keys.MetaRangeID})
	}
	var lastErr error = errors.New("meta leaseholder not found")
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		for _, addr := range r.metaCandidates() {
			if addr == r.node.Self() {
				if m := r.MetaLeader(); m != nil {
					return localFn(local(ctx), m)
				}
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			v, err := remote(forwarded(actx), tidekvpb.NewAdminClient(r.Conn(addr)))
			cancel()
			if err == nil {
				r.metaLeader.Store(&addr)
				return v, nil
			}
			lastErr = err
			if d := r.node.Detail(err); d != nil && d.GetKind() == tidekvpb.ErrorKind_NOT_LEASEHOLDER {
				if d.GetLeaderAddr() != "" {
					a := d.GetLeaderAddr()
					r.metaLeader.Store(&a)
				}
				continue
			}
			if d := r.node.Detail(err); d != nil && d.GetKind() != tidekvpb.ErrorKind_UNAVAILABLE {
				return zero, err // a real answer from the leaseholder
			}
		}
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("meta range: %w (last error: %v)", ctx.Err(), lastErr)
		case <-r.stopper:
			return zero, raftstore.ErrStopped
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// metaCandidates lists addresses to try for the meta leaseholder, most
// likely first.
func (r *Router) metaCandidates() []string {
	var out []string
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if p := r.metaLeader.Load(); p != nil {
		add(*p)
	}
	if m := r.node.Replica(keys.MetaRangeID); m != nil {
		if a, ok := r.node.Addr(m.LeaderNodeID()); ok {
			add(a)
		}
		for _, rd := range m.Desc().GetReplicas() {
			if a, ok := r.node.Addr(rd.GetNodeId()); ok {
				add(a)
			}
		}
	}
	for _, a := range r.node.Members() {
		add(a)
	}
	for _, a := range r.join {
		add(a)
	}
	return out
}

// Range runs an admin operation on a range's leaseholder, locally or by
// forwarding, following hints.
func Range[T any](ctx context.Context, r *Router, rangeID uint64, localFn func(context.Context, *raftstore.Replica) (T, error), remote func(context.Context, tidekvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	var lastErr error = fmt.Errorf("leaseholder of range %d not found", rangeID)
	backoff := 20 * time.Millisecond
	var hint []string
	for {
		if rep := r.node.Replica(rangeID); rep != nil && rep.IsLeader() {
			v, err := localFn(local(ctx), rep)
			var nl *raftstore.NotLeaderError
			if !errors.As(err, &nl) || nl.RangeID != rangeID {
				return v, err
			}
			lastErr = err
		} else if isForwarded(ctx) {
			if rep != nil {
				return zero, r.node.Status(&raftstore.NotLeaderError{RangeID: rangeID, LeaderNodeID: rep.LeaderNodeID(), Desc: rep.Desc()})
			}
			return zero, r.node.Status(&raftstore.RangeNotFoundError{RangeID: rangeID})
		} else if addrs := append(hint, r.rangeCandidates(ctx, rangeID)...); len(addrs) > 0 {
			hint = nil
			// The most likely leaseholder first; a wrong guess costs one
			// round and its hint updates the next round's candidates.
			actx, cancel := context.WithTimeout(ctx, 70*time.Second)
			v, err := remote(forwarded(actx), tidekvpb.NewAdminClient(r.Conn(addrs[0])))
			cancel()
			if err == nil {
				return v, nil
			}
			lastErr = err
			d := r.node.Detail(err)
			if d == nil || (d.GetKind() != tidekvpb.ErrorKind_NOT_LEASEHOLDER && d.GetKind() != tidekvpb.ErrorKind_RANGE_NOT_FOUND && d.GetKind() != tidekvpb.ErrorKind_UNAVAILABLE) {
				return zero, err
			}
			if a := d.GetLeaderAddr(); a != "" && a != r.node.Self() {
				hint = []string{a}
			}
		}
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("range %d: %w (last error: %v)", rangeID, ctx.Err(), lastErr)
		case <-r.stopper:
			return zero, raftstore.ErrStopped
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// rangeCandidates lists addresses likely to hold a range's lease.
func (r *Router) rangeCandidates(ctx context.Context, rangeID uint64) []string {
	var out []string
	seen := map[string]bool{}
	add := func(node uint64) {
		if a, ok := r.node.Addr(node); ok && !seen[a] && node != r.node.ID() {
			seen[a] = true
			out = append(out, a)
		}
	}
	if rep := r.node.Replica(rangeID); rep != nil {
		add(rep.LeaderNodeID())
	}
	if resp, err := r.node.Directory(ctx); err == nil {
		for _, ri := range resp.GetRanges() {
			if ri.GetDesc().GetRangeId() == rangeID {
				add(ri.GetLeaderNodeId())
				for _, rd := range ri.GetDesc().GetReplicas() {
					add(rd.GetNodeId())
				}
			}
		}
	}
	return out
}
