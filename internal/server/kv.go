package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/kvapi"
	"github.com/tidekv/tidekv/internal/kvstream"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// kvService serves the KV API from this node's replicas: a thin wrapper
// over the typed API (s.kv, internal/kvapi) that converts at its edge,
// protobuf in and gRPC status out. A request reaches the node holding the
// key's lease (clients route there); any other node answers with a typed
// routing error.
type kvService struct {
	tidekvpb.UnimplementedKVServer
	s      *Server
	stream *kvstream.Server // serves Batch streams (kvstream.go)
}

// newKVAPI is the node's typed KV API.
func newKVAPI(s *Server) *kvapi.API {
	l := s.cfg.Limits
	return kvapi.New(kvNode{s}, kvapi.Limits{MaxKeySize: l.MaxKeySize, MaxValueSize: l.MaxValueSize, MaxScanLimit: l.MaxScanLimit,
		MaxScanBytes: l.MaxScanBytes, MaxBatchKeys: l.MaxBatchKeys, MaxWriteBytes: l.MaxWriteBytes})
}

// checkKey and checkValue are the typed API's checks, as statuses for the
// gRPC handlers that return them as they are.
func (s *Server) checkKey(k []byte) error   { return s.toStatus(s.kv.CheckKey(k)) }
func (s *Server) checkValue(v []byte) error { return s.toStatus(s.kv.CheckValue(v)) }

// replicaFor finds the local replica covering key.
func (s *Server) replicaFor(key []byte) (*raftstore.Replica, error) {
	r := s.store.LookupKey(key)
	if r == nil {
		return nil, &raftstore.RangeNotFoundError{Key: key}
	}
	return r, nil
}

// kvNode is the node as the typed KV API sees it.
type kvNode struct{ s *Server }

func (n kvNode) Lookup(key []byte) *raftstore.Replica { return n.s.store.LookupKey(key) }

func (n kvNode) Admit(ctx context.Context, read bool) (admission.Priority, error) {
	return n.s.admit(ctx, read)
}

func (n kvNode) Done(p admission.Priority) { n.s.adm.Done(p) }

func (n kvNode) AdmitGrowth(ctx context.Context, r *raftstore.Replica, key []byte, grow uint64) (*raftstore.Replica, func(), error) {
	return n.s.sizes.Admit(ctx, r, key, grow)
}

func (n kvNode) IntentWait(op string) kvapi.IntentWait { return n.s.txn.coord.NewWait(op) }

func (n kvNode) Refused(op string, start time.Time, err error) {
	n.s.metrics.Observe(op, start, errCode(err))
}

func (n kvNode) Served(op string, key []byte, start time.Time, err error) {
	om := n.s.metrics.KVOp(op)
	om.Requests(errCode(err)).Inc()
	om.Latency.Observe(time.Since(start).Seconds())
	om.KeySpace(key).Inc()
	n.s.report.Served(time.Since(start))
}

func (n kvNode) CheckKeySpace(ctx context.Context, name string, key []byte, more ...[]byte) error {
	if err := n.s.checkKeySpace(ctx, name, key); err != nil || len(more) == 0 {
		return err
	}
	return n.s.checkKeySpace(ctx, name, more...)
}

func (n kvNode) ScanEnd(ctx context.Context, name string, start, end []byte, hashOrder bool) ([]byte, error) {
	return n.s.scanEnd(ctx, name, start, end, hashOrder)
}

func (n kvNode) Touch(r *raftstore.Replica, key []byte, more ...[]byte) {
	n.s.ks.Touch(r, key)
	if len(more) > 0 {
		n.s.ks.Touch(r, more...)
	}
}

func (n kvNode) NoteWrite(ctx context.Context, r *raftstore.Replica) { n.s.report.NoteWrite(ctx, r) }

func (n kvNode) CountRead(key []byte, found bool) { n.s.ks.CountRead(key, found) }

