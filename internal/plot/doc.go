// Package plot draws benchmark time series and curves as standalone SVG
// files: stacked panels sharing one x axis, a few lines per panel, each
// panel with its own y scale. It has no dependencies, so benchmarks and the
// simulator can write their figures next to their CSV.
package plot
