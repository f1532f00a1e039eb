// Package linearizability checks that histories of concurrent KV operations
// are linearizable, in the style of etcd's robustness tests.
//
// Clients record what they invoked and what they observed with a [Recorder];
// [Check] then asks porcupine whether some total order of the operations,
// consistent with real time, explains every observed result under the
// sequential specification given by [Model] (a map of independent registers).
//
// The tests of the raftstore and of the real binary share a random workload:
// a [Client] generates get/put/CAS operations over a few keys ([Keys]) and
// records them, leaving the transport to a [Do] callback; [Stats] counts
// their outcomes, and [CheckWithArtifacts] checks a history and leaves a
// visualization and a readable history ([FormatHistory]) behind on failure;
// [WantViolation] is the check of a negative control.
//
// This package owns linearizability checking only: it imports the standard
// library and porcupine, and nothing from the rest of TideKV, so that the
// checker cannot share bugs with the system under test.
package linearizability
