package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	o := security.CertOptions{Dir: t.TempDir(), Lifetime: time.Hour, Files: security.OSFiles{}}
	if err := security.CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateNode(o, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
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
