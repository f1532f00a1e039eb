package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// TestApplyExpiry: values expire at the absolute time their command set,
// judged at each command's own timestamp, so every replica applying the
// same entries agrees; EXPIRE rewrites the live value, KEEPTTL keeps its
// expiry, a plain put clears it, and an expired key is absent to CAS.
func TestApplyExpiry(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica(eng, "a", "m", true)
	ab := newApplyBatch(eng)
	defer func() { ab.b.Close() }()
	apply := func(wall int64, cmd *tidekvpb.RaftCommand) applyResult {
		t.Helper()
		var res applyResult
		if cmd.GetCas() != nil {
			res = r.applyCASLocked(ab, at(wall, cmd))
		} else {
			res = r.applyWritesLocked(ab, at(wall, cmd))
		}
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res
	}
	view := func(wall int64, key string) (string, bool) {
		t.Helper()
		data, err := r.dataLocked(ab, at(wall, &tidekvpb.RaftCommand{}))
		if err != nil {
			t.Fatal(err)
		}
		v, found := data.get([]byte(key))
		return string(v), found
	}
	expireOp := func(k string, at int64) *tidekvpb.LogWrite {
		return &tidekvpb.LogWrite{Key: []byte(k), Expire: true, ExpiresAt: at}
	}
	apply(100, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{
		{Key: []byte("a"), Value: []byte("1"), ExpiresAt: 500}, putOp("b", "2"),
		{Key: []byte("c"), Value: []byte("3"), KeepTtl: true},
	}})
	res := apply(200, proposed(r, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{expireOp("b", 600), expireOp("l", 600)}, WantExisted: true}))
	if got := res.write.GetExisted(); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("EXPIRE of b and of a missing key: existed %v", got)
	}
	apply(300, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("a"), Value: []byte("1b"), KeepTtl: true}}})
	for _, c := range []struct {
		wall  int64
		key   string
		want  string
		found bool
	}{
		{499, "a", "1b", true}, {500, "a", "", false}, {599, "b", "2", true}, {600, "b", "", false}, {10_000, "c", "3", true},
	} {
		if v, found := view(c.wall, c.key); v != c.want || found != c.found {
			t.Errorf("%s at %d: %q, %v; want %q, %v", c.key, c.wall, v, found, c.want, c.found)
		}
	}
	// At 500 a has expired: a CAS expecting it absent succeeds, an EXPIRE
	// finds nothing, and a plain put of b clears b's TTL.
	cas := apply(500, &tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte("a"), NewValue: []byte("new")}})
	if !cas.cas.GetSucceeded() || cas.cas.GetCurrentExists() {
		t.Fatalf("CAS on an expired key: %+v", cas.cas)
	}
	apply(510, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("b", "2b")}})
	if v, found := view(10_000, "b"); v != "2b" || !found {
		t.Errorf("b after a plain put: %q, %v", v, found)
	}
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}

	// An unversioned range refuses every command using expiry, the same
	// way on every replica.
	u := bareReplica(storage.NewMem(), "a", "m", false)
	ub := newApplyBatch(u.store.eng)
	defer ub.b.Close()
	for _, w := range []*tidekvpb.LogWrite{{Key: []byte("a"), ExpiresAt: 5}, expireOp("a", 0)} {
		if res := u.applyWritesLocked(ub, at(1, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{w}})); !errors.Is(res.err, ErrLogVersion) {
			t.Errorf("unversioned apply of %v: %v", w, res.err)
		}
	}
	// keep_ttl alone is a plain put there: no value has a TTL to keep.
	if res := u.applyWritesLocked(ub, at(1, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("a"), Value: []byte("1"), KeepTtl: true}}})); res.err != nil {
		t.Errorf("unversioned put keeping a TTL: %v", res.err)
	}
}

