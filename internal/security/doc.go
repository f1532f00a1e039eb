// Package security holds TideKV's TLS and authentication mechanisms: the
// certificates `tidekv cert` writes, the TLS configurations nodes and
// clients build from a certs directory, users with roles and hashed
// passwords, and the gRPC interceptors that authenticate every call and
// check its method against the role it needs.
//
// # Certificates
//
// A certs directory holds ca.crt (and, on the machine that signs, ca.key),
// node.crt/node.key and client.<user>.crt/client.<user>.key, as
// CockroachDB's `cockroach cert` lays them out. Keys are ECDSA P-256,
// written 0600; nothing is overwritten unless asked.
//
// Roles travel in the certificate's subject: a node certificate has
// OU=tidekv-node (and CN=node), a client certificate OU=tidekv-client and
// CN=<user>. Only the CA's holder can mint either, so a client certificate
// cannot act as a node: node-to-node methods (Raft, snapshots, joins,
// heartbeats, range reports, closed timestamps) require OU=tidekv-node.
//
// # Users and roles
//
// Roles are ordered: read < write < admin; a node is above admin. A call
// authenticates by client certificate (CN = user) or by an
// "authorization: Basic base64(user:password)" metadata entry over TLS.
// The user named by a certificate needs no password; "root" is always an
// admin and need not be listed. Users live in a JSON file (Users), one per
// cluster copied to every node; passwords are stored as salted Argon2id
// hashes (older files: PBKDF2-SHA256, rehashed at the next login), never in
// clear, and never logged. Failed logins back off per user and per source
// address (limiter.go), and the derivations of logins not yet verified keep
// to a share of the node's CPUs, beyond which logins are refused as busy
// (derivations.go). They run in derivation workers: child processes of
// the node's own binary, at the lowest CPU priority and on a heap of their
// own (worker.go), raised to the node's priority while a derivation waits
// beyond a short grace, so that a busy node does not starve its logins
// (workeraging.go), and on a sized node in a cgroup of their own whose
// quota is the budget (workercgroup.go).
//
// Imports: the standard library, golang.org/x/crypto/argon2,
// golang.org/x/sys/unix (a derivation worker's priority), gRPC and
// internal/cgroup (the workers' cgroup) only.
package security
