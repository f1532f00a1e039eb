//go:build !linux

package scenario

import "errors"

// lrHog is a CPU hog pinned to one CPU; Linux only (taskset).
type lrHog struct{}

func lrStartHog(string) (*lrHog, error) {
	return nil, errors.New("the CPU hog needs Linux (taskset)")
}

// Pid is the hog's process ID.
func (h *lrHog) Pid() int { return 0 }

// Stop does nothing.
func (h *lrHog) Stop() {}
