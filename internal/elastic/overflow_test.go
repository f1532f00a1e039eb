package elastic

import (
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

// fillRounds feeds o one round per second for n seconds of a key space of
// 512 MiB per node on two nodes whose ranges 1 and 2 (one per node)
// grow by perNode bytes/s each, starting from start bytes, and returns
// the last plan.
func fillRounds(o *Overflow, n int, start, perNode float64, settling bool) OverflowPlan {
	t0 := time.Unix(0, 0)
	var plan OverflowPlan
	for i := 0; i <= n; i++ {
		b := uint64(start + perNode*float64(i))
		plan = o.Round(OverflowInput{Now: t0.Add(time.Duration(i) * time.Second), Live: []uint64{1, 2}, Settling: settling, Lead: time.Minute,
			Spaces: []CacheSpace{{Name: "c", Capacity: 512 * mib, Ranges: []CacheRange{
				{ID: 1, Bytes: b, Nodes: []uint64{1}, Busy: true}, {ID: 2, Bytes: b, Nodes: []uint64{2}, Busy: true}}}}})
	}
	return plan
}

// Each node fills at 1 MiB/s and takes a minute to start: T is 316 MiB
// (c/2 + δH·Lead·(2 − 1)). Below it nothing is asked for; at it one node
// is, with the terms in the reason; not while a node is still settling.
func TestOverflowPreLaunchAtThreshold(t *testing.T) {
	plan := fillRounds(NewOverflow(DefaultOverflowConfig()), 10, 300*mib, mib, false)
	if plan.Launch != "" {
		t.Fatalf("310 MiB of 512: launched early: %s", plan.Launch)
	}
	if got := plan.Spaces[0].Threshold / mib; got < 315.5 || got > 316.5 {
		t.Fatalf("T = %.1f MiB, want 316", got)
	}
	plan = fillRounds(NewOverflow(DefaultOverflowConfig()), 20, 300*mib, mib, false)
	for _, want := range []string{`pre-launch: key space "c": node 1 holds 320.0 MiB`, "‖N‖ 2", "= 316.0 MiB"} {
		if !strings.Contains(plan.Launch, want) {
			t.Fatalf("launch %q lacks %q", plan.Launch, want)
		}
	}
	if plan := fillRounds(NewOverflow(DefaultOverflowConfig()), 20, 300*mib, mib, true); plan.Launch != "" {
		t.Fatalf("launched while a node settles: %s", plan.Launch)
	}
	fixed := DefaultOverflowConfig()
	fixed.MinThreshold = fixed.MaxThreshold
	if plan := fillRounds(NewOverflow(fixed), 20, 300*mib, mib, false); plan.Launch != "" {
		t.Fatalf("T fixed at 95%%: launched at 320 MiB: %s", plan.Launch)
	}
}

// A node at the shed share splits its fullest range when it is too big
// to move whole, and otherwise moves it to the node with most room; with
// no node that has room it says so once, and a node with room means no
// new node is needed.
func TestOverflowSheds(t *testing.T) {
	o := NewOverflow(DefaultOverflowConfig())
	in := func(ranges ...CacheRange) OverflowInput {
		return OverflowInput{Now: time.Unix(1, 0), Live: []uint64{1, 2, 3}, Lead: time.Minute,
			Spaces: []CacheSpace{{Name: "c", Capacity: 512 * mib, Ranges: ranges}}}
	}
	plan := o.Round(in(CacheRange{ID: 1, Bytes: 400 * mib, Nodes: []uint64{1}}, CacheRange{ID: 2, Bytes: 90 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 3, Bytes: 100 * mib, Nodes: []uint64{2}}))
	if len(plan.Sheds) != 1 || !plan.Sheds[0].Split || plan.Sheds[0].Range != 1 {
		t.Fatalf("want a split of range 1, got %+v", plan.Sheds)
	}
	if plan.Launch != "" {
		t.Fatalf("node 3 is empty, yet a node was asked for: %s", plan.Launch)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 50 * mib, Nodes: []uint64{1}}, CacheRange{ID: 2, Bytes: 440 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 4, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 3, Bytes: 100 * mib, Nodes: []uint64{2}}))
	if len(plan.Sheds) != 1 || plan.Sheds[0].Split || plan.Sheds[0].Range != 4 || plan.Sheds[0].To != 3 {
		t.Fatalf("want range 4 (60 MiB, the biggest that moves whole) moved to node 3 before range 2 (440 MiB) is split, got %+v", plan.Sheds)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 2, Bytes: 430 * mib, Nodes: []uint64{1}, Busy: true},
		CacheRange{ID: 3, Bytes: 100 * mib, Nodes: []uint64{2}}))
	if len(plan.Sheds) != 0 {
		t.Fatalf("node 1 has an operator running; want it left alone, got %+v", plan.Sheds)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 5, Bytes: 60 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 2, Bytes: 370 * mib, Nodes: []uint64{1}}, CacheRange{ID: 3, Bytes: 100 * mib, Nodes: []uint64{2}}))
	if len(plan.Sheds) != 1 || plan.Sheds[0].Split || plan.Sheds[0].Range != 1 {
		t.Fatalf("want range 1 (60 MiB, lowest ID of the two that move whole) moved, got %+v", plan.Sheds)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 61 * mib, Nodes: []uint64{1}}, CacheRange{ID: 5, Bytes: 60 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 2, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 6, Bytes: 310 * mib, Nodes: []uint64{2}},
		CacheRange{ID: 7, Bytes: 310 * mib, Nodes: []uint64{1, 2}, Busy: true}))
	if len(plan.Sheds) != 0 {
		t.Fatalf("range 7 is busy on nodes 1 and 2: want them left alone, got %+v", plan.Sheds)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 61 * mib, Nodes: []uint64{1}}, CacheRange{ID: 5, Bytes: 60 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 2, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 6, Bytes: 310 * mib, Nodes: []uint64{2}},
		CacheRange{ID: 7, Bytes: 310 * mib, Nodes: []uint64{1, 2}}, CacheRange{ID: 8, Bytes: 30 * mib, Nodes: []uint64{3}}))
	if len(plan.Sheds) != 2 || plan.Sheds[0].Split || plan.Sheds[0].Range != 1 || plan.Sheds[0].To != 3 || !plan.Sheds[1].Split || plan.Sheds[1].Range != 6 {
		t.Fatalf("want range 1 moved from node 1 to node 3, and range 6 split for node 2 (none of its ranges moves whole), got %+v", plan.Sheds)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 61 * mib, Nodes: []uint64{1}}, CacheRange{ID: 5, Bytes: 60 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 2, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 7, Bytes: 310 * mib, Nodes: []uint64{1, 2}, Busy: true},
		CacheRange{ID: 9, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 8, Bytes: 30 * mib, Nodes: []uint64{3}}))
	if len(plan.Sheds) != 0 {
		t.Fatalf("range 7 is busy: want nodes 1 and 2 left alone, got %+v", plan.Sheds)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 63 * mib, Nodes: []uint64{1}}, CacheRange{ID: 5, Bytes: 61 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 2, Bytes: 61 * mib, Nodes: []uint64{1}}, CacheRange{ID: 9, Bytes: 61 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 10, Bytes: 61 * mib, Nodes: []uint64{1}}, CacheRange{ID: 11, Bytes: 61 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 12, Bytes: 61 * mib, Nodes: []uint64{1}}, CacheRange{ID: 13, Bytes: 61 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 6, Bytes: 60 * mib, Nodes: []uint64{2}}, CacheRange{ID: 8, Bytes: 30 * mib, Nodes: []uint64{3}}))
	if len(plan.Sheds) != 1 || plan.Sheds[0].Split || plan.Sheds[0].Range != 1 || plan.Sheds[0].From != 1 || plan.Sheds[0].To != 3 {
		t.Fatalf("want range 1 (the fullest that moves whole) moved from node 1 to node 3, got %+v", plan.Sheds)
	}
}

