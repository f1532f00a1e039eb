package resp

import (
	"context"
	"fmt"
	"testing"

	"github.com/tidekv/tidekv/internal/testutil/redisdiff"
)

// TestAsRedisInSmallPages is TestAsRedis with eight keys a scan and a
// write (the most a script's command pushes, with the metadata), so that
// the list searches (LPOS, LREM, LINSERT) cross page boundaries in the
// longer lists of the scripts and drawn sequences.
func TestAsRedisInSmallPages(t *testing.T) {
	kv := asRedisKV()
	s, _ := start(t, kv, func(c *Config) { c.MaxBatchKeys, c.Now = 8, kv.clock.Now }, nil)
	redisdiff.Check(t, s.Addr().String())
}

// TestCollectionReadsItsSpan: LRANGE of ten elements of a long list
// scans ten element keys, LINDEX and SISMEMBER read a key or two, and
// LLEN and SCARD read the metadata alone, whatever the collection's size.
func TestCollectionReadsItsSpan(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	const n = 5000
	elems := make([]any, n)
	for i := range elems {
		elems[i] = fmt.Sprint(i)
	}
	if err := rc.RPush(ctx, "l", elems...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.SAdd(ctx, "s", elems...).Err(); err != nil {
		t.Fatal(err)
	}
	cost := func(name string, want int, f func() error) {
		t.Helper()
		kv.mu.Lock()
		kv.scanned = 0
		kv.mu.Unlock()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		kv.mu.Lock()
		defer kv.mu.Unlock()
		if kv.scanned != want {
			t.Errorf("%s scanned %d keys, want %d", name, kv.scanned, want)
		}
	}
	cost("LRANGE l 100 109", 10, func() error {
		got, err := rc.LRange(ctx, "l", 100, 109).Result()
		if err == nil && (len(got) != 10 || got[0] != "100" || got[9] != "109") {
			err = fmt.Errorf("LRANGE answered %v", got)
		}
		return err
	})
	cost("LRANGE l -10 -1", 10, func() error { return rc.LRange(ctx, "l", -10, -1).Err() })
	cost("LINDEX l 4000", 0, func() error { return rc.LIndex(ctx, "l", 4000).Err() })
	cost("LLEN l", 0, func() error { return rc.LLen(ctx, "l").Err() })
	cost("LPOP l 3", 0, func() error { return rc.LPopCount(ctx, "l", 3).Err() })
	cost("SISMEMBER s 42", 0, func() error { return rc.SIsMember(ctx, "s", "42").Err() })
	cost("SCARD s", 0, func() error { return rc.SCard(ctx, "s").Err() })
	cost("SREM s 42", 0, func() error { return rc.SRem(ctx, "s", "42").Err() })
	cost("SSCAN s 0 COUNT 10", 10, func() error { return rc.SScan(ctx, "s", 0, "", 10).Err() })
}
