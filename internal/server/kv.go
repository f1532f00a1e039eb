package server

import (
	"bytes"
	"context"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// kvService serves the KV API from this node's replicas. A request reaches
// the node holding the key's lease (clients route there); any other node
// answers with a typed routing error.
type kvService struct {
	tidekvpb.UnimplementedKVServer
	s       *Server
	workers *workers // run Batch streams' requests
}

func (s *Server) checkKey(k []byte) error {
	if len(k) == 0 {
		return invalidArg("empty key")
	}
	if len(k) > s.cfg.Limits.MaxKeySize {
		return invalidArg("key of %d bytes is too large (the maximum key size is %d bytes)", len(k), s.cfg.Limits.MaxKeySize)
	}
	return nil
}

func (s *Server) checkValue(v []byte) error {
	if len(v) > s.cfg.Limits.MaxValueSize {
		return invalidArg("value of %d bytes is too large (the maximum value size is %d bytes)", len(v), s.cfg.Limits.MaxValueSize)
	}
	return nil
}

// replicaFor finds the local replica covering key.
func (s *Server) replicaFor(key []byte) (*raftstore.Replica, error) {
	r := s.store.LookupKey(key)
	if r == nil {
		return nil, &raftstore.RangeNotFoundError{Key: key}
	}
	return r, nil
}

// readOps are the operations counted as reads in a range's load.
var readOps = map[string]bool{"get": true, "scan": true, "batch_get": true}

// serve runs one KV request for the gRPC API: run, with its error as a
// gRPC status (toStatus).
func serve[T any](ctx context.Context, s *Server, op string, validate func() error, key []byte, grow uint64, fn func(*raftstore.Replica) (T, error)) (T, error) {
	v, err := run(ctx, s, op, validate, key, grow, nil, fn)
	return v, s.toStatus(err)
}

// run runs one KV request: validation, admission, routing, metrics. Its
// errors are the node's typed errors (classify); the gRPC API converts
// them at its edge. r is the replica the caller already found for key, or
// nil: a request looks its range up once. A request that may store bytes
// in its range says how many at most (grow, sizewatch.go): it waits for
// room under Θmax.
func run[T any](ctx context.Context, s *Server, op string, validate func() error, key []byte, grow uint64, r *raftstore.Replica, fn func(*raftstore.Replica) (T, error)) (T, error) {
	var zero T
	start := time.Now()
	if err := validate(); err != nil {
		s.metrics.Observe(op, start, errCode(err))
		return zero, err
	}
	pri, err := s.admit(ctx, readOps[op])
	if err != nil {
		s.metrics.Observe(op, start, errCode(err))
		return zero, err
	}
	defer s.adm.Done(pri)
	if r == nil {
		r, err = s.replicaFor(key)
	}
	if err == nil {
		var done func()
		if r, done, err = s.admitGrowth(ctx, r, key, grow); err == nil {
			defer done()
		}
	}
	if err != nil {
		s.metrics.Observe(op, start, errCode(err))
		return zero, err
	}
	r.CountRequest(key)
	if readOps[op] {
		r.CountRead()
	}
	v, err := fn(r)
	if err != nil {
		v, err = runPastIntents(ctx, s, op, v, err, func() (T, error) { return fn(r) })
	}
	om := s.metrics.KVOp(op)
	om.Requests(errCode(err)).Inc()
	om.Latency.Observe(time.Since(start).Seconds())
	om.KeySpace(key).Inc()
	s.svc.Observe(time.Since(start))
	return v, err
}

// readRequest is what every read request says about how it reads.
type readRequest interface {
	GetReadMode() tidekvpb.ReadMode
	GetMaxStalenessMs() uint32
	GetReadTimestamp() *tidekvpb.Timestamp
}

// readOptions validates a read's mode, staleness bound and timestamp.
func readOptions(req readRequest) (raftstore.ReadOptions, error) {
	mode, maxStalenessMs := req.GetReadMode(), req.GetMaxStalenessMs()
	ro := raftstore.ReadOptions{Mode: mode, MaxStaleness: time.Duration(maxStalenessMs) * time.Millisecond, Timestamp: req.GetReadTimestamp().HLC()}
	if ts := req.GetReadTimestamp(); ts != nil && ts.GetWallNanos() <= 0 {
		return ro, invalidArg("read timestamp %s is not after the Unix epoch", ro.Timestamp)
	}
	switch mode {
	case tidekvpb.ReadMode_LINEARIZABLE, tidekvpb.ReadMode_ANY:
	case tidekvpb.ReadMode_BOUNDED:
		if maxStalenessMs == 0 && ro.Timestamp.IsZero() {
			return ro, invalidArg("a bounded read needs max_staleness_ms > 0")
		}
	default:
		return ro, invalidArg("unknown read mode %d", mode)
	}
	return ro, nil
}

// getResult is what a Get found: the value and the generation of the
// range that served it.
type getResult struct {
	raftstore.Value
	Generation uint64
}

// kvOptions are what a typed KV call says besides its keys and values.
type kvOptions struct {
	// KeySpace names the key space of the keys ("": the default).
	KeySpace string
	// Read is how a read reads (valid: readOptions).
	Read raftstore.ReadOptions
	// TTL > 0: a put's value expires TTL after the write (whole
	// milliseconds).
	TTL time.Duration
	// Replica is the replica the caller found for the (first) key, or nil.
	Replica *raftstore.Replica
}

// get is the typed Get: the value of key on this node's replica.
func (s *Server) get(ctx context.Context, key []byte, o kvOptions) (getResult, error) {
	validate := func() error {
		if err := s.checkKey(key); err != nil {
			return err
		}
		return s.checkKeySpace(ctx, o.KeySpace, key)
	}
	return run(ctx, s, "get", validate, key, 0, o.Replica, func(r *raftstore.Replica) (getResult, error) {
		v, err := r.GetValue(ctx, key, o.Read)
		if err != nil {
			return getResult{}, err
		}
		s.touch(r, key)
		s.counters.read(key, v.Found)
		if v, err = s.readThrough(ctx, r, key, v); err != nil {
			return getResult{}, err
		}
		return getResult{Value: v, Generation: r.Desc().GetGeneration()}, nil
	})
}

// put is the typed Put: key set to value, with o.TTL.
func (s *Server) put(ctx context.Context, key, value []byte, o kvOptions) error {
	validate := func() error {
		if err := s.checkKey(key); err != nil {
			return err
		}
		if err := s.checkValue(value); err != nil {
			return err
		}
		return s.checkKeySpace(ctx, o.KeySpace, key)
	}
	_, err := run(ctx, s, "put", validate, key, growth(nil, &tidekvpb.WriteOp{Key: key, Value: value}), o.Replica, func(r *raftstore.Replica) (struct{}, error) {
		s.noteWrite(ctx, r)
		_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_PUT, Key: key, Value: value, TtlMs: o.TTL.Milliseconds()}})
		if err != nil {
			return struct{}{}, err
		}
		s.touch(r, key)
		return struct{}{}, nil
	})
	return err
}

