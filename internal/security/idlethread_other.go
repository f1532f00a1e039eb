//go:build !linux

package security

import "time"

// lowerThread does nothing where TideKV does not know the platform's idle
// priority: derivations run at the default priority.
func lowerThread() error { return nil }

// threadTime is the wall clock (a derivation's wall time is at least its
// CPU time, so the budget charges more, never less).
func threadTime() time.Duration { return time.Duration(time.Now().UnixNano()) }
