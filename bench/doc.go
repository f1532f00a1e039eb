// Package bench runs the YCSB core workloads (A–F) against any key-value
// store that implements the narrow Store interface. It is a library: build a
// Config (start from DefaultConfig), call Run, and print the Result as a table
// or as JSON. It imports the standard library, client and plot, and it
// imports nothing under internal/ (internal/lint), so that it can never come to depend on
// TideKV's server internals; `tidekv bench` adapts the Go client to Store.
//
// # Workloads
//
// The operation mixes are those of YCSB's workloads/workload{a..f} files:
//
//	A  update heavy   50% read, 50% update                 zipfian
//	B  read mostly    95% read,  5% update                 zipfian
//	C  read only     100% read                             zipfian
//	D  read latest    95% read,  5% insert                 latest
//	E  short ranges   95% scan,  5% insert                 zipfian
//	F  read-modify-w  50% read, 50% read-modify-write      zipfian
//
// A run has two phases. The load phase inserts RecordCount records (key
// numbers 0..RecordCount-1) with LoadThreads goroutines; the run phase then
// performs OperationCount operations over Threads goroutines, each goroutine
// doing an equal share as YCSB's client threads do. Both phases end by
// themselves; Duration additionally caps the run phase and cancelling the
// context stops either phase, returning the partial Result.
//
// # Cost on the servers
//
// RunWithCost also takes a Probe that samples the servers' cumulative
// counters (CPU seconds, fsyncs, bytes written; HTTPProbe reads them from
// each node's /metrics) right before and after each phase. The phase's
// Cost is the sum of the deltas over every sampled process divided by the
// phase's operations; in JSON, server_cpu_us_per_op, fsyncs_per_op and
// bytes_written_per_op. A figure is absent when some process does not
// export its counter or restarted during the phase, rather than too low.
// Anything else the servers did in that time (other clients, background
// compactions) counts too.
//
// # Keys, values and distributions
//
// Key number n is stored under "user" followed by the decimal FNV-1a 64 hash
// of n, as YCSB's default insertorder=hashed does, so sequential inserts are
// spread across the key space (and across ranges).
//
// A record is FieldCount fields of FieldLength random printable bytes. YCSB
// stores fields as separate columns; TideKV has one value per key, so the
// fields are packed into one value, each prefixed by its uvarint length (one
// byte for fields up to 127 bytes): 10×100-byte fields take 1,010 bytes.
//
// Request distributions choose which existing key an operation touches:
//
//   - zipfian: YCSB's ScrambledZipfianGenerator. Gray et al.'s zipfian
//     generator ("Quickly generating billion-record synthetic databases",
//     SIGMOD '94) draws over 10^10 items with the precomputed zeta constant,
//     and the draw is FNV-hashed modulo the key space so popular items are
//     scattered rather than clustered at low key numbers.
//   - uniform: every loaded record is equally likely.
//   - latest: YCSB's SkewedLatestGenerator, zipfian over the distance from
//     the newest acknowledged insert, so recently inserted keys are hottest.
//   - hotspot: HotspotDataFraction of the records receive HotspotOpnFraction
//     of the operations, uniformly within each set.
//
// Run-phase inserts take key numbers from RecordCount upwards and are
// published through an acknowledged counter (YCSB's
// AcknowledgedCounterGenerator): readers only choose key numbers below which
// every insert has completed, so they never ask for a key whose insert is
// still in flight.
//
// # Transactions
//
// RunTxn (`tidekv bench txn`, txn.go) drives a TxnStore instead: a
// workload's transactions from several workers while its keys are read at
// one timestamp each CheckInterval and at the end and checked. bank
// transfers between random pairs of accounts spread over ranges, whose
// total never changes; tpcc-lite runs TPC-C's New-Order and Payment and
// checks the consistency conditions they keep. It reports committed,
// aborted (given up after conflicts) and failed transactions, retries,
// latency percentiles of the committed ones and the invariants' verdict.
//
// # Differences from YCSB
//
//   - UPDATE writes a whole new record (YCSB's writeallfields=true): with
//     one value per key, updating a single field would itself be a
//     read-modify-write.
//   - READ-MODIFY-WRITE reads the record, replaces one random field and
//     writes it back. It is reported only as READ-MODIFY-WRITE; YCSB also
//     counts its inner read and update under READ and UPDATE.
//   - Latency percentiles cover successful operations; failed operations
//     are counted as errors. Reads that find no record succeed but are
//     counted as not found.
//   - With a ZipfianConstant other than YCSB's 0.99, for which no zeta
//     constant over 10^10 items is known, scrambled zipfian draws over the
//     key space itself, with zeta computed once per run.
package bench