// Full nodes with nowhere to shed to: a note each, once; the floor keeps
// enough nodes for the data at half their capacity.
func TestOverflowNoRoom(t *testing.T) {
	o := NewOverflow(DefaultOverflowConfig())
	in := OverflowInput{Now: time.Unix(1, 0), Live: []uint64{1, 2}, Lead: time.Minute, Spaces: []CacheSpace{{Name: "c", Capacity: 512 * mib}}}
	for i := range 16 {
		in.Spaces[0].Ranges = append(in.Spaces[0].Ranges, CacheRange{ID: uint64(i + 1), Bytes: 61 * mib, Nodes: []uint64{uint64(1 + i%2)}})
	}
	plan := o.Round(in)
	if len(plan.Notes) != 2 || !strings.Contains(plan.Notes[0], "no node has room") || len(plan.Sheds) != 0 || plan.Launch == "" {
		t.Fatalf("want two notes, no shed and a launch, got %+v", plan)
	}
	if plan.Floor != 4 {
		t.Fatalf("floor %d, want 4 (976 MiB at 256 MiB a node)", plan.Floor)
	}
	in.Now = in.Now.Add(time.Second)
	if plan = o.Round(in); len(plan.Notes) != 0 {
		t.Fatalf("notes repeated: %v", plan.Notes)
	}
}

