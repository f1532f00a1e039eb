package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
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
