package raftstore

import (
	"context"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestZZStaleLeaseRead(t *testing.T) {
	lc := newLinzCluster(t, 3)
	for round := 0; round < 10; round++ {
		l := lc.waitLeader(t)
		old := lc.replica(l)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if _, err := old.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("before")}}); err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(time.Duration(round*13%100) * time.Millisecond)
		start := time.Now()
		lc.isolate(l)
		for time.Since(start) < 400*time.Millisecond {
			ls := lc.leaders()
			if len(ls) > 1 && old.IsLeader() {
				var nw *Replica
				for _, r := range ls {
					if r != old {
						nw = r
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, werr := nw.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("after")}})
				v, found, rerr := old.Get(ctx, []byte("k"))
				cancel()
				t.Logf("round %d at %v: write on new leader: %v; then read on old leader (still leader: %v): %q %v %v",
					round, time.Since(start), werr, old.IsLeader(), v, found, rerr)
				break
			}
			time.Sleep(time.Millisecond)
		}
		lc.heal()
		time.Sleep(300 * time.Millisecond)
	}
}
