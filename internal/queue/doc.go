// Package queue holds the decisions and the memory of a node's background
// per-range queues: MVCC GC (which led range to look at, whether its
// garbage is worth a pass), the size watch (which range newly crossed its
// split line) and eviction's sampling cursors. Each round the server walks
// the ranges it leads, does the I/O (counting versions, proposing GC or
// delete commands, reporting to the meta range) and asks this package what
// to do; everything here is a value or a map guarded by a mutex, and time
// comes in as an argument.
//
// The memory of every queue is a Ranges[T]: per range, forgotten when the
// node no longer leads the range.
//
// It imports internal/keys, api/keyspace, internal/ksconfig and
// internal/mvcc (types only) and reads no clock. It imports no I/O package
// (net, os, os/exec, net/http) (internal/lint).
package queue
