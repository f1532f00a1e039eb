package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// threeRanges: [,h) led by n1, [h,p) by n2, [p,) by n3, all on n1..n3.
func threeRanges() []*fakeRange {
	return []*fakeRange{
		rng(1, "", "h", 1, 1, 2, 3),
		rng(2, "h", "p", 2, 1, 2, 3),
		rng(3, "p", "", 3, 1, 2, 3),
	}
}

func mustPut(t *testing.T, cl *Client, k, v string) {
	t.Helper()
	if err := cl.Put(testCtx(t), []byte(k), []byte(v)); err != nil {
		t.Fatalf("put %q: %v", k, err)
	}
}

func mustGet(t *testing.T, cl *Client, k, want string) {
	t.Helper()
	v, err := cl.Get(testCtx(t), []byte(k))
	if err != nil {
		t.Fatalf("get %q: %v", k, err)
	}
	if string(v) != want {
		t.Fatalf("get %q = %q, want %q", k, v, want)
	}
}

func expectCalls(t *testing.T, c *fakeCluster, want string) {
	t.Helper()
	if got := c.callCounts(); got != want {
		t.Fatalf("calls:\n got %s\nwant %s", got, want)
	}
}

// waitDisconnected waits until the client's connection to addr is no longer
// usable.
func waitDisconnected(t *testing.T, cl *Client, addr string) {
	t.Helper()
	nc, err := cl.conns.get(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for s := nc.cc.GetState(); s == connectivity.Ready; s = nc.cc.GetState() {
		if !nc.cc.WaitForStateChange(ctx, s) {
			t.Fatal("connection still ready")
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero fields take defaults", Config{Addrs: []string{"127.0.0.1:7400"}}, true},
		{"defaults plus addrs", func() Config { c := DefaultConfig(); c.Addrs = []string{"h:1", "h:2"}; return c }(), true},
		{"no addrs", DefaultConfig(), false},
		{"addr without port", Config{Addrs: []string{"localhost"}}, false},
		{"negative timeout", Config{Addrs: []string{"h:1"}, AttemptTimeout: -1}, false},
		{"negative attempts", Config{Addrs: []string{"h:1"}, MaxAttempts: -1}, false},
		{"min above max backoff", Config{Addrs: []string{"h:1"}, MinBackoff: time.Second, MaxBackoff: time.Millisecond}, false},
		{"min above default max", Config{Addrs: []string{"h:1"}, MinBackoff: time.Second}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if _, err2 := New(tc.cfg); (err2 == nil) != tc.ok {
			t.Errorf("%s: New() = %v, want ok=%v", tc.name, err2, tc.ok)
		}
	}
}

func TestRoutesStraightToLeaseholder(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(threeRanges()...)
	cl := c.newClient(nil)
	for _, k := range []string{"a", "k", "x"} {
		mustPut(t, cl, k, "v"+k)
	}
	// One refresh from the seed, then every request lands on its leaseholder.
	expectCalls(t, c, "n1:Put=1 n1:Ranges=1 n2:Put=1 n3:Put=1")

	c.resetCalls()
	for _, k := range []string{"a", "k", "x"} {
		mustGet(t, cl, k, "v"+k)
	}
	if _, err := cl.Get(testCtx(t), []byte("zz")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing key: %v, want ErrNotFound", err)
	}
	existed, err := cl.Delete(testCtx(t), []byte("k"))
	if err != nil || !existed {
		t.Fatalf("delete = %v, %v", existed, err)
	}
	existed, err = cl.Delete(testCtx(t), []byte("k"))
	if err != nil || existed {
		t.Fatalf("second delete = %v, %v", existed, err)
	}
	expectCalls(t, c, "n1:Get=1 n2:Delete=2 n2:Get=1 n3:Get=2")
}

func TestNotLeaseholderRedirect(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	c.freezeMeta() // the meta range keeps saying n1
	c.setLeader(1, 3)
	cl := c.newClient(nil)

	mustPut(t, cl, "a", "1")
	expectCalls(t, c, "n1:Put=1 n1:Ranges=1 n3:Put=1")

	// The redirect taught the cache the leaseholder: no detour now.
	c.resetCalls()
	mustPut(t, cl, "b", "2")
	mustGet(t, cl, "a", "1")
	expectCalls(t, c, "n3:Get=1 n3:Put=1")
}

func TestNotLeaseholderDuringElection(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	c.freezeMeta()
	c.setLeader(1, 0) // nobody holds the lease yet
	cl := c.newClient(nil)
	// elected closes just before the leaseholder appears: a put that
	// succeeds finds it closed unless it succeeded with no leaseholder.
	// (Timing the put from a reading taken after the timer was set
	// allowed 5 ms for the gap between the two readings, which a loaded
	// machine's scheduling can exceed.)
	elected := make(chan struct{})
	time.AfterFunc(30*time.Millisecond, func() {
		close(elected)
		c.setLeader(1, 2)
	})

	mustPut(t, cl, "a", "1")
	select {
	case <-elected:
	default:
		t.Fatal("put succeeded before any leaseholder existed")
	}
	if n := c.node(2).count("Put"); n == 0 {
		t.Fatalf("put never reached the new leaseholder n2: %s", c.callCounts())
	}
}

func TestRefreshAfterSplitRangeNotFound(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	mustPut(t, cl, "x", "1")

	// The right half lives on n2 and n3 only, so n1 has no replica for "x".
	c.split("m", 2, 2, 2, 3)
	c.resetCalls()
	mustGet(t, cl, "x", "1")
	expectCalls(t, c, "n1:Get=1 n1:Ranges=1 n2:Get=1")

	c.resetCalls()
	mustGet(t, cl, "x", "1")
	mustPut(t, cl, "a", "2")
	expectCalls(t, c, "n1:Put=1 n2:Get=1")
}

func TestKeyMismatchUpdatesCacheFromDetail(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	mustPut(t, cl, "a", "A")
	mustPut(t, cl, "x", "X")

	// The split keeps all replicas on n1, which answers multi-key requests
	// across the new boundary with KEY_MISMATCH and the right descriptor.
	c.split("m", 2, 1)
	c.resetCalls()
	res, err := cl.BatchGet(testCtx(t), [][]byte{[]byte("x"), []byte("a"), []byte("y")})
	if err != nil {
		t.Fatal(err)
	}
	want := []GetResult{{Value: []byte("X"), Found: true}, {Value: []byte("A"), Found: true}, {}}
	if got := fmt.Sprint(res); got != fmt.Sprint(want) {
		t.Fatalf("BatchGet = %v, want %v", got, want)
	}
	// One mismatch, a refresh to fill the gap left of "m", then one request
	// per range.
	expectCalls(t, c, "n1:BatchGet=3 n1:Ranges=1")

	// Write must not straddle the boundary: rejected without being sent.
	c.resetCalls()
	err = cl.Write(testCtx(t), []Op{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("z"), Value: []byte("2")}})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("cross-range Write: %v, want ErrInvalidArgument", err)
	}
	if n := c.node(1).count("Write"); n != 0 {
		t.Fatalf("cross-range Write was sent %d times", n)
	}
	err = cl.Write(testCtx(t), []Op{{Key: []byte("x"), Value: []byte("1")}, {Key: []byte("y"), Value: []byte("2")}, {Key: []byte("z"), Delete: true}})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, cl, "y", "2")
}

