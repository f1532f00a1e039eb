package raftstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
)

// A write pending when its replica goes (removed by a replica change, or
// merged away) may still be committed by the other replicas, so its
// proposer answers ErrAmbiguous. RangeNotFound would tell routing that the
// write was not done here and should go to the range's new home, which
// then runs it a second time: a one-phase commit found its own write as a
// changed read and the transaction ran again (TestBankUnderFaults).
func TestWritePendingAtDestroyIsAmbiguous(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v")
	r := tc.leader(testRangeID)
	// The leader cut off, so that the write stays pending.
	tc.net.Isolate(r.store.nodeID, tc.nodes, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("w")}})
		errc <- err
	}()
	waitFor(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.mu.proposals) > 0
	})
	r.mu.Lock()
	r.store.destroyReplicaLocked(r, "a test removes it")
	r.mu.Unlock()
	if err := <-errc; !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("a write pending when its replica went: %v, want ErrAmbiguous", err)
	}
}

// pausingEngine holds up, once armed, the first read of a key containing
// key, or with snapshots the first engine snapshot, until released: a read
// that has passed its checks and not yet taken its view of the engine.
type pausingEngine struct {
	*storage.MemEngine
	key       []byte
	snapshots bool
	armed     atomic.Bool
	paused    chan struct{}
	release   chan struct{}
}

func (e *pausingEngine) pause(snapshot bool, k []byte) {
	if snapshot == e.snapshots && bytes.Contains(k, e.key) && e.armed.CompareAndSwap(true, false) {
		close(e.paused)
		<-e.release
	}
}

func (e *pausingEngine) Get(k []byte) ([]byte, bool, error) {
	e.pause(false, k)
	return e.MemEngine.Get(k)
}

func (e *pausingEngine) NewIter(lo, hi []byte) (storage.Iterator, error) {
	e.pause(false, lo)
	return e.MemEngine.NewIter(lo, hi)
}

func (e *pausingEngine) NewSnapshot() storage.Snapshot {
	e.pause(true, e.key)
	return e.MemEngine.NewSnapshot()
}

// A read that passed its checks (under the lease, or a follower read) and
// took its view of the engine only after its replica was destroyed would
// find the span cleared: "not found" for a key that exists, or a
// transaction's refresh finding no newer version. It must be refused with
// RangeNotFound instead, so that the client retries elsewhere.
func TestReadRacingDestroyIsRefused(t *testing.T) {
	key := []byte("paused-key")
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		// leaseholder: the read is on the leaseholder, else a follower;
		// versioned: the range's data layout; snapshot: the read takes an
		// engine snapshot.
		leaseholder, versioned, snapshot bool
		// read returns nil for the right answer.
		read func(*Replica) error
	}{
		{"leaseholder get", true, false, false, func(r *Replica) error {
			if _, found, err := r.Get(ctx, key, ReadOptions{}); err != nil || !found {
				return cmp.Or(err, errors.New("not found"))
			}
			return nil
		}},
		{"follower scan", false, true, false, func(r *Replica) error {
			if kvs, _, err := r.Scan(ctx, key, nil, 10, 1<<20, ReadOptions{Mode: tidekvpb.ReadMode_ANY}); err != nil || len(kvs) == 0 {
				return cmp.Or(err, errors.New("scan found nothing"))
			}
			return nil
		}},
		{"leaseholder refresh", true, true, true, func(r *Replica) error {
			err := r.RefreshReads(ctx, [][]byte{key}, hlc.Timestamp{WallTime: 1}, r.store.hlc.Now(), nil)
			var changed *ReadChangedError
			if errors.As(err, &changed) {
				return nil
			}
			return cmp.Or(err, errors.New("refresh found no newer version"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			if tt.versioned {
				tc.migrate(t, testRangeID)
			}
			tc.put(string(key), "v")
			tc.crash(3)
			eng := &pausingEngine{MemEngine: tc.engines[3], key: key, snapshots: tt.snapshot,
				paused: make(chan struct{}), release: make(chan struct{})}
			tc.startStoreOn(3, eng)
			if tt.leaseholder {
				tc.moveLease(3)
			} else {
				tc.moveLease(1)
			}
			r := tc.stores[3].GetReplica(testRangeID)
			waitFor(t, func() bool { return tt.read(r) == nil })
			eng.armed.Store(true)
			done := make(chan error, 1)
			go func() { done <- tt.read(r) }()
			select {
			case <-eng.paused:
			case <-time.After(10 * time.Second):
				t.Fatal("the read never reached the engine")
			}
			r.mu.Lock()
			r.store.destroyReplicaLocked(r, "a test removes it under a read")
			r.mu.Unlock()
			close(eng.release)
			var gone *RangeNotFoundError
			if err := <-done; !errors.As(err, &gone) {
				t.Fatalf("a read racing its replica's destruction answered: %v; want RangeNotFoundError", err)
			}
		})
	}
}
