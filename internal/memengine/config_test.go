package memengine

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, idx := range []Index{BTree, ExtendibleHash, CountingBloom} {
		c := DefaultConfig()
		c.Index = idx
		if _, err := New(c); err != nil {
			t.Errorf("index %s: %v", idx, err)
		}
	}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Index = "lsm" }, `unknown index "lsm"`},
		{func(c *Config) { c.Index = "" }, `unknown index ""`},
		{func(c *Config) { c.BucketRecords = 0 }, "records per bucket must be between 8 and 65536, got 0"},
		{func(c *Config) { c.BucketRecords = -5 }, "got -5"},
		{func(c *Config) { c.BucketRecords = 7 }, "got 7"},
		{func(c *Config) { c.BucketRecords = 1 << 20 }, "records per bucket"},
		{func(c *Config) { c.CBFCounters = 0 }, "counting Bloom filter needs between 64 and 4294967296 counters, got 0"},
		{func(c *Config) { c.CBFCounters = 1<<32 + 1 }, "counters"},
		{func(c *Config) { c.CBFHashes = 0 }, "between 1 and 16 hashes a key, got 0"},
		{func(c *Config) { c.CBFHashes = 17 }, "got 17"},
	} {
		c := DefaultConfig()
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want it to say %q", c, err, tc.want)
			continue
		}
		if strings.Count(err.Error(), ". ") > 0 || strings.Contains(err.Error(), "\n") {
			t.Errorf("not one sentence: %q", err)
		}
		if e, err := New(c); err == nil || e != nil {
			t.Errorf("%+v: New accepted it", c)
		}
	}
}
