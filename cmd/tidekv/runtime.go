package main

import (
	"os"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// defaultGCPercent trades memory for CPU: TideKV's live heap is small (the
// data lives in Pebble's off-heap cache), so collecting at 4× the live heap
// instead of 2× costs little memory and, in paired runs on a 2-core machine,
// raised read-only YCSB throughput by 10-20% (docs/benchmarks/cost.md).
const defaultGCPercent = 400

// gcPercentFlag adds --gc-percent; applyGCPercent honours it unless the
// operator set GOGC, which always wins.
func gcPercentFlag(f *pflag.FlagSet) *int {
	return f.Int("gc-percent", defaultGCPercent, "Go GC target percentage (GOGC); the GOGC environment variable overrides it")
}

func applyGCPercent(p int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(p)
	}
}
