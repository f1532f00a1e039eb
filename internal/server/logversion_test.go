package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// logVersions are the versions the nodes' stores propose at.
func (tc *testCluster) logVersions() []uint32 {
	var out []uint32
	for _, s := range tc.nodes {
		if s != nil {
			out = append(out, s.store.LogVersion())
		}
	}
	return out
}

func (tc *testCluster) waitLogVersion(t testing.TB, want uint32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, v := range tc.logVersions() {
			ok = ok && v == want
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("log versions %v, want every node at %d", tc.logVersions(), want)
}

// restartOnNewBinary restarts node i on its data with a binary that
// applies the latest log version.
func (tc *testCluster) restartOnNewBinary(ctx context.Context, t *testing.T, i int) {
	t.Helper()
	tc.nodes[i].Stop()
	cfg := tc.cfgs[i]
	cfg.Raft.MaxLogVersion = raftstore.LatestLogVersion
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.nodes[i] = s
}

// guardedWrite runs a guarded write at the leaseholder of key.
func (tc *testCluster) guardedWrite(ctx context.Context, key string) error {
	for _, s := range tc.nodes {
		if r := s.store.LookupKey([]byte(key)); r != nil && r.IsLeader() {
			_, err := r.WriteGuarded(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_PUT, Key: []byte(key + "/f"), Value: []byte("v")}},
				&tidekvpb.WriteGuard{Key: []byte(key), Value: []byte("h")}, false)
			return err
		}
	}
	return errors.New("no leaseholder for " + key)
}

