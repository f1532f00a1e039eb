//go:build !race

package mvcc

const raceEnabled = false
