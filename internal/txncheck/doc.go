// Package txncheck finds serializability anomalies in histories of
// transactions, in the style of Jepsen's Elle: black-box, from what
// clients observed only.
//
// A history is a list of transactions ([Txn]), each with its process,
// invoke and complete times, outcome (committed, failed, or unknown) and
// micro-operations ([Mop]) on keys. Two workloads make dependencies
// inferable because every written value is unique per key:
//
//   - [ListAppend]: each key holds a list; a transaction appends values
//     and reads whole lists. The longest list read of a key gives its
//     version order (every other read must be a prefix of it).
//   - [Register]: each key holds one value; a transaction writes and
//     reads values. The version order is known where a transaction read a
//     value and then wrote the key (the write directly follows the read
//     version), and the initial (unset) version precedes every write.
//
// From these, [Check] infers write-write (ww), write-read (wr) and
// read-write (rw, anti-dependency) edges between committed transactions,
// and real-time (rt) edges between a transaction that completed and one
// that began after it. Tarjan's algorithm finds the strongly connected
// components of that graph; in each, a breadth-first search finds the
// smallest cycle of each kind: G0 (ww only), G1c (ww and wr), G-single
// (exactly one rw), G2-item (rw, never exactly one), and, through real-time
// edges, the same kinds suffixed "-realtime" (strict serializability
// violations). Non-cycle anomalies are found directly: G1a (a read of an
// aborted transaction's write), G1b (a read of a value its writer later
// overwrote in the same transaction), reads of values nobody wrote,
// duplicate list elements, list reads that are not prefixes of one
// another, and transactions that do not see their own writes. Each
// anomaly comes with a readable explanation ("T1 appended 3 to x, then
// T2 appended 4 after it (ww)").
//
// A [Recorder] records a history from concurrent clients.
//
// This package owns transactional anomaly checking only: it imports the
// standard library and nothing from the rest of TideKV, so that the
// checker cannot share bugs with the system under test.
package txncheck