// TestExpiryReplicated: a TTL set through the leaseholder is the same on
// every replica, and at one time the leaseholder's lease read and the
// followers' reads agree on the value, its TTL and when it is gone.
func TestExpiryReplicated(t *testing.T) {
	clock := manualclock.New(time.Unix(1_700_000_000, 0))
	tc := newTestCluster(t, 3, func(c *Config) { c.Clock = clock })
	tc.migrate(t, testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader := tc.leader(testRangeID)
	write := func(ops ...*tidekvpb.WriteOp) {
		t.Helper()
		if _, err := leader.Write(ctx, ops); err != nil {
			t.Fatal(err)
		}
	}
	write(&tidekvpb.WriteOp{Key: []byte("k"), Value: []byte("v"), TtlMs: 1000}, &tidekvpb.WriteOp{Key: []byte("p"), Value: []byte("w")})
	// agree waits for every replica to read want, then checks they all
	// read the same; the leaseholder reads under its lease.
	agree := func(key string, want Value) {
		t.Helper()
		read := func(r *Replica) Value {
			ro := anyRead
			if r == leader {
				ro = ReadOptions{}
			}
			v, err := r.GetValue(ctx, []byte(key), ro)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		same := func(v Value) bool {
			return string(v.Value) == string(want.Value) && v.Found == want.Found && v.TTL == want.TTL
		}
		for _, id := range tc.nodes {
			r := tc.stores[id].GetReplica(testRangeID)
			waitFor(t, func() bool { return same(read(r)) })
		}
	}
	agree("k", Value{Value: []byte("v"), Found: true, TTL: time.Second})
	clock.Advance(999 * time.Millisecond)
	agree("k", Value{Value: []byte("v"), Found: true, TTL: time.Millisecond})
	clock.Advance(time.Millisecond)
	agree("k", Value{})
	for _, id := range tc.nodes {
		if got := scanAll(t, tc.stores[id].GetReplica(testRangeID)); got != "p=w" {
			t.Errorf("node %d scans %s after k expired", id, got)
		}
	}

	write(&tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_EXPIRE, Key: []byte("p"), TtlMs: 2000})
	agree("p", Value{Value: []byte("w"), Found: true, TTL: 2 * time.Second})
	// A bounded read on a follower agrees too, once the follower has
	// applied the entry a published closed timestamp names.
	for _, id := range tc.nodes {
		if r := tc.stores[id].GetReplica(testRangeID); r != leader {
			waitFor(t, func() bool {
				tc.publishClosed()
				v, err := r.GetValue(ctx, []byte("p"), bounded(time.Hour))
				return err == nil && v.TTL == 2*time.Second
			})
		}
	}
	write(&tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_EXPIRE, Key: []byte("p")})
	agree("p", Value{Value: []byte("w"), Found: true})

	// An absolute expiry is stored as it is; one already past leaves the
	// key absent.
	nowMs := clock.Now().UnixMilli()
	write(&tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_EXPIRE, Key: []byte("p"), ExpireAtMs: nowMs + 500})
	agree("p", Value{Value: []byte("w"), Found: true, TTL: 500 * time.Millisecond})
	write(&tidekvpb.WriteOp{Key: []byte("q"), Value: []byte("v"), ExpireAtMs: nowMs - 1})
	agree("q", Value{})
}

// TestExpiryNeedsLogVersion: below log version 5 a TTL is refused at
// proposal, before it reaches the log; invalid TTLs always are.
func TestExpiryNeedsLogVersion(t *testing.T) {
	tc := newTestCluster(t, 1, func(c *Config) { c.InitialLogVersion = LogVersionMVCC })
	tc.migrate(t, testRangeID)
	r := tc.leader(testRangeID)
	ctx := context.Background()
	for _, op := range []*tidekvpb.WriteOp{{Key: []byte("k"), TtlMs: 5}, {Key: []byte("k"), ExpireAtMs: 5}, {Kind: tidekvpb.WriteOp_EXPIRE, Key: []byte("k")}} {
		if _, err := r.Write(ctx, []*tidekvpb.WriteOp{op}); !errors.Is(err, ErrLogVersion) {
			t.Errorf("write %v at log version 4: %v", op, err)
		}
	}
	// HSET and INCR keep a TTL, and must work while the cluster upgrades.
	if _, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), KeepTtl: true}}); err != nil {
		t.Errorf("a put keeping the TTL at log version 4: %v", err)
	}
	if _, err := r.CompareAndSet(ctx, &tidekvpb.CompareAndSetRequest{Key: []byte("k"), TtlMs: 5}); !errors.Is(err, ErrLogVersion) {
		t.Errorf("CAS with a TTL at log version 4: %v", err)
	}
	for _, op := range []*tidekvpb.WriteOp{
		{Key: []byte("k"), TtlMs: -1}, {Key: []byte("k"), TtlMs: 1, KeepTtl: true}, {Kind: tidekvpb.WriteOp_EXPIRE, Key: []byte("k"), Value: []byte("v")},
		{Key: []byte("k"), ExpireAtMs: -1}, {Key: []byte("k"), TtlMs: 1, ExpireAtMs: 1}, {Key: []byte("k"), ExpireAtMs: 1, KeepTtl: true},
		{Kind: 7, Key: []byte("k")},
	} {
		if _, err := r.Write(ctx, []*tidekvpb.WriteOp{op}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("write %v: %v, want an invalid request", op, err)
		}
	}
}
