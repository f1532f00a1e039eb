// Package plot draws benchmark time series and curves as standalone SVG
// files: stacked panels sharing one x axis, a few lines or bars per panel,
// each panel with its own y scale, and marked moments. Figures are meant
// to read at a glance: axes tick at round values (steps of 1, 2 or 5 ×
// 10^k; whole numbers only on an axis of counts), each panel has a keyed
// legend (a swatch of each series' colour and dash beside its name), and a
// paper's reported values can share the axes with ours as reference
// series, drawn dashed grey with markers and keyed "paper: …".
// docs/benchmarks.md says why this package and not gonum/plot.
// It has no dependencies and sits outside internal/ so that the bench
// packages, the simulator and the CLI can all write their figures next to
// their tables. It imports nothing under internal/ (internal/lint).
package plot