func TestKeyMismatchSingleKey(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	mustPut(t, cl, "x", "1")

	// A scripted KEY_MISMATCH without a descriptor: the client must refresh.
	_, right := c.split("m", 2, 2)
	_ = right
	var once atomic.Bool
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		if method == "Get" && once.CompareAndSwap(false, true) {
			return statusWith(codes.FailedPrecondition, "key mismatch", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_KEY_MISMATCH})
		}
		return nil
	})
	c.resetCalls()
	mustGet(t, cl, "x", "1")
	expectCalls(t, c, "n1:Get=1 n1:Ranges=1 n2:Get=1")
}

func TestRetryAfterUnavailable(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	mustPut(t, cl, "a", "1")

	// n1 loses its lease and says UNAVAILABLE; n2 takes over.
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		c.setLeader(1, 2)
		return statusWith(codes.Unavailable, "replica unavailable", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_UNAVAILABLE})
	})
	c.resetCalls()
	mustGet(t, cl, "a", "1")
	mustPut(t, cl, "b", "2")
	if c.node(2).count("Get") != 1 || c.node(2).count("Put") != 1 {
		t.Fatalf("requests did not move to n2: %s", c.callCounts())
	}
	if n := c.node(1).count("Put"); n != 0 {
		t.Fatalf("suspect n1 was tried again for the put: %s", c.callCounts())
	}
}

func TestRetryAfterNodeStops(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	// A fail-over that waited for a dial or attempt timeout would run into
	// testCtx's deadline and fail; backoffs are capped at 20 ms. (It used
	// to be timed against 1 s, which a loaded machine's scheduling can
	// exceed without any wait in the client.)
	cl := c.newClient(func(cfg *Config) {
		cfg.Addrs = c.addrs()
		cfg.DialTimeout, cfg.AttemptTimeout = time.Hour, time.Hour
	})
	mustPut(t, cl, "a", "1")

	c.node(1).srv.Stop()
	c.setLeader(1, 2)
	mustGet(t, cl, "a", "1")
	mustPut(t, cl, "b", "2")
	existed, err := cl.Delete(testCtx(t), []byte("a"))
	if err != nil || !existed {
		t.Fatalf("delete = %v, %v", existed, err)
	}
}

func TestSeedDownAtStart(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 2, 1, 2, 3))
	c.node(1).srv.Stop()
	cl := c.newClient(func(cfg *Config) { cfg.Addrs = c.addrs() })
	mustPut(t, cl, "a", "1")
	mustGet(t, cl, "a", "1")
}

