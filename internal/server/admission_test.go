package server

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/kvapi"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

func windows(s *Server, clk *manualclock.Clock, n int, sched time.Duration) {
	for range n {
		clk.Advance(s.cfg.Admission.Interval)
		s.adm.Tick(sched)
	}
}

// shedAtAnyDepth configures nodes with a Redis port and admission's
// defaults on clk, shedding at any count in flight: one request at a time
// is enough (the nearly-empty-queue guard has its own test in
// internal/admission).
func shedAtAnyDepth(clk *manualclock.Clock) func(*Config) {
	return func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		c.admissionClock = clk.Now
		c.Admission = admission.DefaultConfig()
		c.Admission.MinInflight = 0
	}
}

// An overloaded node refuses a share of new gRPC writes and of Redis
// writes sent ahead of their replies at once (a Redis client waiting for
// each reply is served), with a reason and a retry hint, refuses background writes outright,
// keeps serving reads, gRPC and Redis (refusing one costs as much as
// serving it; docs/admission.md), and admin calls, and admits everything
// again once its queue is short.
func TestAdmissionShedsByDelay(t *testing.T) {
	clk := manualclock.New(time.Unix(1000, 0))
	tc := startClusterWith(t, 1, shedAtAnyDepth(clk))
	s := tc.nodes[0]
	kv := kvClient(t, s.Addr())
	waitServing(t, kv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Five windows with the run queue 50 ms long: the gate admits 0.7^5.
	windows(s, clk, 5, 50*time.Millisecond)
	if st := s.adm.State(); !st.Overloaded || st.AdmitShare > 0.17 {
		t.Fatalf("admission state %+v, want overloaded admitting about 17%%", st)
	}
	// shedOf makes 200 calls and returns how many were refused, checking
	// each refusal with isRefusal.
	shedOf := func(what string, isRefusal func(error) bool, call func() error) int {
		t.Helper()
		var admitted, shed int
		for range 200 {
			err := call()
			if err == nil {
				admitted++
				continue
			}
			if !isRefusal(err) {
				t.Fatalf("%s on an overloaded node: %v, want a refusal with a hint", what, err)
			}
			shed++
		}
		if admitted == 0 || shed < 100 {
			t.Fatalf("%s: %d admitted, %d shed of 200 at a 17%% share", what, admitted, shed)
		}
		return shed
	}
	grpcRefusal := func(err error) bool {
		d := errorDetail(err)
		msg := status.Convert(err).Message()
		return status.Code(err) == codes.ResourceExhausted && d.GetKind() == tidekvpb.ErrorKind_OVERLOADED && d.GetRetryAfterMs() >= 100 &&
			strings.Contains(msg, "admits 17%") && strings.Contains(msg, "retry after")
	}
	shed := shedOf("put", grpcRefusal, func() error {
		_, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		return err
	})
	// Redis SETs from a client that waits for each reply are all served;
	// from one that sends ahead, shed at the share.
	admitted, aheadShed := redisPacedAndAhead(ctx, t, s.RedisAddr())
	if admitted == 0 || aheadShed < 100 {
		t.Fatalf("redis SET sent ahead: %d admitted, %d shed of 200 at a 17%% share", admitted, aheadShed)
	}
	shed += aheadShed
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr(), MaxRetries: -1})
	defer rdb.Close()

	// Reads are served, every one: at a 17% share about 166 of 200 would
	// be refused if they met the gate.
	for range 200 {
		if _, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("k")}); err != nil {
			t.Fatalf("get on an overloaded node: %v", err)
		}
		if err := rdb.Get(ctx, "r").Err(); err != nil && err != redis.Nil {
			t.Fatalf("redis GET on an overloaded node: %v", err)
		}
	}

	// Background work is refused whatever the draw.
	bg := client.WithPriority(ctx, tidekvpb.Priority_PRIORITY_BACKGROUND)
	for range 20 {
		_, err := kv.Put(bg, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		if !strings.Contains(status.Convert(err).Message(), "background requests wait") {
			t.Fatalf("background put on an overloaded node: %v", err)
		}
	}

	// Admin calls are node-internal work: never shed.
	admin := tc.client()
	for range 20 {
		if _, err := admin.Status(ctx); err != nil {
			t.Fatalf("status on an overloaded node: %v", err)
		}
	}
	st := s.adm.State()
	if st.Rejected[admission.Shed] < uint64(shed) || st.Rejected[admission.Deferred] < 20 {
		t.Fatalf("counted refusals %v, want at least %d shed and 20 background", st.Rejected, shed)
	}
	if v := gathered(t, s, "tidekv_requests_rejected_total", "reason", "shed"); v < float64(shed) {
		t.Fatalf("tidekv_requests_rejected_total{reason=shed} = %v", v)
	}

	// Good windows give the share back a tenth at a time.
	windows(s, clk, 9, 0)
	if st := s.adm.State(); st.Overloaded || st.AdmitShare != 1 {
		t.Fatalf("after 9 good windows: %+v", st)
	}
	for range 50 {
		if _, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
			t.Fatalf("put after recovery: %v", err)
		}
		if _, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("k")}); err != nil {
			t.Fatalf("get after recovery: %v", err)
		}
		if err := rdb.Set(ctx, "r", "v", 0).Err(); err != nil {
			t.Fatalf("redis SET after recovery: %v", err)
		}
	}
}

