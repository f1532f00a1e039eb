package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/clockwatch"
	"github.com/tidekv/tidekv/internal/closedpush"
	"github.com/tidekv/tidekv/internal/ctlloop"
	"github.com/tidekv/tidekv/internal/gcqueue"
	"github.com/tidekv/tidekv/internal/georpc"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/metarange"
	"github.com/tidekv/tidekv/internal/metrics"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/gossip"
	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/keyspaces"
	"github.com/tidekv/tidekv/internal/kvapi"
	"github.com/tidekv/tidekv/internal/kvstream"
	"github.com/tidekv/tidekv/internal/loops"
	"github.com/tidekv/tidekv/internal/monitor"
	"github.com/tidekv/tidekv/internal/nodedir"
	"github.com/tidekv/tidekv/internal/nodereport"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/redisgw"
	"github.com/tidekv/tidekv/internal/security"
	"github.com/tidekv/tidekv/internal/sizewatch"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/transport"
	"github.com/tidekv/tidekv/internal/txn"
	"github.com/tidekv/tidekv/internal/txnclient"
)

// Server is one running TideKV node.
type Server struct {
	cfg Config
	// ks is the node's key spaces: its copy of the catalogue, memory
	// engines, counts, eviction and read-through (internal/keyspaces);
	// ks.Engine() is the node's engine, the base engine with memory key
	// spaces routed to memory.
	ks    *keyspaces.Spaces
	store *raftstore.Store
	id    ident
	ports ports
	peers peers
	// txn coordinates the transactions clients send this node.
	txn     txnHandles
	sec     *nodeSecurity
	metrics *metrics.Set
	adm     *admission.Controller
	kv      *kvapi.API // the typed KV API (kv.go)
	meta    metaDuties
	// sizes is the size watch: range sizes, write budgets, crossed split
	// lines (internal/sizewatch).
	sizes  *sizewatch.Watch
	events *events.Log
	// report sends heartbeats and range reports and keeps the load table
	// and the node's load they carry (internal/nodereport).
	report *nodereport.Reporter
	// clock is the offset monitor and its verdict (internal/clockwatch).
	clock *clockwatch.Watch
	// gc is the MVCC GC queue and the protected timestamps
	// (internal/gcqueue).
	gc  *gcqueue.Queue
	geo *georpc.Service // geo transactions
	// bg runs the background loops and tasks and stops them (internal/loops).
	bg       *loops.Group
	stopOnce sync.Once
}

// metaDuties are what the node does while it holds the meta range's
// lease: the table of liveness, leaders and reports it keeps from
// heartbeats (internal/meta), and the control loop (internal/ctlloop).
// Both start afresh when it acquires the lease (LeaderAcquired).
type metaDuties struct {
	table *meta.Table
	ctl   *ctlloop.Loop
}

// ident is who the node is, once it has joined or bootstrapped.
type ident struct{ cluster, node uint64 }

// ports are the node's listeners and the servers on them.
type ports struct {
	// ready says the node serves KV and admin requests: set once it has
	// joined (gRPC serves before, for peers' Raft traffic), cleared as it
	// stops.
	ready   atomic.Bool
	grpc    *grpc.Server
	grpcLis net.Listener
	http    *http.Server // nil without an HTTP address
	httpLis net.Listener
	// httpRoutes are the HTTP port's patterns and the role each needs.
	httpRoutes []httpapi.Route
	faults     http.Handler   // nil unless Config.FaultInjection
	redis      *redisgw.Front // nil without a Redis address
}

// peers are the other nodes as this node knows and reaches them.
type peers struct {
	dir *nodedir.Dir
	// route runs admin calls on the leaseholders that serve them and
	// holds the connections to peers (internal/adminroute).
	route *adminroute.Router
	// push sends closed timestamps and loads to peers and keeps every
	// node's load as last heard (internal/closedpush).
	push   *closedpush.Pusher
	gossip *gossip.Gossip // nil when gossip is off
	raft   *transport.GRPC
}

// txnHandles are the node's transaction coordinator (internal/txn) and
// the routing it sends through.
type txnHandles struct {
	coord  *txn.Coordinator
	router *txnclient.Sender
}