func TestCompareAndSet(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(threeRanges()...)
	cl := c.newClient(nil)
	ctx := testCtx(t)
	k := []byte("k")
	v1, v2 := []byte("v1"), []byte("v2")

	swapped, cur, exists, err := cl.CompareAndSet(ctx, k, nil, &v1)
	if err != nil || !swapped || exists || cur != nil {
		t.Fatalf("create: %v %q %v %v", swapped, cur, exists, err)
	}
	swapped, cur, exists, err = cl.CompareAndSet(ctx, k, nil, &v2)
	if err != nil || swapped || !exists || string(cur) != "v1" {
		t.Fatalf("create again: %v %q %v %v", swapped, cur, exists, err)
	}
	swapped, _, _, err = cl.CompareAndSet(ctx, k, &v1, &v2)
	if err != nil || !swapped {
		t.Fatalf("swap: %v %v", swapped, err)
	}
	swapped, _, _, err = cl.CompareAndSet(ctx, k, &v2, nil)
	if err != nil || !swapped {
		t.Fatalf("delete: %v %v", swapped, err)
	}
	if _, err := cl.Get(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after CAS delete: %v", err)
	}
}

func TestAmbiguous(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	mustPut(t, cl, "a", "1")

	var fail atomic.Int32
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		if fail.Add(-1) >= 0 {
			return statusWith(codes.Unavailable, "proposal dropped by leader change", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_AMBIGUOUS})
		}
		return nil
	})

	// Not retried: the first attempt may have been applied.
	fail.Store(1)
	v := []byte("2")
	_, _, _, err := cl.CompareAndSet(testCtx(t), []byte("a"), nil, &v)
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("CAS after AMBIGUOUS: %v, want ErrAmbiguous", err)
	}
	if !strings.Contains(err.Error(), "proposal dropped") {
		t.Fatalf("server message lost: %v", err)
	}
	if n := c.node(1).count("CompareAndSet"); n != 1 {
		t.Fatalf("CAS sent %d times", n)
	}

	// Puts are not retried either: a late first attempt plus a retry would
	// apply the value twice, around other clients' writes.
	fail.Store(1)
	if err := cl.Put(testCtx(t), []byte("a"), []byte("3")); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("put after AMBIGUOUS: %v, want ErrAmbiguous", err)
	}
	if n := c.node(1).count("Put"); n != 2 {
		t.Fatalf("put sent %d times, want 1 + 1 ambiguous", n)
	}
	mustPut(t, cl, "a", "4")
	mustGet(t, cl, "a", "4")
}

func TestCompareAndSetTransportFailure(t *testing.T) {
	t.Run("after send is ambiguous", func(t *testing.T) {
		c := newFakeCluster(t, 3)
		c.setRanges(rng(1, "", "", 1, 1, 2, 3))
		cl := c.newClient(nil)
		mustPut(t, cl, "a", "1")
		arrived := make(chan struct{})
		c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
			if method == "CompareAndSet" {
				close(arrived)
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		go func() {
			<-arrived
			c.node(1).srv.Stop() // the connection dies with the CAS in flight
		}()
		v := []byte("2")
		_, _, _, err := cl.CompareAndSet(testCtx(t), []byte("a"), nil, &v)
		if !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("CAS cut off mid-flight: %v, want ErrAmbiguous", err)
		}
		for _, id := range []uint64{2, 3} {
			if n := c.node(id).count("CompareAndSet"); n != 0 {
				t.Fatalf("CAS retried on n%d", id)
			}
		}
	})

	t.Run("attempt timeout is ambiguous", func(t *testing.T) {
		c := newFakeCluster(t, 3)
		c.setRanges(rng(1, "", "", 1, 1, 2, 3))
		cl := c.newClient(func(cfg *Config) { cfg.AttemptTimeout = 100 * time.Millisecond })
		mustPut(t, cl, "a", "1")
		c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
			<-ctx.Done()
			return ctx.Err()
		})
		v := []byte("2")
		_, _, _, err := cl.CompareAndSet(testCtx(t), []byte("a"), nil, &v)
		if !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("CAS attempt timeout: %v, want ErrAmbiguous", err)
		}
	})

	t.Run("caller deadline mid-flight is ambiguous", func(t *testing.T) {
		c := newFakeCluster(t, 3)
		c.setRanges(rng(1, "", "", 1, 1, 2, 3))
		cl := c.newClient(nil)
		mustPut(t, cl, "a", "1")
		c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
			<-ctx.Done()
			return ctx.Err()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		v := []byte("2")
		_, _, _, err := cl.CompareAndSet(ctx, []byte("a"), nil, &v)
		if !errors.Is(err, ErrAmbiguous) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CAS deadline: %v, want ErrAmbiguous and DeadlineExceeded", err)
		}
	})

	t.Run("connect failure is retried", func(t *testing.T) {
		c := newFakeCluster(t, 3)
		c.setRanges(rng(1, "", "", 1, 1, 2, 3))
		cl := c.newClient(nil)
		mustPut(t, cl, "a", "1")
		c.node(1).srv.Stop()
		// Once the client has seen the connection drop, a CAS cannot get
		// onto it: it is known not to have been sent. (Sent into a
		// connection that died unnoticed, it would be ambiguous.)
		waitDisconnected(t, cl, c.node(1).addr)
		c.setLeader(1, 2)
		v1, v2 := []byte("1"), []byte("2")
		swapped, _, _, err := cl.CompareAndSet(testCtx(t), []byte("a"), &v1, &v2)
		if err != nil || !swapped {
			t.Fatalf("CAS with leaseholder down: %v %v", swapped, err)
		}
	})
}

