package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A data directory written by a newer format is refused at start with one
// sentence, before the engine opens it.
func TestStartRefusesNewerFormat(t *testing.T) {
	cfg := testConfig(t)
	cfg.InMemory = false
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "FORMAT"), []byte("tidekv-format 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err == nil {
		s.Stop()
		t.Fatal("started on a newer format")
	}
	if !strings.Contains(err.Error(), "written by a newer TideKV (format 9; this binary reads format 1)") {
		t.Fatalf("error: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "engine")); err == nil {
		t.Fatal("the engine was created in a refused directory")
	}
}
