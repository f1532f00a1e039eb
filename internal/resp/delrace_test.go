package resp

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scanHookKV runs hook once, at the first Scan from start after it is
// armed, before the scan: a command run there lands between DEL's
// deletion of a key and the clearing of its span that follows it.
type scanHookKV struct {
	*fakeKV
	start []byte
	hook  atomic.Pointer[func()]
}

func (k *scanHookKV) arm(start []byte, hook func()) {
	k.start = start
	k.hook.Store(&hook)
}

func (k *scanHookKV) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	if bytes.Equal(start, k.start) {
		if h := k.hook.Swap(nil); h != nil {
			(*h)()
		}
	}
	return k.fakeKV.Scan(ctx, start, end, limit)
}

// A collection made again at a key between DEL's deletion of it and the
// clearing of its old elements keeps every element it was given: the
// clearing stops once the key exists again, and reads agree (SCARD with
// SMEMBERS, SPOP finds the positions of a numbered set). For sets, hashes,
// lists, sorted sets and streams, through a DEL of one key, of several (one
// transaction) and a pipeline's DELs (WriteEach), with the key and its
// span in one range (guarded writes) and in two (transactions).
func TestDelClearingSparesACollectionMadeAgain(t *testing.T) {
	ctx := context.Background()
	kv := &scanHookKV{fakeKV: newFakeKV()}
	s, rc := start(t, kv, nil, nil)
	types := []struct {
		name          string
		make, makeNew func(k string) error
		check         func(t *testing.T, k string)
	}{
		{"set", func(k string) error { return rc.SAdd(ctx, k, "x", "y", "z", "w").Err() },
			func(k string) error { return rc.SAdd(ctx, k, "a", "b", "c").Err() },
			func(t *testing.T, k string) {
				eq(t, must(rc.SCard(ctx, k).Result()), int64(3))
				got := must(rc.SMembers(ctx, k).Result())
				slices.Sort(got)
				eq(t, fmt.Sprint(got), "[a b c]")
				m := must(rc.SPop(ctx, k).Result())
				if m != "a" && m != "b" && m != "c" {
					t.Fatalf("SPOP answered %q", m)
				}
				eq(t, must(rc.SCard(ctx, k).Result()), int64(2))
			}},
		{"hash", func(k string) error { return rc.HSet(ctx, k, "x", "1", "y", "2", "z", "3").Err() },
			func(k string) error { return rc.HSet(ctx, k, "a", "1", "b", "2").Err() },
			func(t *testing.T, k string) {
				eq(t, must(rc.HLen(ctx, k).Result()), int64(2))
				eq(t, fmt.Sprint(must(rc.HGetAll(ctx, k).Result())), "map[a:1 b:2]")
			}},
		{"list", func(k string) error { return rc.RPush(ctx, k, "x", "y", "z", "w").Err() },
			func(k string) error { return rc.RPush(ctx, k, "a", "b", "c").Err() },
			func(t *testing.T, k string) {
				eq(t, must(rc.LLen(ctx, k).Result()), int64(3))
				eq(t, fmt.Sprint(must(rc.LRange(ctx, k, 0, -1).Result())), "[a b c]")
			}},
		{"zset", func(k string) error {
			return rc.ZAdd(ctx, k, redis.Z{Score: 1, Member: "x"}, redis.Z{Score: 2, Member: "y"}, redis.Z{Score: 3, Member: "z"}).Err()
		},
			func(k string) error {
				return rc.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}).Err()
			},
			func(t *testing.T, k string) {
				eq(t, must(rc.ZCard(ctx, k).Result()), int64(2))
				eq(t, fmt.Sprint(must(rc.ZRange(ctx, k, 0, -1).Result())), "[a b]")
			}},
		{"stream", func(k string) error {
			return rc.XAdd(ctx, &redis.XAddArgs{Stream: k, ID: "5-1", Values: []string{"x", "1"}}).Err()
		},
			func(k string) error {
				if err := rc.XAdd(ctx, &redis.XAddArgs{Stream: k, ID: "1-1", Values: []string{"a", "1"}}).Err(); err != nil {
					return err
				}
				return rc.XAdd(ctx, &redis.XAddArgs{Stream: k, ID: "1-2", Values: []string{"b", "2"}}).Err()
			},
			func(t *testing.T, k string) {
				eq(t, must(rc.XLen(ctx, k).Result()), int64(2))
				var got []string
				for _, e := range must(rc.XRange(ctx, k, "-", "+").Result()) {
					got = append(got, e.ID+" "+fmt.Sprint(e.Values))
				}
				eq(t, fmt.Sprint(got), "[1-1 map[a:1] 1-2 map[b:2]]")
			}},
	}
	dels := []struct {
		name string
		del  func(k string) string
	}{
		{"del", func(k string) string { return fmt.Sprint(must(rc.Del(ctx, k).Result())) }},
		{"del-several", func(k string) string { return fmt.Sprint(must(rc.Del(ctx, k, k+":absent").Result())) }},
		{"pipelined", func(k string) string {
			return strings.TrimPrefix(pipeline(t, s, []string{"DEL", k}, []string{"DEL", k + ":absent"})[0], ":")
		}},
	}
	for _, split := range []bool{false, true} {
		for _, c := range types {
			for _, d := range dels {
				t.Run(fmt.Sprintf("%s/%s/split=%v", c.name, d.name, split), func(t *testing.T) {
					k := fmt.Sprintf("%s:%s:%v", c.name, d.name, split)
					kv.mu.Lock()
					kv.splitAt = nil
					if split {
						// The key and its span in different ranges: no
						// guarded write covers both.
						kv.splitAt = fieldPrefix([]byte(k))
					}
					kv.mu.Unlock()
					if err := c.make(k); err != nil {
						t.Fatal(err)
					}
					var made error
					kv.arm(fieldPrefix([]byte(k)), func() { made = c.makeNew(k) })
					got := d.del(k)
					if kv.hook.Load() != nil {
						t.Fatal("DEL did not clear the span")
					}
					if made != nil {
						t.Fatalf("making %s again during DEL: %v", k, made)
					}
					if got != "1" {
						t.Fatalf("DEL answered %s, want 1", got)
					}
					c.check(t, k)
				})
			}
		}
	}
}
