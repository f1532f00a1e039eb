package cache

import (
	"errors"
	"time"
)

// Config is a node's cache settings: eviction for key spaces with a
// capacity, read-through for key spaces with a miss handler.
type Config struct {
	// EvictInterval is how often the node looks at the key spaces with a
	// capacity, and so, with MaxEvictKeys, the eviction rate limit.
	EvictInterval time.Duration
	// LowWater is the share of the capacity (in (0, 1]) eviction brings a
	// node's share of a key space under once it went over the capacity, so
	// that a key space at its capacity does not evict on every write.
	LowWater float64
	// SampleKeys is how many keys of each range it leads the node reads
	// per round, continuing where the previous round stopped (a clock hand
	// over the range): the candidates of the round.
	SampleKeys int
	// MaxEvictKeys bounds the keys one key space loses on one node per
	// round.
	MaxEvictKeys int
	// TrackedKeys bounds how many keys' last use a node remembers (about
	// 100 bytes each plus the key).
	TrackedKeys int
	// FetchTimeout bounds one call to a key space's miss handler.
	FetchTimeout time.Duration
	// MaxFetches bounds the miss handler calls one node has in flight;
	// misses beyond it wait for a free slot (within FetchTimeout).
	MaxFetches int
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{EvictInterval: time.Second, LowWater: 0.95, SampleKeys: 256, MaxEvictKeys: 1000,
		TrackedKeys: 100_000, FetchTimeout: 2 * time.Second, MaxFetches: 64}
}

// Validate checks the bounds.
func (c Config) Validate() error {
	switch {
	case c.EvictInterval <= 0:
		return errors.New("cache: the eviction interval must be positive")
	case c.LowWater <= 0 || c.LowWater > 1:
		return errors.New("cache: the low-water mark must be a share of the capacity in (0, 1]")
	case c.SampleKeys < 4:
		return errors.New("cache: at least 4 keys must be sampled per range")
	case c.MaxEvictKeys < 1:
		return errors.New("cache: at least one key must be evictable per round")
	case c.TrackedKeys < 1:
		return errors.New("cache: at least one key's last use must be tracked")
	case c.FetchTimeout <= 0:
		return errors.New("cache: the miss handler timeout must be positive")
	case c.MaxFetches < 1:
		return errors.New("cache: at least one miss handler call must be allowed in flight")
	}
	return nil
}
