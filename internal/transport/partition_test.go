package transport

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestPartitionSets(t *testing.T) {
	var nilP *Partition
	if nilP.Blocked(2) || nilP.String() != "none" {
		t.Fatal("a nil partition must cut nothing")
	}
	p := &Partition{}
	p.Cut([]uint64{3, 2, 3})
	if !p.Blocked(2) || !p.Blocked(3) || p.Blocked(1) || p.String() != "2,3" {
		t.Fatalf("cut 2,3: blocked(1..3)=%v,%v,%v %q", p.Blocked(1), p.Blocked(2), p.Blocked(3), p)
	}
	p.Isolate()
	if !p.Blocked(1) || !p.Blocked(99) || p.String() != "all" {
		t.Fatalf("isolated: %q", p)
	}
	p.Cut(nil)
	if p.Blocked(2) || p.String() != "none" {
		t.Fatalf("cut of nothing must heal: %q", p)
	}
}

// noMessage fails if ch yields a message within a short wait.
func noMessage(t *testing.T, ch <-chan *tidekvpb.RaftMessage, what string) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("%s: got %v", what, m)
	case <-time.After(200 * time.Millisecond):
	}
}

// A node whose partition cuts a peer neither sends to nor accepts from it
// (so cutting one side is a two-way partition), snapshots included; other
// peers are unaffected, and healing restores the link.
func TestGRPCPartitionCutsBothWaysAndHeals(t *testing.T) {
	book := &addrBook{}
	h1, h2, h3 := newRecorder(), newRecorder(), newRecorder()
	cfg := DefaultConfig()
	cfg.Partition = &Partition{}
	t1 := startNode(t, cfg, book, 1, h1)
	t2 := startNode(t, DefaultConfig(), book, 2, h2)
	t3 := startNode(t, DefaultConfig(), book, 3, h3)
	cfg.Partition.Cut([]uint64{2})

	if !t1.Send(msg(1, 1, 2, 1)) {
		t.Fatal("a send into a partition must look sent (the sender is not told)")
	}
	t2.Send(msg(1, 2, 1, 2))
	noMessage(t, h2.msgs, "1 -> 2 across the partition")
	noMessage(t, h1.msgs, "2 -> 1 across the partition")
	err := t1.SendSnapshot(context.Background(), snapHeader(), bytes.NewReader([]byte("sst")))
	if err == nil || !strings.Contains(err.Error(), "partition") {
		t.Fatalf("snapshot 1 -> 2 across the partition: %v", err)
	}
	back := snapHeader()
	back.FromNodeId, back.ToNodeId = 2, 1
	if err := t2.SendSnapshot(context.Background(), back, bytes.NewReader([]byte("sst"))); err == nil {
		t.Fatal("snapshot 2 -> 1 across the partition was accepted")
	}

	t1.Send(msg(1, 1, 3, 3))
	t3.Send(msg(1, 3, 1, 4))
	if m := receive(t, h3.msgs, 1)[0]; m.GetMessage().GetIndex() != 3 {
		t.Fatalf("1 -> 3 outside the partition: %v", m)
	}
	if m := receive(t, h1.msgs, 1)[0]; m.GetMessage().GetIndex() != 4 {
		t.Fatalf("3 -> 1 outside the partition: %v", m)
	}

	cfg.Partition.Heal()
	t1.Send(msg(1, 1, 2, 5))
	t2.Send(msg(1, 2, 1, 6))
	if m := receive(t, h2.msgs, 1)[0]; m.GetMessage().GetIndex() != 5 {
		t.Fatalf("1 -> 2 after healing: %v", m)
	}
	if m := receive(t, h1.msgs, 1)[0]; m.GetMessage().GetIndex() != 6 {
		t.Fatalf("2 -> 1 after healing: %v", m)
	}
	if err := t1.SendSnapshot(context.Background(), snapHeader(), bytes.NewReader([]byte("sst"))); err != nil {
		t.Fatalf("snapshot after healing: %v", err)
	}
}
