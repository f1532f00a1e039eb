//go:build !unix

package security

import "time"

// processCPU is unknown here: a derivation is charged its wall time.
func processCPU() (time.Duration, bool) { return 0, false }