// Nodes at the threshold while another holds under half of it move data
// there before anyone nears capacity, rather than ask for a node; never so
// much that the roomy node reaches the threshold itself.
func TestOverflowShedsEarlyToARoomyNode(t *testing.T) {
	o := NewOverflow(DefaultOverflowConfig())
	in := func(ranges ...CacheRange) OverflowInput {
		return OverflowInput{Now: time.Unix(1, 0), Live: []uint64{1, 2, 3}, Lead: time.Minute,
			Spaces: []CacheSpace{{Name: "c", Capacity: 512 * mib, Ranges: ranges}}}
	}
	plan := o.Round(in(CacheRange{ID: 1, Bytes: 150 * mib, Nodes: []uint64{1}}, CacheRange{ID: 2, Bytes: 50 * mib, Nodes: []uint64{1}},
		CacheRange{ID: 3, Bytes: 100 * mib, Nodes: []uint64{1}}, CacheRange{ID: 4, Bytes: 60 * mib, Nodes: []uint64{2}},
		CacheRange{ID: 5, Bytes: 50 * mib, Nodes: []uint64{2}}, CacheRange{ID: 7, Bytes: 50 * mib, Nodes: []uint64{2}},
		CacheRange{ID: 8, Bytes: 50 * mib, Nodes: []uint64{2}}, CacheRange{ID: 9, Bytes: 50 * mib, Nodes: []uint64{2}},
		CacheRange{ID: 6, Bytes: 20 * mib, Nodes: []uint64{3}}))
	if got := plan.Spaces[0].Threshold / mib; got != 256 {
		t.Fatalf("T = %.1f MiB, want 256 (c/2: no rate measured yet)", got)
	}
	if plan.Launch != "" || len(plan.Sheds) != 2 {
		t.Fatalf("nodes 1 and 2 (300 and 260 MiB) at T with node 3 at 20 MiB: want two steps and no launch, got %+v", plan)
	}
	if sh := plan.Sheds[0]; sh.Split || sh.Range != 2 || sh.To != 3 || !strings.Contains(sh.Reason, "at or above T = 256.0 MiB, while a node holds under T/2") {
		t.Fatalf("want node 1's range 2 (50 MiB, the biggest that moves whole) moved to node 3, got %+v", sh)
	}
	if sh := plan.Sheds[1]; sh.Split || sh.Range != 4 || sh.From != 2 || sh.To != 3 {
		t.Fatalf("want range 4 (60 MiB, moves whole) moved from node 2 to node 3, got %+v", sh)
	}
	plan = o.Round(in(CacheRange{ID: 1, Bytes: 60 * mib, Nodes: []uint64{1}}, CacheRange{ID: 2, Bytes: 240 * mib, Nodes: []uint64{2}},
		CacheRange{ID: 3, Bytes: 110 * mib, Nodes: []uint64{3}}, CacheRange{ID: 4, Bytes: 200 * mib, Nodes: []uint64{1}, Busy: true}))
	if len(plan.Sheds) != 0 {
		t.Fatalf("node 1 is busy, node 2 under T; node 3 would pass T with any of their ranges: want nothing, got %+v", plan.Sheds)
	}
}
