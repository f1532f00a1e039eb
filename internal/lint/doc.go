// Package lint holds the tests that enforce TideKV's import rules (in the
// manner of Pebble's internal/lint): which packages may import which, read
// from `go list -deps -json`, and that the rules written in
// docs/architecture.md ("Import rules") and in each governed package's
// doc.go are exactly the ones checked. It has no non-test code.
package lint
