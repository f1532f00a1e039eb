// Package transport carries Raft traffic between nodes: batched messages
// (one connection per node pair and direction: length-prefixed frames on
// the node's gRPC port, or a gRPC stream to a node without them,
// frames.go) and snapshot streams of SST bytes over gRPC. GRPC is the
// real implementation; Mem is an in-process twin with
// partitions for tests. A Partition (Config.Partition) gives GRPC
// partitions too, for chaos runs against real processes.
//
// Both can emulate a WAN for tests and benchmarks of geo-distributed
// localities: a Delays table (Config.Delays, MemNetwork.SetDelays) gives a
// one-way latency per ordered node pair, e.g. SetLocalities with
// UniformRTT(R) for localities R apart. Delayed messages keep their
// per-pair order and are pipelined (each is stamped with a due time when
// sent and the sender waits only for the head of the queue), so latency
// does not cap throughput; with no delay for a pair nothing is timed.
// Delays are timed on the process's monotonic clock; the package's tests
// time them on a manual twin, to assert exactly when a message arrives.
//
// It may import api/tidekvpb and grpc; it knows nothing of replicas beyond
// the Handler interface it calls for incoming traffic.
package transport
