package txncheck

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Hand-built histories: txn(p, from, to, outcome, mops) runs from ms from
// to ms to.
func txn(p, from, to int, o Outcome, mops ...Mop) Txn {
	return Txn{Process: p, Invoke: time.Duration(from) * time.Millisecond, Complete: time.Duration(to) * time.Millisecond, Outcome: o, Mops: mops}
}

func rl(k string, l ...int) Mop {
	if l == nil {
		l = []int{}
	}
	return Mop{F: Read, Key: k, List: l}
}
func ap(k string, v int) Mop { return Mop{F: Append, Key: k, Value: v} }
func rr(k string, v int) Mop { return Mop{F: Read, Key: k, Value: v} }
func wr(k string, v int) Mop { return Mop{F: Write, Key: k, Value: v} }

func check(t *testing.T, w Workload, h ...Txn) Result {
	t.Helper()
	res, err := Check(w, h)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Each anomaly is found, named and explained.
func TestAnomalies(t *testing.T) {
	for _, c := range []struct {
		name  string
		w     Workload
		h     []Txn
		kinds []string
		// explained holds lines the anomalies' explanations have.
		explained []string
	}{
		{"G0 list", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1), ap("y", 2)),
			txn(1, 0, 10, OK, ap("x", 2), ap("y", 1)),
			txn(2, 20, 30, OK, rl("x", 1, 2), rl("y", 1, 2)),
		}, []string{"G0"}, []string{
			"G0: a cycle of 2 transactions, T0 → T1 → T0",
			"T0 appended 1 to x, then T1 appended 2 after it (ww)",
			"T1 appended 1 to y, then T0 appended 2 after it (ww)",
		}},
		{"G0 register", Register, []Txn{
			txn(0, 0, 10, OK, rr("y", 1), wr("x", 1), wr("y", 2)),
			txn(1, 0, 10, OK, rr("x", 1), wr("x", 2), wr("y", 1)),
		}, []string{"G0", "G1c"}, []string{"T0 wrote x = 1, then T1 overwrote it with 2 (ww)"}},
		{"G1a", ListAppend, []Txn{
			txn(0, 0, 10, Fail, ap("x", 1)),
			txn(1, 20, 30, OK, rl("x", 1)),
		}, []string{"G1a"}, []string{"T1 read 1 in x, written by T0, which failed"}},
		{"G1a register", Register, []Txn{
			txn(0, 0, 10, Fail, wr("x", 1)),
			txn(1, 20, 30, OK, rr("x", 1)),
		}, []string{"G1a"}, nil},
		{"G1b", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1), ap("x", 2)),
			txn(1, 0, 10, OK, rl("x", 1)),
			txn(2, 20, 30, OK, rl("x", 1, 2)),
		}, []string{"G-single", "G1b"}, []string{"T1 read 1 in x, which T0 wrote and then overwrote in the same transaction"}},
		{"G1b register", Register, []Txn{
			txn(0, 0, 10, OK, wr("x", 1), wr("x", 2)),
			txn(1, 0, 10, OK, rr("x", 1)),
		}, []string{"G1b"}, nil},
		{"G1c", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1), rl("y", 1)),
			txn(1, 0, 10, OK, ap("y", 1), rl("x", 1)),
		}, []string{"G1c"}, []string{"T0 appended 1 to x, and T1 read it (wr)", "T1 appended 1 to y, and T0 read it (wr)"}},
		{"G-single read skew", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1), ap("y", 1)),
			txn(1, 0, 10, OK, rl("x"), rl("y", 1)),
			txn(2, 20, 30, OK, rl("x", 1)),
		}, []string{"G-single"}, []string{"T1 read x empty, and T0 appended 1 after that (rw)", "T0 appended 1 to y, and T1 read it (wr)"}},
		{"G-single register", Register, []Txn{
			txn(0, 0, 10, OK, wr("x", 1), wr("y", 1)),
			txn(1, 0, 10, OK, rr("x", 1), rr("y", 0)),
		}, []string{"G-single"}, []string{"T1 read y unset, and T0 overwrote that with 1 (rw)"}},
		{"G2-item write skew", ListAppend, []Txn{
			txn(0, 0, 10, OK, rl("x"), ap("y", 1)),
			txn(1, 0, 10, OK, rl("y"), ap("x", 1)),
			txn(2, 20, 30, OK, rl("x", 1), rl("y", 1)),
		}, []string{"G2-item"}, []string{"T0 read x empty, and T1 appended 1 after that (rw)"}},
		{"lost update", ListAppend, []Txn{
			txn(0, 0, 10, OK, rl("x"), ap("x", 1)),
			txn(1, 0, 10, OK, rl("x"), ap("x", 2)),
			txn(2, 20, 30, OK, rl("x", 1)),
		}, []string{"G2-item"}, []string{"T1 read x empty, and T0 appended 1 after that (rw)", "T0 read x empty, and T1 appended 2 after that (rw)"}},
		{"lost update register", Register, []Txn{
			txn(0, 0, 10, OK, rr("x", 0), wr("x", 1)),
			txn(1, 0, 10, OK, rr("x", 0), wr("x", 2)),
		}, []string{"G2-item"}, nil},
		{"stale read", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1)),
			txn(1, 20, 30, OK, rl("x")),
			txn(2, 40, 50, OK, rl("x", 1)),
		}, []string{"G-single-realtime"}, []string{"T0 completed at 10ms, before T1 began at 20ms (realtime)", "T1 read x empty, and T0 appended 1 after that (rw)"}},
		{"stale read register", Register, []Txn{
			txn(0, 0, 10, OK, wr("x", 1)),
			txn(1, 20, 30, OK, rr("x", 0)),
		}, []string{"G-single-realtime"}, nil},
		{"lost append", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1)),
			txn(1, 0, 10, OK, ap("x", 2)),
			txn(2, 20, 30, OK, rl("x", 1)),
		}, []string{"G-single-realtime"}, []string{"T2 read x up to 1, and T1 appended 2 after that (rw)"}},
		{"incompatible order", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1)),
			txn(1, 0, 10, OK, ap("x", 2)),
			txn(2, 20, 30, OK, rl("x", 1, 2)),
			txn(3, 20, 30, OK, rl("x", 2, 1)),
		}, []string{"incompatible-order"}, []string{"neither is a prefix of the other"}},
		{"duplicate and garbage", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1)),
			txn(1, 20, 30, OK, rl("x", 1, 1, 7)),
		}, []string{"duplicate-element", "garbage-read"}, nil},
		{"internal", ListAppend, []Txn{
			txn(0, 0, 10, OK, ap("x", 1), rl("x")),
		}, []string{"internal"}, []string{"T0 appended [1] to x and then read [], which does not end with them"}},
		{"internal register", Register, []Txn{
			txn(0, 0, 10, OK, wr("x", 1), rr("x", 0)),
		}, []string{"internal"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := check(t, c.w, c.h...)
			if got := res.Kinds(); !slices.Equal(got, c.kinds) {
				t.Fatalf("kinds %v, want %v\n%s", got, c.kinds, res.Describe())
			}
			var ex string
			for _, a := range res.Anomalies {
				ex += a.Explanation + "\n"
			}
			for _, line := range c.explained {
				if !strings.Contains(ex, line) {
					t.Errorf("the explanation lacks %q:\n%s", line, ex)
				}
			}
		})
	}
}

