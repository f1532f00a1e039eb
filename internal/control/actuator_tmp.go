package control

import "context"

// TEMPORARY: the same declarations as the actuators branch's actuator.go;
// removed when it merges.

// Member is a node as the actuator knows it.
type Member struct {
	ID   uint64
	Addr string
}

// Actuator adds and removes TideKV nodes.
type Actuator interface {
	Name() string
	ScaleOut(ctx context.Context, count int, join []string) (string, error)
	Victim(members []Member) (Member, error)
	Remove(ctx context.Context, m Member) (string, error)
}