// Start opens the node's data, joins or creates the cluster, and serves.
// It returns once the node serves requests.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Snapshot bandwidth is the control loop's migration allowance, which
	// raftstore enforces on every outgoing snapshot, under the node's cap.
	cfg.Raft.SnapshotBytesPerSecond = int64(cfg.snapshotRate(cfg.Control.Runner.MigrationRate))
	if cfg.Raft.SnapshotDir == "" {
		cfg.Raft.SnapshotDir = filepath.Join(cfg.DataDir, "snapshots")
	}
	var faults http.Handler
	if cfg.FaultInjection {
		faults = injectFaults(&cfg)
	}
	sec, err := loadSecurity(cfg.Security, cfg.Gossip.BindAddr != "")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	var eng storage.Engine
	if cfg.engine != nil {
		eng = cfg.engine
	} else if cfg.InMemory {
		eng = storage.NewMem()
	} else if err = storage.CheckFormat(cfg.DataDir); err != nil {
		return nil, err
	} else if eng, err = storage.OpenPebble(filepath.Join(cfg.DataDir, "engine"), cfg.Pebble); err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	m, ev := metrics.New(), events.New(cfg.Events, 0, time.Now)
	ks, err := keyspaces.Open(eng, keyspaces.Config{Mem: cfg.MemEngine, Cache: cfg.Cache, MaxScanBytes: cfg.Limits.MaxScanBytes}, m, ev)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("open memory key spaces: %w", err)
	}
	eng = ks.Engine()
	s := &Server{
		cfg: cfg, ks: ks, peers: peers{dir: nodedir.New(eng)}, sec: sec, ports: ports{faults: faults},
		bg:      loops.New(),
		meta:    metaDuties{table: meta.NewTable()},
		metrics: m,
		events:  ev,
	}
	s.peers.route = adminroute.New(routeNode{s}, cfg.Join, s.dial, s.bg.Stopped())
	s.peers.push = closedpush.New(pushNode{s}, s.bg.Stopped())
	s.gc = gcqueue.New(gcNode{s}, s.peers.route, cfg.GC)
	ks.SetNode(ksNode{s: s, origin: &http.Client{}})
	s.sizes = sizewatch.New(sizewatch.Config{SplitBackpressure: cfg.SplitBackpressure, SplitBackpressureWait: cfg.SplitBackpressureWait}, sizeNode{s}, m)
	s.txn.router = txnclient.New(s.routerNode)
	s.kv = newKVAPI(s)
	s.meta.ctl = newControlLoop(s)
	s.geo = georpc.New(cfg.Geo, geoNode{s})
	admNow := time.Now
	if cfg.admissionClock != nil {
		admNow = cfg.admissionClock
	}
	if s.adm, err = admission.New(cfg.Admission, admNow, nil); err != nil {
		return nil, err
	}
	s.adm.OnDelay(s.metrics.ObserveQueueDelay)
	mon, err := monitor.New(cfg.Monitor, monitor.ProcSource, ownQuota(), func() (int, int, time.Duration) {
		return s.adm.State().Inflight, cfg.Admission.MaxInflight, s.report.ServiceTime()
	}, time.Now)
	if err != nil {
		return nil, err
	}
	// The store's time and the offset monitor share one steady clock.
	wall := raftstore.NewSteadyClock(s.cfg.Raft.Clock)
	s.cfg.Raft.Clock = wall
	s.clock = clockwatch.New(cfg.Raft.MaxClockOffset, cfg.ClosedTimestampInterval, wall, clockNode{s}, s.metrics.Reg)
	s.report = nodereport.New(reportNode{s}, nodereport.Handles{Metrics: m, Admission: s.adm, MaxInflight: cfg.Admission.MaxInflight,
		Monitor: mon, Clock: s.clock, Sizes: s.sizes, KeySpaceCounts: ks.Counts})
	s.metrics.RegisterNode(nodeGauges{s})
	s.metrics.Reg.MustRegister(s.admissionCollectors()...)
	if err := s.serve(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) serve(ctx context.Context) error {
	if err := s.setupSecurity(); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return err
	}
	s.ports.grpcLis = lis
	s.peers.raft, err = transport.NewGRPC(s.cfg.Transport, s.peers.dir.Addr, nil)
	if err != nil {
		return err
	}
	// Stream workers reuse goroutines (and their grown stacks) across
	// requests instead of starting one per request.
	l := s.cfg.Limits
	opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(l.MaxMessageSize), grpc.MaxSendMsgSize(l.MaxMessageSize),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams), grpc.NumStreamWorkers(32), grpc.InTapHandle(s.arrive)}, s.grpcSecurity()...)
	s.ports.grpc = grpc.NewServer(opts...)
	s.registerServices()
	// Raft frames share the gRPC port (internal/transport/frames.go).
	go s.ports.grpc.Serve(s.peers.raft.Listen(lis))
	if err := s.startHTTP(); err != nil {
		return err
	}

	ident, err := s.loadIdent()
	if err != nil {
		return err
	}
	if ident == nil {
		if len(s.cfg.Join) == 0 {
			ident, err = s.bootstrap()
		} else {
			ident, err = s.join(ctx)
		}
		if err != nil {
			return err
		}
	}
	s.id.cluster, s.id.node = ident.GetClusterId(), ident.GetNodeId()
	s.events.SetNode(s.id.node)
	s.peers.dir.Update([]*tidekvpb.NodeDescriptor{s.self()})
	rcfg := s.cfg.Raft
	rcfg.ReplicationFactorOf = s.ks.RF
	s.store, err = raftstore.NewStore(rcfg, s.id.node, s.ks.Engine(), s.peers.raft, s)
	if err != nil {
		return err
	}
	s.store.SetRangeDirectory(metaDirectory{s})
	if len(s.cfg.Join) == 0 && !s.bootstrapped() {
		if err := s.bootstrapRanges(); err != nil {
			return err
		}
	}
	if err := s.startGossip(); err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	s.peers.raft.SetHandler(s.store)
	s.store.Start()
	// The Redis port is open before the loops start, so the first heartbeat
	// already names it (self reads ports.redis; set later, it raced with
	// the heartbeat and the node's descriptor lacked it until the next).
	if s.cfg.Redis.ListenAddr != "" {
		if err := s.startRedis(); err != nil {
			return err
		}
	}
	s.startLoops()
	s.geo.Start(s.bg.Stopped(), s.bg.Go)
	s.ports.ready.Store(true)
	s.events.Record("node-start", events.NodeSubject(s.id.node), "serving with %d replicas (grpc=%s http=%s redis=%s)", len(s.store.Replicas()), s.Addr(), s.HTTPAddr(), s.RedisAddr())
	log.Printf("node %d serving: grpc=%s http=%s redis=%s cluster=%x", s.id.node, s.Addr(), s.HTTPAddr(), s.RedisAddr(), s.id.cluster)
	return nil
}

