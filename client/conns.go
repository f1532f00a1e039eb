package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// nodeConn is the one connection the client keeps to a node address, with
// its service stubs.
type nodeConn struct {
	addr  string
	cc    *grpc.ClientConn
	kv    tidekvpb.KVClient // a muxKV unless Config.UnaryRPC
	admin tidekvpb.AdminClient
	txn   tidekvpb.TxnClient
	peer  *peerStats // round trips and failures, for replica choice
}

// connPool lazily creates and then reuses one grpc.ClientConn per address.
// Lookups go through a sync.Map so the request path takes no lock; mu only
// serializes creation and Close.
type connPool struct {
	ctx     context.Context // the client's: ends KV streams on Close
	unary   bool            // Config.UnaryRPC
	clock   *hlc.Clock      // the client's, for Batch streams
	md      metadata.MD     // sent when a KV stream opens (Config.Locality)
	opts    []grpc.DialOption
	peerOf  func(addr string) *peerStats
	latency func(addr string) time.Duration // Config.Latency
	conns   sync.Map                        // addr -> *nodeConn
	mu      sync.Mutex
	closed  bool
}

// maxMsgSize is the largest message a TideKV node accepts (and sends) over
// gRPC by default (its --grpc-max-message-size). Receiving it lets large
// scan pages through (gRPC's default is 4 MiB); sending no more makes a
// larger request fail here, before it is sent, with the same "too large"
// error a node would give (one with a lower limit gives it itself).
const maxMsgSize = 64 << 20

func newConnPool(ctx context.Context, cfg Config, peerOf func(string) *peerStats, clock *hlc.Clock) *connPool {
	dialTimeout, locality := cfg.DialTimeout, cfg.Locality
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	p := &connPool{
		ctx:     ctx,
		clock:   clock,
		unary:   cfg.UnaryRPC,
		peerOf:  peerOf,
		latency: cfg.Latency,
		opts: []grpc.DialOption{
			grpc.WithTransportCredentials(creds),
			// gRPC's default reconnect backoff grows to 2 minutes, which would
			// keep a restarted node out of rotation long after it is back.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  50 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   time.Second,
				},
				MinConnectTimeout: dialTimeout,
			}),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		},
	}
	if cfg.Credentials != nil {
		p.opts = append(p.opts, grpc.WithPerRPCCredentials(cfg.Credentials))
	}
	if locality != "" {
		p.md = metadata.Pairs(originMetadataKey, locality)
		p.opts = append(p.opts, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, originMetadataKey, locality), method, req, reply, cc, opts...)
		}))
	}
	return p
}

// originMetadataKey carries Config.Locality; internal/nodereport's
// OriginMetadataKey names the same key.
const originMetadataKey = "tidekv-origin"

func (p *connPool) get(addr string) (*nodeConn, error) {
	if nc, ok := p.conns.Load(addr); ok {
		return nc.(*nodeConn), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if nc, ok := p.conns.Load(addr); ok {
		return nc.(*nodeConn), nil
	}
	peer := p.peerOf(addr)
	intercept := peer.interceptor(addr, p.latency)
	opts := append(p.opts[:len(p.opts):len(p.opts)], grpc.WithUnaryInterceptor(intercept))
	// NewClient does not connect; the first RPC (or waitReady) does.
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	var kv tidekvpb.KVClient = newMuxKV(cc, intercept, p.ctx, p.md, p.clock)
	if p.unary {
		kv = tidekvpb.NewKVClient(cc)
	}
	nc := &nodeConn{addr: addr, cc: cc, kv: kv, admin: tidekvpb.NewAdminClient(cc), txn: tidekvpb.NewTxnClient(cc), peer: peer}
	p.conns.Store(addr, nc)
	return nc, nil
}

// close closes every connection; requests still holding one fail with
// codes.Canceled, which the retry loop turns into ErrClosed.
func (p *connPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	p.conns.Range(func(k, v any) bool {
		if err := v.(*nodeConn).cc.Close(); err != nil {
			errs = append(errs, err)
		}
		p.conns.Delete(k)
		return true
	})
	return errors.Join(errs...)
}

// waitReady connects nc and waits until it is usable, for at most timeout.
// Non-idempotent requests use it so that a failure to connect is known to
// have happened before anything was sent.
func waitReady(ctx context.Context, nc *nodeConn, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc.cc.Connect()
	for {
		s := nc.cc.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !nc.cc.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// suspects remembers nodes that recently failed so that routing prefers
// other replicas for a short while. A sync.Map keeps the check on the request
// path free of locks.
type suspects struct {
	until sync.Map // addr -> int64 unix nanos
}

const suspectFor = time.Second

func (s *suspects) mark(addr string) {
	s.until.Store(addr, time.Now().Add(suspectFor).UnixNano())
}

// clear forgets addr; the Load first keeps the common case (not suspect)
// read-only.
func (s *suspects) clear(addr string) {
	if _, ok := s.until.Load(addr); ok {
		s.until.Delete(addr)
	}
}

func (s *suspects) is(addr string) bool {
	v, ok := s.until.Load(addr)
	return ok && time.Now().UnixNano() < v.(int64)
}