// A write, gRPC or Redis, is refused by the delay it measured, from its
// arrival to the start of its work, and a read that waited as long is
// served: a typed Put whose request arrived longer than the admission
// interval ago is refused and a Get that arrived then is served; of a
// pipeline held behind a SET that took that long (the clock moves while
// the first SET is served), the GET is answered and the SET after it is
// refused "TRYAGAIN overloaded, retry after N ms", proposing nothing to
// Raft. Reads are measured but never shed by delay (docs/admission.md).
// Held for less than the target, the same requests are served.
func TestAdmissionRefusesWritesNotReadsByDelay(t *testing.T) {
	clk := manualclock.New(time.Unix(1000, 0))
	var hold atomic.Int64 // how far the clock moves while a Redis SET is served
	tc := startClusterWith(t, 1, func(c *Config) {
		shedAtAnyDepth(clk)(c)
		// Commands are stamped on the admission's clock when read.
		c.Redis.Now = clk.Now
		c.redisWrote = func() { clk.Advance(time.Duration(hold.Load())) }
	})
	s := tc.nodes[0]
	kv := kvClient(t, s.Addr())
	waitServing(t, kv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("a"), Value: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	late := s.cfg.Admission.Interval + time.Millisecond
	in := func(at time.Time) context.Context { return admission.WithArrival(ctx, at, admission.Normal, true) }
	if err := s.kv.Put(in(clk.Now().Add(-late)), []byte("a"), []byte("late"), kvapi.Options{}); !isDelayRefusal(err) {
		t.Fatalf("put that waited %v: %v, want refused for its queueing delay", late, err)
	}
	if g, err := s.kv.Get(in(clk.Now().Add(-late)), []byte("a"), kvapi.Options{}); err != nil || string(g.Value.Value) != "0" {
		t.Fatalf("get that waited %v: %+v, %v, want served (reads are not shed by delay) with the value before the refused put", late, g, err)
	}
	if err := s.kv.Put(in(clk.Now().Add(-s.cfg.Admission.Target/2)), []byte("a"), []byte("0"), kvapi.Options{}); err != nil {
		t.Fatalf("put that waited half the target: %v", err)
	}

	// pipeline sends SET a 1, GET a, SET b 2 in one write on c, so that
	// they are read together, and returns the three replies' first lines.
	// With ahead, the write also carries the first byte of the next
	// pipeline, which the one before sent (c is then primed with a PING
	// that did), so the pipeline is sent ahead of the replies before it:
	// not paced, measured from its arrival like a gRPC request.
	const cmds = "3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n"
	pipeline := func(c *rawRedis, ahead bool) []string {
		t.Helper()
		if ahead {
			c.send(t, cmds+"*")
		} else {
			c.send(t, "*"+cmds)
		}
		var out []string
		for range 3 {
			line := c.line(t)
			if strings.HasPrefix(line, "$") && line != "$-1" {
				line = c.line(t)
			}
			out = append(out, line)
		}
		return out
	}
	aheadConn := dialRedis(t, s.RedisAddr())
	aheadConn.send(t, "PING\r\n*")
	if got := aheadConn.line(t); got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}
	r := s.Store().LookupKey([]byte("a"))
	before := r.Status().Commit
	hold.Store(int64(late))
	got := pipeline(aheadConn, true)
	if got[0] != "+OK" || got[1] != "1" || !strings.HasPrefix(got[2], "-TRYAGAIN overloaded, retry after ") {
		t.Fatalf("pipeline held %v behind its first SET: %q, want OK, the GET answered 1, then a TRYAGAIN refusal", late, got)
	}
	// The first SET is one Raft entry; the refused SET is none.
	if after := r.Status().Commit; after != before+1 {
		t.Fatalf("commit index %d -> %d over one served and one refused SET, want one entry", before, after)
	}
	if v, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("b")}); err != nil || v.GetFound() {
		t.Fatalf("b after its SET was refused: %v, %v", v, err)
	}
	// The late Put and the late SET; the late Get and GET were served.
	if st := s.adm.State(); st.Rejected[admission.Delay] != 2 {
		t.Fatalf("refusals %v, want 2 for queueing delay", st.Rejected)
	}

	// The same pipeline from a client that waited for every reply before
	// it (paced) is a closed loop's: held as long, all of it is served.
	if got := pipeline(dialRedis(t, s.RedisAddr()), false); got[0] != "+OK" || got[1] != "1" || got[2] != "+OK" {
		t.Fatalf("paced pipeline held %v behind its first SET: %q, want OK 1 OK", late, got)
	}

	hold.Store(int64(s.cfg.Admission.Target / 2))
	windows(s, clk, 10, 0) // the long waits made the node overloaded: let it recover
	if got := pipeline(aheadConn, true); got[0] != "+OK" || got[1] != "1" || got[2] != "+OK" {
		t.Fatalf("pipeline held half the target: %q, want OK 1 OK", got)
	}
}

