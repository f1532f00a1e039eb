//go:build !linux

package security

import (
	"errors"
	"os"
)

// selfExe is the node's own binary.
var selfExe, _ = os.Executable()

// schedThreads lowers and raises workers on Linux only: elsewhere a
// worker keeps the node's priority (and still its own heap), so a raise
// has nothing to do, and a lower says it cannot.
type schedThreads struct{ canRaise func() bool }

// mayLeaveIdle: a raise has nothing to undo here.
func mayLeaveIdle() bool { return true }

func (schedThreads) lower(int) error {
	return errors.New("the CPU priority of derivation workers is lowered on Linux only")
}

func (schedThreads) raise(int) error { return nil }
