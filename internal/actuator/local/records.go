package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Node is what the pidfile <Dir>/node<Index>.pid records about a launched
// server (as JSON), so that `tidekv up` can stop it and a controller on
// another node can find it. Remove renames the pidfile to
// node<Index>.removed, which makes a repeated Remove a no-op.
type Node struct {
	Index    int       `json:"index"`
	PID      int       `json:"pid"`
	DataDir  string    `json:"data_dir"`
	GRPCAddr string    `json:"grpc_addr"`
	HTTPAddr string    `json:"http_addr"`
	Log      string    `json:"log"`
	Started  time.Time `json:"started"`
	// Cgroup is the sized node's cgroup directory; "" for an unsized one.
	Cgroup string `json:"cgroup,omitempty"`
	// Alive is not stored: Nodes fills it in from the OS.
	Alive bool `json:"-"`
}

// Suffixes of a launched node's record and of a removed node's.
const (
	pidSuffix     = ".pid"
	removedSuffix = ".removed"
)

func nodeName(index int) string { return "node" + strconv.Itoa(index) }

func pidPath(dir string, index int) string {
	return filepath.Join(dir, nodeName(index)+pidSuffix)
}

func removedPath(dir string, index int) string {
	return filepath.Join(dir, nodeName(index)+removedSuffix)
}

// writeRecord writes n's pidfile atomically (temp file, then rename), so a
// reader never sees half a record.
func writeRecord(dir string, n Node) error {
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	tmp := pidPath(dir, n.Index) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, pidPath(dir, n.Index))
}

// readRecords returns the records in dir whose file names end in suffix,
// by index.
func readRecords(dir, suffix string) ([]Node, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		var n Node
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("local actuator: record %s: %w", e.Name(), err)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return a.Index - b.Index })
	return out, nil
}

// reserveIndex claims the next unused node index by creating its directory
// exclusively: two controllers racing get different indexes. Indexes only
// grow (removed nodes keep their directory for the log), so the highest
// index is the most recently launched node.
func reserveIndex(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	next := 1
	for _, e := range entries {
		if i, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && e.IsDir() && i >= next {
			next = i + 1
		}
	}
	for ; ; next++ {
		err := os.Mkdir(filepath.Join(dir, nodeName(next)), 0o755)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return 0, err
		}
	}
}

// clearData deletes everything in dataDir except the log, which is kept
// for the post-mortem of a removed node.
func clearData(dataDir, log string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dataDir, e.Name())
		if p == log {
			continue
		}
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}
