package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

func windows(s *Server, clk *manualclock.Clock, n int, sched time.Duration) {
	for range n {
		clk.Advance(s.cfg.Admission.Interval)
		s.adm.Tick(sched)
	}
}

// An overloaded node refuses a share of new gRPC and Redis writes at once,
// with a reason and a retry hint, refuses background writes outright,
// keeps serving reads (refusing one costs as much as serving it) and admin
// calls, and admits everything again once its queue is short.
func TestAdmissionShedsByDelay(t *testing.T) {
	clk := manualclock.New(time.Unix(1000, 0))
	tc := startClusterWith(t, 1, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		c.admissionClock = clk.Now
		c.Admission = admission.DefaultConfig()
		// One request at a time: shed at any count in flight (the
		// nearly-empty-queue guard has its own test in internal/admission).
		c.Admission.MinInflight = 0
	})
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
	var admitted, shed int
	for range 200 {
		_, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		if err == nil {
			admitted++
			continue
		}
		d := errorDetail(err)
		if status.Code(err) != codes.ResourceExhausted || d.GetKind() != tidekvpb.ErrorKind_OVERLOADED || d.GetRetryAfterMs() < 100 {
			t.Fatalf("refusal %v (detail %v), want OVERLOADED with a hint of several windows", err, d)
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, "admits 17%") || !strings.Contains(msg, "retry after") {
			t.Fatalf("refusal message %q", msg)
		}
		shed++
	}
	if admitted == 0 || shed < 100 {
		t.Fatalf("%d admitted, %d shed of 200 at a 17%% share", admitted, shed)
	}

	// Background work is refused whatever the draw.
	bg := client.WithPriority(ctx, tidekvpb.Priority_PRIORITY_BACKGROUND)
	for range 20 {
		_, err := kv.Put(bg, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		if !strings.Contains(status.Convert(err).Message(), "background requests wait") {
			t.Fatalf("background put on an overloaded node: %v", err)
		}
	}
	// Reads are served.
	for range 50 {
		if _, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("k")}); err != nil {
			t.Fatalf("get on an overloaded node: %v", err)
		}
		if _, err := rdbGet(ctx, s); err != nil {
			t.Fatalf("redis GET on an overloaded node: %v", err)
		}
	}

	// Redis commands come from connections that each wait for their
	// answer: they are PRIORITY_HIGH, bounded by the in-flight cap only
	// (TestRedisOverloadedAtTheCap), never shed by delay.
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr(), MaxRetries: -1})
	defer rdb.Close()
	for range 100 {
		if err := rdb.Set(ctx, "r", "v", 0).Err(); err != nil {
			t.Fatalf("redis SET on a node shedding by delay: %v", err)
		}
	}
	const redisShed = 0

	// Admin calls are node-internal work: never shed.
	admin := tc.client()
	for range 20 {
		if _, err := admin.Status(ctx); err != nil {
			t.Fatalf("status on an overloaded node: %v", err)
		}
	}
	st := s.adm.State()
	if st.Rejected[admission.Shed] < uint64(shed+redisShed) || st.Rejected[admission.Deferred] < 20 {
		t.Fatalf("counted refusals %v, want at least %d shed and 20 background", st.Rejected, shed+redisShed)
	}
	if v := gathered(t, s, "tidekv_requests_rejected_total", "reason", "shed"); v < float64(shed+redisShed) {
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
	}
}

// rdbGet reads "r" over the node's Redis port.
func rdbGet(ctx context.Context, s *Server) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr(), MaxRetries: -1})
	defer rdb.Close()
	v, err := rdb.Get(ctx, "r").Result()
	if err == redis.Nil {
		return "", nil
	}
	return v, err
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
		if err := rdb.Do(ctx, cmd...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR overloaded, retry after ") {
			t.Fatalf("%v at the in-flight cap: %v, want ERR overloaded, retry after", cmd[0], err)
		}
	}
	s.adm.Done(admission.Normal)
	s.adm.Done(admission.Normal)
	if err := rdb.Set(ctx, "k", "w", 0).Err(); err != nil {
		t.Fatalf("SET once the slots are free: %v", err)
	}
}

// Until it is ready (joined, its store open), a node refuses KV and admin
// calls as UNAVAILABLE, saying they did nothing, and still lets peers' Raft
// traffic through; once ready it refuses none of them.
func TestStartingNodeRefusesRequests(t *testing.T) {
	s := &Server{}
	for _, m := range []string{tidekvpb.KV_Get_FullMethodName, tidekvpb.KV_Batch_FullMethodName, tidekvpb.Admin_LocalStatus_FullMethodName} {
		err := s.startingErr(m)
		if status.Code(err) != codes.Unavailable || errorDetail(err).GetKind() != tidekvpb.ErrorKind_UNAVAILABLE || !strings.Contains(err.Error(), "node is starting") {
			t.Errorf("%s while starting: %v", m, err)
		}
	}
	if err := s.startingErr(tidekvpb.Raft_RaftStream_FullMethodName); err != nil {
		t.Errorf("Raft traffic while starting: %v", err)
	}
	s.ready.Store(true)
	if err := s.startingErr(tidekvpb.KV_Get_FullMethodName); err != nil {
		t.Errorf("a ready node refused a get: %v", err)
	}
}
