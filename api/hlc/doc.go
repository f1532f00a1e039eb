// Package hlc owns TideKV's hybrid logical clock: the timestamps that
// versions (internal/mvcc) and, later, transactions are ordered by.
//
// A Timestamp is a wall time in nanoseconds since the Unix epoch plus a
// logical counter. A Clock reads an injected physical clock (the node's wall
// clock; raftstore's SkewClock fits, so clock-skew faults reach it) and
// never goes backwards: when the physical clock stalls or steps back, the
// logical counter orders events instead. Update folds in a timestamp from
// another node so that everything this node does afterwards is ordered
// after it, and refuses one further ahead of the local physical clock than
// the configured maximum offset: a node whose clock runs far ahead must not
// drag every other node's timestamps with it.
//
// Wall time, not the monotonic clock, because timestamps are compared
// across nodes; leases stay on the monotonic clock (raftstore/clock.go).
//
// Timestamps have a fixed 12-byte encoding whose bytewise order is the
// timestamps' order (mvcc keys embed it) and a text form,
// "<seconds>.<nanoseconds>,<logical>", that Parse reads back.
//
// The package imports the standard library only: it
// imports nothing under internal/ (internal/lint).
package hlc
