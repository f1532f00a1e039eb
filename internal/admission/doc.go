// Package admission decides which client requests a node starts, so that
// the requests it does serve stay fast when more arrive than it can serve.
//
// A count of requests in flight bounds nothing when the CPU is the
// bottleneck: the backlog then waits in connection buffers and the
// scheduler's run queue, where no counter sees it. The Controller therefore
// watches queueing delay, the time from a request's arrival at the node
// (its header read off the connection) to the moment its work starts, and
// the Go scheduler's run-queue latency, and sheds by delay as CoDel does:
//
//   - Each Interval it looks at the median delay of that interval (CoDel
//     takes the minimum, the standing part of a FIFO queue; goroutines do
//     not start in arrival order, so here a few can start at once however
//     long the others wait, and the median is what shows the standing
//     queue). A
//     median above Target, or a scheduler run queue that long, means the
//     node is overloaded.
//   - While overloaded, a gate at arrival admits only a share of new
//     normal requests (multiplicative decrease each overloaded interval,
//     additive increase each good one), refusing the rest before their
//     payload is read. Requests already past the gate that have waited
//     longer than Target are refused when their work would start (they
//     are likely past their caller's patience), and any request that
//     waited longer than Interval is refused at any time. The server
//     applies both to writes only, Redis writes included (a Redis command
//     arrives when its connection read it): a refused write saves its
//     Raft round, while refusing a cached read costs the node as much as
//     serving it, so reads are measured (Observe) and bounded by
//     MaxInflight only.
//   - Background requests are refused whenever the node is overloaded and
//     may hold only a share of the in-flight slots; node-internal work
//     (Raft messages, leases, heartbeats, snapshots, admin calls) never
//     passes through here at all.
//   - MaxInflight stays as a hard cap on requests in progress.
//
// Every refusal carries a reason and a retry-after hint that grows as the
// admitted share shrinks, so clients back off in proportion to the
// overload. The Controller does no I/O and reads time only from its
// injected clock; the server feeds it arrivals and the scheduler samples.
//
// It imports no I/O package (net, os, os/exec, net/http) (internal/lint).
package admission
