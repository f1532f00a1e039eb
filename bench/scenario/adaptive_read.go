package scenario

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// adaptiveRead performs one read and classifies its outcome.
type adaptiveRead func(ctx context.Context, key []byte) readOutcome

type readOutcome int

const (
	readOK readOutcome = iota
	readOverloaded
	readTimeout
	readOther
)

// adaptiveNewReader returns the read function of kind and what stops it.
func adaptiveNewReader(ctx context.Context, kind adaptiveReaderKind, cl *plInProc, admin *client.Client, timeout time.Duration) (adaptiveRead, func(), error) {
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	every := func(fn func()) {
		wg.Go(func() {
			for rctx.Err() == nil {
				fn()
				plSleep(rctx, time.Second)
			}
		})
	}
	if kind == readerRoundRobin {
		rr := &adaptiveRoundRobin{conns: map[string]tidekvpb.KVClient{}}
		refresh := func() {
			if resp, err := plRanges(rctx, admin); err == nil {
				rr.install(resp)
			}
		}
		refresh()
		every(refresh)
		return rr.read, func() { stop(); wg.Wait(); rr.close() }, nil
	}
	rc, err := cl.client(func(cfg *client.Config) {
		cfg.MaxAttempts = 1
		cfg.AttemptTimeout = timeout
		cfg.DefaultRead = client.Any()
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	if kind == readerClientRefresh {
		every(func() {
			cctx, cancel := context.WithTimeout(rctx, time.Second)
			rc.Ranges(cctx)
			cancel()
		})
	}
	read := func(ctx context.Context, key []byte) readOutcome {
		_, err := rc.Get(ctx, key)
		switch {
		case err == nil || errors.Is(err, client.ErrNotFound):
			return readOK
		case errors.Is(err, client.ErrOverloaded):
			return readOverloaded
		case errors.Is(err, context.DeadlineExceeded):
			return readTimeout
		}
		return readOther
	}
	return read, func() { stop(); wg.Wait(); rc.Close() }, nil
}

// adaptiveRoundRobin sends each read to the next replica of the key's
// range, by raw gRPC.
type adaptiveRoundRobin struct {
	mu     sync.Mutex
	ranges []adaptiveRRRange
	conns  map[string]tidekvpb.KVClient
	closer []*grpc.ClientConn
	next   atomic.Uint64
}

type adaptiveRRRange struct {
	start, end []byte
	replicas   []tidekvpb.KVClient
}

func (rr *adaptiveRoundRobin) install(resp *tidekvpb.RangesResponse) {
	addrs := map[uint64]string{}
	for _, n := range resp.GetNodes() {
		addrs[n.GetNodeId()] = n.GetGrpcAddr()
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var ranges []adaptiveRRRange
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		r := adaptiveRRRange{start: d.GetStartKey(), end: d.GetEndKey()}
		for _, rd := range d.GetReplicas() {
			a := addrs[rd.GetNodeId()]
			if a == "" {
				continue
			}
			kv := rr.conns[a]
			if kv == nil {
				conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					continue
				}
				rr.closer = append(rr.closer, conn)
				kv = tidekvpb.NewKVClient(conn)
				rr.conns[a] = kv
			}
			r.replicas = append(r.replicas, kv)
		}
		ranges = append(ranges, r)
	}
	rr.ranges = ranges
}

func (rr *adaptiveRoundRobin) read(ctx context.Context, key []byte) readOutcome {
	rr.mu.Lock()
	var reps []tidekvpb.KVClient
	for _, r := range rr.ranges {
		if string(key) >= string(r.start) && (len(r.end) == 0 || string(key) < string(r.end)) {
			reps = r.replicas
			break
		}
	}
	rr.mu.Unlock()
	if len(reps) == 0 {
		return readOther
	}
	kv := reps[rr.next.Add(1)%uint64(len(reps))]
	_, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: key, ReadMode: tidekvpb.ReadMode_ANY})
	switch status.Code(err) {
	case codes.OK:
		return readOK
	case codes.ResourceExhausted:
		return readOverloaded
	case codes.DeadlineExceeded:
		return readTimeout
	}
	return readOther
}

func (rr *adaptiveRoundRobin) close() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, c := range rr.closer {
		c.Close()
	}
}