func TestOverloaded(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	var (
		mu         sync.Mutex
		remaining  int
		retryAfter uint32
	)
	script := func(n int, after time.Duration) {
		mu.Lock()
		remaining, retryAfter = n, uint32(after/time.Millisecond)
		mu.Unlock()
	}
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if method != "Get" || remaining == 0 {
			return nil
		}
		remaining--
		return statusWith(codes.ResourceExhausted, "too busy", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: retryAfter})
	})
	cl := c.newClient(func(cfg *Config) { cfg.MaxAttempts = 5 })
	mustPut(t, cl, "a", "1")

	t.Run("waits retry_after", func(t *testing.T) {
		script(2, 60*time.Millisecond)
		start := time.Now()
		mustGet(t, cl, "a", "1")
		if d := time.Since(start); d < 120*time.Millisecond {
			t.Fatalf("two 60ms retry_afters took only %v", d)
		}
	})
	t.Run("deadline before retry_after", func(t *testing.T) {
		script(1, 10*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		pauses := recordPauses(cl)
		_, err := cl.Get(ctx, []byte("a"))
		if !errors.Is(err, ErrOverloaded) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrOverloaded and DeadlineExceeded", err)
		}
		if p := pauses(); len(p) != 0 {
			t.Fatalf("paused %v before returning, want no wait", p)
		}
	})
	t.Run("attempts run out", func(t *testing.T) {
		script(100, time.Millisecond)
		before := c.node(1).count("Get")
		_, err := cl.Get(testCtx(t), []byte("a"))
		if !errors.Is(err, ErrOverloaded) {
			t.Fatalf("got %v, want ErrOverloaded", err)
		}
		if n := c.node(1).count("Get") - before; n != 5 {
			t.Fatalf("%d attempts, want MaxAttempts=5", n)
		}
	})
	t.Run("fail fast passes the hint on", func(t *testing.T) {
		ff := c.newClient(func(cfg *Config) { cfg.FailFastOnOverload = true })
		script(1, 250*time.Millisecond)
		before := c.node(1).count("Get")
		pauses := recordPauses(ff)
		_, err := ff.Get(testCtx(t), []byte("a"))
		var oe *OverloadedError
		if !errors.As(err, &oe) || !errors.Is(err, ErrOverloaded) || oe.RetryAfter != 250*time.Millisecond || !strings.Contains(err.Error(), "too busy") {
			t.Fatalf("got %v, want an OverloadedError with the node's 250ms hint and sentence", err)
		}
		if n := c.node(1).count("Get") - before; n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
		if p := pauses(); len(p) != 0 {
			t.Fatalf("fail-fast refusal paused %v, want no wait", p)
		}
	})
}

func TestInvalidArgumentNotRetried(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	const msg = "value is 2000000 bytes, exceeds max_value_bytes 1048576"
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		if method == "Put" {
			return statusWith(codes.InvalidArgument, msg, &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_INVALID_ARGUMENT})
		}
		return nil
	})
	cl := c.newClient(nil)
	err := cl.Put(testCtx(t), []byte("a"), make([]byte, 10))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("got %v, want ErrInvalidArgument with %q", err, msg)
	}
	if n := c.node(1).count("Put"); n != 1 {
		t.Fatalf("sent %d times", n)
	}
}

