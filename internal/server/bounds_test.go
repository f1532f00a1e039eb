package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/httpapi"
)

// TestGRPCAndHTTPBounds: the gRPC message size and streams per connection
// come from Limits, and an oversize message reaches a client as one
// sentence naming the node's limit; the HTTP port cuts request bodies and
// refuses oversize headers.
func TestGRPCAndHTTPBounds(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.EnablePprof = true // /debug/pprof/symbol reads a body
	cfg.Limits.MaxWriteBytes, cfg.Limits.MaxScanBytes = 512<<10, 512<<10
	cfg.Limits.MaxMessageSize, cfg.Limits.MaxConcurrentStreams = 2<<20, 7
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitServing(t, kvClient(t, s.Addr()))

	t.Run("oversize gRPC message", func(t *testing.T) {
		ccfg := client.DefaultConfig()
		ccfg.Addrs = []string{s.Addr()}
		cl, err := client.New(ccfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		err = cl.Put(context.Background(), []byte("k"), make([]byte, 3<<20))
		want := regexp.MustCompile(`^tidekv: invalid argument: request of 31457\d\d bytes is too large \(a node accepts at most 2097152 bytes per message\)$`)
		if !errors.Is(err, client.ErrInvalidArgument) || !want.MatchString(fmt.Sprint(err)) {
			t.Fatalf("Put of 3 MiB: %v, want %s", err, want)
		}
	})
	t.Run("streams per connection", func(t *testing.T) {
		if n := maxConcurrentStreams(t, s.Addr()); n != 7 {
			t.Fatalf("the node announces %d concurrent streams per connection (0: no limit), want 7", n)
		}
	})
	t.Run("oversize header", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+"/health", nil)
		req.Header.Set("X-Filler", strings.Repeat("x", 2*httpapi.MaxHeaderBytes))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("a %d-byte header: %s, want 431", 2*httpapi.MaxHeaderBytes, resp.Status)
		}
	})
	t.Run("oversize body", func(t *testing.T) {
		sent, status := postForever(t, s.HTTPAddr(), "/debug/pprof/symbol")
		if status != http.StatusOK || sent > 16<<20 {
			t.Fatalf("a 64 MiB body: %d, and the node took %d bytes of it before closing; want at most 16 MiB", status, sent)
		}
		t.Logf("the node took %d bytes of a 64 MiB body (the kernel's buffers hold most)", sent)
	})
}

// maxConcurrentStreams reads SETTINGS_MAX_CONCURRENT_STREAMS from the
// node's first HTTP/2 SETTINGS frame.
func maxConcurrentStreams(t *testing.T, addr string) uint32 {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// The client preface, then an empty SETTINGS frame.
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	r := bufio.NewReader(c)
	for {
		var head [9]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, int(head[0])<<16|int(head[1])<<8|int(head[2]))
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		if head[3] != 4 || head[4]&1 != 0 { // not SETTINGS, or its ACK
			continue
		}
		for i := 0; i+6 <= len(payload); i += 6 {
			if binary.BigEndian.Uint16(payload[i:]) == 3 { // MAX_CONCURRENT_STREAMS
				return binary.BigEndian.Uint32(payload[i+2:])
			}
		}
		return 0 // not announced: unbounded
	}
}

// postForever POSTs a 64 MiB body of "0x1+" (pprof/symbol reads it word by
// word, to the end) and returns how much of it the node took before it
// answered and closed the connection, and the reply's status.
func postForever(t *testing.T, addr, path string) (sent int64, status int) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	const size = 64 << 20
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", path, size)
	wrote := make(chan int64, 1)
	go func() {
		chunk := []byte(strings.Repeat("0x1+", 16<<10))
		var n int64
		for n < size {
			m, err := c.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
		}
		wrote <- n
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return <-wrote, resp.StatusCode
}

func TestMessageLimitsValidate(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxMessageSize = 16 << 20
	want := "server: MaxMessageSize (16777216 bytes) must be at least 17825792 bytes, MaxWriteBytes and MaxScanBytes plus 1 MiB, so that a full write or scan page fits in one message"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
	cfg = testConfig(t)
	cfg.Limits.MaxConcurrentStreams = 0
	if err := cfg.Validate(); err == nil {
		t.Error("MaxConcurrentStreams 0 accepted")
	}
}

// A node's --snapshot-rate caps the migration allowance the control loop
// hands out; it never raises it.
func TestSnapshotRateCap(t *testing.T) {
	cfg := testConfig(t)
	if got := cfg.snapshotRate(64 << 20); got != 64<<20 {
		t.Errorf("no cap: %v, want the allowance", got)
	}
	cfg.MaxSnapshotRate = 1e6
	for allowance, want := range map[float64]float64{64 << 20: 1e6, 5e5: 5e5, 0: 1e6} {
		if got := cfg.snapshotRate(allowance); got != want {
			t.Errorf("cap 1e6, allowance %v: %v, want %v", allowance, got, want)
		}
	}
	cfg.MaxSnapshotRate = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "snapshot rate cap") {
		t.Errorf("Validate with a negative cap = %v", err)
	}
}

// The lease return rule reads the control loop's memory of finished
// operators: a node whose memory is shorter than the rule's window is
// refused at start, as the rule would forget a move before its window ends.
func TestRecentWindowCoversLeaseReturn(t *testing.T) {
	cfg := testConfig(t)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg.Control.Runner.RecentWindow = cfg.Placement.Lease.ReturnAfter - time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "lease return-after") {
		t.Errorf("Validate with a memory shorter than lease return-after = %v", err)
	}
}
