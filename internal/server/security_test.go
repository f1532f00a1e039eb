package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

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