// Histories a strictly serializable store could produce report nothing:
// concurrent transactions, reads of own writes, failed and unknown
// transactions whose writes nobody saw, and an unknown one whose write
// someone saw (it committed).
func TestKnownGood(t *testing.T) {
	for _, c := range []struct {
		name string
		w    Workload
		h    []Txn
	}{
		{"list", ListAppend, []Txn{
			txn(0, 0, 10, OK, rl("x"), ap("x", 1), rl("x", 1)),
			txn(1, 5, 20, OK, rl("x", 1), ap("x", 2), ap("y", 1)),
			txn(2, 5, 25, Fail, ap("x", 3)),
			txn(3, 6, 30, Info, ap("y", 2)),
			txn(4, 8, 40, Info, ap("x", 4)),
			txn(0, 30, 50, OK, rl("y", 1, 2), rl("x", 1, 2)),
			txn(1, 45, 60, OK, ap("x", 5), rl("x", 1, 2, 5)),
		}},
		{"register", Register, []Txn{
			txn(0, 0, 10, OK, rr("x", 0), wr("x", 1), rr("x", 1)),
			txn(1, 5, 20, OK, rr("x", 1), wr("x", 2), wr("y", 1)),
			txn(2, 5, 25, Fail, wr("x", 3)),
			txn(3, 6, 30, Info, wr("y", 2)),
			txn(4, 8, 40, Info, wr("x", 4)),
			txn(0, 30, 50, OK, rr("y", 2), rr("x", 2)),
			txn(1, 45, 60, OK, wr("x", 5), rr("x", 5)),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if res := check(t, c.w, c.h...); !res.Valid() || res.Committed != 4 {
				t.Fatalf("%s", res.Describe())
			}
		})
	}
}

