package events

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func reasons(es []*tidekvpb.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.GetReason())
	}
	return out
}

func equal(t *testing.T, got []*tidekvpb.Event, want ...string) {
	t.Helper()
	g := reasons(got)
	if len(g) != len(want) {
		t.Fatalf("got %q, want %q", g, want)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Fatalf("got %q, want %q", g, want)
		}
	}
}

func TestLogKeepsNewestCapacity(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(Config{Capacity: 3, Window: time.Hour}, 7, clk.now)
	for _, r := range []string{"a", "b", "c", "d", "e"} {
		clk.t = clk.t.Add(time.Second)
		l.Record("split", "range 2", "%s", r)
	}
	equal(t, l.List(0), "c", "d", "e")
	equal(t, l.List(2), "d", "e")
	if e := l.List(1)[0]; e.GetNodeId() != 7 || e.GetKind() != "split" || e.GetSubject() != "range 2" || e.GetUnixNanos() != clk.t.UnixNano() {
		t.Fatalf("event fields: %v", e)
	}
}

func TestLogDropsEventsOlderThanWindow(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(Config{Capacity: 10, Window: time.Minute}, 1, clk.now)
	l.Record("k", "s", "old")
	clk.t = clk.t.Add(50 * time.Second)
	l.Record("k", "s", "new")
	equal(t, l.List(0), "old", "new")
	clk.t = clk.t.Add(20 * time.Second)
	equal(t, l.List(0), "new")
}

func TestMergeOrdersByTimeThenNode(t *testing.T) {
	ev := func(ns int64, node uint64, r string) *tidekvpb.Event {
		return &tidekvpb.Event{UnixNanos: ns, NodeId: node, Reason: r}
	}
	a := []*tidekvpb.Event{ev(1, 2, "a1"), ev(5, 2, "a5")}
	b := []*tidekvpb.Event{ev(1, 1, "b1"), ev(3, 1, "b3"), ev(9, 1, "b9")}
	equal(t, Merge(0, a, b), "b1", "a1", "b3", "a5", "b9")
	equal(t, Merge(2, a, b), "a5", "b9")
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{Capacity: 0, Window: time.Hour}, {Capacity: 1, Window: 0}} {
		if c.Validate() == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
}
