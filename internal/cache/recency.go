package cache

import (
	"sync"
	"time"
)

// Recency is a node's memory of when keys were last used (read or written
// through this node while it led their range). It is not replicated: a new
// leaseholder starts without it and takes the keys it has not seen as the
// least recently used, as Redis does after a restart.
//
// It remembers at most a fixed number of keys. When full, it forgets the
// oldest of a few entries taken from the map in its random iteration
// order, the sampled approximation of LRU that Redis uses for its keys: a
// key forgotten that way was likely among the least recently used, and a
// forgotten key only looks older than it is.
type Recency struct {
	mu   sync.Mutex
	max  int
	used map[string]int64 // key → last use, Unix nanoseconds
}

// forgetSample is how many entries a full Recency looks at to pick the
// one it forgets (Redis's maxmemory-samples default).
const forgetSample = 5

// NewRecency remembers up to max keys.
func NewRecency(max int) *Recency {
	return &Recency{max: max, used: map[string]int64{}}
}

// Touch records a use of key at now.
func (r *Recency) Touch(key []byte, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.used[string(key)]; !ok && len(r.used) >= r.max {
		r.forgetOneLocked()
	}
	r.used[string(key)] = now.UnixNano()
}

func (r *Recency) forgetOneLocked() {
	var oldest string
	at, n := int64(0), 0
	for k, t := range r.used {
		if n == 0 || t < at {
			oldest, at = k, t
		}
		if n++; n == forgetSample {
			break
		}
	}
	delete(r.used, oldest)
}

// LastUsed is when key was last used (zero: not remembered).
func (r *Recency) LastUsed(key []byte) time.Time {
	r.mu.Lock()
	t, ok := r.used[string(key)]
	r.mu.Unlock()
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, t)
}

// Forget drops key (evicted, or deleted).
func (r *Recency) Forget(key []byte) {
	r.mu.Lock()
	delete(r.used, string(key))
	r.mu.Unlock()
}

// Len is how many keys it remembers.
func (r *Recency) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.used)
}
