package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The stored layouts of the Redis front end's sets and sorted sets
// (internal/resp, docs/redis.md), as the keys hold them; the default key
// space stores a Redis key as it is.
var (
	setMetaPrefix  = []byte("\xffTideKV:set\x00\x01\xfe")
	zsetMetaPrefix = []byte("\xffTideKV:zset\x00\x01\xfe")
)

// setLayout is what the store holds for set k: its count, whether the
// metadata says numbered (the word after the count is 1), how many member
// keys have an empty value (a set not numbered) or an 8-byte position,
// and how many position keys there are.
type setLayout struct {
	count, numbered               uint64
	emptyMembers, posMembers, pos int
}

func readSetLayout(ctx context.Context, t *testing.T, c *client.Client, k string) setLayout {
	t.Helper()
	// One snapshot, read in a transaction: it waits out the intents of
	// the command just written, as Txn runs again when they outlast the
	// wait (a plain scan answers "retry" then).
	var kvs []client.KeyValue
	err := c.Txn(ctx, func(tx *client.Tx) error {
		kvs = nil
		for from := []byte(k); ; {
			page, err := tx.Scan(ctx, from, []byte(k+"\x00\x02"), 10_000)
			if err != nil {
				return err
			}
			if kvs = append(kvs, page...); len(page) < 10_000 {
				return nil
			}
			from = append(bytes.Clone(page[len(page)-1].Key), 0)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) == 0 || string(kvs[0].Key) != k || !bytes.HasPrefix(kvs[0].Value, setMetaPrefix) || len(kvs[0].Value) != len(setMetaPrefix)+32 {
		t.Fatalf("%s: no set metadata first in %d keys", k, len(kvs))
	}
	m := kvs[0].Value[len(setMetaPrefix):]
	gen := binary.BigEndian.Uint64(m)
	l := setLayout{count: binary.BigEndian.Uint64(m[16:]), numbered: binary.BigEndian.Uint64(m[24:])}
	members := k + "\x00\x01" + string(binary.BigEndian.AppendUint64(nil, gen))
	positions := k + "\x00\x01" + string(binary.BigEndian.AppendUint64(nil, gen^1<<63))
	for _, kv := range kvs[1:] {
		switch key := string(kv.Key); {
		case strings.HasPrefix(key, members) && len(kv.Value) == 0:
			l.emptyMembers++
		case strings.HasPrefix(key, members) && len(kv.Value) == 8:
			l.posMembers++
		case strings.HasPrefix(key, positions):
			l.pos++
		default:
			t.Fatalf("%s: key %q = %q is neither a member nor a position", k, key, kv.Value)
		}
	}
	return l
}

// zsetMeta is sorted set z's metadata as stored.
func zsetMeta(ctx context.Context, t *testing.T, c *client.Client, z string) []byte {
	t.Helper()
	var v []byte
	err := c.Txn(ctx, func(tx *client.Tx) (err error) { // as readSetLayout
		v, err = tx.Get(ctx, []byte(z))
		return err
	})
	if err != nil || !bytes.HasPrefix(v, zsetMetaPrefix) {
		t.Fatalf("%s: %q, %v; want a sorted set's metadata", z, v, err)
	}
	return v
}

// TestRedisLayoutsFollowLogVersion: while one node's binary applies only
// log version 12, whose Redis front end would break a set's member
// positions and read a sorted set's metadata with a start hint as a
// string, every node's front end writes sets and sorted sets as that
// binary does: member keys with empty values and no positions, sorted-set
// metadata of the marker and count alone, also after ZPOPMIN; an SADD of
// 9,999 new members fits a transaction. Once that node runs the new binary
// and the cluster is at 13, new sets are numbered, a small set written
// before is numbered by its next write, ZPOPMIN sets a start hint, and an
// SADD's new members are at most 4,999 (a member and its position).
func TestRedisLayoutsFollowLogVersion(t *testing.T) {
	const older = raftstore.LogVersionSetPositions - 1
	i := 0
	tc := startClusterWith(t, 3, func(c *Config) {
		c.InMemory = false // node 1 restarts on its data (TestLogVersionWaitsForEveryNode)
		c.Redis.ListenAddr = "127.0.0.1:0"
		if i++; i == 1 {
			c.Raft.MaxLogVersion = older
		}
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	tc.waitLogVersion(t, older)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	redisAt := func(i int) *redis.Client {
		r := redis.NewClient(&redis.Options{Addr: tc.nodes[i].RedisAddr(), MaxRetries: -1, ReadTimeout: 30 * time.Second})
		t.Cleanup(func() { r.Close() })
		return r
	}
	must := func(cmd redis.Cmder) {
		t.Helper()
		if err := cmd.Err(); err != nil {
			t.Fatalf("%v: %v", cmd.Args(), err)
		}
	}
	bigAdd := func(r *redis.Client, k string, n int) error {
		args := []any{"SADD", k}
		for j := range n {
			args = append(args, fmt.Sprintf("m%05d", j))
		}
		return r.Do(ctx, args...).Err()
	}

	// Each node's front end at 12, the new binaries' too.
	for i := range tc.nodes {
		r := redisAt(i)
		k, z := fmt.Sprintf("s%d", i), fmt.Sprintf("z%d", i)
		must(r.SAdd(ctx, k, "a", "b", "c", "d"))
		must(r.SRem(ctx, k, "b"))
		must(r.SPop(ctx, k))
		must(r.SAdd(ctx, k, "e"))
		must(r.ZAdd(ctx, z, redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 3, Member: "c"}))
		must(r.ZPopMin(ctx, z))
		must(r.ZAdd(ctx, z, redis.Z{Score: 0, Member: "x"}))
		l := readSetLayout(ctx, t, c, k)
		if l != (setLayout{count: 3, emptyMembers: 3}) {
			t.Fatalf("node %d at log version %d: set %s stored as %+v, want 3 members with empty values, not numbered, no positions", i+1, older, k, l)
		}
		if m := zsetMeta(ctx, t, c, z); len(m) != len(zsetMetaPrefix)+8 {
			t.Fatalf("node %d at log version %d: sorted set metadata %q, want the marker and count alone", i+1, older, m)
		}
		if got, err := r.ZRange(ctx, z, 0, -1).Result(); err != nil || strings.Join(got, " ") != "x b c" {
			t.Fatalf("ZRANGE %s: %v, %v", z, got, err)
		}
	}
	r := redisAt(2)
	if err := bigAdd(r, "big", 9999); err != nil {
		t.Fatalf("SADD of 9,999 new members at log version %d: %v", older, err)
	}
	if l := readSetLayout(ctx, t, c, "big"); l != (setLayout{count: 9999, emptyMembers: 9999}) {
		t.Fatalf("SADD of 9,999 at log version %d: %+v", older, l)
	}

	tc.restartOnNewBinary(ctx, t, 0)
	tc.waitLogVersion(t, raftstore.LatestLogVersion) // 13 and beyond: the layouts below come with 13
	for i := range tc.nodes {
		r := redisAt(i)
		k, z, n := fmt.Sprintf("s%d", i), fmt.Sprintf("z%d", i), fmt.Sprintf("n%d", i)
		// Written at 12, small: numbered by this write.
		must(r.SAdd(ctx, k, "f"))
		must(r.SAdd(ctx, n, "a", "b", "c"))
		must(r.SRem(ctx, n, "a"))
		for _, k := range []string{k, n} {
			l := readSetLayout(ctx, t, c, k)
			if l.numbered != 1 || l.emptyMembers != 0 || uint64(l.posMembers) != l.count || uint64(l.pos) != l.count {
				t.Fatalf("node %d at log version %d: set %s stored as %+v, want numbered", i+1, raftstore.LogVersionSetPositions, k, l)
			}
		}
		must(r.ZPopMin(ctx, z))
		if m := zsetMeta(ctx, t, c, z); len(m) <= len(zsetMetaPrefix)+8 {
			t.Fatalf("node %d at log version %d: ZPOPMIN left metadata %q without a start hint", i+1, raftstore.LogVersionSetPositions, m)
		}
		if got, err := r.ZRange(ctx, z, 0, -1).Result(); err != nil || strings.Join(got, " ") != "b c" {
			t.Fatalf("ZRANGE %s: %v, %v", z, got, err)
		}
	}
	r = redisAt(2)
	if err := bigAdd(r, "big2", 5000); err == nil || !strings.Contains(err.Error(), "over its limits of 10000 keys") {
		t.Fatalf("SADD of 5,000 new members at log version %d: %v, want the transaction's limit", raftstore.LogVersionSetPositions, err)
	}
	if err := bigAdd(r, "big2", 4999); err != nil {
		t.Fatalf("SADD of 4,999 new members at log version %d: %v", raftstore.LogVersionSetPositions, err)
	}
}
