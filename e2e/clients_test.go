package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/internal/testcluster"
)

// The clients of a test cluster, each reaching it in the mode the tests
// run in ($TIDEKV_E2E_SECURE, see internal/testcluster): plaintext, or TLS
// with secure mode's credentials. Tests get their clients here (and from
// newClient and ctl) rather than choosing credentials themselves.

// dialGRPC opens a raw gRPC connection to addr, as root in secure mode.
func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if tc := testcluster.ClientTLS(t); tc != nil {
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// redisOptions are a go-redis client's options for addr: in secure mode
// TLS and secure mode's Redis user. The caller sets the rest.
func redisOptions(t *testing.T, addr string) *redis.Options {
	t.Helper()
	o := &redis.Options{Addr: addr}
	if testcluster.Secured(t) != nil {
		o.TLSConfig = testcluster.CATLS(t)
		o.Username, o.Password = testcluster.RedisUser, testcluster.RedisPassword
	}
	return o
}

// redisToolArgs are the flags that give the tool bin (redis-cli or
// redis-benchmark) the same.
func redisToolArgs(t *testing.T, bin string) []string {
	t.Helper()
	s := testcluster.Secured(t)
	if s == nil {
		return nil
	}
	args := []string{"--tls", "--cacert", filepath.Join(s.CertsDir, "ca.crt"),
		"--user", testcluster.RedisUser, "-a", testcluster.RedisPassword}
	if filepath.Base(bin) == "redis-cli" {
		// Its warning about -a would be read as the command's output.
		args = append(args, "--no-auth-warning")
	}
	return args
}

// dialRESP opens a raw connection to a node's Redis port, for tests that
// speak the protocol byte by byte: in secure mode over TLS and logged in
// (AUTH). refused is the node's answer to the login when it is not +OK (a
// node at --max-connections refuses this way); insecure mode sends no login,
// so it is always "" there. readBuffer, when positive, shrinks the socket's
// receive buffer, for clients that are meant to fall behind.
func dialRESP(t *testing.T, addr string, readBuffer int) (c net.Conn, r *bufio.Reader, refused string) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if readBuffer > 0 {
		_ = raw.(*net.TCPConn).SetReadBuffer(readBuffer)
	}
	c = raw
	if testcluster.Secured(t) != nil {
		cfg := testcluster.CATLS(t)
		cfg.ServerName, _, _ = net.SplitHostPort(addr) // what tls.Dial would check
		c = tls.Client(raw, cfg)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r = bufio.NewReader(c)
	if c == raw {
		return c, r, ""
	}
	fmt.Fprintf(c, "AUTH %s %s\r\n", testcluster.RedisUser, testcluster.RedisPassword)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("AUTH on %s: %v", addr, err)
	}
	if line != "+OK\r\n" {
		return c, r, line
	}
	return c, r, ""
}