// del is the typed Delete: key removed; it reports whether it held a
// value.
func (s *Server) del(ctx context.Context, key []byte, o kvOptions) (bool, error) {
	validate := func() error {
		if err := s.checkKey(key); err != nil {
			return err
		}
		return s.checkKeySpace(ctx, o.KeySpace, key)
	}
	return run(ctx, s, "delete", validate, key, growth(nil, &tidekvpb.WriteOp{Key: key}), o.Replica, func(r *raftstore.Replica) (bool, error) {
		s.noteWrite(ctx, r)
		return r.Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_DELETE, Key: key}})
	})
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
	v, err := s.get(ctx, req.GetKey(), kvOptions{KeySpace: req.GetKeyspace(), Read: ro})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &tidekvpb.GetResponse{Found: v.Found, Value: v.Value.Value, TtlMs: raftstore.TTLMillis(v.TTL), RangeGeneration: v.Generation,
		ReadTimestamp: req.GetReadTimestamp(), VersionTimestamp: tidekvpb.OptionalHLC(v.Version)}, nil
}

func (k *kvService) Put(ctx context.Context, req *tidekvpb.PutRequest) (*tidekvpb.PutResponse, error) {
	err := k.s.put(ctx, req.GetKey(), req.GetValue(), kvOptions{KeySpace: req.GetKeyspace(), TTL: time.Duration(req.GetTtlMs()) * time.Millisecond})
	if err != nil {
		return nil, k.s.toStatus(err)
	}
	return &tidekvpb.PutResponse{}, nil
}

func (k *kvService) Delete(ctx context.Context, req *tidekvpb.DeleteRequest) (*tidekvpb.DeleteResponse, error) {
	deleted, err := k.s.del(ctx, req.GetKey(), kvOptions{KeySpace: req.GetKeyspace()})
	if err != nil {
		return nil, k.s.toStatus(err)
	}
	return &tidekvpb.DeleteResponse{Deleted: deleted}, nil
}

// scanPage is one page of a Scan: pairs in key order, the key the next
// page starts at (nil: none) and the generation of the range that served
// it.
type scanPage struct {
	KVs        []*tidekvpb.KeyValue
	Resume     []byte
	Generation uint64
}

