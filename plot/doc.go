// Package plot draws benchmark time series and curves as standalone SVG
// files: stacked panels sharing one x axis, a few lines or bars per panel,
// each panel with its own y scale, and marked moments. It has no
// dependencies and sits outside internal/ so that the bench packages, the
// simulator and the CLI can all write their figures next to their tables.
// It imports nothing under internal/ (internal/lint).
package plot