// rawRedis is a Redis connection written and read by hand, for tests
// that choose when bytes reach the node.
type rawRedis struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRedis(t *testing.T, addr string) *rawRedis {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawRedis{c: c, br: bufio.NewReader(c)}
}

func (r *rawRedis) send(t *testing.T, b string) {
	t.Helper()
	if _, err := r.c.Write([]byte(b)); err != nil {
		t.Fatal(err)
	}
}

// line is the next reply line without its CRLF.
func (r *rawRedis) line(t *testing.T) string {
	t.Helper()
	l, err := r.br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(l, "\r\n")
}

// isDelayRefusal says err is admission's refusal for queueing delay.
func isDelayRefusal(err error) bool {
	return status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "before it could start")
}

// gathered returns the value of the series name{label=value} on s.
func gathered(t *testing.T, s *Server, name, label, value string) float64 {
	t.Helper()
	mfs, err := s.metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

// The Redis front end's commands are bounded by the node's in-flight cap:
// beyond it a command is answered "overloaded, retry after" at once, and
// served again once the slots free up.
func TestRedisOverloadedAtTheCap(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		c.Admission.MaxInflight = 2
	})
	s := tc.nodes[0]
	waitServing(t, kvClient(t, s.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr(), MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.adm.Admit(admission.Normal, time.Time{}, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range [][]any{{"SET", "k", "w"}, {"GET", "k"}} {
		if err := rdb.Do(ctx, cmd...).Err(); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN overloaded, retry after ") {
			t.Fatalf("%v at the in-flight cap: %v, want TRYAGAIN overloaded, retry after", cmd[0], err)
		}
	}
	s.adm.Done(admission.Normal)
	s.adm.Done(admission.Normal)
	if err := rdb.Set(ctx, "k", "w", 0).Err(); err != nil {
		t.Fatalf("SET once the slots are free: %v", err)
	}
}

// Until it is ready (joined, its store open), a node refuses KV, admin,
// transaction and geo calls as UNAVAILABLE, saying they did nothing, and
// still lets peers' Raft traffic through; once ready it refuses none of
// them.
func TestStartingNodeRefusesRequests(t *testing.T) {
	s := &Server{}
	for _, m := range []string{tidekvpb.KV_Get_FullMethodName, tidekvpb.KV_Batch_FullMethodName, tidekvpb.Admin_LocalStatus_FullMethodName,
		tidekvpb.Txn_Get_FullMethodName, tidekvpb.Geo_Commit_FullMethodName} {
		err := s.startingErr(m)
		if status.Code(err) != codes.Unavailable || errorDetail(err).GetKind() != tidekvpb.ErrorKind_UNAVAILABLE || !strings.Contains(err.Error(), "node is starting") {
			t.Errorf("%s while starting: %v", m, err)
		}
	}
	if err := s.startingErr(tidekvpb.Raft_RaftStream_FullMethodName); err != nil {
		t.Errorf("Raft traffic while starting: %v", err)
	}
	s.ports.ready.Store(true)
	if err := s.startingErr(tidekvpb.KV_Get_FullMethodName); err != nil {
		t.Errorf("a ready node refused a get: %v", err)
	}
}

// A Redis command routed to another node's lease keeps its pacing: a
// client waiting for each reply is high priority at the leaseholder too
// (bounded by its in-flight cap only), and one sending ahead is admitted
// there by delay.
func TestAdmissionPacedRoutedRedisWrites(t *testing.T) {
	clk := manualclock.New(time.Unix(1000, 0))
	tc := startClusterWith(t, 3, shedAtAnyDepth(clk))
	tc.waitReplicated(tc.client(), 3)
	// No placement round moves r's lease while the test runs.
	defer tc.holdControl()()
	lh := tc.leaseholderOf([]byte("r"))
	if lh < 0 {
		t.Fatal("no leaseholder for r")
	}
	gw := tc.nodes[(lh+1)%len(tc.nodes)]
	// Only the leaseholder is overloaded: the gateway serves nothing of r
	// in process.
	windows(tc.nodes[lh], clk, 5, 50*time.Millisecond)
	if st := tc.nodes[lh].adm.State(); !st.Overloaded || st.AdmitShare > 0.17 {
		t.Fatalf("leaseholder's admission %+v, want overloaded admitting about 17%%", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, shed := redisPacedAndAhead(ctx, t, gw.RedisAddr()); shed < 100 {
		t.Fatalf("%d of 200 SETs sent ahead through another node were shed at a 17%% share", shed)
	}
}

// redisPacedAndAhead sends 200 SETs of r to addr from a client that waits
// for each reply (a closed loop: go-redis, which retries "TRYAGAIN "
// unless MaxRetries is -1), each of which must be served, then 200 from a
// client that sends ahead: each write carries a SET and the first byte of
// the next, so every SET began before the reply to the one before it was
// written. It returns how many of those were served and how many refused
// with TRYAGAIN.
func redisPacedAndAhead(ctx context.Context, t *testing.T, addr string) (admitted, shed int) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for range 200 {
		if err := rdb.Set(ctx, "r", "v", 0).Err(); err != nil {
			t.Fatalf("paced redis SET: %v, want served", err)
		}
	}
	ahead := dialRedis(t, addr)
	ahead.send(t, "PING\r\n*")
	if got := ahead.line(t); got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}
	for range 200 {
		ahead.send(t, "3\r\n$3\r\nSET\r\n$1\r\nr\r\n$1\r\nv\r\n*")
		switch got := ahead.line(t); {
		case got == "+OK":
			admitted++
		case strings.HasPrefix(got, "-TRYAGAIN overloaded, retry after "):
			shed++
		default:
			t.Fatalf("SET sent ahead: %q", got)
		}
	}
	return admitted, shed
}
