package gossip

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	var ms Membership = NewFake()
	f := ms.(*Fake)
	if got := ms.Members(); len(got) != 0 {
		t.Fatalf("empty fake: %+v", got)
	}
	t0 := time.Unix(100, 0)
	f.Set(3, Alive, t0)
	f.Put(Member{NodeID: 1, GRPCAddr: "g1", GossipAddr: "a1", State: Alive, Since: t0})
	f.Set(1, Dead, t0.Add(time.Second)) // keeps the addresses
	f.Set(2, Left, t0)
	got := ms.Members()
	want := []Member{
		{NodeID: 1, GRPCAddr: "g1", GossipAddr: "a1", State: Dead, Since: t0.Add(time.Second)},
		{NodeID: 2, State: Left, Since: t0},
		{NodeID: 3, State: Alive, Since: t0},
	}
	if len(got) != len(want) {
		t.Fatalf("Members() = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	f.Remove(2)
	if got := ms.Members(); len(got) != 2 || got[1].NodeID != 3 {
		t.Fatalf("after Remove: %+v", got)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Alive: "alive", Suspect: "suspect", Dead: "dead", Left: "left", 0: "State(0)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}
