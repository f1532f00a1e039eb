package cache

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Flights runs one fetch per key at a time: the misses of a key that
// arrive while its fetch is in flight wait for that fetch and share its
// result, so many concurrent misses of one key reach the origin once. It
// also bounds the fetches in flight (over all keys).
type Flights struct {
	timeout time.Duration
	slots   chan struct{}
	mu      sync.Mutex
	m       map[string]*flight
}

type flight struct {
	done  chan struct{}
	value []byte
	found bool
	err   error
}

// NewFlights allows up to max fetches in flight, each (its wait for a
// free slot included) ending after timeout.
func NewFlights(max int, timeout time.Duration) *Flights {
	return &Flights{timeout: timeout, slots: make(chan struct{}, max), m: map[string]*flight{}}
}

// Do returns fetch's result for key, running fetch unless a fetch of key
// is in flight, in which case it waits for that one. fetch runs with a
// context that ends after the timeout but not with the caller's (others
// may be waiting for it); a caller whose ctx ends stops waiting.
func (f *Flights) Do(ctx context.Context, key string, fetch func(context.Context) ([]byte, bool, error)) ([]byte, bool, error) {
	f.mu.Lock()
	fl, ok := f.m[key]
	if !ok {
		fl = &flight{done: make(chan struct{})}
		f.m[key] = fl
		go f.run(context.WithoutCancel(ctx), key, fl, fetch)
	}
	f.mu.Unlock()
	select {
	case <-fl.done:
		return fl.value, fl.found, fl.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

func (f *Flights) run(ctx context.Context, key string, fl *flight, fetch func(context.Context) ([]byte, bool, error)) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	select {
	case f.slots <- struct{}{}:
		fl.value, fl.found, fl.err = fetch(ctx)
		<-f.slots
	case <-ctx.Done():
		fl.err = fmt.Errorf("no free slot for a miss handler call within %s (all %d of this node's slots busy)", f.timeout, cap(f.slots))
	}
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
	close(fl.done)
}
