//go:build linux

package raftstore

import "golang.org/x/sys/unix"

// bootBase is CLOCK_BOOTTIME when the package started, less 1 ns so that
// no reading is 0 ("never").
var bootBase int64

func init() {
	if now, ok := bootNanos(); ok {
		bootBase = now - 1
		monoNow = bootMonoNow
	}
}

func bootNanos() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}

func bootMonoNow() monoTime {
	now, _ := bootNanos()
	return monoTime(now - bootBase)
}
