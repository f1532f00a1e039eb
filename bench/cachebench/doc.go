// Package cachebench runs the elastic key-value cache paper's experiments
// (seed 002, Chiu, Shetty, Agrawal) in miniature against TideKV's own
// code, for `tidekv bench cache`:
//
//   - Migration (its Figs. 4 and 5): what moving ranges off a node costs
//     with each index of the in-memory engine (internal/memengine). A
//     cache that grows from one node to several splits its largest span at
//     the median and moves the lower half to a new node, each time; the
//     move is the one snapshots use (WriteSST of a snapshot, a range
//     deletion at the source, IngestSST at the destination), timed per
//     step and per index.
//   - Fig3 (its Fig. 3): the miss rate over time of a cache key space that
//     grows (internal/elastic's overflow policy decides when to ask for a
//     node and what to split and move) against static caches of 2, 4 and 8
//     nodes that evict (internal/cache's Decide over a Recency), at two
//     query rates over 64K distinct keys. It is a key-level model in
//     virtual time: which keys each node holds is exact, the time a move
//     or a node start takes is not (moves are instant, a node joins a
//     fixed number of steps after it is asked for).
//
// The prelaunch experiment (Fig. 6) runs in the simulator (sim.RunCache).
//
// RunRealFig3 and RunRealPrelaunch run Figs. 3 and 6 on real processes
// (`tidekv bench cache --real`): a cluster per variant started with the
// launcher (bench/elastic.StartCluster), sized nodes if asked, a growing
// key space's nodes added by the local actuator; Fig. 3's reads miss to
// an origin in this process (read-through). Each reports the model's or
// the simulator's run of the same config beside it.
package cachebench