// A cluster with one node on a binary that applies only log version 1 stays
// there: no shared entries, and guarded writes are refused with a reason.
// Once that node runs a binary that applies version 2 the cluster moves,
// says so in an event, and guarded writes work.
func TestLogVersionWaitsForEveryNode(t *testing.T) {
	i := 0
	tc := startClusterWith(t, 3, func(c *Config) {
		// Node 1 restarts below with its data; nodes on in-memory engines
		// cannot send it snapshots (their SSTs are the memory engine's).
		c.InMemory = false
		// The old binary is the first node: were it a later one, the
		// nodes before it could raise the version before it joins, and
		// it would (rightly) be refused at its join.
		if i++; i == 1 {
			c.Raft.MaxLogVersion = raftstore.LogVersionBase
		}
	})
	tc.waitReplicated(tc.client(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Heartbeats run every 100 ms: give them time to (wrongly) move.
	time.Sleep(time.Second)
	tc.waitLogVersion(t, raftstore.LogVersionBase)
	if err := tc.guardedWrite(ctx, "h1"); !errors.Is(err, raftstore.ErrLogVersion) || !strings.Contains(err.Error(), "needs log version 2") {
		t.Fatalf("guarded write with an old node: %v, want ErrLogVersion", err)
	}

	// The old node comes back on a new binary.
	tc.restartOnNewBinary(ctx, t, 0)
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	// The restart may still be moving leadership: a write finds none, or
	// one that steps down under it.
	eventually(t, 10*time.Second, "a guarded write after the upgrade", func() error { return tc.guardedWrite(ctx, "h1") })
	tc.waitEvents(t, [3]string{"log-version", fmt.Sprintf("raised from 1 to %d", raftstore.LatestLogVersion), "cluster"})
}

// A node whose binary is older than the cluster's log version is refused
// when it joins, and says why.
func TestJoinRefusedBelowLogVersion(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	cfg := testConfig(t)
	cfg.Join = []string{tc.nodes[0].Addr()}
	cfg.Raft.MaxLogVersion = raftstore.LogVersionBase
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err == nil {
		s.Stop()
		t.Fatalf("a node applying only log version 1 joined a cluster at version %d", raftstore.LatestLogVersion)
	}
	if want := fmt.Sprintf("applies Raft log version 1 and the cluster runs at %d", raftstore.LatestLogVersion); !strings.Contains(err.Error(), "join refused") || !strings.Contains(err.Error(), want) {
		t.Fatalf("join of an old node: %v", err)
	}
}

// layouts reports, per node, which local user ranges are versioned.
func (tc *testCluster) layouts() (versioned, unversioned []string) {
	for _, s := range tc.nodes {
		for _, r := range s.store.Replicas() {
			if r.RangeID() == keys.MetaRangeID {
				continue
			}
			name := fmt.Sprintf("n%d/r%d", s.id.node, r.RangeID())
			if r.VersionedLayout() {
				versioned = append(versioned, name)
			} else {
				unversioned = append(unversioned, name)
			}
		}
	}
	return versioned, unversioned
}

// A cluster at log version 3 (one node's binary applies no more) keeps
// every range's data unversioned, and the Redis front end refuses TTLs but
// not what keeps one (INCR); raised to 4 or later (here straight to the
// latest), every user range moves to the versioned layout on every
// replica, the data reads the same, and TTLs work.
func TestLogVersionRaisedToMVCC(t *testing.T) {
	i := 0
	tc := startClusterWith(t, 3, func(c *Config) {
		c.InMemory = false // node 1 restarts on its data (see above)
		c.Redis.ListenAddr = "127.0.0.1:0"
		if i++; i == 1 {
			c.Raft.MaxLogVersion = raftstore.LogVersionDirectory
		}
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string]string{}
	for i := range 100 {
		k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d", i)
		if err := c.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	if _, err := c.Split(ctx, []byte("k050")); err != nil {
		t.Fatal(err)
	}
	tc.waitReplicated(c, 3)
	tc.waitLogVersion(t, raftstore.LogVersionDirectory)
	time.Sleep(time.Second) // reports and heartbeats: time to (wrongly) migrate
	if v, _ := tc.layouts(); len(v) != 0 {
		t.Fatalf("ranges versioned at log version 3: %v", v)
	}
	rdb := redis.NewClient(&redis.Options{Addr: tc.nodes[2].RedisAddr()})
	defer rdb.Close()
	if err := rdb.Set(ctx, "e", "v", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "has not finished upgrading") {
		t.Fatalf("SET EX at log version 3: %v", err)
	}
	if n, err := rdb.Incr(ctx, "cnt").Result(); err != nil || n != 1 {
		t.Fatalf("INCR at log version 3: %d, %v", n, err)
	}

	tc.restartOnNewBinary(ctx, t, 0)
	tc.waitLogVersion(t, raftstore.LatestLogVersion) // 4 and beyond: the new binary applies them all
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, u := tc.layouts()
		if len(u) == 0 && len(v) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every range migrated: versioned %v, unversioned %v", v, u)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k, v := range want {
		if got, err := c.Get(ctx, []byte(k)); err != nil || string(got) != v {
			t.Fatalf("%s after the migration: %q, %v; want %q", k, got, err, v)
		}
	}
	if err := c.Put(ctx, []byte("k010"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	kvs, err := c.Scan(ctx, []byte("k000"), []byte("k100"), 1000)
	if err != nil || len(kvs) != len(want) || string(kvs[10].Value) != "new" {
		t.Fatalf("scan after the migration: %d keys (%v), want %d with k010 = new", len(kvs), err, len(want))
	}
	if err := rdb.Set(ctx, "e", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET EX after the upgrade: %v", err)
	}
	if d, err := rdb.TTL(ctx, "e").Result(); err != nil || d != time.Minute {
		t.Fatalf("TTL after the upgrade: %v, %v", d, err)
	}
}

// A cluster its first node's binary bootstraps starts at the newest log
// version that binary applies, with its first range on the versioned
// layout, and a node that joins starts at the cluster's version: reads at
// a timestamp and transactions work as soon as the nodes have started, at
// every node, with no heartbeat or migration in between.
func TestNewClusterStartsAtLatestLogVersion(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			tc := startCluster(t, n)
			if got := tc.logVersions(); len(got) != n || slices.ContainsFunc(got, func(v uint32) bool { return v != raftstore.LatestLogVersion }) {
				t.Fatalf("log versions %v right after the start, want every node at %d", got, raftstore.LatestLogVersion)
			}
			if v, u := tc.layouts(); len(v) == 0 || len(u) != 0 {
				t.Fatalf("right after the start: versioned ranges %v, unversioned %v", v, u)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, s := range tc.nodes {
				c := tc.client(func(c *client.Config) { c.Addrs = []string{s.Addr()} })
				k := []byte(fmt.Sprintf("fresh/%d", i))
				if err := c.Put(ctx, k, []byte("v1")); err != nil {
					t.Fatalf("node %d: put: %v", i+1, err)
				}
				before := c.Now()
				if err := c.Put(ctx, k, []byte("v2")); err != nil {
					t.Fatalf("node %d: put: %v", i+1, err)
				}
				if v, err := c.Get(ctx, k, client.ReadAt(before)); err != nil || string(v) != "v1" {
					t.Fatalf("node %d: read at a timestamp: %q, %v; want v1", i+1, v, err)
				}
				if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, k, []byte("txn")) }); err != nil {
					t.Fatalf("node %d: transaction: %v", i+1, err)
				}
				if v, err := c.Get(ctx, k); err != nil || string(v) != "txn" {
					t.Fatalf("node %d: after the transaction: %q, %v", i+1, v, err)
				}
			}
		})
	}
}