func TestScanAcrossRanges(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(threeRanges()...)
	cl := c.newClient(nil)
	for ch := 'a'; ch <= 'z'; ch++ {
		mustPut(t, cl, string(ch), strings.ToUpper(string(ch)))
	}
	keys := func(kvs []KeyValue) string {
		var b strings.Builder
		for _, kv := range kvs {
			if strings.ToUpper(string(kv.Key)) != string(kv.Value) {
				t.Fatalf("bad pair %q=%q", kv.Key, kv.Value)
			}
			b.Write(kv.Key)
		}
		return b.String()
	}
	for _, tc := range []struct {
		start, end string
		limit      int
		want       string
		calls      string
	}{
		{"", "", 0, "abcdefghijklmnopqrstuvwxyz", "n1:Scan=1 n2:Scan=1 n3:Scan=1"},
		{"c", "", 20, "cdefghijklmnopqrstuv", "n1:Scan=1 n2:Scan=1 n3:Scan=1"},
		{"c", "", 8, "cdefghij", "n1:Scan=1 n2:Scan=1"},
		{"a", "", 3, "abc", "n1:Scan=1"},
		{"f", "r", 0, "fghijklmnopq", "n1:Scan=1 n2:Scan=1 n3:Scan=1"},
		{"f", "p", 0, "fghijklmno", "n1:Scan=1 n2:Scan=1"},
		{"q", "q", 0, "", ""},
	} {
		c.resetCalls()
		kvs, err := cl.Scan(testCtx(t), []byte(tc.start), []byte(tc.end), tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(kvs); got != tc.want {
			t.Errorf("Scan(%q, %q, %d) = %s, want %s", tc.start, tc.end, tc.limit, got, tc.want)
		}
		if got := c.callCounts(); got != tc.calls {
			t.Errorf("Scan(%q, %q, %d) calls %s, want %s", tc.start, tc.end, tc.limit, got, tc.calls)
		}
	}
}

func TestScanFollowsServerPages(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	cl := c.newClient(nil)
	ops := make([]Op, 0, 1500)
	for i := range 1500 {
		ops = append(ops, Op{Key: []byte(fmt.Sprintf("k%04d", i)), Value: []byte("v")})
	}
	if err := cl.Write(testCtx(t), ops); err != nil {
		t.Fatal(err)
	}
	kvs, err := cl.Scan(testCtx(t), nil, nil, 0)
	if err != nil || len(kvs) != 1500 {
		t.Fatalf("got %d pairs, %v", len(kvs), err)
	}
	if n := c.node(1).count("Scan"); n != 2 {
		t.Fatalf("%d scan requests, want 2 pages", n)
	}
}

func TestBatchGetAcrossRanges(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(threeRanges()...)
	cl := c.newClient(nil)
	for _, k := range []string{"a", "b", "k", "x"} {
		mustPut(t, cl, k, "v"+k)
	}
	c.resetCalls()
	in := []string{"x", "a", "k", "nope", "b", "zz", "x"}
	keys := make([][]byte, len(in))
	for i, k := range in {
		keys[i] = []byte(k)
	}
	res, err := cl.BatchGet(testCtx(t), keys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		if r.Found {
			got = append(got, string(r.Value))
		} else {
			got = append(got, "-")
		}
	}
	if want := "vx va vk - vb - vx"; strings.Join(got, " ") != want {
		t.Fatalf("BatchGet = %v, want %s", got, want)
	}
	expectCalls(t, c, "n1:BatchGet=1 n2:BatchGet=1 n3:BatchGet=1")

	if res, err := cl.BatchGet(testCtx(t), nil); err != nil || len(res) != 0 {
		t.Fatalf("empty BatchGet = %v, %v", res, err)
	}
}

// WriteEach sends one Write per range, and reports each op in order.
func TestWriteEachAcrossRanges(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(threeRanges()...)
	cl := c.newClient(nil)
	mustPut(t, cl, "k", "old")
	c.resetCalls()
	ops := []Op{
		{Key: []byte("x"), Value: []byte("1")}, {Key: []byte("a"), Value: []byte("1")},
		{Key: []byte("k"), Delete: true}, {Key: []byte("b"), Value: []byte("1")},
		{Key: []byte("k"), Delete: true}, {Key: []byte("zz"), Value: []byte("1")},
	}
	res := cl.WriteEach(testCtx(t), ops)
	for i, want := range []bool{false, false, true, false, false, false} {
		if res[i].Err != nil || res[i].Existed != want {
			t.Errorf("op %d (%q): %+v, want existed=%v", i, ops[i].Key, res[i], want)
		}
	}
	expectCalls(t, c, "n1:Write=1 n2:Write=1 n3:Write=1")
	for k, want := range map[string]string{"x": "1", "a": "1", "b": "1", "zz": "1"} {
		if v, err := cl.Get(testCtx(t), []byte(k)); err != nil || string(v) != want {
			t.Errorf("get %q = %q, %v", k, v, err)
		}
	}
	if _, err := cl.Get(testCtx(t), []byte("k")); !errors.Is(err, ErrNotFound) {
		t.Errorf("get k after its delete: %v", err)
	}
}

func TestContextDeadline(t *testing.T) {
	// The deadline, not a timeout or running out of attempts, must end
	// each request: those are an hour and unbounded, and a request not
	// back 10 s after its deadline has hung. (Each used to be timed
	// against 500 ms, which a loaded machine's scheduling can exceed
	// with the request ending at its deadline.)
	returns := func(t *testing.T, deadline time.Duration, req func(ctx context.Context) error) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- req(ctx) }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("no return 10s after a %v deadline", deadline)
			return nil
		}
	}
	unbounded := func(cfg *Config) {
		cfg.DialTimeout, cfg.AttemptTimeout, cfg.MaxAttempts = time.Hour, time.Hour, math.MaxInt
	}
	t.Run("hung leaseholder", func(t *testing.T) {
		c := newFakeCluster(t, 3)
		c.setRanges(rng(1, "", "", 1, 1, 2, 3))
		cl := c.newClient(unbounded)
		mustPut(t, cl, "a", "1")
		for _, n := range c.nodes {
			n.setHook(func(ctx context.Context, method string, key []byte) error {
				<-ctx.Done()
				return ctx.Err()
			})
		}
		err := returns(t, 150*time.Millisecond, func(ctx context.Context) error {
			_, err := cl.Get(ctx, []byte("a"))
			return err
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want DeadlineExceeded", err)
		}
	})
	t.Run("whole cluster down", func(t *testing.T) {
		c := newFakeCluster(t, 3)
		c.setRanges(rng(1, "", "", 1, 1, 2, 3))
		cl := c.newClient(func(cfg *Config) {
			unbounded(cfg)
			cfg.MaxBackoff = 100 * time.Millisecond
		})
		mustPut(t, cl, "a", "1")
		for _, n := range c.nodes {
			n.srv.Stop()
		}
		// A put on a connection that broke may have been applied.
		err := returns(t, 200*time.Millisecond, func(ctx context.Context) error {
			return cl.Put(ctx, []byte("a"), []byte("2"))
		})
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("got %v, want DeadlineExceeded, ErrUnavailable or ErrAmbiguous", err)
		}
	})
	t.Run("already expired", func(t *testing.T) {
		c := newFakeCluster(t, 1)
		c.setRanges(rng(1, "", "", 1, 1))
		cl := c.newClient(nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := cl.Put(ctx, []byte("a"), nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want Canceled", err)
		}
	})
}

