package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/gossip"
	"github.com/tidekv/tidekv/internal/security"
)

// A node refused for a bad --certs-dir leaves no data directory behind.
func TestBadCertsDirTouchesNothing(t *testing.T) {
	cfg := testConfig(t)
	cfg.InMemory = false
	cfg.DataDir = filepath.Join(t.TempDir(), "node")
	cfg.Security.CertsDir = filepath.Join(t.TempDir(), "no-such-certs")
	s, err := Start(context.Background(), cfg)
	if err == nil {
		s.Stop()
		t.Fatal("started with a certs dir that does not exist")
	}
	if _, serr := os.Stat(cfg.DataDir); !os.IsNotExist(serr) {
		t.Fatalf("refused start (%v) left the data directory behind: %v", err, serr)
	}
}

// A secure node with gossip on needs CertsDir/gossip.key and encrypts
// gossip with it: a member without the key cannot join the node's gossip,
// one with it can.
func TestSecureGossipIsEncrypted(t *testing.T) {
	o := testCertsDir(t)
	cfg := testConfig(t)
	cfg.Security.CertsDir = o.Dir
	cfg.Gossip.BindAddr = "127.0.0.1:0"
	if s, err := Start(context.Background(), cfg); err == nil {
		s.Stop()
		t.Fatal("a secure node with gossip started without gossip.key")
	} else if !strings.Contains(err.Error(), "tidekv cert create-gossip-key") {
		t.Fatalf("refusal %q does not say how to make the key", err)
	}
	if err := security.CreateGossipKey(o, false); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	keys, err := security.LoadGossipKeys(o.Files, o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range [][][]byte{nil, keys} {
		gc := gossip.DefaultConfig()
		gc.NodeID, gc.GRPCAddr, gc.Keys = uint64(100+i), "127.0.0.1:1", k
		g, err := gossip.Start(gc, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Stop()
		if err := g.Join([]string{s.gossipAddr()}); (err == nil) != (k != nil) {
			t.Errorf("a member with keys %x joining the node's gossip: %v", k, err)
		}
	}
}

// testCertsDir makes a CA and a node certificate for 127.0.0.1.
func testCertsDir(t *testing.T) security.CertOptions {
	t.Helper()
	o := security.CertOptions{Dir: t.TempDir(), Lifetime: 24 * time.Hour, Files: security.OSFiles{}}
	if err := security.CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateNode(o, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	return o
}

// The Redis password is the default user's, checked and limited as every
// user's, on a secure node and on an insecure one alike: wrong ones are
// counted in tidekv_login_failures_total, and the failure that starts a
// back-off is an event (the back-off itself: security's TestLoginBackOff).
func TestRedisPasswordLoginFailuresCounted(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run(map[bool]string{true: "secure", false: "insecure"}[secure], func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Redis.ListenAddr = "127.0.0.1:0"
			cfg.Security.RedisPassword = "dpw"
			opts := &redis.Options{MaxRetries: -1, PoolSize: 1}
			if secure {
				o := testCertsDir(t)
				cfg.Security.CertsDir = o.Dir
				ca, err := os.ReadFile(filepath.Join(o.Dir, security.CACert))
				if err != nil {
					t.Fatal(err)
				}
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(ca)
				opts.TLSConfig = &tls.Config{RootCAs: pool}
			}
			s, err := Start(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			opts.Addr = s.RedisAddr()
			rdb := redis.NewClient(opts)
			defer rdb.Close()
			ctx := context.Background()
			if err := rdb.Do(ctx, "AUTH", "dpw").Err(); err != nil {
				t.Fatalf("AUTH with the Redis password: %v", err)
			}
			for i := 0; i < 5; i++ {
				if err := rdb.Do(ctx, "AUTH", "default", "guess").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
					t.Fatalf("a wrong password: %v", err)
				}
			}
			if err := rdb.Do(ctx, "AUTH", "dpw").Err(); err == nil || !strings.Contains(err.Error(), "too many failed logins") {
				t.Fatalf("the right password during the back-off: %v, want a refusal", err)
			}
			if n := promtest.ToFloat64(s.metrics.LoginFailures.WithLabelValues("wrong")); n != 5 {
				t.Errorf("tidekv_login_failures_total{result=wrong} = %v, want 5", n)
			}
			var backOffs int
			for _, e := range s.events.List(0) {
				if e.GetKind() == "login-backoff" {
					backOffs++
				}
			}
			if backOffs != 1 {
				t.Errorf("%d login-backoff events after the fifth failure, want 1: %v", backOffs, s.events.List(0))
			}
		})
	}
}

// Once the node's derivation budget is spent, a login that would derive is
// refused unchecked on every port: gRPC ResourceExhausted, Redis "ERR too
// many login attempts, retry later", the dashboard's login 429 with
// Retry-After. A user whose password the node verified, a client
// certificate and a session go on. Each refusal counts as
// result="busy", and the first is a login-busy event (at most one a
// minute). The budget is a thousandth of the node's CPUs with a burst of
// a microsecond: the first derivation (an Argon2id of 19 MiB, milliseconds
// at the least) leaves a debt that takes at least 500 times as long as it
// to repay (seconds), in which the test runs.
func TestLoginBusyEndToEnd(t *testing.T) {
	n := startSecureNode(t, security.LoginConfig{DerivationShare: 0.001, DerivationBurst: time.Microsecond})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: n.tls(t, "")},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(user, password string) *http.Response {
		t.Helper()
		resp, err := hc.PostForm("https://"+n.s.HTTPAddr()+"/login", url.Values{"user": {user}, "password": {password}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// The one derivation the budget has for now: reader's login.
	resp := login("reader", "r-pass")
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("reader's login: %s, cookies %v", resp.Status, resp.Cookies())
	}
	session := resp.Cookies()[0]

	if resp := login("writer", "w-pass"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || len(resp.Cookies()) != 0 {
		t.Errorf("writer's login with the budget spent: %s, Retry-After %q, cookies %v; want 429 with Retry-After",
			resp.Status, resp.Header.Get("Retry-After"), resp.Cookies())
	}
	ctx := context.Background()
	get := &tidekvpb.GetRequest{Key: []byte("probe")}
	for _, c := range []struct {
		name  string
		tls   *tls.Config
		creds credentials.PerRPCCredentials
		want  codes.Code
	}{
		{"writer's password", n.tls(t, ""), security.PasswordCredentials{User: "writer", Password: "w-pass"}, codes.ResourceExhausted},
		{"a made-up user", n.tls(t, ""), security.PasswordCredentials{User: "nobody", Password: "x"}, codes.ResourceExhausted},
		{"reader's verified password", n.tls(t, ""), security.PasswordCredentials{User: "reader", Password: "r-pass"}, codes.OK},
		{"carol's certificate", n.tls(t, "carol"), nil, codes.OK},
	} {
		_, err := tidekvpb.NewKVClient(n.grpcConn(t, c.tls, c.creds)).Get(ctx, get)
		if got := status.Code(err); got != c.want {
			t.Errorf("gRPC Get by %s with the budget spent: %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ user, password, want string }{
		{"writer", "w-pass", "ERR too many login attempts, retry later"},
		{"reader", "r-pass", ""},
	} {
		rc := redis.NewClient(&redis.Options{Addr: n.s.RedisAddr(), Username: c.user, Password: c.password,
			TLSConfig: n.tls(t, ""), MaxRetries: -1, PoolSize: 1})
		err := rc.Ping(ctx).Err()
		rc.Close()
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || err.Error() != c.want)) {
			t.Errorf("Redis AUTH as %s with the budget spent: %v, want %q", c.user, err, c.want)
		}
	}
	req, _ := http.NewRequest("GET", "https://"+n.s.HTTPAddr()+"/api/whoami", nil)
	req.AddCookie(session)
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("reader's session with the budget spent: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// go-redis logs in with HELLO's AUTH, then, refused, with AUTH.
	if got := promtest.ToFloat64(n.s.metrics.LoginFailures.WithLabelValues("busy")); got != 5 {
		t.Errorf("tidekv_login_failures_total{result=busy} = %v, want 5 (HTTP, gRPC twice, Redis HELLO and AUTH)", got)
	}
	var busy int
	for _, e := range n.s.events.List(0) {
		if e.GetKind() == "login-busy" {
			busy++
		}
	}
	if busy != 1 {
		t.Errorf("%d login-busy events, want 1 (one a minute)", busy)
	}
}