// registerServices puts the node's gRPC services on s.ports.grpc.
func (s *Server) registerServices() {
	kv := &kvService{s: s}
	kv.stream = kvstream.New(streamNode{s}, kv, s.cfg.Limits.MaxMessageSize, s.bg.Stopped())
	tidekvpb.RegisterKVServer(s.ports.grpc, kv)
	tidekvpb.RegisterAdminServer(s.ports.grpc, &adminService{s: s})
	s.txn.coord = s.newCoordinator()
	tidekvpb.RegisterTxnServer(s.ports.grpc, &txnService{s: s, coord: s.txn.coord})
	tidekvpb.RegisterGeoServer(s.ports.grpc, s.geo)
	s.peers.raft.Register(s.ports.grpc)
}

// startHTTP serves the dashboard, metrics and the other HTTP endpoints,
// over TLS on a secure node; nothing without an HTTP address.
func (s *Server) startHTTP() error {
	if s.cfg.HTTPAddr == "" {
		return nil
	}
	var err error
	if s.ports.httpLis, err = s.listenHTTP(); err != nil {
		return err
	}
	s.ports.http, s.ports.httpRoutes = httpapi.NewServer(s.httpNode())
	if s.sec != nil {
		s.ports.http.TLSConfig = s.sec.tls.Server
		go s.ports.http.ServeTLS(s.ports.httpLis, "", "")
	} else {
		go s.ports.http.Serve(s.ports.httpLis)
	}
	return nil
}

