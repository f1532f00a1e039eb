// Package nodereport owns what a node tells the rest of the cluster about
// its load, and the memory behind it: the heartbeat to the meta range
// every heartbeat interval (liveness, request rates, admission state,
// monitor score, clock verdict, replicas, leases and replica reads, and
// what the meta range answers, saying once when its log version is beyond
// this binary: Heartbeat), each led range's report on
// every descriptor change and every report interval (Queue, Send,
// ReportAll), the node's load as its side transport sends it to peers
// (Load), and the load table both read: the local ranges' rates and sizes
// sampled once per report interval (internal/rangeload), the writes each
// led range takes by origin locality (NoteWrite), the rate of refused
// requests between heartbeats and the mean service time the monitor's
// score counts (Served).
//
// The node is reached through Node, which the package owns: its
// descriptor, replicas and stored bytes, the meta range's heartbeat and
// report calls (here or forwarded), what to do with the meta range's
// answer, each range's garbage and the event log. The handles it reads are the node's
// metrics, admission controller, monitor, clock watch, size watch and key
// space counters. It imports no server, SDK or network code
// (internal/server, client, internal/transport, net, net/http)
// (internal/lint).
package nodereport
