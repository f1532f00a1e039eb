// Package sizewatch owns a node's watch over its ranges' sizes
// (docs/operations.md "Θmax"): each local range's size, an exact count of
// its data span plus the bytes written since, recounted when it could have
// grown by a quarter of its counted size, at once at the split line and at
// most every recountGap below it (Watch.Size, RangeSize); the round that
// reports a led range the moment it crosses its split line and renews the
// write budgets (Round); and the admission that holds a write
// whose range has no room until the range splits, refusing it as
// RANGE_BUSY when no split comes in time (Admit).
//
// The node is reached through Node, which the package owns: its replicas,
// the cluster's placement settings, the report of a crossed range and the
// refusal's wire form. The server runs Round in its loops, woken by Poke.
// It builds on internal/raftstore (replicas, their data sizes),
// internal/queue (which range newly crossed), internal/placement (the
// settings' types) and internal/metrics. It imports no server, SDK or
// network code (internal/server, client, internal/transport, net,
// net/http) (internal/lint).
package sizewatch
