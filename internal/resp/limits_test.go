package resp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// exchange sends header, then payload bytes of filler, and returns
// everything the server answers until it closes the connection. payload is
// written concurrently from one reused buffer, so the test itself
// allocates next to nothing.
func exchange(t *testing.T, addr, header string, payload int64) (reply string, sent int64) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan int64, 1)
	go func() {
		n, _ := io.WriteString(c, header)
		chunk := make([]byte, 64<<10)
		total := int64(n)
		for payload > 0 {
			m, err := c.Write(chunk[:min(int64(len(chunk)), payload)])
			total += int64(m)
			payload -= int64(m)
			if err != nil {
				break
			}
		}
		wrote <- total
	}()
	var out bytes.Buffer
	if _, err := io.Copy(&out, io.LimitReader(c, 1<<10)); err != nil {
		t.Fatalf("reading the reply: %v (so far %q)", err, out.String())
	}
	return out.String(), <-wrote
}

// allocated returns the bytes allocated by the whole process since it
// started (including what was freed since).
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestOversizeRequestsRefused: a request over a limit gets one error reply
// naming the limit, then the connection closes, and the node never
// allocates the payload the header announced (or the part of it that is
// sent). Commands pipelined before it are answered first.
func TestOversizeRequestsRefused(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	const maxAlloc = 4 << 20 // the whole process, test client included
	for _, tc := range []struct {
		name, header string
		payload      int64
		want         string
	}{
		{"bulk length 2^40", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1099511627776\r\n", 0,
			"-ERR Protocol error: bulk string of 1099511627776 bytes is too large (the maximum is 1048576 bytes)\r\n"},
		{"array of 10^9", "*1000000000\r\n", 0,
			"-ERR Protocol error: command of 1000000000 arguments is too large (the maximum is 65536 arguments)\r\n"},
		{"64 MB value", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$67108864\r\n", 64 << 20,
			"-ERR Protocol error: bulk string of 67108864 bytes is too large (the maximum is 1048576 bytes)\r\n"},
		{"inline line of 1 MiB", "SET k ", 1 << 20,
			"-ERR Protocol error: inline command is too large (the maximum is 65536 bytes)\r\n"},
		{"after a pipelined command", "PING\r\n*2\r\n$4\r\nECHO\r\n$1099511627776\r\n", 0,
			"+PONG\r\n-ERR Protocol error: bulk string of 1099511627776 bytes is too large (the maximum is 1048576 bytes)\r\n"},
		{"malformed length", "*1\r\n$12345678901234567890123\r\n", 0, "-ERR Protocol error: invalid bulk length\r\n"},
		{"not a bulk string", "*1\r\n+PING\r\n", 0, "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"payload not followed by CRLF", "PING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nab\r\n", 0,
			"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		{"unbalanced quotes", "PING\r\nSET \"k v\r\n", 0, "+PONG\r\n-ERR Protocol error: unbalanced quotes in request\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GC()
			refused := s.Disconnects(ReasonRequestLimit)
			before := allocated()
			reply, sent := exchange(t, s.Addr().String(), tc.header, tc.payload)
			grew := allocated() - before
			eq(t, s.Disconnects(ReasonRequestLimit), refused+1)
			if reply != tc.want {
				t.Fatalf("reply %q, want %q", reply, tc.want)
			}
			if grew > maxAlloc {
				t.Errorf("%d bytes allocated while %d were sent; want at most %d", grew, sent, maxAlloc)
			}
			t.Logf("%d bytes sent, %d allocated", sent, grew)
		})
	}
}

// TestCommandLenLimit: arguments each within MaxBulkLen but together over
// MaxCommandLen are refused at the header that crosses it.
func TestCommandLenLimit(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.MaxCommandLen = 2 << 20 }, nil)
	mib := fmt.Sprint(1 << 20)
	header := "*4\r\n$4\r\nMSET\r\n$1\r\na\r\n$" + mib + "\r\n" + strings.Repeat("x", 1<<20) + "\r\n$" + mib + "\r\n"
	reply, _ := exchange(t, s.Addr().String(), header, 1<<20)
	if want := "-ERR Protocol error: command of more than 2097152 bytes is too large (the maximum is 2097152 bytes)\r\n"; reply != want {
		t.Fatalf("reply %q, want %q", reply, want)
	}
}

