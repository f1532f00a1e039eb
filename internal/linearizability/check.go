package linearizability

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// ArtifactsEnv names the environment variable that, when set, is the
// directory where VisualizationPath puts visualizations, so CI can keep
// them after the test's temporary directory is removed.
const ArtifactsEnv = "TIDEKV_ARTIFACTS"

// Result is the outcome of Check.
type Result struct {
	// Ok is true if the history is linearizable.
	Ok bool
	// Unknown is true if the check timed out before reaching a verdict.
	Unknown bool
	// Ops is the number of operations checked, after dropping reads with
	// unknown outcomes.
	Ops int
	// Describe summarizes the verdict for test logs.
	Describe string
	// FailedKeys lists the keys whose sub-history is not linearizable, when
	// the checker could identify them.
	FailedKeys []string
	// VisualizationPath is where the HTML visualization was written, or ""
	// if none was.
	VisualizationPath string
}

// Option configures Check.
type Option func(*checkConfig)

type checkConfig struct {
	vizPath string
}

// WithVisualization makes Check write a porcupine HTML visualization to path
// when the history is not linearizable. Parent directories are created.
func WithVisualization(path string) Option {
	return func(c *checkConfig) { c.vizPath = path }
}

// Check reports whether h is linearizable with respect to Model. A timeout
// of 0 means no limit; on failure the diagnosis pass gets its own timeout,
// so Check may take up to twice as long.
func Check(h History, timeout time.Duration, opts ...Option) Result {
	var cfg checkConfig
	for _, o := range opts {
		o(&cfg)
	}
	model := Model()
	ops, stats := toPorcupine(h)
	res := Result{Ops: len(ops)}
	summary := fmt.Sprintf("%d ops on %d keys (%d unknown-outcome writes, %d unknown-outcome reads dropped)",
		len(ops), stats.keys, stats.unknownWrites, stats.droppedReads)

	// The plain check stops at the first failing key and skips bookkeeping,
	// so the common passing case stays fast; only failures pay for the
	// verbose pass below.
	switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
	case porcupine.Ok:
		res.Ok = true
		res.Describe = "linearizable: " + summary
		return res
	case porcupine.Unknown:
		res.Unknown = true
		res.Describe = fmt.Sprintf("linearizability check timed out after %v: %s", timeout, summary)
		return res
	}

	verdict, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if verdict == porcupine.Illegal {
		res.FailedKeys = failedKeys(model, ops, info)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "NOT linearizable: %s", summary)
	if len(res.FailedKeys) > 0 {
		fmt.Fprintf(&b, "; failing keys: %q", res.FailedKeys)
	}
	if cfg.vizPath != "" {
		if err := writeVisualization(model, info, cfg.vizPath); err != nil {
			fmt.Fprintf(&b, "; writing visualization: %v", err)
		} else {
			res.VisualizationPath = cfg.vizPath
			fmt.Fprintf(&b, "; visualization: %s", cfg.vizPath)
		}
	}
	res.Describe = b.String()
	return res
}

func writeVisualization(model porcupine.Model, info porcupine.LinearizationInfo, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return porcupine.VisualizePath(model, info, path)
}

// failedKeys returns the keys none of whose partial linearizations covers
// the whole partition. It relies on porcupine reporting partitions in the
// order model.Partition returns them, which is sorted by key.
func failedKeys(model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) []string {
	parts := model.Partition(ops)
	partials := info.PartialLinearizations()
	if len(partials) != len(parts) {
		return nil
	}
	var keys []string
	for i, part := range parts {
		complete := false
		for _, lin := range partials[i] {
			if len(lin) == len(part) {
				complete = true
				break
			}
		}
		if !complete {
			keys = append(keys, part[0].Input.(Input).Key)
		}
	}
	return keys
}

type historyStats struct {
	keys          int
	unknownWrites int
	droppedReads  int
}

// toPorcupine applies the unknown-outcome convention: an unknown read has no
// effect and constrains nothing, so it is dropped; an unknown write is kept
// with a return time after every other event, so it may linearize anywhere
// after its call, including after everything else (i.e. never observed).
func toPorcupine(h History) ([]porcupine.Operation, historyStats) {
	var stats historyStats
	var infinity int64
	for _, op := range h {
		infinity = max(infinity, op.Call, op.Return)
	}
	// A finite stand-in for infinity keeps visualization timestamps sane.
	infinity++

	// Porcupine's visualization draws one row per ClientId, expects them
	// dense from zero, and assumes a row's operations do not overlap. A
	// client whose operation has an unknown outcome moves on while that
	// operation stays open forever, so its later operations get a new row;
	// that needs each client's operations in invocation order.
	order := make([]int, len(h))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return h[order[a]].Call < h[order[b]].Call })
	rows := make(map[int]int)
	nextRow := 0
	keys := make(map[string]struct{})

	ops := make([]porcupine.Operation, 0, len(h))
	for _, i := range order {
		op := h[i]
		if op.Output.Unknown && op.Input.Kind == Get {
			stats.droppedReads++
			continue
		}
		r, ok := rows[op.ClientID]
		if !ok {
			r = nextRow
			nextRow++
			rows[op.ClientID] = r
		}
		ret := op.Return
		if op.Output.Unknown {
			stats.unknownWrites++
			ret = infinity
			rows[op.ClientID] = nextRow
			nextRow++
		}
		keys[op.Input.Key] = struct{}{}
		ops = append(ops, porcupine.Operation{
			ClientId: r,
			Input:    op.Input,
			Call:     op.Call,
			Output:   op.Output,
			Return:   ret,
			Metadata: opMeta{client: op.ClientID, unknown: op.Output.Unknown},
		})
	}
	stats.keys = len(keys)
	return ops, stats
}

// VisualizationPath returns where a test named name should write its
// visualization: under $TIDEKV_ARTIFACTS if set, else under fallbackDir
// (typically t.TempDir()). Characters that are awkward in file names, such
// as the slashes of subtest names, are replaced.
func VisualizationPath(fallbackDir, name string) string {
	dir := fallbackDir
	if d := os.Getenv(ArtifactsEnv); d != "" {
		dir = d
	}
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
	return filepath.Join(dir, safe+".html")
}