// scan is the typed Scan: keys in [start, end) of the range holding start,
// at most limit of them (0: the node's maximum); hashOrder scans a hashed
// key space in the order it stores keys.
func (s *Server) scan(ctx context.Context, start, end []byte, limit int, hashOrder bool, o kvOptions) (scanPage, error) {
	validate := func() error {
		if len(start) > s.cfg.Limits.MaxKeySize || len(end) > s.cfg.Limits.MaxKeySize {
			return invalidArg("scan bound exceeds the maximum key size of %d bytes", s.cfg.Limits.MaxKeySize)
		}
		if len(end) > 0 && bytes.Compare(start, end) >= 0 {
			return invalidArg("invalid scan range: start %q is not before end %q", start, end)
		}
		if limit > s.cfg.Limits.MaxScanLimit {
			return invalidArg("scan limit %d exceeds the maximum scan limit of %d", limit, s.cfg.Limits.MaxScanLimit)
		}
		var err error
		end, err = s.scanEnd(ctx, o.KeySpace, start, end, hashOrder)
		return err
	}
	if limit == 0 {
		limit = s.cfg.Limits.MaxScanLimit
	}
	return run(ctx, s, "scan", validate, start, 0, o.Replica, func(r *raftstore.Replica) (scanPage, error) {
		kvs, resume, err := r.Scan(ctx, start, end, limit, s.cfg.Limits.MaxScanBytes, o.Read)
		if err != nil {
			return scanPage{}, err
		}
		return scanPage{KVs: kvs, Resume: resume, Generation: r.Desc().GetGeneration()}, nil
	})
}

func (k *kvService) Scan(ctx context.Context, req *tidekvpb.ScanRequest) (*tidekvpb.ScanResponse, error) {
	s := k.s
	ro, err := readOptions(req)
	if err != nil {
		return nil, s.refuse("scan", err)
	}
	ro.UncertaintyLimit = req.GetUncertaintyLimit().HLC()
	p, err := s.scan(ctx, req.GetStartKey(), req.GetEndKey(), int(req.GetLimit()), req.GetHashOrder(), kvOptions{KeySpace: req.GetKeyspace(), Read: ro})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &tidekvpb.ScanResponse{Kvs: p.KVs, ResumeKey: p.Resume, RangeGeneration: p.Generation, ReadTimestamp: req.GetReadTimestamp()}, nil
}

// batchGot is what a BatchGet found: one result per key, in order, and
// the generation of the range that served them.
type batchGot struct {
	Results    []*tidekvpb.GetResponse
	Generation uint64
}

// batchGet is the typed BatchGet: the values of keys, all in one range.
func (s *Server) batchGet(ctx context.Context, ks [][]byte, o kvOptions) (batchGot, error) {
	validate := func() error {
		if len(ks) == 0 {
			return invalidArg("batch get needs at least one key")
		}
		if len(ks) > s.cfg.Limits.MaxBatchKeys {
			return invalidArg("batch of %d keys exceeds the maximum batch size of %d", len(ks), s.cfg.Limits.MaxBatchKeys)
		}
		for _, key := range ks {
			if err := s.checkKey(key); err != nil {
				return err
			}
		}
		return s.checkKeySpace(ctx, o.KeySpace, ks...)
	}
	var first []byte
	if len(ks) > 0 {
		first = ks[0]
	}
	return run(ctx, s, "batch_get", validate, first, 0, o.Replica, func(r *raftstore.Replica) (batchGot, error) {
		res, err := r.BatchGet(ctx, ks, o.Read)
		if err != nil {
			return batchGot{}, err
		}
		s.touch(r, ks...)
		for i, g := range res {
			s.counters.read(ks[i], g.GetFound())
		}
		return batchGot{Results: res, Generation: r.Desc().GetGeneration()}, nil
	})
}

func (k *kvService) BatchGet(ctx context.Context, req *tidekvpb.BatchGetRequest) (*tidekvpb.BatchGetResponse, error) {
	s := k.s
	ro, err := readOptions(req)
	if err != nil {
		return nil, s.refuse("batch_get", err)
	}
	g, err := s.batchGet(ctx, req.GetKeys(), kvOptions{KeySpace: req.GetKeyspace(), Read: ro})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &tidekvpb.BatchGetResponse{Results: g.Results, RangeGeneration: g.Generation, ReadTimestamp: req.GetReadTimestamp()}, nil
}

