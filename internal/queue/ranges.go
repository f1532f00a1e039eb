package queue

import (
	"maps"
	"sync"
)

// Ranges is a queue's memory of the ranges a node leads, by range ID. It
// is safe for concurrent use: the queue's loop writes it, other loops
// (range reports) read it.
type Ranges[T any] struct {
	mu sync.Mutex
	m  map[uint64]T
}

// Get returns range id's entry and whether there is one.
func (r *Ranges[T]) Get(id uint64) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[id]
	return v, ok
}

// Set replaces range id's entry.
func (r *Ranges[T]) Set(id uint64, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[uint64]T{}
	}
	r.m[id] = v
}

// Delete forgets range id.
func (r *Ranges[T]) Delete(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// KeepOnly forgets the ranges not in led (the node no longer leads them,
// or they are gone).
func (r *Ranges[T]) KeepOnly(led map[uint64]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.m, func(id uint64, _ T) bool { return !led[id] })
}

// Len is the number of ranges remembered.
func (r *Ranges[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
