package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
)

// The client keeps one hybrid logical clock: its Batch messages carry it,
// and a node's answer moves it on, unless the node's timestamp lies beyond
// the maximum offset ahead; a node that sends none (an older binary)
// leaves it alone.
func TestClientClockFollowsAnswers(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	cl := c.newClient(nil)
	n := c.node(1)
	ctx := context.Background()
	get := func() {
		t.Helper()
		if _, err := cl.Get(ctx, []byte("k")); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	get()
	n.mu.Lock()
	saw := n.sawHLC
	n.mu.Unlock()
	if saw.IsZero() {
		t.Fatal("the client's Batch message carried no HLC")
	}

	ahead := hlc.Timestamp{WallTime: time.Now().Add(100 * time.Millisecond).UnixNano(), Logical: 7}
	n.mu.Lock()
	n.hlc = ahead
	n.mu.Unlock()
	get()
	if now := cl.clock.Now(); !ahead.Less(now) {
		t.Fatalf("client clock %s after an answer at %s, want it past", now, ahead)
	}

	far := hlc.Timestamp{WallTime: time.Now().Add(time.Hour).UnixNano()}
	n.mu.Lock()
	n.hlc = far
	n.mu.Unlock()
	get()
	if now := cl.clock.Now(); !now.Less(far) {
		t.Fatalf("client clock %s adopted a timestamp an hour ahead", now)
	}
}
