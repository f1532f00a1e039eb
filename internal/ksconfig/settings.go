package ksconfig

import (
	"errors"
	"fmt"
	"github.com/tidekv/tidekv/api/keyspace"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/units"
)

// Engine is the storage engine a key space's replicas keep its data in.
type Engine string

const (
	Pebble Engine = "pebble"
	// Memory is internal/memengine: the data is lost when a node restarts
	// and copied back from the other replicas, or started empty if every
	// replica lost it (docs/keyspaces.md, "Restart").
	Memory Engine = "memory"
)

// OnFull says what a node does when its share of a key space with a
// capacity per node nears that capacity.
type OnFull string

const (
	// Evict drops the least recently used keys: the key space is as big
	// as its nodes' capacities (a static cache).
	Evict OnFull = "evict"
	// Grow asks for nodes ahead of need and moves data to nodes with room
	// (internal/elastic's overflow policy); nodes evict only when no node
	// may be added.
	Grow OnFull = "grow"
)

// MaxRF bounds a key space's replication factor: more voters than this
// only slow every write.
const MaxRF = 7

// Settings are one key space's settings. A zero RF means the cluster's
// replication factor; a zero CapacityPerNode means no capacity (nothing is
// evicted); a zero TTL means values do not expire unless a write says so;
// a zero GCTTL means the engine's default retention (GCTTLFor).
type Settings struct {
	Name string
	Mode keyspace.Mode
	// RF is the number of voters each of the key space's ranges has.
	RF     int
	Engine Engine
	// Index is the memory engine's index (memengine.Index; empty with
	// Pebble).
	Index memengine.Index
	// CapacityPerNode is the bytes of the key space one node may hold;
	// above it the node evicts the least recently used keys.
	CapacityPerNode uint64
	// OnFull is what happens as a node nears CapacityPerNode.
	OnFull OnFull
	// TTL is the expiry a value written without one gets.
	TTL time.Duration
	// MissHandler is the http(s) URL a point read that misses asks for
	// the value (read-through; empty: none).
	MissHandler string
	// GCTTL is how long the key space's overwritten and deleted versions
	// stay readable; 0 is its engine's default (GCTTLFor).
	GCTTL time.Duration
}

// DefaultSettings are those of the default key space and the starting
// point of a new one.
func DefaultSettings() Settings {
	return Settings{Name: keyspace.DefaultName, Mode: keyspace.DefaultMode, Engine: Pebble, OnFull: Evict}
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// Validate checks the settings alone; every problem is named.
func (s Settings) Validate() error {
	var errs []error
	if !namePattern.MatchString(s.Name) {
		errs = append(errs, fmt.Errorf("name %q must be 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter", s.Name))
	}
	if s.Mode != keyspace.Ordered && s.Mode != keyspace.Hashed {
		errs = append(errs, fmt.Errorf("unknown mode %q (known: ordered, hashed)", s.Mode))
	}
	switch s.Engine {
	case Pebble:
		if s.Index != "" {
			errs = append(errs, fmt.Errorf("index %q applies to the memory engine only", s.Index))
		}
	case Memory:
		mc := memengine.DefaultConfig()
		mc.Index = s.Index
		if err := mc.Validate(); err != nil {
			errs = append(errs, errors.New(strings.TrimPrefix(err.Error(), "memengine: ")))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown engine %q (known: pebble, memory)", s.Engine))
	}
	if s.RF < 0 || s.RF > MaxRF {
		errs = append(errs, fmt.Errorf("replication factor %d must be between 1 and %d (0: the cluster's)", s.RF, MaxRF))
	}
	if s.TTL < 0 {
		errs = append(errs, fmt.Errorf("default TTL %s must not be negative", s.TTL))
	}
	if s.TTL%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("default TTL %s must be whole milliseconds", s.TTL))
	}
	if err := checkGCTTL(s.GCTTL); err != nil {
		errs = append(errs, err)
	}
	switch {
	case s.OnFull != Evict && s.OnFull != Grow:
		errs = append(errs, fmt.Errorf("unknown on-full %q (known: evict, grow)", s.OnFull))
	case s.OnFull == Grow && s.CapacityPerNode == 0:
		errs = append(errs, errors.New("on-full grow needs a capacity per node (it grows before nodes reach it)"))
	}
	if err := checkMissHandler(s.MissHandler); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkMissHandler accepts an absolute http or https URL without a query
// or fragment: a read appends "?key=...".
func checkMissHandler(h string) error {
	if h == "" {
		return nil
	}
	u, err := url.Parse(h)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("miss handler %q must be an http or https URL with a host and no query (reads add ?key=...)", h)
	}
	return nil
}

// String is the settings as the CLI would write them.
func (s Settings) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s mode=%s engine=%s", s.Name, s.Mode, s.Engine)
	if s.Index != "" {
		fmt.Fprintf(&b, " index=%s", s.Index)
	}
	if s.RF > 0 {
		fmt.Fprintf(&b, " rf=%d", s.RF)
	}
	if s.CapacityPerNode > 0 {
		fmt.Fprintf(&b, " capacity-per-node=%s", units.Human(s.CapacityPerNode))
	}
	if s.OnFull == Grow {
		fmt.Fprintf(&b, " on-full=%s", s.OnFull)
	}
	if s.TTL > 0 {
		fmt.Fprintf(&b, " ttl=%s", s.TTL)
	}
	if s.MissHandler != "" {
		fmt.Fprintf(&b, " miss-handler=%s", s.MissHandler)
	}
	if s.GCTTL > 0 {
		fmt.Fprintf(&b, " gc-ttl=%s", s.GCTTL)
	}
	return b.String()
}