func (k *kvService) Write(ctx context.Context, req *tidekvpb.WriteRequest) (*tidekvpb.WriteResponse, error) {
	s := k.s
	ops := req.GetOps()
	validate := func() error {
		if len(ops) == 0 {
			return invalidArg("write needs at least one op")
		}
		if len(ops) > s.cfg.Limits.MaxBatchKeys {
			return invalidArg("write of %d ops exceeds the maximum batch size of %d", len(ops), s.cfg.Limits.MaxBatchKeys)
		}
		total := 0
		for _, op := range ops {
			if err := s.checkKey(op.GetKey()); err != nil {
				return err
			}
			if err := s.checkValue(op.GetValue()); err != nil {
				return err
			}
			total += len(op.GetKey()) + len(op.GetValue())
		}
		if total > s.cfg.Limits.MaxWriteBytes {
			return invalidArg("write of %d bytes is too large (the maximum write size is %d bytes)", total, s.cfg.Limits.MaxWriteBytes)
		}
		if err := s.checkGuard(req.GetGuard()); err != nil {
			return err
		}
		return s.checkKeySpace(ctx, req.GetKeyspace(), writeKeys(req)...)
	}
	var first []byte
	if len(ops) > 0 {
		first = ops[0].GetKey()
	}
	return serve(ctx, s, "write", validate, first, growth(nil, ops...), func(r *raftstore.Replica) (*tidekvpb.WriteResponse, error) {
		d := r.Desc()
		for _, k := range writeKeys(req) {
			if !keys.Contains(d.GetStartKey(), d.GetEndKey(), k) {
				return nil, invalidArg("write spans more than one range: key %q is outside range %d [%q, %q)", k, d.GetRangeId(), d.GetStartKey(), d.GetEndKey())
			}
		}
		if end := req.GetGuard().GetClearEnd(); len(end) > 0 && len(d.GetEndKey()) > 0 && bytes.Compare(end, d.GetEndKey()) > 0 {
			return nil, invalidArg("write spans more than one range: its clear span ends at %q, past the end %q of range %d", end, d.GetEndKey(), d.GetRangeId())
		}
		s.noteWrite(ctx, r)
		s.touch(r, writeKeys(req)...)
		if req.GetGuard() == nil && !req.GetWantExisted() {
			if _, err := r.Write(ctx, ops); err != nil {
				return nil, err
			}
			return &tidekvpb.WriteResponse{}, nil
		}
		return r.WriteGuarded(ctx, ops, req.GetGuard(), req.GetWantExisted())
	})
}

// writeKeys are the keys a write touches that must lie in its range: the
// ops', the guard's and the start of its clear span.
func writeKeys(req *tidekvpb.WriteRequest) [][]byte {
	ks := make([][]byte, 0, len(req.GetOps())+2)
	for _, op := range req.GetOps() {
		ks = append(ks, op.GetKey())
	}
	if g := req.GetGuard(); g != nil {
		ks = append(ks, g.GetKey())
		if len(g.GetClearStart()) > 0 {
			ks = append(ks, g.GetClearStart())
		}
	}
	return ks
}

// checkGuard validates a write's guard: a key, and a clear span that is
// either absent or a non-empty interval.
func (s *Server) checkGuard(g *tidekvpb.WriteGuard) error {
	if g == nil {
		return nil
	}
	if err := s.checkKey(g.GetKey()); err != nil {
		return err
	}
	if err := s.checkValue(g.GetValue()); err != nil {
		return err
	}
	start, end := g.GetClearStart(), g.GetClearEnd()
	if len(start) == 0 && len(end) == 0 {
		return nil
	}
	if len(start) > s.cfg.Limits.MaxKeySize || len(end) > s.cfg.Limits.MaxKeySize {
		return invalidArg("guard clear span exceeds the maximum key size of %d bytes", s.cfg.Limits.MaxKeySize)
	}
	if len(start) == 0 || bytes.Compare(start, end) >= 0 {
		return invalidArg("invalid guard clear span: start %q is not before end %q", start, end)
	}
	return nil
}

func (k *kvService) CompareAndSet(ctx context.Context, req *tidekvpb.CompareAndSetRequest) (*tidekvpb.CompareAndSetResponse, error) {
	s := k.s
	validate := func() error {
		if err := s.checkKey(req.GetKey()); err != nil {
			return err
		}
		if err := s.checkValue(req.GetNewValue()); err != nil {
			return err
		}
		return s.checkKeySpace(ctx, req.GetKeyspace(), req.GetKey())
	}
	return serve(ctx, s, "cas", validate, req.GetKey(), growth(nil, &tidekvpb.WriteOp{Key: req.GetKey(), Value: req.GetNewValue()}), func(r *raftstore.Replica) (*tidekvpb.CompareAndSetResponse, error) {
		s.noteWrite(ctx, r)
		s.touch(r, req.GetKey())
		return r.CompareAndSet(ctx, req)
	})
}
