package control

import "context"

// Member is a node as an actuator knows it.
type Member struct {
	// ID is the cluster-assigned node ID.
	ID uint64
	// Addr is the node's advertised gRPC address (host:port).
	Addr string
}

// Actuator adds and removes TideKV nodes. Implementations (package
// internal/actuator): local processes, a Kubernetes StatefulSet, or only a
// recommendation. The controller decides when; the actuator only carries a
// decision out, so it never counts a node as capacity itself.
type Actuator interface {
	// Name is the actuator's kind: "local", "kubernetes" or "manual".
	Name() string
	// ScaleOut asks for count more nodes to join the cluster through join
	// (gRPC addresses of live members). It returns once the request is
	// accepted (processes started, replicas raised), with one line saying
	// what it did. A node counts as capacity only once it has joined live;
	// the actuator does not decide that.
	ScaleOut(ctx context.Context, count int, join []string) (string, error)
	// Victim picks the member a scale-in should drain (kubernetes: the
	// highest ordinal; local: the most recently started node this actuator
	// launched; manual: the member with the highest ID). It returns an
	// error if none may be removed. It does no I/O beyond reading local
	// bookkeeping.
	Victim(members []Member) (Member, error)
	// Remove stops a member after placement has drained and decommissioned
	// it (it holds no replica). Kubernetes lowers replicas by one, and only
	// if m is the highest ordinal. Removing a member that is already gone
	// succeeds without doing anything, so a retry is safe.
	Remove(ctx context.Context, m Member) (string, error)
}