// The smallest cycle is shown first, whatever order they are found in.
func TestSmallestFirst(t *testing.T) {
	res := check(t, ListAppend,
		// A three-transaction G0 on x, y, z...
		txn(0, 0, 10, OK, ap("x", 1), ap("z", 2)),
		txn(1, 0, 10, OK, ap("x", 2), ap("y", 1)),
		txn(2, 0, 10, OK, ap("y", 2), ap("z", 1)),
		txn(3, 20, 30, OK, rl("x", 1, 2), rl("y", 1, 2), rl("z", 1, 2)),
		// ...and a two-transaction G1c on u, v.
		txn(4, 0, 10, OK, ap("u", 1), rl("v", 1)),
		txn(5, 0, 10, OK, ap("v", 1), rl("u", 1)))
	if got := res.Kinds(); !slices.Equal(got, []string{"G0", "G1c"}) {
		t.Fatalf("kinds %v\n%s", got, res.Describe())
	}
	if s := res.Smallest(); s.Kind != "G1c" || !slices.Equal(s.Txns, []int{4, 5}) {
		t.Fatalf("smallest %s %v, want the G1c of T4 and T5", s.Kind, s.Txns)
	}
}

// A history that breaks the workload's rules is refused, not judged.
func TestMalformed(t *testing.T) {
	for _, c := range []struct {
		w    Workload
		h    []Txn
		want string
	}{
		{ListAppend, []Txn{txn(0, 0, 1, OK, ap("x", 1)), txn(1, 0, 1, Fail, ap("x", 1))}, "unique per key"},
		{ListAppend, []Txn{txn(0, 0, 1, OK, ap("x", 0))}, "must be positive"},
		{Register, []Txn{txn(0, 0, 1, OK, ap("x", 1))}, "in a register history"},
	} {
		if _, err := Check(c.w, c.h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.h, err, c.want)
		}
	}
}

// A transaction the recorder saw begin but not end is unknown; a
// committed one carries its reads.
func TestRecorder(t *testing.T) {
	r := NewRecorder()
	a := r.Invoke(1, []Mop{ap("x", 1)})
	b := r.Invoke(2, []Mop{{F: Read, Key: "x"}})
	r.Complete(b, OK, []Mop{rl("x")})
	h := r.History()
	if h[a].Outcome != Info || h[b].Outcome != OK || h[b].Mops[0].List == nil || h[b].Complete < h[b].Invoke {
		t.Fatalf("%v", h)
	}
	if res := check(t, ListAppend, h...); !res.Valid() {
		t.Fatal(res.Describe())
	}
}

// A long list read is shown by its head and its tail, where the
// dependencies are.
func TestLongListShortened(t *testing.T) {
	if got, want := rl("x", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10).String(), "read x [10 values: 1 2 … 7 8 9 10]"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
