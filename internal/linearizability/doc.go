// Package linearizability checks that histories of concurrent KV operations
// are linearizable, in the style of etcd's robustness tests.
//
// Clients record what they invoked and what they observed with a [Recorder];
// [Check] then asks porcupine whether some total order of the operations,
// consistent with real time, explains every observed result under the
// sequential specification given by [Model] (a map of independent registers).
//
// This package owns linearizability checking only: it imports the standard
// library and porcupine, and nothing from the rest of TideKV, so that the
// checker cannot share bugs with the system under test.
package linearizability