func TestAdmin(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	ctx := testCtx(t)

	mustPut(t, cl, "a", "0") // warm the cache
	st, err := cl.Status(ctx)
	if err != nil || len(st.Nodes) != 3 {
		t.Fatalf("status: %v %v", st, err)
	}
	ls, err := cl.LocalStatus(ctx, c.node(2).addr)
	if err != nil || ls.Node.NodeId != 2 {
		t.Fatalf("local status: %v %v", ls, err)
	}
	sp, err := cl.Split(ctx, []byte("m"))
	if err != nil || string(sp.Right.StartKey) != "m" {
		t.Fatalf("split: %v %v", sp, err)
	}
	if _, err := cl.Split(ctx, []byte("m")); err == nil || status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
		t.Fatalf("second split at the same key: %v, want FailedPrecondition not retried", err)
	}
	if n := c.node(1).count("Split"); n != 2 {
		t.Fatalf("split sent %d times", n)
	}
	// The split response already told the cache about the boundary.
	c.resetCalls()
	if err := cl.TransferLease(ctx, sp.Right.RangeId, 3); err != nil {
		t.Fatal(err)
	}
	mustPut(t, cl, "x", "1")
	expectCalls(t, c, "n1:TransferLease=1 n3:Put=1")

	desc, err := cl.ChangeReplicas(ctx, sp.Right.RangeId, 0, 1)
	if err != nil || len(desc.Replicas) != 2 {
		t.Fatalf("change replicas: %v %v", desc, err)
	}
	if _, err := cl.ChangeReplicas(ctx, 99, 1, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("change replicas of unknown range: %v", err)
	}
	rs, err := cl.Ranges(ctx)
	if err != nil || len(rs.Ranges) != 2 || len(rs.Nodes) != 3 {
		t.Fatalf("ranges: %v %v", rs, err)
	}
}

