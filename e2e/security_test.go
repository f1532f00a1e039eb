package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/security"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// secureSetup makes a CA, a node certificate for 127.0.0.1, client
// certificates for root and alice, and a users file (reader: read, writer:
// write, both with passwords; alice: admin by certificate), all with the
// CLI.
func secureSetup(t *testing.T, bin string) (certs, users string) {
	t.Helper()
	dir := t.TempDir()
	certs, users = filepath.Join(dir, "certs"), filepath.Join(dir, "users.json")
	run := func(env string, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tidekv %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("", "cert", "create-ca", "--certs-dir", certs)
	run("", "cert", "create-node", "--certs-dir", certs, "127.0.0.1", "localhost")
	run("", "cert", "create-client", "--certs-dir", certs, "root")
	run("", "cert", "create-gossip-key", "--certs-dir", certs)
	run("", "cert", "create-client", "--certs-dir", certs, "alice")
	run("TIDEKV_NEW_PASSWORD=r-pass", "user", "add", "reader", "--role", "read", "--users-file", users)
	run("TIDEKV_NEW_PASSWORD=w-pass", "user", "add", "writer", "--role", "write", "--users-file", users)
	run("", "user", "add", "alice", "--role", "admin", "--cert-only", "--users-file", users)
	return certs, users
}

// secureCtl runs `tidekv ctl` with extra environment entries.
func secureCtl(ctx context.Context, bin, addr string, env []string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"ctl", "--addr", addr, "--timeout", "5s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return strings.TrimSpace(out.String()), strings.TrimSpace(errb.String()), err
}

// secureCluster is a running cluster started with --certs-dir and the
// users of secureSetup.
type secureCluster struct {
	bin, addr string
	certs     *testcluster.Security
	tc        *testcluster.Cluster
	ctx       context.Context
	sec       []string // ctl's flags for the cluster
}

func TestSecureCluster(t *testing.T) {
	bin := testcluster.Binary(t)
	certs, users := secureSetup(t, bin)
	sec := &testcluster.Security{CertsDir: certs, UsersFile: users}
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, Security: sec})
	c := &secureCluster{bin: bin, certs: sec, addr: tc.Addr(2), tc: tc, ctx: testCtx(t, 2*time.Minute),
		sec: []string{"--certs-dir", certs}}
	t.Run("ctl with a client certificate", func(t *testing.T) { testCtlByCertificate(t, c) })
	t.Run("plaintext client refused", func(t *testing.T) { testPlaintextRefused(t, c) })
	t.Run("read user cannot write", func(t *testing.T) { testReaderCannotWrite(t, c) })
	t.Run("read user cannot write in a transaction", func(t *testing.T) { testReaderCannotWriteInTxn(t, c) })
	t.Run("non-admin cannot move a replica", func(t *testing.T) { testNonAdminCannotMove(t, c) })
	t.Run("client certificate cannot act as a node", func(t *testing.T) { testClientCertNotANode(t, c) })
	t.Run("certificate of another CA refused", func(t *testing.T) { testForeignCARefused(t, c) })
	t.Run("HTTP is HTTPS only", func(t *testing.T) { testHTTPSOnly(t, c) })
	t.Run("redis needs AUTH with a user and password", func(t *testing.T) { testRedisAuth(t, c) })
}

func testCtlByCertificate(t *testing.T, c *secureCluster) {
	if _, errOut, err := secureCtl(c.ctx, c.bin, c.addr, nil, append(c.sec, "put", "greeting", "hello")...); err != nil {
		t.Fatalf("put as root: %v: %s", err, errOut)
	}
	if out, errOut, err := secureCtl(c.ctx, c.bin, c.tc.Addr(3), nil, append(c.sec, "--user", "alice", "get", "greeting")...); err != nil || out != "hello" {
		t.Fatalf("get as alice: %q %v: %s", out, err, errOut)
	}
	// Admin calls go to the meta leaseholder and range leaders: nodes
	// forward them with their node certificates.
	for _, addr := range []string{c.tc.Addr(1), c.tc.Addr(3)} {
		if _, errOut, err := secureCtl(c.ctx, c.bin, addr, nil, append(c.sec, "--user", "alice", "status")...); err != nil {
			t.Fatalf("status as alice via %s: %v: %s", addr, err, errOut)
		}
	}
	if _, errOut, err := secureCtl(c.ctx, c.bin, c.tc.Addr(3), nil, append(c.sec, "--user", "alice", "split", "m")...); err != nil {
		t.Fatalf("split as alice: %v: %s", err, errOut)
	}
}

func testPlaintextRefused(t *testing.T, c *secureCluster) {
	if out, _, err := secureCtl(c.ctx, c.bin, c.addr, nil, "get", "greeting"); err == nil {
		t.Fatalf("a plaintext ctl got %q", out)
	}
}

func testReaderCannotWrite(t *testing.T, c *secureCluster) {
	env := []string{"TIDEKV_PASSWORD=r-pass"}
	if out, errOut, err := secureCtl(c.ctx, c.bin, c.addr, env, append(c.sec, "--user", "reader", "get", "greeting")...); err != nil || out != "hello" {
		t.Fatalf("get as reader: %q %v: %s", out, err, errOut)
	}
	_, errOut, err := secureCtl(c.ctx, c.bin, c.addr, env, append(c.sec, "--user", "reader", "put", "greeting", "bye")...)
	if err == nil || !strings.Contains(errOut, "PermissionDenied") || !strings.Contains(errOut, "needs role write") {
		t.Fatalf("put as reader: %v: %s", err, errOut)
	}
	_, errOut, err = secureCtl(c.ctx, c.bin, c.addr, []string{"TIDEKV_PASSWORD=wrong"}, append(c.sec, "--user", "reader", "get", "greeting")...)
	if err == nil || !strings.Contains(errOut, "Unauthenticated") {
		t.Fatalf("get with a wrong password: %v: %s", err, errOut)
	}
}

