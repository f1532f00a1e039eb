package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// model is what the test has been told: the last acknowledged value of each
// key, nil for an acknowledged delete. Every write is retried until it is
// acknowledged before the next write of the same key, so the last
// acknowledged value is the only correct answer.
type model map[string][]byte

func durKey(i int) []byte { return []byte(fmt.Sprintf("dur/%05d", i)) }

// put writes key=value, retrying across failover for up to d.
func (m model) put(ctx context.Context, t *testing.T, cl *client.Client, key, value []byte, d time.Duration) {
	t.Helper()
	if err := eventually(ctx, d, func(ctx context.Context) error { return cl.Put(ctx, key, value) }); err != nil {
		t.Fatalf("put %s never acknowledged: %v", key, err)
	}
	m[string(key)] = value
}

func (m model) del(ctx context.Context, t *testing.T, cl *client.Client, key []byte, d time.Duration) {
	t.Helper()
	if err := eventually(ctx, d, func(ctx context.Context) error {
		_, err := cl.Delete(ctx, key)
		return err
	}); err != nil {
		t.Fatalf("delete %s never acknowledged: %v", key, err)
	}
	m[string(key)] = nil
}

// verify reads every key back, and scans the whole prefix to catch keys
// that should not exist.
func (m model) verify(ctx context.Context, t *testing.T, cl *client.Client, when string) {
	t.Helper()
	bad, live := 0, 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format, append([]any{when}, args...)...)
		if bad++; bad >= 10 {
			t.Fatalf("%s: giving up after %d wrong answers", when, bad)
		}
	}
	for k, want := range m {
		if want != nil {
			live++
		}
		var got []byte
		var gerr error
		err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			got, gerr = cl.Get(ctx, []byte(k))
			if errors.Is(gerr, client.ErrNotFound) {
				return nil
			}
			return gerr
		})
		switch {
		case err != nil:
			t.Fatalf("%s: get %s kept failing: %v", when, k, err)
		case want == nil && gerr == nil:
			fail("%s = %q, want deleted", k, got)
		case want != nil && gerr != nil:
			fail("%s not found, want %q", k, want)
		case !bytes.Equal(got, want):
			fail("%s = %q, want %q", k, got, want)
		}
	}
	var kvs []client.KeyValue
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) (err error) {
		kvs, err = cl.Scan(ctx, []byte("dur/"), []byte("dur0"), 0)
		return err
	}); err != nil {
		t.Fatalf("%s: scan: %v", when, err)
	}
	if len(kvs) != live {
		fail("scan returned %d keys, want %d", len(kvs), live)
	}
	for i, kv := range kvs {
		if i > 0 && bytes.Compare(kvs[i-1].Key, kv.Key) >= 0 {
			fail("scan out of order at %s", kv.Key)
		}
		if want := m[string(kv.Key)]; !bytes.Equal(kv.Value, want) {
			fail("scan: %s = %q, want %q", kv.Key, kv.Value, want)
		}
	}
	if bad == 0 {
		t.Logf("%s: all %d keys (%d live) read back correctly", when, len(m), live)
	}
}

// leaseholderIndex returns the index of the node holding the lease of
// key's range, as the meta range reports it.
func leaseholderIndex(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client, key []byte) int {
	t.Helper()
	idx := 0
	err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		resp, err := cl.Ranges(ctx)
		if err != nil {
			return err
		}
		r := rangeFor(resp, key)
		if r == nil {
			return fmt.Errorf("no range covers %q", key)
		}
		if idx = tc.IndexOf(r.GetLeaderNodeId()); idx == 0 {
			return fmt.Errorf("range %d: leaseholder node id %d is not a known node",
				r.GetDesc().GetRangeId(), r.GetLeaderNodeId())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("finding the leaseholder of %q: %v", key, err)
	}
	return idx
}

// TestDurabilityKillAndRestart checks that acknowledged writes survive the
// crash of the leaseholder, continue on the surviving quorum, and survive a
// crash of the whole cluster.
func TestDurabilityKillAndRestart(t *testing.T) {
	nkeys, rounds := 200, 1
	if long() {
		nkeys, rounds = 2000, 4
	}
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx := testCtx(t, 5*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)

	m := model{}
	for i := 0; i < nkeys; i++ {
		m.put(ctx, t, cl, durKey(i), []byte(fmt.Sprintf("v0-%d", i)), 10*time.Second)
	}
	next := nkeys
	for round := 1; round <= rounds; round++ {
		victim := leaseholderIndex(ctx, t, tc, cl, durKey(nkeys/2))
		t.Logf("round %d: killing node %d (id %d), the leaseholder", round, victim, tc.NodeID(victim))
		tc.Kill(victim)

		// The surviving two are a quorum: every write must get through
		// once a new leaseholder takes over.
		start, writes := time.Now(), next+nkeys/4
		for i := 0; i < next; i++ {
			if i%10 == round%10 {
				m.del(ctx, t, cl, durKey(i), 30*time.Second)
				continue
			}
			m.put(ctx, t, cl, durKey(i), []byte(fmt.Sprintf("v%d-%d", round, i)), 30*time.Second)
		}
		for end := next + nkeys/4; next < end; next++ {
			m.put(ctx, t, cl, durKey(next), []byte(fmt.Sprintf("v%d-%d", round, next)), 30*time.Second)
		}
		t.Logf("round %d: %d writes on two nodes took %v", round, writes, time.Since(start).Round(time.Millisecond))

		tc.Restart(victim)
		m.verify(ctx, t, cl, fmt.Sprintf("round %d, node %d restarted", round, victim))
	}

	t.Log("killing every node")
	tc.KillAll()
	tc.RestartAll()
	// A fresh client: nothing cached from before the crash helps.
	m.verify(ctx, t, newClient(t, tc.Addrs()), "after whole-cluster crash")
}
