//go:build !linux

package security

import (
	"errors"
	"os"
)

// selfExe is the node's own binary.
var selfExe, _ = os.Executable()

// lowerPriority is Linux's only: elsewhere a worker keeps the node's
// priority (and still its own heap).
func lowerPriority() error {
	return errors.New("the CPU priority of derivation workers is lowered on Linux only")
}
