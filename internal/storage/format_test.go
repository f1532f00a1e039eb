package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node1")
	if err := CheckFormat(dir); err != nil {
		t.Fatalf("new directory: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, formatFile))
	if err != nil || string(b) != "tidekv-format 1\n" {
		t.Fatalf("format file %q, %v", b, err)
	}
	if err := CheckFormat(dir); err != nil {
		t.Fatalf("reopening: %v", err)
	}
	for _, c := range []struct{ content, want string }{
		{"tidekv-format 2\n", "written by a newer TideKV (format 2; this binary reads format 1)"},
		{"hello\n", "unrecognised format file"},
		{"tidekv-format 0\n", "invalid format version 0"},
	} {
		if err := os.WriteFile(filepath.Join(dir, formatFile), []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckFormat(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%q: %v, want %q", c.content, err, c.want)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, formatFile)); string(got) != c.content {
			t.Fatalf("a refused directory was changed: %q", got)
		}
	}
}
