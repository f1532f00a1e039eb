package gossip

import (
	"bytes"
	"log"
	"slices"
	"strings"
	"testing"
	"time"
)

// clock is a manual clock for Since.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func (c *clock) tick() time.Time {
	c.t = c.t.Add(time.Second)
	return c.t
}

func newTestTable() (*table, *clock, *[]State) {
	c := &clock{t: time.Unix(1000, 0)}
	tab := newTable(c.now)
	var changes []State
	tab.onChange = func(m Member) { changes = append(changes, m.State) }
	return tab, c, &changes
}

func mustGet(t *testing.T, tab *table, id uint64) Member {
	t.Helper()
	m, ok := tab.get(id)
	if !ok {
		t.Fatalf("node %d unknown", id)
	}
	return m
}

func TestTableTransitions(t *testing.T) {
	tab, c, changes := newTestTable()

	joined := c.tick()
	tab.alive(7, "g7", "a7", true)
	if m := mustGet(t, tab, 7); m.State != Alive || !m.Since.Equal(joined) || m.GRPCAddr != "g7" || m.GossipAddr != "a7" {
		t.Fatalf("after join: %+v", m)
	}

	// An update with new addresses keeps Since.
	c.tick()
	tab.alive(7, "g7b", "a7b", false)
	if m := mustGet(t, tab, 7); !m.Since.Equal(joined) || m.GRPCAddr != "g7b" || m.GossipAddr != "a7b" {
		t.Fatalf("after update: %+v", m)
	}

	// A failed probe makes it Suspect; a good probe clears it.
	suspected := c.tick()
	tab.suspect(7)
	tab.suspect(7)
	if m := mustGet(t, tab, 7); m.State != Suspect || !m.Since.Equal(suspected) {
		t.Fatalf("after suspect: %+v", m)
	}
	c.tick()
	tab.probeOK(7)
	tab.suspect(7)
	dead := c.tick()
	tab.gone(7)
	if m := mustGet(t, tab, 7); m.State != Dead || !m.Since.Equal(dead) {
		t.Fatalf("after gone: %+v", m)
	}
	// Neither a late probe result nor a failed probe revives or re-suspects
	// a dead member; only a join does.
	tab.probeOK(7)
	tab.suspect(7)
	tab.alive(7, "g7", "a7c", true)

	want := []State{Alive, Suspect, Alive, Suspect, Dead, Alive}
	if !slices.Equal(*changes, want) {
		t.Fatalf("changes %v, want %v", *changes, want)
	}

	// Unknown members are ignored.
	tab.gone(9)
	tab.suspect(9)
	tab.probeOK(9)
	tab.leaveNote(9)
	if ms := tab.snapshot(); len(ms) != 1 || ms[0].NodeID != 7 {
		t.Fatalf("snapshot %+v", ms)
	}
}

func TestTableLeaveNote(t *testing.T) {
	tab, c, changes := newTestTable()
	tab.alive(1, "g", "a", true)
	tab.alive(2, "g", "a", true)
	tab.alive(3, "g", "a", true)

	// Note first, then memberlist's leave: Left.
	tab.leaveNote(1)
	left := c.tick()
	tab.gone(1)
	if m := mustGet(t, tab, 1); m.State != Left || !m.Since.Equal(left) {
		t.Fatalf("node 1: %+v", m)
	}

	// memberlist's leave first, the note late: Left, since when it went.
	gone := c.tick()
	tab.gone(2)
	c.tick()
	tab.leaveNote(2)
	if m := mustGet(t, tab, 2); m.State != Left || !m.Since.Equal(gone) {
		t.Fatalf("node 2: %+v", m)
	}

	// No note: Dead. A note does not outlive a rejoin.
	tab.gone(3)
	if m := mustGet(t, tab, 3); m.State != Dead {
		t.Fatalf("node 3: %+v", m)
	}
	tab.leaveNote(1) // already Left: nothing
	tab.alive(1, "g", "a", true)
	tab.gone(1)
	if m := mustGet(t, tab, 1); m.State != Dead {
		t.Fatalf("node 1 after rejoin and failure: %+v", m)
	}
	want := []State{Alive, Alive, Alive, Left, Dead, Left, Dead, Alive, Dead}
	if !slices.Equal(*changes, want) {
		t.Fatalf("changes %v, want %v", *changes, want)
	}
}

func TestMetaAndNames(t *testing.T) {
	id, addr, ok := decodeMeta(encodeMeta(1<<40+5, "10.0.0.1:7000"))
	if !ok || id != 1<<40+5 || addr != "10.0.0.1:7000" {
		t.Fatalf("decodeMeta = %d %q %v", id, addr, ok)
	}
	for _, bad := range [][]byte{nil, []byte("tkv"), []byte("xyz\x01\x05"), encodeMeta(0, "a"), []byte("tkv\x01\x80")} {
		if _, _, ok := decodeMeta(bad); ok {
			t.Errorf("decodeMeta(%q) accepted", bad)
		}
	}
	if id, ok := decodeLeaveNote(encodeLeaveNote(42)); !ok || id != 42 {
		t.Fatalf("decodeLeaveNote = %d %v", id, ok)
	}
	for _, bad := range [][]byte{nil, []byte("hello"), encodeLeaveNote(0), append(encodeLeaveNote(4), 'x')} {
		if _, ok := decodeLeaveNote(bad); ok {
			t.Errorf("decodeLeaveNote(%q) accepted", bad)
		}
	}
	if nodeName(12) != "tidekv-12" {
		t.Fatal(nodeName(12))
	}
	if id, ok := parseNodeName("tidekv-12"); !ok || id != 12 {
		t.Fatalf("parseNodeName = %d %v", id, ok)
	}
	for _, bad := range []string{"tidekv-0", "tidekv-012", "tidekv-", "node-1", "tidekv-1x", "tidekv--1"} {
		if _, ok := parseNodeName(bad); ok {
			t.Errorf("parseNodeName(%q) accepted", bad)
		}
	}
}

func TestLogFilter(t *testing.T) {
	var buf bytes.Buffer
	var suspects []string
	f := &logFilter{out: log.New(&buf, "", 0), onSuspect: func(n string) { suspects = append(suspects, n) }}
	ml := log.New(f, "", 0)
	ml.Printf("[DEBUG] memberlist: Stream connection from=%s", "127.0.0.1:1")
	ml.Printf("[INFO] memberlist: Suspect %s has failed, no acks received", "tidekv-3")
	ml.Printf("[WARN] memberlist: Refuting a suspect message (from: %s)", "tidekv-2")
	ml.Printf("[ERR] memberlist: Push/Pull with %s failed: %s", "tidekv-2", "EOF")
	got := buf.String()
	if strings.Contains(got, "DEBUG") {
		t.Errorf("DEBUG line kept:\n%s", got)
	}
	for _, want := range []string{"[INFO] memberlist: Suspect tidekv-3", "[WARN]", "[ERR]"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if !slices.Equal(suspects, []string{"tidekv-3"}) {
		t.Errorf("suspects %v", suspects)
	}
}
