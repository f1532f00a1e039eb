// Package scenario holds TideKV's scenario benchmarks: experiments that
// start their own clusters (in-process or as real processes), drive load,
// change the cluster underneath it (add nodes, slow nodes down, inject WAN
// latency) and report a table of what they measured. `tidekv bench
// scenario NAME` runs one; docs/benchmarks/ records their runs and
// docs/benchmarks.md each claim's latest result.
//
// Each scenario lives in its own file and registers itself in init.
package scenario

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"
)

// Options are the knobs every scenario understands; a scenario documents
// which it uses. Zero values mean the scenario's defaults.
type Options struct {
	// Binary is the tidekv binary for scenarios that start processes
	// ("": the scenario builds or locates one).
	Binary string
	// Dir holds data directories and logs ("": a temporary directory,
	// removed afterwards).
	Dir string
	// Duration scales each measured step.
	Duration time.Duration
	// Quick shrinks the scenario (data, steps, durations) to a smoke test.
	Quick bool
	// Out is the directory for the scenario's figures (SVG), linked from
	// its report ("": none drawn).
	Out string
	// Seed makes workload choices reproducible.
	Seed uint64
	// Records, when positive, replaces the number of records a scenario
	// loads (partitioning), to see how its result depends on the data size.
	Records int64
	// NodeCPUs, when positive, sizes every node process the scenario
	// starts (launcher.NodeSpec.CPUs).
	NodeCPUs float64
	// JSON asks for the report as JSON instead of markdown, from the
	// scenarios that support it (geotxn); the others ignore it.
	JSON bool
	// Progress receives human progress lines (stderr in the CLI).
	Progress io.Writer
}

// Scenario is one registered benchmark.
type Scenario struct {
	Name  string
	Short string
	// Run executes the scenario and writes its report (markdown tables) to
	// out.
	Run func(ctx context.Context, opts Options, out io.Writer) error
}

var registry = map[string]Scenario{}

// register adds a scenario; called from init functions.
func register(s Scenario) {
	if _, dup := registry[s.Name]; dup {
		panic("scenario: duplicate " + s.Name)
	}
	registry[s.Name] = s
}

// All lists the scenarios by name.
func All() []Scenario {
	out := make([]Scenario, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Run runs the named scenario.
func Run(ctx context.Context, name string, opts Options, out io.Writer) error {
	s, ok := registry[name]
	if !ok {
		return fmt.Errorf("bench: unknown scenario %q (see tidekv bench scenario --list)", name)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	return s.Run(ctx, opts, out)
}