func TestClose(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	cl := c.newClient(nil)
	mustPut(t, cl, "a", "1")
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Get(testCtx(t), []byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if err := cl.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestConcurrentChurn runs many requests while leases move and ranges split,
// for the race detector and to check that stale-cache errors from many
// goroutines share refreshes.
func TestConcurrentChurn(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	ctx := testCtx(t)

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		next := uint64(2)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			c.setLeader(uint64(1+i%int(next-1)), uint64(1+i%3))
			if i%10 == 0 && next < 10 {
				c.split(fmt.Sprintf("k%02d", next*10), next, uint64(1+i%3))
				next++
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := []byte(fmt.Sprintf("k%02d", (g*7+i)%100))
				if err := cl.Put(ctx, k, k); err != nil {
					errs <- err
					return
				}
				if v, err := cl.Get(ctx, k); err != nil || string(v) != string(k) {
					errs <- fmt.Errorf("get %s = %q, %v", k, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	churn.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	refreshes := 0
	for _, n := range c.nodes {
		refreshes += n.count("Ranges")
	}
	// 1600 requests, 8 splits: refreshes are shared and spaced, so there are
	// far fewer of them than requests that hit a stale cache.
	if refreshes > 40 {
		t.Errorf("%d range refreshes", refreshes)
	}
}

// TestTooLargeRequest: a request over gRPC's message size limit is an
// invalid argument in one sentence, returned at once: not "overloaded"
// (gRPC refuses it with ResourceExhausted) and not retried. The fake nodes
// keep gRPC's default 4 MiB receive limit; the client's own send limit is
// maxMsgSize.
func TestTooLargeRequest(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	cl := c.newClient(nil)
	for _, tc := range []struct {
		size int
		want string
	}{
		{5 << 20, `^tidekv: invalid argument: request of 52428\d\d bytes is too large \(a node accepts at most 4194304 bytes per message\)$`},
		{maxMsgSize + 1, `^tidekv: invalid argument: request of 671088\d\d bytes is too large \(a node accepts at most 67108864 bytes per message\)$`},
	} {
		before := c.node(1).count("Put")
		err := cl.Put(testCtx(t), []byte("k"), make([]byte, tc.size))
		if !errors.Is(err, ErrInvalidArgument) || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
			t.Errorf("Put of %d bytes: %v, want %s", tc.size, err, tc.want)
		}
		if n := c.node(1).count("Put") - before; n != 0 {
			t.Errorf("Put of %d bytes reached the node's handler %d times", tc.size, n)
		}
	}
}

// An admin call with a deadline retries through overload until the
// deadline, with back-off, rather than for a fixed number of attempts (a
// split right after a node died must wait for the cluster, not give up
// within a second); when the deadline ends it says how long it tried.
// The nodes' answers end it deterministically: the last refusal asks for a
// wait longer than the whole deadline, so the client stops between
// attempts, never with one in flight (where the outcome would be unknown).
func TestAdminRetriesThroughOverloadUntilDeadline(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(func(cfg *Config) { cfg.MaxAttempts = 3 })
	// overloadedFor scripts the next Splits (on any node): the nth is
	// refused as overloaded asking to retry after hints[n]; any after
	// those is served.
	var mu sync.Mutex
	var script []time.Duration
	overloadedFor := func(hints ...time.Duration) {
		mu.Lock()
		script = hints
		mu.Unlock()
		c.resetCalls()
	}
	hook := func(_ context.Context, method string, _ []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if method != "Split" || len(script) == 0 {
			return nil
		}
		hint := script[0]
		script = script[1:]
		return statusWith(codes.ResourceExhausted, "overloaded, retry", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: uint32(hint.Milliseconds())})
	}
	for i := uint64(1); i <= 3; i++ {
		c.node(i).setHook(hook)
	}
	splits := func() int {
		n := 0
		for i := uint64(1); i <= 3; i++ {
			n += c.node(i).count("Split")
		}
		return n
	}
	const deadline = time.Minute // never reached: the nodes' answers end each call
	ms := time.Millisecond

	overloadedFor(ms, ms, ms, ms, ms, ms)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := cl.Split(ctx, []byte("m")); err != nil || splits() != 7 {
		t.Fatalf("split through 6 overloaded answers with MaxAttempts 3: %v after %d attempts, want served at the 7th", err, splits())
	}

	overloadedFor(ms, ms, ms, ms, 2*deadline)
	_, err := cl.Split(ctx, []byte("t"))
	if want := regexp.MustCompile(`^tidekv: overloaded: split: 5 attempts over \d+ms, the last asked to retry after [0-9hms.]+: context deadline exceeded$`); !errors.Is(err, ErrOverloaded) || !errors.Is(err, context.DeadlineExceeded) || !want.MatchString(err.Error()) || splits() != 5 {
		t.Fatalf("split refused until the next wait would pass the deadline: %v after %d attempts, want overloaded and the deadline after 5 attempts, matching %s", err, splits(), want)
	}

	// Without a deadline the attempt bound holds: the 4th would be served.
	overloadedFor(ms, ms, ms)
	if _, err := cl.Split(context.Background(), []byte("t")); !errors.Is(err, ErrOverloaded) || splits() != 3 {
		t.Fatalf("split without a deadline: %v after %d attempts, want ErrOverloaded after MaxAttempts (3)", err, splits())
	}
}

// A replica change whose outcome is unknown is resolved from the range
// directory: done if the range has the asked-for layout, else made again.
func TestChangeReplicasResolvesAmbiguity(t *testing.T) {
	c := newFakeCluster(t, 4)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	cl := c.newClient(nil)
	ctx := testCtx(t)
	lost := func(applied bool) hookFunc {
		var once atomic.Bool
		return func(_ context.Context, method string, _ []byte) error {
			if method != "ChangeReplicas" || once.Swap(true) {
				return nil
			}
			if applied {
				c.setRanges(rng(1, "", "", 1, 1, 2, 4))
			}
			return statusWith(codes.Unavailable, "connection lost", &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_AMBIGUOUS})
		}
	}
	for i := uint64(1); i <= 4; i++ {
		c.node(i).setHook(lost(true))
	}
	d, err := cl.ChangeReplicas(ctx, 1, 4, 3)
	if err != nil || !hasLayout(d, 4, 3) {
		t.Fatalf("change applied before its answer was lost: %v %v, want the new layout", d, err)
	}
	calls := 0
	for i := uint64(1); i <= 4; i++ {
		calls += c.node(i).count("ChangeReplicas")
	}
	if calls != 1 {
		t.Fatalf("ChangeReplicas sent %d times; the directory already showed it done", calls)
	}

	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	c.resetCalls()
	for i := uint64(1); i <= 4; i++ {
		c.node(i).setHook(lost(false))
	}
	d, err = cl.ChangeReplicas(ctx, 1, 4, 3)
	if err != nil || !hasLayout(d, 4, 3) {
		t.Fatalf("change lost before it ran: %v %v, want it made again", d, err)
	}
}

// An overloaded node's refusal narrows the client's window of requests in
// flight to it; requests over the window are refused in the client;
// successes widen it back until it is unbounded again.
// A write refused because its range waits for a split (RANGE_BUSY) is
// retried after the hint, and does not narrow the node's window: the node
// is not overloaded, and a window cut by a range's hold would refuse, in
// the client, requests to every other range of the node.
func TestRangeBusyRetriesWithoutWindowCut(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	var busy atomic.Int32
	busy.Store(3)
	c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
		if method != "Put" || busy.Add(-1) < 0 {
			return nil
		}
		return statusWith(codes.ResourceExhausted, "range 1 is above its size limit and its split is late, retry",
			&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_BUSY, RetryAfterMs: 10})
	})
	cl := c.newClient(nil)
	mustPut(t, cl, "a", "1")
	if n := c.node(1).count("Put"); n != 4 {
		t.Fatalf("%d attempts, want 3 refused and 1 served", n)
	}
	if w := cl.peer(c.node(1).addr).window.Load(); w != 0 {
		t.Fatalf("window %v after RANGE_BUSY refusals, want none", math.Float64frombits(w))
	}
}

