package ksconfig

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
)

func TestValidate(t *testing.T) {
	ok := DefaultSettings()
	ok.Name = "cache"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"http://origin:8080/v", "https://origin"} {
		s := ok
		s.MissHandler = h
		if err := s.Validate(); err != nil {
			t.Errorf("miss handler %q refused: %v", h, err)
		}
	}
	grow := ok
	grow.OnFull, grow.CapacityPerNode = Grow, 1<<30
	if err := grow.Validate(); err != nil {
		t.Errorf("on-full grow with a capacity refused: %v", err)
	}
	for _, c := range []struct {
		mut  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.Name = "Bad Name" }, "name"},
		{func(s *Settings) { s.Name = "" }, "name"},
		{func(s *Settings) { s.Mode = "sorted" }, `unknown mode "sorted"`},
		{func(s *Settings) { s.Engine = "rocks" }, `unknown engine "rocks"`},
		{func(s *Settings) { s.Index = "btree" }, "memory engine only"},
		{func(s *Settings) { s.Engine, s.Index = Memory, "trie" }, `unknown index "trie"`},
		{func(s *Settings) { s.RF = -1 }, "replication factor -1"},
		{func(s *Settings) { s.RF = 9 }, "replication factor 9"},
		{func(s *Settings) { s.TTL = -time.Second }, "must not be negative"},
		{func(s *Settings) { s.TTL = time.Microsecond }, "whole milliseconds"},
		{func(s *Settings) { s.MissHandler = "ftp://origin/x" }, `miss handler "ftp://origin/x" must be an http or https URL`},
		{func(s *Settings) { s.MissHandler = "origin:8080" }, "must be an http or https URL"},
		{func(s *Settings) { s.MissHandler = "http:///path" }, "with a host"},
		{func(s *Settings) { s.MissHandler = "http://origin/v?x=1" }, "no query"},
		{func(s *Settings) { s.OnFull = "spill" }, `unknown on-full "spill"`},
		{func(s *Settings) { s.OnFull = "" }, `unknown on-full ""`},
		{func(s *Settings) { s.OnFull = Grow }, "on-full grow needs a capacity per node"},
	} {
		s := ok
		c.mut(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %q", s, err, c.want)
		}
	}
}

func TestCatalogue(t *testing.T) {
	c := NewCatalogue([]KeySpace{{ID: 2, Settings: Settings{Name: "b", Mode: keyspace.Hashed}}, {ID: 1, Settings: Settings{Name: "a", Mode: keyspace.Ordered}}})
	if k, ok := c.ByName("b"); !ok || k.ID != 2 {
		t.Errorf("ByName(b) = %+v, %v", k, ok)
	}
	if k, ok := c.ByID(0); !ok || k.Name != keyspace.DefaultName {
		t.Errorf("ByID(0) = %+v, %v", k, ok)
	}
	if _, ok := c.ByID(3); ok {
		t.Error("ByID(3) found a key space")
	}
	s := DefaultSettings()
	s.Name = "a"
	if err := c.CheckNew(s); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("CheckNew of an existing name: %v", err)
	}
	s.Name = keyspace.DefaultName
	if err := c.CheckNew(s); err == nil {
		t.Error("CheckNew accepted the default key space's name")
	}
	b := c.Boundaries()
	want := append([][]byte{{0xff, 0xff}, keyspace.Prefix(1), keyspace.Prefix(2)}, append(keyspace.HashSliceStarts(2), keyspace.Prefix(3))...)
	if len(b) != len(want) {
		t.Fatalf("Boundaries = %x", b)
	}
	for i := range b {
		if !bytes.Equal(b[i], want[i]) {
			t.Errorf("boundary %d = %x, want %x", i, b[i], want[i])
		}
	}
	// Key space 2 is hashed: its slices are equal spans of hash values.
	starts := keyspace.HashSliceStarts(2)
	if len(starts) != keyspace.HashSlices-1 || !bytes.Equal(starts[0], append(keyspace.Prefix(2), 0x20, 0, 0, 0, 0, 0, 0, 0)) ||
		!bytes.Equal(starts[keyspace.HashSlices-2], append(keyspace.Prefix(2), 0xe0, 0, 0, 0, 0, 0, 0, 0)) {
		t.Errorf("hash slice starts = %x", starts)
	}
	if len(Catalogue(nil).Boundaries()) != 0 {
		t.Error("an empty catalogue splits ranges")
	}
}
