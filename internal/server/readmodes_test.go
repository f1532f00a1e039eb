package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/transport"
)

// ackLog records when each value of a counter key was acknowledged.
type ackLog struct {
	mu   sync.Mutex
	acks []ack
}

type ack struct {
	value int
	at    time.Time
}

func (l *ackLog) add(v int, at time.Time) {
	l.mu.Lock()
	l.acks = append(l.acks, ack{v, at})
	l.mu.Unlock()
}

// newestBefore is the highest value acknowledged before t (0 if none).
func (l *ackLog) newestBefore(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	best := 0
	for _, a := range l.acks {
		if a.at.Before(t) && a.value > best {
			best = a.value
		}
	}
	return best
}

type tally struct{ served, stale, violations int }

// checkStaleness is the bounded-staleness checker: while a writer
// increments a key, one reader per node issues reads in mode (with bound
// theta); each answer must be at least the newest value acknowledged theta
// before the read began and never a value not yet written. It returns what
// each node did; violations are counted, and reported as test errors only
// when failOnViolation is set (the negative control expects some).
func checkStaleness(t *testing.T, tc *testCluster, mode tidekvpb.ReadMode, theta, runFor time.Duration, failOnViolation bool) map[uint64]*tally {
	t.Helper()
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []byte("counter")
	// Values go on from an earlier check's on the same key: a read within
	// the bound of this one's start may still see that check's last value,
	// which must not look "never written".
	start := 0
	if v, err := c.Get(ctx, key); err == nil {
		start, _ = strconv.Atoi(string(v))
	} else if !errors.Is(err, client.ErrNotFound) {
		t.Fatal(err)
	}
	if err := c.Put(ctx, key, []byte(strconv.Itoa(start))); err != nil {
		t.Fatal(err)
	}
	acks := &ackLog{}
	var written atomic.Int64
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := start + 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			written.Store(int64(i))
			if err := c.Put(ctx, key, []byte(strconv.Itoa(i))); err != nil {
				t.Errorf("put %d: %v", i, err)
				return
			}
			acks.add(i, time.Now())
		}
	}()

	var mu sync.Mutex
	perNode := map[uint64]*tally{}
	var wg sync.WaitGroup
	for _, s := range tc.nodes {
		conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		kv := tidekvpb.NewKVClient(conn)
		id := s.NodeID()
		perNode[id] = &tally{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(runFor)
			for time.Now().Before(deadline) {
				began := time.Now()
				resp, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: key, ReadMode: mode, MaxStalenessMs: uint32(theta.Milliseconds())})
				mu.Lock()
				tl := perNode[id]
				switch {
				case err != nil && errorDetail(err).GetKind() == tidekvpb.ErrorKind_STALE_REPLICA:
					tl.stale++
				case err != nil:
					t.Errorf("node %d: read: %v", id, err)
				default:
					tl.served++
					v, _ := strconv.Atoi(string(resp.GetValue()))
					if int64(v) > written.Load() {
						t.Errorf("node %d: read %d, never written", id, v)
					}
					if floor := acks.newestBefore(began.Add(-theta)); v < floor {
						tl.violations++
						if failOnViolation {
							t.Errorf("node %d: read began %v returned %d, but %d was acknowledged more than %v before", id, began.Format(time.StampMicro), v, floor, theta)
						}
					}
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-writerDone
	if n := written.Load(); n < 10 {
		t.Fatalf("only %d writes: the check saw too little", n)
	}
	for id, tl := range perNode {
		t.Logf("node %d: %d reads served, %d refused as stale, %d violations", id, tl.served, tl.stale, tl.violations)
	}
	return perNode
}

// Followers serve BOUNDED reads (closed timestamps vouch for them) and
// every answer is fresh enough.
func TestBoundedReadsAreFreshEnough(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitReplicated(tc.client(), 3)
	for id, tl := range checkStaleness(t, tc, tidekvpb.ReadMode_BOUNDED, 300*time.Millisecond, 3*time.Second, true) {
		if tl.served == 0 {
			t.Errorf("node %d served no bounded read", id)
		}
	}
}

// The node with the highest ID starts no closed-timestamp exchange
// (internal/closedpush: the lower ID of a pair does): with the lease on
// it, its followers learn its closed timestamps only from their answers to
// the others' exchanges, and still serve BOUNDED reads, fresh enough.
func TestBoundedReadsFromExchangeAnswers(t *testing.T) {
	tc := startCluster(t, 3)
	c := tc.client()
	tc.waitReplicated(c, 3)
	defer tc.holdControl()()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []byte("counter")
	if err := c.Put(ctx, key, []byte("0")); err != nil {
		t.Fatal(err)
	}
	var highest uint64
	for _, s := range tc.nodes {
		highest = max(highest, s.NodeID())
	}
	rangeID := tc.nodes[0].Store().LookupKey(key).RangeID()
	eventually(t, 10*time.Second, "the lease on the highest ID", func() error {
		if lh := tc.leaseholder(t, rangeID); lh != highest {
			if err := c.TransferLease(ctx, rangeID, highest); err != nil {
				return err
			}
			return fmt.Errorf("leaseholder %d, want %d", lh, highest)
		}
		return nil
	})
	for id, tl := range checkStaleness(t, tc, tidekvpb.ReadMode_BOUNDED, 300*time.Millisecond, 3*time.Second, true) {
		if tl.served == 0 {
			t.Errorf("node %d served no bounded read", id)
		}
	}
	if lh := tc.leaseholder(t, rangeID); lh != highest {
		t.Fatalf("the lease moved to node %d during the check", lh)
	}
}

// With one follower's incoming traffic delayed well past the bound, ANY
// reads there return values older than the bound (the checker's negative
// control: it can fail), while BOUNDED reads there are refused rather than
// served stale.
func TestLaggingFollowerRefusesBoundedReads(t *testing.T) {
	delays := &transport.Delays{}
	tc := startClusterWith(t, 3, func(c *Config) { c.Transport.Delays = delays })
	tc.waitReplicated(tc.client(), 3)
	// Lag a node that does not lead the range the key lives in.
	var lagging uint64
	eventually(t, 10*time.Second, "a follower to lag", func() error {
		for _, s := range tc.nodes {
			if r := s.Store().LookupKey([]byte("counter")); r != nil && !r.IsLeader() && r.LeaderNodeID() != 0 {
				lagging = s.NodeID()
				return nil
			}
		}
		return fmt.Errorf("no follower with a known leader yet")
	})
	for _, s := range tc.nodes {
		if s.NodeID() != lagging {
			delays.Set(s.NodeID(), lagging, 600*time.Millisecond)
		}
	}
	const theta = 200 * time.Millisecond
	anyRes := checkStaleness(t, tc, tidekvpb.ReadMode_ANY, theta, 3*time.Second, false)
	if anyRes[lagging].violations == 0 {
		t.Errorf("negative control: ANY reads on the lagging node %d never looked staler than %v", lagging, theta)
	}
	boundedRes := checkStaleness(t, tc, tidekvpb.ReadMode_BOUNDED, theta, 3*time.Second, true)
	if boundedRes[lagging].stale == 0 {
		t.Errorf("the lagging node %d refused no bounded read", lagging)
	}
}

// Reads report the generation of the serving replica's descriptor, so that
// a client learns of replicas added without a routing error.
func TestReadsReportRangeGeneration(t *testing.T) {
	tc := startCluster(t, 1)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	want := tc.nodes[0].Store().LookupKey([]byte("k")).Desc().GetGeneration()
	conn, err := grpc.NewClient(tc.nodes[0].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := tidekvpb.NewKVClient(conn)
	for _, mode := range []tidekvpb.ReadMode{tidekvpb.ReadMode_LINEARIZABLE, tidekvpb.ReadMode_ANY} {
		get, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("k"), ReadMode: mode})
		if err != nil || get.GetRangeGeneration() != want || want == 0 {
			t.Errorf("%v get: generation %d, %v; want %d", mode, get.GetRangeGeneration(), err, want)
		}
		scan, err := kv.Scan(ctx, &tidekvpb.ScanRequest{StartKey: []byte("k"), ReadMode: mode})
		if err != nil || scan.GetRangeGeneration() != want {
			t.Errorf("%v scan: generation %d, %v; want %d", mode, scan.GetRangeGeneration(), err, want)
		}
		batch, err := kv.BatchGet(ctx, &tidekvpb.BatchGetRequest{Keys: [][]byte{[]byte("k")}, ReadMode: mode})
		if err != nil || batch.GetRangeGeneration() != want {
			t.Errorf("%v batch get: generation %d, %v; want %d", mode, batch.GetRangeGeneration(), err, want)
		}
	}
}

// A bounded read needs a bound, and an unknown mode is refused.
func TestReadModeValidation(t *testing.T) {
	tc := startCluster(t, 1)
	conn, err := grpc.NewClient(tc.nodes[0].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := tidekvpb.NewKVClient(conn)
	ctx := context.Background()
	for _, req := range []*tidekvpb.GetRequest{
		{Key: []byte("k"), ReadMode: tidekvpb.ReadMode_BOUNDED},
		{Key: []byte("k"), ReadMode: tidekvpb.ReadMode(42)},
	} {
		if _, err := kv.Get(ctx, req); errorDetail(err).GetKind() != tidekvpb.ErrorKind_INVALID_ARGUMENT {
			t.Errorf("%v: got %v, want INVALID_ARGUMENT", req, err)
		}
	}
	if _, err := kv.Scan(ctx, &tidekvpb.ScanRequest{StartKey: []byte("a"), ReadMode: tidekvpb.ReadMode_BOUNDED}); errorDetail(err).GetKind() != tidekvpb.ErrorKind_INVALID_ARGUMENT {
		t.Errorf("scan without bound: %v", err)
	}
}
