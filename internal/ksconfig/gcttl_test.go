package ksconfig

import (
	"strings"
	"testing"
	"time"
)

// A key space's GC TTL is its own when set; unset, a memory key space
// keeps history as long as the longest transaction (never longer than
// the cluster's gc-ttl, never shorter than MinGCTTL) and a Pebble one
// the cluster's gc-ttl.
func TestGCTTLFor(t *testing.T) {
	const cluster, txn = 10 * time.Minute, time.Minute
	pebble := DefaultSettings()
	pebble.Name = "docs"
	mem := pebble
	mem.Name, mem.Engine = "cache", Memory
	own := mem
	own.GCTTL = 5 * time.Second
	long := pebble
	long.GCTTL = time.Hour
	for _, c := range []struct {
		name         string
		s            Settings
		cluster, txn time.Duration
		want         time.Duration
		why          string
	}{
		{"pebble, unset", pebble, cluster, txn, cluster, "the cluster's gc-ttl"},
		{"memory, unset", mem, cluster, txn, txn, "memory key space cache's default"},
		{"memory, cluster shorter", mem, 30 * time.Second, txn, 30 * time.Second, "default"},
		{"memory, tiny txn deadline", mem, cluster, time.Millisecond, MinGCTTL, "default"},
		{"memory, own", own, cluster, txn, 5 * time.Second, "key space cache's gc-ttl"},
		{"pebble, own above the cluster's", long, cluster, txn, time.Hour, "key space docs's gc-ttl"},
		{"default key space", DefaultSettings(), cluster, txn, cluster, "cluster"},
	} {
		got := c.s.GCTTLFor(c.cluster, c.txn)
		if got.TTL != c.want || !strings.Contains(got.Why, c.why) {
			t.Errorf("%s: %v (%s), want %v (%s)", c.name, got.TTL, got.Why, c.want, c.why)
		}
	}
}

// Validate takes 0 or whole milliseconds between MinGCTTL and MaxGCTTL,
// and says what is wrong in one sentence.
func TestValidateGCTTL(t *testing.T) {
	s := DefaultSettings()
	s.Name = "cache"
	for _, ok := range []time.Duration{0, MinGCTTL, 10 * time.Second, MaxGCTTL} {
		s.GCTTL = ok
		if err := s.Validate(); err != nil {
			t.Errorf("gc-ttl %v refused: %v", ok, err)
		}
	}
	for _, c := range []struct {
		ttl  time.Duration
		want string
	}{
		{-time.Second, "gc-ttl -1s must not be negative (0: the engine's default)"},
		{500 * time.Millisecond, "gc-ttl 500ms must be between 1s and 720h0m0s"},
		{MaxGCTTL + time.Hour, "must be between"},
		{time.Second + time.Microsecond, "gc-ttl 1.000001s must be whole milliseconds"},
	} {
		s.GCTTL = c.ttl
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("gc-ttl %v: %v, want one sentence naming %q", c.ttl, err, c.want)
		}
	}
	s.GCTTL = 90 * time.Second
	if got := s.String(); !strings.Contains(got, "gc-ttl=1m30s") {
		t.Errorf("String() = %q, want gc-ttl=1m30s", got)
	}
	if back := FromAPI(ToAPI(KeySpace{ID: 3, Settings: s})); back.GCTTL != s.GCTTL {
		t.Errorf("the admin API message carried gc-ttl %v as %v", s.GCTTL, back.GCTTL)
	}
}
