// Package client is TideKV's Go client. It owns client-side routing and
// retries: it caches range descriptors, sends each request straight to the
// range's leaseholder, follows NOT_LEASEHOLDER redirects, refreshes the cache
// when the cluster says it is stale, and retries requests across leader
// changes and node failures with jittered backoff, all within the caller's
// context deadline.
//
// Reads are linearizable by default: served by the leaseholder. With a
// ReadOption (Bounded(θ) or Any(), per call or as Config.DefaultRead) a read
// may be served by any replica, and the client sends it to the cheapest one:
// lowest load score (Admin.NodeLoads, polled in the background) plus
// measured round trip, skipping replicas that recently failed, look hung or
// refused as stale. When a replica cannot serve it, the client tries the
// next one at once, and finally the leaseholder. ReadAt(ts) and
// FollowerReadAt(ts) read the data as it was at a timestamp, and
// SnapshotScan scans every range at one: a consistent cut. See
// docs/read-modes.md.
//
// Reads are retried after any failure. Writes (Put, Delete, Write,
// CompareAndSet) are retried only while the cluster says they were not
// applied; once one may have reached a server and its outcome is unknown it
// is reported as ErrAmbiguous. Retrying it could apply it twice with other
// clients' writes in between, which linearizability forbids.
//
// The examples (example_test.go: connecting, Put and Get, Scan, errors with
// errors.Is, ReadAt, FollowerReadAt, Txn, TxnIf) are the place to start;
// `go test ./client` runs them against a one-node cluster inside the test
// binary and checks their output, so they stay true as the API changes.
//
// The package imports only api/tidekvpb, api/hlc, api/keyspace, gRPC and
// protobuf so that it can later become a module of its own: it
// imports nothing under internal/ (internal/lint).
//
// Routing state is an immutable snapshot of the range map behind an
// atomic.Pointer, so the request path does one atomic load and a binary
// search. Leaseholder hints live in per-range atomics and are updated in
// place; only descriptor changes (rare: splits, replica changes) copy the
// snapshot.
package client