// listenHTTP binds the HTTP listener, deriving its address for AutoAddr.
func (s *Server) listenHTTP() (net.Listener, error) {
	if s.cfg.HTTPAddr != AutoAddr {
		return net.Listen("tcp", s.cfg.HTTPAddr)
	}
	host, port, err := net.SplitHostPort(s.ports.grpcLis.Addr().String())
	if err != nil {
		return nil, err
	}
	p, _ := strconv.Atoi(port)
	next := net.JoinHostPort(host, strconv.Itoa(p+1))
	if l, err := net.Listen("tcp", next); err == nil {
		return l, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	log.Printf("HTTP: %s is taken; listening on %s instead", next, l.Addr())
	return l, nil
}

func (s *Server) self() *tidekvpb.NodeDescriptor {
	return &tidekvpb.NodeDescriptor{NodeId: s.id.node, GrpcAddr: s.Addr(), HttpAddr: s.HTTPAddr(), Locality: s.cfg.Locality, RedisAddr: s.RedisAddr(), GossipAddr: s.gossipAddr(),
		MaxLogVersion: s.cfg.Raft.MaxLogVersion}
}

// RedisAddr is the node's Redis-protocol address ("" if disabled).
func (s *Server) RedisAddr() string {
	if s.ports.redis == nil {
		return ""
	}
	return s.ports.redis.Addr().String()
}

// Addr is the node's gRPC address.
// Addr is the gRPC address the node advertises: what peers and clients
// dial.
func (s *Server) Addr() string {
	if s.cfg.AdvertiseAddr != "" {
		return s.cfg.AdvertiseAddr
	}
	return s.ports.grpcLis.Addr().String()
}

// HTTPAddr is the node's HTTP address ("" if disabled).
func (s *Server) HTTPAddr() string {
	if s.ports.httpLis == nil {
		return ""
	}
	return s.ports.httpLis.Addr().String()
}

// NodeID is the cluster-assigned ID of this node.
func (s *Server) NodeID() uint64 { return s.id.node }

// Store exposes the replica store (tests and status).
func (s *Server) Store() *raftstore.Store { return s.store }

func (s *Server) loadIdent() (*tidekvpb.NodeIdent, error) {
	v, ok, err := s.ks.Engine().Get(keys.NodeIdentKey)
	if err != nil || !ok {
		return nil, err
	}
	id := &tidekvpb.NodeIdent{}
	return id, proto.Unmarshal(v, id)
}

// writeIdent persists the node's identity and, if not zero, the cluster's
// log version its store starts at (a join's answer: the node proposes at
// it before its first heartbeat, and a restart starts there too).
func (s *Server) writeIdent(id *tidekvpb.NodeIdent, logVersion uint32) error {
	b := s.ks.Engine().NewBatch()
	defer b.Close()
	v, _ := proto.Marshal(id)
	if err := b.Set(keys.NodeIdentKey, v); err != nil {
		return err
	}
	if logVersion != 0 {
		if err := raftstore.WriteLogVersion(b, logVersion); err != nil {
			return err
		}
	}
	return b.Commit(true)
}

// bootstrap creates a new cluster whose first node is this one.
func (s *Server) bootstrap() (*tidekvpb.NodeIdent, error) {
	id := &tidekvpb.NodeIdent{ClusterId: rand.Uint64(), NodeId: 1}
	log.Printf("creating a new cluster %x as node 1", id.GetClusterId())
	return id, nil
}

func (s *Server) bootstrapped() bool {
	v, ok, _ := s.ks.Engine().Get(keys.ReplicaStateKey(keys.MetaRangeID))
	return ok && len(v) > 0
}

// bootstrapRanges writes the meta range and the first user range, each
// with one replica on this node, then marks the node as part of the cluster.
func (s *Server) bootstrapRanges() error {
	one := []*tidekvpb.ReplicaDescriptor{{NodeId: s.id.node, ReplicaId: 1, Type: tidekvpb.ReplicaType_VOTER}}
	descs := []*tidekvpb.RangeDescriptor{
		{RangeId: keys.MetaRangeID, Replicas: one, Generation: 1, NextReplicaId: 2},
		{RangeId: keys.FirstUserRangeID, Replicas: one, Generation: 1, NextReplicaId: 2},
	}
	// The cluster starts at the newest log version this binary applies:
	// its one node is the oldest there is, and the user range begins on
	// the layout of that version, with nothing to migrate.
	version := s.cfg.Raft.MaxLogVersion
	b := s.ks.Engine().NewBatch()
	if err := raftstore.BootstrapMeta(b, s.self(), descs, keys.FirstUserRangeID+1, version); err != nil {
		b.Close()
		return err
	}
	if err := b.Commit(true); err != nil {
		b.Close()
		return err
	}
	b.Close()
	if err := s.store.Bootstrap(descs, version); err != nil {
		return err
	}
	return s.writeIdent(&tidekvpb.NodeIdent{ClusterId: s.id.cluster, NodeId: s.id.node}, 0)
}

// join asks an existing node for a node ID, retrying until one answers.
func (s *Server) join(ctx context.Context) (*tidekvpb.NodeIdent, error) {
	req := &tidekvpb.JoinRequest{GrpcAddr: s.Addr(), HttpAddr: s.HTTPAddr(), MaxLogVersion: s.cfg.Raft.MaxLogVersion}
	backoff := 100 * time.Millisecond
	for {
		for _, addr := range s.cfg.Join {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := tidekvpb.NewAdminClient(s.conn(addr)).Join(cctx, req)
			cancel()
			if err == nil {
				id := &tidekvpb.NodeIdent{ClusterId: resp.GetClusterId(), NodeId: resp.GetNodeId()}
				s.peers.dir.Update(resp.GetNodes())
				if err := s.writeIdent(id, resp.GetLogVersion()); err != nil {
					return nil, err
				}
				log.Printf("joined cluster %x as node %d via %s", id.GetClusterId(), id.GetNodeId(), addr)
				return id, nil
			}
			if st := status.Convert(err); st.Code() == codes.FailedPrecondition && strings.HasPrefix(st.Message(), metarange.JoinRefused) {
				return nil, fmt.Errorf("join via %s: %s", addr, st.Message())
			}
			log.Printf("join via %s: %v", addr, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("join: %w", ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// conn is the node's connection to the peer at addr (internal/adminroute).
func (s *Server) conn(addr string) *grpc.ClientConn { return s.peers.route.Conn(addr) }

// dial makes a connection to the peer at addr.
func (s *Server) dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(s.peerCreds()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(s.cfg.Limits.MaxMessageSize)))
}

// Stop shuts the node down: stop accepting requests, stop replicas, close
// the engine.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.bg.Close()
		s.ports.ready.Store(false)
		if s.ports.http != nil {
			s.ports.http.Close()
		}
		if s.ports.redis != nil {
			s.ports.redis.Close()
		}
		s.txn.router.Close()
		if s.ports.grpc != nil {
			stopped := make(chan struct{})
			go func() { s.ports.grpc.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(2 * time.Second):
				s.ports.grpc.Stop()
			}
		}
		s.bg.Wait()
		if s.peers.gossip != nil {
			s.peers.gossip.Stop()
		}
		if s.store != nil {
			s.store.Stop()
		}
		if s.peers.raft != nil {
			s.peers.raft.Stop()
		}
		s.peers.route.Close()
		if err := s.ks.Engine().Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			log.Printf("closing engine: %v", err)
		}
		// No login is under way now. The workers' cgroup inside the
		// node's must go before the node exits: the launcher cannot
		// remove a cgroup that has a child.
		if err := security.StopDerivationWorkers(); err != nil {
			log.Printf("stopping password derivation workers: %v", err)
		}
	})
}

// LeaderAcquired implements raftstore.Listener.
func (s *Server) LeaderAcquired(d *tidekvpb.RangeDescriptor) {
	if d.GetRangeId() == keys.MetaRangeID {
		// Liveness and leaders are rebuilt from scratch by this leaseholder.
		s.meta.table.Reset(time.Now())
		s.meta.ctl.Reset()
		s.events.Record("meta-lease", events.NodeSubject(s.id.node), "acquired the meta range's lease: now tracks liveness and runs placement")
	}
	s.report.Queue(d)
	s.sizes.Poke() // its write budget, without which its growing writes wait (internal/sizewatch)
}

// ReplicaRemoved implements raftstore.Listener.
func (s *Server) ReplicaRemoved(rm raftstore.Removed) {
	s.events.Record("replica-gc", events.RangeSubject(rm.RangeID), "local replica (generation %d) removed: %s", rm.Generation, rm.Reason)
}

// DescriptorChanged implements raftstore.Listener.
func (s *Server) DescriptorChanged(d *tidekvpb.RangeDescriptor) { s.report.Queue(d) }