// NeedVersion answers UNIMPLEMENTED, which the routing client does not
// retry: a transaction fails with its sentence at once (a plain request's
// ErrLogVersion answers UNAVAILABLE and is retried, which carries it over
// the heartbeat that raises the version once an upgrade is done).
func (n kvNode) NeedVersion(v uint32, what string) error {
	if err := n.s.store.NeedVersion(v, what); err != nil {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return nil
}

func (n kvNode) TxnExpiry() time.Duration { return n.s.cfg.Txn.Expiry }

func (n kvNode) ReadThrough(ctx context.Context, r *raftstore.Replica, key []byte, v raftstore.Value) (raftstore.Value, error) {
	return n.s.ks.ReadThrough(ctx, r, key, v)
}

// readRequest is what every read request says about how it reads.
type readRequest interface {
	GetReadMode() tidekvpb.ReadMode
	GetMaxStalenessMs() uint32
	GetReadTimestamp() *tidekvpb.Timestamp
}

// readOptions is how a read request reads, validated.
func readOptions(req readRequest) (raftstore.ReadOptions, error) {
	ro := raftstore.ReadOptions{Mode: req.GetReadMode(), MaxStaleness: time.Duration(req.GetMaxStalenessMs()) * time.Millisecond, Timestamp: req.GetReadTimestamp().HLC()}
	if ts := req.GetReadTimestamp(); ts != nil && ts.GetWallNanos() <= 0 {
		return ro, kverr.Invalid("read timestamp %s is not after the Unix epoch", ro.Timestamp)
	}
	return ro, kvapi.CheckRead(ro)
}

// refuse counts a request of op that the gRPC API refused before the
// typed call (an invalid read mode) and returns its status.
func (s *Server) refuse(op string, err error) error {
	s.metrics.Observe(op, time.Now(), errCode(err))
	return s.toStatus(err)
}

func (k *kvService) Get(ctx context.Context, req *tidekvpb.GetRequest) (*tidekvpb.GetResponse, error) {
	s := k.s
	ro, err := readOptions(req)
	if err != nil {
		return nil, s.refuse("get", err)
	}
	ro.Txn, ro.UncertaintyLimit = req.GetTxnId(), req.GetUncertaintyLimit().HLC()
	v, err := s.kv.Get(ctx, req.GetKey(), kvapi.Options{KeySpace: req.GetKeyspace(), Read: ro})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &tidekvpb.GetResponse{Found: v.Found, Value: v.Value.Value, TtlMs: raftstore.TTLMillis(v.TTL), RangeGeneration: v.Generation,
		ReadTimestamp: req.GetReadTimestamp(), VersionTimestamp: tidekvpb.OptionalHLC(v.Version)}, nil
}

func (k *kvService) Put(ctx context.Context, req *tidekvpb.PutRequest) (*tidekvpb.PutResponse, error) {
	err := k.s.kv.Put(ctx, req.GetKey(), req.GetValue(), kvapi.Options{KeySpace: req.GetKeyspace(), TTL: time.Duration(req.GetTtlMs()) * time.Millisecond})
	if err != nil {
		return nil, k.s.toStatus(err)
	}
	return &tidekvpb.PutResponse{}, nil
}

func (k *kvService) Delete(ctx context.Context, req *tidekvpb.DeleteRequest) (*tidekvpb.DeleteResponse, error) {
	deleted, err := k.s.kv.Delete(ctx, req.GetKey(), kvapi.Options{KeySpace: req.GetKeyspace()})
	if err != nil {
		return nil, k.s.toStatus(err)
	}
	return &tidekvpb.DeleteResponse{Deleted: deleted}, nil
}

func (k *kvService) Scan(ctx context.Context, req *tidekvpb.ScanRequest) (*tidekvpb.ScanResponse, error) {
	s := k.s
	ro, err := readOptions(req)
	if err != nil {
		return nil, s.refuse("scan", err)
	}
	ro.UncertaintyLimit = req.GetUncertaintyLimit().HLC()
	p, err := s.kv.Scan(ctx, req.GetStartKey(), req.GetEndKey(), int(req.GetLimit()), req.GetHashOrder(), kvapi.Options{KeySpace: req.GetKeyspace(), Read: ro})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &tidekvpb.ScanResponse{Kvs: p.KVs, ResumeKey: p.Resume, RangeGeneration: p.Generation, ReadTimestamp: req.GetReadTimestamp()}, nil
}

func (k *kvService) BatchGet(ctx context.Context, req *tidekvpb.BatchGetRequest) (*tidekvpb.BatchGetResponse, error) {
	s := k.s
	ro, err := readOptions(req)
	if err != nil {
		return nil, s.refuse("batch_get", err)
	}
	g, err := s.kv.BatchGet(ctx, req.GetKeys(), kvapi.Options{KeySpace: req.GetKeyspace(), Read: ro})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &tidekvpb.BatchGetResponse{Results: g.Results, RangeGeneration: g.Generation, ReadTimestamp: req.GetReadTimestamp()}, nil
}

func (k *kvService) Write(ctx context.Context, req *tidekvpb.WriteRequest) (*tidekvpb.WriteResponse, error) {
	resp, err := k.s.kv.GuardedWrite(ctx, req.GetOps(), req.GetGuard(), req.GetWantExisted(), kvapi.Options{KeySpace: req.GetKeyspace()})
	return resp, k.s.toStatus(err)
}

func (k *kvService) CompareAndSet(ctx context.Context, req *tidekvpb.CompareAndSetRequest) (*tidekvpb.CompareAndSetResponse, error) {
	resp, err := k.s.kv.CompareAndSet(ctx, req, kvapi.Options{KeySpace: req.GetKeyspace()})
	return resp, k.s.toStatus(err)
}
