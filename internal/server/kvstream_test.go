package server

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// openBatch opens a raw Batch stream to s.
func openBatch(t testing.TB, s *Server) tidekvpb.KV_BatchClient {
	t.Helper()
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	st, err := tidekvpb.NewKVClient(cc).Batch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// recvAnswers reads answers until it has n of them, by id.
func recvAnswers(t *testing.T, st tidekvpb.KV_BatchClient, n int) map[uint64]*tidekvpb.KVResponse {
	t.Helper()
	out := map[uint64]*tidekvpb.KVResponse{}
	for len(out) < n {
		msg, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d of %d answers: %v", len(out), n, err)
		}
		for _, r := range msg.GetResponses() {
			if _, dup := out[r.GetId()]; dup {
				t.Fatalf("request %d answered twice", r.GetId())
			}
			out[r.GetId()] = r
		}
	}
	return out
}

// One message of mixed requests: each is answered by its id, with what the
// unary call returns, errors included, and a bad request fails alone.
func TestBatchStreamAnswersEachRequest(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitReplicated(tc.client(), 1)
	st := openBatch(t, tc.nodes[0])
	put := func(id uint64, k, v string) *tidekvpb.KVRequest {
		return &tidekvpb.KVRequest{Id: id, Request: &tidekvpb.KVRequest_Put{Put: &tidekvpb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	get := func(id uint64, k string) *tidekvpb.KVRequest {
		return &tidekvpb.KVRequest{Id: id, TimeoutMs: 5000, Request: &tidekvpb.KVRequest_Get{Get: &tidekvpb.GetRequest{Key: []byte(k)}}}
	}
	if err := st.Send(&tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{
		put(1, "a", "1"), put(2, "b", "2"), get(3, ""), {Id: 4},
		put(5, "c", string(make([]byte, tc.cfgs[0].Limits.MaxValueSize+1))),
	}}); err != nil {
		t.Fatal(err)
	}
	ans := recvAnswers(t, st, 5)
	for _, id := range []uint64{1, 2} {
		if a := ans[id]; a.GetErrorCode() != 0 || a.GetPut() == nil {
			t.Fatalf("put %d: %v", id, a)
		}
	}
	for _, id := range []uint64{3, 4, 5} {
		a := ans[id]
		if codes.Code(a.GetErrorCode()) != codes.InvalidArgument || a.GetErrorMessage() == "" {
			t.Fatalf("bad request %d answered %v, want InvalidArgument with a reason", id, a)
		}
	}
	if k := ans[5].GetErrorDetail().GetKind(); k != tidekvpb.ErrorKind_INVALID_ARGUMENT {
		t.Fatalf("oversize value: detail %v, want INVALID_ARGUMENT", k)
	}

	// Reads after the writes see them; a key never written is not found.
	if err := st.Send(&tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{get(6, "a"), get(7, "b"), get(8, "c")}}); err != nil {
		t.Fatal(err)
	}
	ans = recvAnswers(t, st, 3)
	for id, want := range map[uint64]string{6: "1", 7: "2"} {
		if g := ans[id].GetGet(); !g.GetFound() || string(g.GetValue()) != want {
			t.Fatalf("get %d: %v, want %q", id, ans[id], want)
		}
	}
	if ans[8].GetErrorCode() != 0 || ans[8].GetGet().GetFound() {
		t.Fatalf("get of the refused put's key: %v, want not found", ans[8])
	}
}

// A stopping node ends its streams itself (a stream lasts as long as its
// client otherwise), after answering what it had started.
func TestBatchStreamEndsWhenNodeStops(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitReplicated(tc.client(), 1)
	st := openBatch(t, tc.nodes[0])
	if err := st.Send(&tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{
		{Id: 1, Request: &tidekvpb.KVRequest_Put{Put: &tidekvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if a := recvAnswers(t, st, 1)[1]; a.GetErrorCode() != 0 {
		t.Fatalf("put: %v", a)
	}
	tc.nodes[0].Stop()
	tc.nodes[0] = nil
	_, err := st.Recv()
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "node is stopping") {
		t.Fatalf("stream after stop: %v, want Unavailable from the stopping node", err)
	}
}

// A shedding node refuses a stream's writes as it reads them, each with
// the unary call's OVERLOADED answer, refuses background writes, and
// serves every read of the same message: reads are never shed by delay
// (docs/admission.md), so at a 17% share all 200 Gets are served where
// about 166 would be refused if they met the gate.
func TestBatchStreamShedsWrites(t *testing.T) {
	clk := manualclock.New(time.Unix(1000, 0))
	tc := startClusterWith(t, 1, func(c *Config) {
		c.admissionClock = clk.Now
		c.Admission = admission.DefaultConfig()
		c.Admission.MinInflight = 0
	})
	s := tc.nodes[0]
	waitServing(t, kvClient(t, s.Addr()))
	windows(s, clk, 5, 50*time.Millisecond) // admits 0.7^5, about 17%
	st := openBatch(t, s)
	var reqs []*tidekvpb.KVRequest
	for i := range 200 {
		reqs = append(reqs, &tidekvpb.KVRequest{Id: uint64(i + 1), Request: &tidekvpb.KVRequest_Put{Put: &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}}})
	}
	for i := range 20 {
		reqs = append(reqs, &tidekvpb.KVRequest{Id: uint64(201 + i), Priority: tidekvpb.Priority_PRIORITY_BACKGROUND,
			Request: &tidekvpb.KVRequest_Put{Put: &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}}})
	}
	for i := range 200 {
		reqs = append(reqs, &tidekvpb.KVRequest{Id: uint64(221 + i), Request: &tidekvpb.KVRequest_Get{Get: &tidekvpb.GetRequest{Key: []byte("k")}}})
	}
	if err := st.Send(&tidekvpb.KVBatchRequest{Requests: reqs}); err != nil {
		t.Fatal(err)
	}
	ans := recvAnswers(t, st, len(reqs))
	var admitted, shed int
	for id := uint64(1); id <= 200; id++ {
		a := ans[id]
		if a.GetErrorCode() == 0 {
			admitted++
			continue
		}
		if d := a.GetErrorDetail(); codes.Code(a.GetErrorCode()) != codes.ResourceExhausted || d.GetKind() != tidekvpb.ErrorKind_OVERLOADED || d.GetRetryAfterMs() < 100 {
			t.Fatalf("refused put %d: %v, want OVERLOADED with a hint", id, a)
		}
		shed++
	}
	if admitted == 0 || shed < 100 {
		t.Fatalf("%d admitted, %d shed of 200 at a 17%% share", admitted, shed)
	}
	for i := uint64(0); i < 20; i++ {
		if a := ans[201+i]; !strings.Contains(a.GetErrorMessage(), "background requests wait") {
			t.Fatalf("background put: %v", a)
		}
	}
	for id := uint64(221); id <= 420; id++ {
		if a := ans[id]; a.GetErrorCode() != 0 {
			t.Fatalf("get %d on a shedding node: %v, want served (reads are not shed by delay)", id, a)
		}
	}
}

// BenchmarkBatchStreamGet measures what a read forwarded by a gateway
// costs the leaseholder: messages of 8 Gets of a 1000-byte key on one
// Batch stream, as the gateway's sender groups them, read, run and
// answered. allocs/op and cpu-µs/op are per request and include the
// client's side of the stream (the same process).
func BenchmarkBatchStreamGet(b *testing.B) {
	tc, key := benchNode(b, func(*Config) {})
	st := openBatch(b, tc.nodes[0])
	const perMsg = 8
	msg := &tidekvpb.KVBatchRequest{}
	for i := range perMsg {
		msg.Requests = append(msg.Requests, &tidekvpb.KVRequest{Id: uint64(i + 1), TimeoutMs: 5000,
			Request: &tidekvpb.KVRequest_Get{Get: &tidekvpb.GetRequest{Key: key}}})
	}
	var ru syscall.Rusage
	cpu := func() time.Duration {
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpu()
	for done := 0; done < b.N; done += perMsg {
		if err := st.Send(msg); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < perMsg; {
			ans, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range ans.GetResponses() {
				if !a.GetGet().GetFound() {
					b.Fatalf("get: %v", a)
				}
			}
			got += len(ans.GetResponses())
		}
	}
	b.ReportMetric(float64((cpu()-start).Microseconds())/float64(b.N), "cpu-µs/op")
}