func TestOverloadWindow(t *testing.T) {
	var p peerStats
	now := int64(time.Hour)
	if _, refused := p.throttled(); refused {
		t.Fatal("a fresh peer has a window")
	}
	p.inflight.Store(40)
	p.cut(now, 0.25, 30*time.Millisecond)
	if hint, refused := p.throttled(); !refused || hint != 30*time.Millisecond {
		t.Fatalf("40 in flight after a cut to 10: refused=%v hint=%v", refused, hint)
	}
	p.cut(now+int64(time.Millisecond), 0.25, 0) // within a round trip: one cut only
	if w := math.Float64frombits(p.window.Load()); w != 10 {
		t.Fatalf("window %v, want 40 x 0.25", w)
	}
	p.inflight.Store(9)
	if _, refused := p.throttled(); refused {
		t.Fatal("9 in flight refused under a window of 10")
	}
	p.inflight.Store(6)
	p.cut(now+int64(time.Second), 0, 0) // unknown share: halves what is in flight
	if w := math.Float64frombits(p.window.Load()); w != minWindow {
		t.Fatalf("window %v, want max(minWindow, 6 x 0.5)", w)
	}
	for range 200 {
		p.widen()
	}
	if w := math.Float64frombits(p.window.Load()); w < 15 || w > 25 {
		t.Fatalf("window %v after 200 successes, want about 20 (growth 1/window each)", w)
	}
	p.window.Store(math.Float64bits(maxWindow - 1e-6))
	p.widen()
	if _, refused := p.throttled(); refused || p.window.Load() != 0 {
		t.Fatal("a window grown to maxWindow still bounds")
	}
	// The first cut counts however soon after the process started (the
	// monotonic clock starts at 0 there).
	var fresh peerStats
	fresh.inflight.Store(40)
	fresh.cut(int64(time.Millisecond), 0.25, 0)
	if w := math.Float64frombits(fresh.window.Load()); w != 10 {
		t.Fatalf("window %v after a cut 1 ms into the process, want 10", w)
	}
}

// A split refused because a replica change held its range too long
// (raftstore.RangeBusyError: a bare FAILED_PRECONDITION, no kind) comes
// back at once with its sentence: an admin call's bare refusal is no
// routing hint, so it is neither retried at another node nor taken for
// UNAVAILABLE. (A write held for a split is RANGE_BUSY and retried after
// its hint: TestRangeBusyRetriesWithoutWindowCut.)
func TestSplitRefusedAsBusyFailsAtOnce(t *testing.T) {
	c := newFakeCluster(t, 3)
	c.setRanges(rng(1, "", "", 1, 1, 2, 3))
	const busy = "range 1 is busy with a replica change (waited 5s); nothing was done, retry after it"
	for id := uint64(1); id <= 3; id++ {
		c.node(id).setHook(func(ctx context.Context, method string, key []byte) error {
			if method == "Split" {
				return status.Error(codes.FailedPrecondition, busy)
			}
			return nil
		})
	}
	cl := c.newClient(nil)
	_, err := cl.Split(context.Background(), []byte("m"))
	if err == nil || !strings.Contains(err.Error(), busy) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("split refused as busy: %v, want the refusal itself", err)
	}
	n := 0
	for id := uint64(1); id <= 3; id++ {
		n += c.node(id).count("Split")
	}
	if n != 1 {
		t.Fatalf("%d split attempts, want 1", n)
	}
}