func testNonAdminCannotMove(t *testing.T, c *secureCluster) {
	env := []string{"TIDEKV_PASSWORD=w-pass"}
	if _, errOut, err := secureCtl(c.ctx, c.bin, c.addr, env, append(c.sec, "--user", "writer", "put", "k", "v")...); err != nil {
		t.Fatalf("put as writer: %v: %s", err, errOut)
	}
	_, errOut, err := secureCtl(c.ctx, c.bin, c.addr, env, append(c.sec, "--user", "writer", "move-replica", "2", "1", "3")...)
	if err == nil || !strings.Contains(errOut, "PermissionDenied") || !strings.Contains(errOut, "needs role admin") {
		t.Fatalf("move-replica as writer: %v: %s", err, errOut)
	}
}

func testClientCertNotANode(t *testing.T, c *secureCluster) {
	cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(credentials.NewTLS(c.certs.ClientTLS(t, "root"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = tidekvpb.NewAdminClient(cc).Join(c.ctx, &tidekvpb.JoinRequest{GrpcAddr: "127.0.0.1:1"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Join with a client certificate: %v, want PermissionDenied", err)
	}
	stream, err := tidekvpb.NewRaftClient(cc).RaftStream(c.ctx)
	if err == nil {
		_ = stream.Send(&tidekvpb.RaftMessageBatch{})
		_, err = stream.CloseAndRecv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("RaftStream with a client certificate: %v, want PermissionDenied", err)
	}
}

func testForeignCARefused(t *testing.T, c *secureCluster) {
	other := t.TempDir()
	for _, args := range [][]string{{"create-ca"}, {"create-client", "root"}} {
		if out, err := exec.Command(c.bin, append(append([]string{"cert"}, args...), "--certs-dir", other)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	forged := (&testcluster.Security{CertsDir: other}).ClientTLS(t, "root")
	forged.RootCAs = c.certs.ClientTLS(t, "").RootCAs // trusts the cluster, is not trusted by it
	cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(credentials.NewTLS(forged)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	if _, err := tidekvpb.NewKVClient(cc).Get(cctx, &tidekvpb.GetRequest{Key: []byte("greeting")}); err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
}

func testHTTPSOnly(t *testing.T, c *secureCluster) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.certs.ClientTLS(t, "")}}
	resp, err := hc.Get("https://" + c.tc.HTTPAddr(1) + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET https /health: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + c.tc.HTTPAddr(1) + "/health")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP /health answered 200")
		}
	}
}

func testRedisAuth(t *testing.T, c *secureCluster) {
	open := func(user, pass string) *redis.Client {
		rc := redis.NewClient(&redis.Options{Addr: c.tc.RedisAddr(1), Username: user, Password: pass,
			TLSConfig: c.certs.ClientTLS(t, ""), MaxRetries: -1})
		t.Cleanup(func() { rc.Close() })
		return rc
	}
	if err := open("", "").Get(c.ctx, "greeting").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("GET without AUTH: %v, want NOAUTH", err)
	}
	r := open("reader", "r-pass")
	if v, err := r.Get(c.ctx, "greeting").Result(); err != nil || v != "hello" {
		t.Errorf("GET as reader: %q %v", v, err)
	}
	if err := r.Set(c.ctx, "greeting", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("SET as reader: %v, want NOPERM", err)
	}
	if err := open("writer", "w-pass").Set(c.ctx, "r", "1", 0).Err(); err != nil {
		t.Errorf("SET as writer: %v", err)
	}
	plain := redis.NewClient(&redis.Options{Addr: c.tc.RedisAddr(1), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Ping(c.ctx).Err(); err == nil {
		t.Error("a plaintext Redis client got an answer")
	}
}

// A transaction's writes travel with its commit (End), which a reader may
// call: the writes still need the role to write, and nothing is applied.
func testReaderCannotWriteInTxn(t *testing.T, c *secureCluster) {
	cfg := client.DefaultConfig()
	cfg.Addrs = []string{c.addr}
	cfg.TLS = c.certs.ClientTLS(t, "")
	cfg.Credentials = security.PasswordCredentials{User: "reader", Password: "r-pass"}
	rc, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	err = rc.Txn(c.ctx, func(tx *client.Tx) error {
		if _, err := tx.Get(c.ctx, []byte("greeting")); err != nil && !errors.Is(err, client.ErrNotFound) {
			return err
		}
		return tx.Put(c.ctx, []byte("txn-by-reader"), []byte("x"))
	})
	if err == nil || !strings.Contains(err.Error(), "needs role write") {
		t.Fatalf("a reader's transaction with a write: %v; want a refusal that names role write", err)
	}
	if _, errOut, err := secureCtl(c.ctx, c.bin, c.addr, nil, append(c.sec, "get", "txn-by-reader")...); err == nil || !strings.Contains(errOut, "not found") {
		t.Fatalf("the reader's write: %v: %s; want not found", err, errOut)
	}
}
