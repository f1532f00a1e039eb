package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The coordinator's decisions, with its ranges faked: a Sender that
// records what it was sent and answers as each test says, and a store
// whose clock stands still.

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

type fakeStore struct{ clock *hlc.Clock }

func (s fakeStore) HLC() *hlc.Clock                                  { return s.clock }
func (s fakeStore) LogVersion() uint32                               { return raftstore.LogVersionOnePhase }
func (s fakeStore) CommitWait(ctx context.Context, ts hlc.Timestamp) {}

// fakeSender answers from its fields and logs each call.
type fakeSender struct {
	mu    sync.Mutex
	calls []string
	// get answers Get at a read timestamp; getKey, when set, instead.
	get    func(at ReadAt) (Value, error)
	getKey func(key []byte, at ReadAt) (Value, error)
	// onePhase answers CommitOnePhase; writtenAt is where intents land.
	onePhase  error
	writtenAt hlc.Timestamp
}

func (f *fakeSender) log(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeSender) Get(ctx context.Context, key []byte, at ReadAt) (Value, error) {
	f.log("get %s at %d", key, at.Timestamp.WallTime)
	if f.getKey != nil {
		return f.getKey(key, at)
	}
	return f.get(at)
}

func (f *fakeSender) Scan(ctx context.Context, start, end []byte, limit int, at ReadAt) ([]KeyValue, error) {
	f.log("scan %s-%s", start, end)
	return nil, nil
}

func (f *fakeSender) RefreshReads(ctx context.Context, txnID []byte, keys [][]byte, from, to hlc.Timestamp) error {
	f.log("refresh %q from %d to %d", keys, from.WallTime, to.WallTime)
	return nil
}

func (f *fakeSender) RefreshSpans(ctx context.Context, txnID []byte, spans []*tidekvpb.KeySpan, from, to hlc.Timestamp) error {
	if len(spans) > 0 {
		f.log("refresh %d spans", len(spans))
	}
	return nil
}

func (f *fakeSender) CommitOnePhase(ctx context.Context, txnID []byte, readTS hlc.Timestamp, reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	f.log("one phase")
	return readTS, f.onePhase
}

func (f *fakeSender) WriteIntents(ctx context.Context, t *tidekvpb.TxnKey, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	f.log("intents %d at %d", len(ops), writeTS.WallTime)
	return f.writtenAt, nil
}

func (f *fakeSender) TxnRecord(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error) {
	switch req.GetOp() {
	case tidekvpb.TxnRecordOp_TXN_COMMIT:
		f.log("record commit at %d", req.GetCommitTimestamp().HLC().WallTime)
		return &tidekvpb.TxnRecordResponse{Status: tidekvpb.TxnStatus_TXN_COMMITTED}, nil
	case tidekvpb.TxnRecordOp_TXN_HEARTBEAT:
		f.log("record heartbeat")
		return &tidekvpb.TxnRecordResponse{Status: tidekvpb.TxnStatus_TXN_PENDING}, nil
	}
	f.log("record %s", req.GetOp())
	return &tidekvpb.TxnRecordResponse{}, nil
}

func (f *fakeSender) ResolveIntents(ctx context.Context, t *tidekvpb.TxnKey, keys [][]byte, commit bool, commitTS hlc.Timestamp) error {
	f.log("resolve %d commit=%v", len(keys), commit)
	return nil
}

const now = int64(1_000_000_000_000)

// writeKeys writes n keys in transaction id, MaxBatchKeys a write.
func writeKeys(t *testing.T, c *Coordinator, id string, n int) {
	t.Helper()
	for w := 0; w < n; w += c.deps.MaxBatchKeys {
		var ops []*tidekvpb.WriteOp
		for i := w; i < min(n, w+c.deps.MaxBatchKeys); i++ {
			ops = append(ops, &tidekvpb.WriteOp{Key: fmt.Appendf(nil, "k%03d", i), Value: []byte("v")})
		}
		if _, err := c.Write(context.Background(), meta(id), ops); err != nil {
			t.Fatal(err)
		}
	}
}

func newTestCoordinator(t *testing.T, send Sender) *Coordinator {
	t.Helper()
	clock, err := hlc.NewClock(fixedClock{time.Unix(0, now)}, 250*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	t.Cleanup(func() { close(stopped) })
	ok := func() error { return nil }
	return New(Deps{
		Store: fakeStore{clock},
		Send:  send,
		Node: Node{NeedTxnVersion: ok, CheckKey: func([]byte) error { return nil }, CheckTxnOps: func([]*tidekvpb.WriteOp) error { return nil },
			CheckKeySpace: func(context.Context, string, ...[]byte) error { return nil },
			User:          func(context.Context) (string, error) { return "", nil }},
		Config:       DefaultConfig(),
		MaxBatchKeys: 100,
		Metrics: Metrics{Commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "commits"}, []string{"path"}),
			Refreshes: prometheus.NewCounter(prometheus.CounterOpts{Name: "refreshes"}), UncertainRestarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "restarts"}),
			RecordsLeft: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "left"}, []string{"why"})},
		Stopped: stopped,
	})
}

