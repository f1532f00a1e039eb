package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/tidekv/tidekv/internal/admission"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func kvClient(t testing.TB, addr string) tidekvpb.KVClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return tidekvpb.NewKVClient(conn)
}

// waitServing waits until the single node serves a write.
func waitServing(t testing.TB, kv tidekvpb.KVClient) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("probe"), Value: []byte("x")})
		cancel()
		if err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("node never served")
}

func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	tc := startCluster(t, 1)
	kv := kvClient(t, tc.nodes[0].Addr())
	waitServing(t, kv)
	ctx := context.Background()
	big := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	cases := []struct {
		name string
		call func() error
		want string // substring of the message naming the limit
	}{
		{"empty key", func() error { _, err := kv.Put(ctx, &tidekvpb.PutRequest{Value: []byte("v")}); return err }, "empty key"},
		{"key over 4 KiB", func() error {
			_, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: big(4097), Value: []byte("v")})
			return err
		}, "key of 4097 bytes is too large (the maximum key size is 4096 bytes)"},
		{"value over 1 MiB", func() error {
			_, err := kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: big(1<<20 + 1)})
			return err
		}, "value of 1048577 bytes is too large (the maximum value size is 1048576 bytes)"},
		{"get empty key", func() error { _, err := kv.Get(ctx, &tidekvpb.GetRequest{}); return err }, "empty key"},
		{"scan over the limit", func() error {
			_, err := kv.Scan(ctx, &tidekvpb.ScanRequest{StartKey: []byte("a"), Limit: 10001})
			return err
		}, "maximum scan limit of 10000"},
		{"inverted scan range", func() error {
			_, err := kv.Scan(ctx, &tidekvpb.ScanRequest{StartKey: []byte("b"), EndKey: []byte("a")})
			return err
		}, "invalid scan range"},
		{"cas value over 1 MiB", func() error {
			_, err := kv.CompareAndSet(ctx, &tidekvpb.CompareAndSetRequest{Key: []byte("k"), NewValue: big(1<<20 + 1)})
			return err
		}, "maximum value size"},
		{"write with an oversized value among good ops", func() error {
			_, err := kv.Write(ctx, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{
				{Key: []byte("w1"), Value: []byte("ok")}, {Key: []byte("w2"), Value: big(1<<20 + 1)}}})
			return err
		}, "maximum value size"},
		{"empty batch get", func() error { _, err := kv.BatchGet(ctx, &tidekvpb.BatchGetRequest{}); return err }, "at least one key"},
		{"write guard without a key", func() error {
			_, err := kv.Write(ctx, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("w1"), Value: []byte("ok")}},
				Guard: &tidekvpb.WriteGuard{Value: []byte("m")}})
			return err
		}, "empty key"},
		{"write guard with an inverted clear span", func() error {
			_, err := kv.Write(ctx, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("w1"), Value: []byte("ok")}},
				Guard: &tidekvpb.WriteGuard{Key: []byte("w1"), ClearStart: []byte("w2"), ClearEnd: []byte("w1")}})
			return err
		}, "invalid guard clear span"},
	}
	for _, c := range cases {
		err := c.call()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%s: got %v, want InvalidArgument mentioning %q", c.name, err, c.want)
		}
		if d := errorDetail(err); d == nil || d.GetKind() != tidekvpb.ErrorKind_INVALID_ARGUMENT {
			t.Errorf("%s: missing INVALID_ARGUMENT detail: %v", c.name, d)
		}
	}
	// Nothing was written by the rejected requests.
	for _, k := range []string{"k", "w1", "w2"} {
		resp, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte(k)})
		if err != nil || resp.GetFound() {
			t.Errorf("key %q after rejected writes: found=%v err=%v", k, resp.GetFound(), err)
		}
	}
}

func TestOverloadFailsFast(t *testing.T) {
	tc := startCluster(t, 1)
	s := tc.nodes[0]
	kv := kvClient(t, s.Addr())
	waitServing(t, kv)
	// Occupy every admission slot, as a burst of slow requests would.
	for range s.cfg.Admission.MaxInflight {
		if err := s.adm.Admit(admission.Normal, time.Time{}, true); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := kv.Get(context.Background(), &tidekvpb.GetRequest{Key: []byte("probe")})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("get while full: %v, want ResourceExhausted", err)
	}
	if d := errorDetail(err); d.GetKind() != tidekvpb.ErrorKind_OVERLOADED || d.GetRetryAfterMs() == 0 {
		t.Fatalf("detail %v, want OVERLOADED with a retry hint", d)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("rejection took %v; it must not queue", took)
	}
	for range s.cfg.Admission.MaxInflight {
		s.adm.Done(admission.Normal)
	}
	if _, err := kv.Get(context.Background(), &tidekvpb.GetRequest{Key: []byte("probe")}); err != nil {
		t.Fatalf("get after the burst: %v", err)
	}
}

func TestWriteSpanningRangesIsRejected(t *testing.T) {
	tc := startCluster(t, 1)
	kv := kvClient(t, tc.nodes[0].Addr())
	waitServing(t, kv)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	_, err := kv.Write(ctx, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("z"), Value: []byte("2")}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "more than one range") {
		t.Fatalf("cross-range write: %v", err)
	}
	resp, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("a")})
	if err != nil || resp.GetFound() {
		t.Fatalf("cross-range write left key a behind: %v %v", resp, err)
	}
}

func TestHealthAndMetricsEndpoints(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPAddr = "127.0.0.1:0"
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	kv := kvClient(t, s.Addr())
	waitServing(t, kv)
	get := func(path string) string {
		resp, err := http.Get("http://" + s.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return string(b)
	}
	if h := get("/health"); strings.TrimSpace(h) != "ok" {
		t.Fatalf("/health = %q", h)
	}
	m := get("/metrics")
	for _, want := range []string{`tidekv_requests_total{code="OK",op="put"}`, "tidekv_request_duration_seconds_bucket", "tidekv_replicas 2", "tidekv_leases 2", "tidekv_requests_inflight"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestRedisTooLargeValue: through a node's Redis listener, a value over the
// maximum value size is "too large" in one sentence, whichever limit stops
// it: the bulk length cap (by default the maximum value size) at its
// header, or, with that cap raised, the node's value size check.
func TestRedisTooLargeValue(t *testing.T) {
	for _, tc := range []struct {
		bulkLen int
		want    string
	}{
		{0, "-ERR Protocol error: bulk string of 2097152 bytes is too large (the maximum is 1048576 bytes)"},
		{4 << 20, "-ERR invalid argument: value of 2097152 bytes is too large (the maximum value size is 1048576 bytes)"},
	} {
		tc1 := startClusterWith(t, 1, func(c *Config) {
			c.Redis.ListenAddr = "127.0.0.1:0"
			if tc.bulkLen > 0 {
				c.Redis.MaxBulkLen = tc.bulkLen
			}
		})
		waitServing(t, kvClient(t, tc1.nodes[0].Addr()))
		conn, err := net.Dial("tcp", tc1.nodes[0].RedisAddr())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		go fmt.Fprintf(conn, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n", 2<<20, bytes.Repeat([]byte("x"), 2<<20))
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if strings.TrimRight(line, "\r\n") != tc.want {
			t.Errorf("bulk cap %d: reply %q (%v), want %q", tc.bulkLen, line, err, tc.want)
		}
	}
}