// TestOversizeValueThroughClient: what a Redis client sees for a value over
// the limit, that the node then closes that connection, and that the
// client's next command works on a new one. The node closes as Redis does
// on a protocol error: staying open would mean reading the whole value the
// limit exists to refuse. A pooled client may therefore take the closed
// connection once more if it looks before the close reaches it; the test
// sends the oversize value on one connection held for it (rc.Conn) so the
// command after the error meets the close every time, with retries off.
func TestOversizeValueThroughClient(t *testing.T) {
	ctx := context.Background()
	var dials atomic.Int32
	_, rc := start(t, newFakeKV(), nil, func(o *redis.Options) {
		o.OnConnect = func(context.Context, *redis.Conn) error { dials.Add(1); return nil }
	})
	conn := rc.Conn()
	err := conn.Set(ctx, "k", strings.Repeat("x", 2<<20), 0).Err()
	if want := "ERR Protocol error: bulk string of 2097152 bytes is too large (the maximum is 1048576 bytes)"; err == nil || err.Error() != want {
		t.Fatalf("SET of 2 MiB: %v, want %q", err, want)
	}
	// The node sent nothing after the error and closed: the next command on
	// that connection reads the end of the stream.
	if err := conn.Ping(ctx).Err(); !errors.Is(err, io.EOF) {
		t.Fatalf("PING on the refused connection: %v, want EOF", err)
	}
	eq(t, conn.Close(), nil)
	eq(t, must(rc.Set(ctx, "k", strings.Repeat("x", 1<<20), 0).Result()), "OK")
	eq(t, dials.Load(), 2)
}

// TestMaxConnections: a connection beyond MaxConns gets an error reply and
// is closed; once one closes, a new one is served.
func TestMaxConnections(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.MaxConns = 2 }, nil)
	dial := func() (net.Conn, string) {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "PING\r\n")
		b := make([]byte, 128)
		n, _ := io.ReadAtLeast(c, b, 7)
		return c, string(b[:n])
	}
	a, ra := dial()
	defer a.Close()
	b, rb := dial()
	eq(t, ra+rb, "+PONG\r\n+PONG\r\n")
	c, rc := dial()
	c.Close()
	eq(t, rc, "-ERR max number of clients reached (the maximum is 2 connections)\r\n")
	eq(t, s.Disconnects(ReasonMaxConns), 1)
	b.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, rd := dial()
		d.Close()
		if rd == "+PONG\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a connection closed, a new one still gets %q", rd)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFrameScannerSplits: the scanner follows valid requests however the
// stream is cut into reads.
func TestFrameScannerSplits(t *testing.T) {
	stream := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*1\r\n$0\r\n\r\nGET k\r\n")
	lim := frameLimits{bulk: 5, args: 3, inline: 6, command: 64}
	for cut := 0; cut <= len(stream); cut++ {
		f := frameScanner{lim: lim}
		for _, part := range [][]byte{stream[:cut], stream[cut:]} {
			if n, err := f.scan(part); err != nil || n != len(part) {
				t.Fatalf("cut at %d: scan = %d, %v", cut, n, err)
			}
		}
		if f.state != atCommand {
			t.Fatalf("cut at %d: ends in state %d", cut, f.state)
		}
	}
	f := frameScanner{lim: lim}
	if _, err := f.scan([]byte("*1\r\n$6\r\n")); err == nil {
		t.Fatal("a bulk string over the limit was accepted")
	}
}

// A TLS connection beyond MaxConns whose client never starts the handshake
// is closed all the same: the refusal's write waits for the handshake, and
// a read of its own with no deadline would hold the connection and its
// goroutine for as long as the client stays.
func TestMaxConnectionsTLSSilentClient(t *testing.T) {
	s, rc := start(t, newFakeKV(), func(c *Config) { c.MaxConns, c.TLS = 1, selfSignedTLS(t) },
		func(o *redis.Options) { o.TLSConfig = &tls.Config{InsecureSkipVerify: true} })
	eq(t, must(rc.Ping(context.Background()).Result()), "PONG") // the one connection admitted
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * drainFor))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a refused connection that never shook hands: %v, want it closed (EOF)", err)
	}
}

// selfSignedTLS is a server TLS config with a fresh self-signed
// certificate.
func selfSignedTLS(t *testing.T) *tls.Config {
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
