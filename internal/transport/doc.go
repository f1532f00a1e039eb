// Package transport carries Raft traffic between nodes: batched message
// streams (one per node pair and direction) and snapshot streams of SST
// bytes. GRPC is the real implementation; Mem is an in-process twin with
// partitions for tests.
//
// It may import api/tidekvpb and grpc; it knows nothing of replicas beyond
// the Handler interface it calls for incoming traffic.
package transport
