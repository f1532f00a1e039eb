// Package settings owns the cluster settings: the keys `tidekv ctl
// config` lists and changes (placement's configuration, the autoscale.*
// policy and gc-ttl), what each one's value means and how a set of them
// applies to a node's configuration (Apply), refusing an unknown key, a
// bad value or a result that does not validate. The settings live in the
// meta range; the node reads them and passes them in.
//
// It is pure: it imports api/tidekvpb (the Setting message),
// internal/placement, internal/elastic, internal/queue (their
// configurations) and internal/units. It imports no I/O package (net, os,
// os/exec, net/http) (internal/lint).
package settings