func meta(id string) *tidekvpb.TxnMeta {
	return &tidekvpb.TxnMeta{Id: []byte(id), ReadTimestamp: &tidekvpb.Timestamp{WallNanos: 1}}
}

// A read that finds a version in its uncertainty window raises the
// transaction's read timestamp to it, after refreshing what it read
// before up to there, and reads again; the transaction's later reads and
// its commit are at the raised timestamp.
func TestUncertainReadRaisesAfterRefreshing(t *testing.T) {
	found := hlc.Timestamp{WallTime: now + 100}
	f := &fakeSender{get: func(at ReadAt) (Value, error) {
		if at.Timestamp.Less(found) && !at.Limit.Less(found) {
			return Value{}, &UncertainReadError{Timestamp: found}
		}
		return Value{Found: true, Value: []byte("v"), Version: found}, nil
	}}
	// The first read, of a, finds nothing uncertain.
	get, first := f.get, true
	f.get = func(at ReadAt) (Value, error) {
		if first {
			first = false
			return Value{}, nil
		}
		return get(at)
	}
	c := newTestCoordinator(t, f)
	ctx := context.Background()
	if _, err := c.Get(ctx, meta("T"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, meta("T"), []byte("b"))
	if err != nil || string(got.GetValue()) != "v" || got.GetReadTimestamp().HLC() != found {
		t.Fatalf("get b = %v, %v; want v read at %v", got, err, found)
	}
	end, err := c.End(ctx, meta("T"), true)
	if err != nil || end.GetCommitTimestamp().HLC() != found {
		t.Fatalf("read-only commit = %v, %v; want at %v", end, err, found)
	}
	want := []string{
		"get a at %d", "get b at %d", fmt.Sprintf("refresh [\"a\"] from %%d to %d", found.WallTime), fmt.Sprintf("get b at %d", found.WallTime),
	}
	if len(f.calls) != len(want) {
		t.Fatalf("calls %q; want %d like %q", f.calls, len(want), want)
	}
	for i := range 3 {
		var ts int64
		if _, err := fmt.Sscanf(f.calls[i], want[i], &ts); err != nil || ts != now {
			t.Errorf("call %d = %q; want %q at the clock's %d (%v)", i, f.calls[i], want[i], now, err)
		}
	}
	if f.calls[3] != want[3] {
		t.Errorf("call 3 = %q; want %q", f.calls[3], want[3])
	}
}

// BatchGet answers a key the transaction wrote from its write, reads the
// others at the read timestamp at once, and reads again one that found a
// version in its uncertainty window, after refreshing the others up to it
// (they joined the transaction's reads): all are one snapshot, at the
// raised timestamp, as Get's one by one would be.
func TestBatchGetRefreshesTheOthersBeforeRaising(t *testing.T) {
	found := hlc.Timestamp{WallTime: now + 100}
	f := &fakeSender{getKey: func(key []byte, at ReadAt) (Value, error) {
		if string(key) == "b" && at.Timestamp.Less(found) {
			return Value{}, &UncertainReadError{Timestamp: found}
		}
		return Value{Found: true, Value: append([]byte("v"), key...)}, nil
	}}
	c := newTestCoordinator(t, f)
	ctx := context.Background()
	if _, err := c.Write(ctx, meta("T"), []*tidekvpb.WriteOp{{Key: []byte("w"), Value: []byte("mine")}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.BatchGet(ctx, meta("T"), [][]byte{[]byte("a"), []byte("w"), []byte("b"), []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, r := range got.GetResults() {
		vals = append(vals, string(r.GetValue()))
	}
	if fmt.Sprint(vals) != "[va mine vb vc]" || got.GetReadTimestamp().HLC() != found {
		t.Fatalf("batch get = %q at %v; want [va mine vb vc] at %v", vals, got.GetReadTimestamp().HLC(), found)
	}
	f.mu.Lock()
	calls := f.calls
	f.mu.Unlock()
	// a, b and c at once (in any order), then the refresh of a and c,
	// then b again at the raised timestamp.
	refresh := fmt.Sprintf("refresh [\"a\" \"c\"] from %d to %d", now, found.WallTime)
	if len(calls) != 5 || calls[3] != refresh || calls[4] != fmt.Sprintf("get b at %d", found.WallTime) {
		t.Fatalf("calls %q; want three gets at %d, %q, get b at %d", calls, now, refresh, found.WallTime)
	}
}

// A commit whose keys span ranges (the one-phase commit says so) writes
// intents with its record, refreshes its reads when the intents landed
// above its read timestamp, commits the record there, and resolves the
// intents afterwards; a one-phase commit that fails otherwise rolls back.
func TestCommitFallsBackToTwoPhases(t *testing.T) {
	above := hlc.Timestamp{WallTime: now + 500}
	f := &fakeSender{onePhase: Mark(errors.New("spans ranges"), ErrNotOneRange), writtenAt: above,
		get: func(ReadAt) (Value, error) { return Value{}, nil }}
	c := newTestCoordinator(t, f)
	ctx := context.Background()
	if _, err := c.Get(ctx, meta("T"), []byte("r")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, meta("T"), []*tidekvpb.WriteOp{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("z"), Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	end, err := c.End(ctx, meta("T"), true)
	if err != nil || end.GetCommitTimestamp().HLC() != above {
		t.Fatalf("commit = %v, %v; want at %v", end, err, above)
	}
	if c.Open() != 0 {
		t.Errorf("%d transactions open after the commit; want 0", c.Open())
	}
	// The record is created beside the intents (in either order).
	f.mu.Lock()
	calls := append([]string(nil), f.calls...)
	f.mu.Unlock()
	if len(calls) < 6 || calls[1] != "one phase" || calls[4] != fmt.Sprintf("refresh [\"r\"] from %d to %d", now, above.WallTime) || calls[5] != fmt.Sprintf("record commit at %d", above.WallTime) {
		t.Fatalf("calls %q; want get, one phase, record heartbeat and intents, refresh of r up to %d, record commit there", calls, above.WallTime)
	}

	f = &fakeSender{onePhase: Mark(errors.New("conflict"), ErrRetry), get: f.get}
	c = newTestCoordinator(t, f)
	if _, err := c.Write(ctx, meta("U"), []*tidekvpb.WriteOp{{Key: []byte("a"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.End(ctx, meta("U"), true); !errors.Is(err, ErrRetry) {
		t.Fatalf("commit after a failed one-phase commit = %v; want ErrRetry", err)
	}
	if _, err := c.End(ctx, meta("U"), true); !errors.Is(err, ErrRetry) {
		t.Fatalf("commit of a rolled-back transaction = %v; want ErrRetry (not open here)", err)
	}
}

// A transaction writing more than a range takes in one request
// (MaxBatchKeys, 100 here), in several writes, commits in two phases: no
// one-phase commit is tried, its intents go out and are resolved at most
// MaxBatchKeys a request, every key once, and it commits as one.
func TestManyWritesCommitInPieces(t *testing.T) {
	f := &fakeSender{writtenAt: hlc.Timestamp{WallTime: now}, get: func(ReadAt) (Value, error) { return Value{}, nil }}
	c := newTestCoordinator(t, f)
	ctx := context.Background()
	const n = 250
	writeKeys(t, c, "T", n)
	if _, err := c.End(ctx, meta("T"), true); err != nil {
		t.Fatal(err)
	}
	// The intents are resolved after the answer; the record is forgotten
	// last.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		calls := append([]string(nil), f.calls...)
		f.mu.Unlock()
		if len(calls) > 0 && calls[len(calls)-1] == "record TXN_FORGET" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %q; the record was not forgotten", calls)
		}
		time.Sleep(time.Millisecond)
	}
	var intents, resolves []string
	for _, call := range f.calls {
		switch {
		case call == "one phase":
			t.Errorf("a one-phase commit of %d writes was tried (a range takes 100)", n)
		case strings.HasPrefix(call, "intents "):
			intents = append(intents, call)
		case strings.HasPrefix(call, "resolve "):
			resolves = append(resolves, call)
		}
	}
	at := fmt.Sprintf(" at %d", now)
	if want := []string{"intents 100" + at, "intents 100" + at, "intents 50" + at}; !slices.Equal(intents, want) {
		t.Errorf("intents %q; want %q", intents, want)
	}
	if want := []string{"resolve 100 commit=true", "resolve 100 commit=true", "resolve 50 commit=true"}; !slices.Equal(resolves, want) {
		t.Errorf("resolves %q; want %q", resolves, want)
	}
}

// A batch get of more keys than a node takes in one request is refused
// before anything is read, as a KV BatchGet or a transaction's write of
// as many is: the client sends them in pieces (client.Tx.BatchGet).
func TestBatchGetPastMaxBatchKeysRefused(t *testing.T) {
	f := &fakeSender{get: func(ReadAt) (Value, error) { return Value{Found: true}, nil }}
	c := newTestCoordinator(t, f)
	keys := make([][]byte, c.deps.MaxBatchKeys+1)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%04d", i)
	}
	_, err := c.BatchGet(context.Background(), meta("T"), keys)
	if !errors.Is(err, kverr.ErrInvalidArgument) {
		t.Fatalf("batch get of %d keys (limit %d) = %v; want an invalid-argument error", len(keys), c.deps.MaxBatchKeys, err)
	}
	f.mu.Lock()
	read := len(f.calls)
	f.mu.Unlock()
	if read != 0 {
		t.Fatalf("a refused batch get read %d keys", read)
	}
	if _, err := c.BatchGet(context.Background(), meta("T"), keys[:c.deps.MaxBatchKeys]); err != nil {
		t.Fatalf("batch get of %d keys (the limit) = %v", c.deps.MaxBatchKeys, err)
	}
}
