package meta

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/gossip"
)

// A node's state follows from its last heartbeat, its draining mark and
// gossip, with the dead-node grace of 10s.
func TestStateOf(t *testing.T) {
	now := time.Unix(1000, 0)
	const grace = 10 * time.Second
	never := time.Duration(-1)
	for _, c := range []struct {
		name     string
		silent   time.Duration // since the last heartbeat; never: not heard
		live     bool
		draining bool
		replicas uint32
		gossip   gossip.State
		gsince   time.Duration // before now
		gok      bool
		want     string
	}{
		{"heard and live", time.Second, true, false, 3, 0, 0, false, StateLive},
		{"late", 3 * time.Second, false, false, 3, 0, 0, false, StateSuspect},
		{"silent past the grace", 11 * time.Second, false, false, 3, 0, 0, false, StateDead},
		{"not heard yet", never, false, false, 0, 0, 0, false, StateUnknown},
		{"gossip says dead for the grace", time.Second, true, false, 3, gossip.Dead, 11 * time.Second, true, StateDead},
		{"gossip says suspect", time.Second, true, false, 3, gossip.Suspect, time.Second, true, StateSuspect},
		{"draining", time.Second, true, true, 3, 0, 0, false, StateDraining},
		{"drained", time.Second, true, true, 0, 0, 0, false, StateDrained},
		{"drained and stopped", 3 * time.Second, false, true, 0, 0, 0, false, StateDecommissioned},
	} {
		ns := &tidekvpb.NodeStatus{LastSeenSeconds: -1, Live: c.live, Replicas: c.replicas}
		silent := 5 * time.Second // since this node took over
		if c.silent != never {
			silent, ns.LastSeenSeconds = c.silent, c.silent.Seconds()
		}
		n := &tidekvpb.NodeDescriptor{NodeId: 1, Draining: c.draining}
		if got := StateOf(n, ns, silent, now, grace, c.gossip, now.Add(-c.gsince), c.gok); got != c.want {
			t.Errorf("%s: StateOf = %q, want %q", c.name, got, c.want)
		}
	}
}

// A report from an older lease does not replace the newer one's; a range
// newly above its split line says so once.
func TestTableReport(t *testing.T) {
	tb := NewTable()
	rep := func(term, bytes uint64) bool {
		return tb.Report(&tidekvpb.ReportRangeRequest{Desc: &tidekvpb.RangeDescriptor{RangeId: 5, Generation: 1},
			LeaderNodeId: term, LeaseTerm: term, Bytes: bytes}, 100)
	}
	if rep(3, 50) || !rep(3, 150) || rep(3, 160) {
		t.Fatal("want crossed only on the report that first went above 100 bytes")
	}
	if rep(2, 10); tb.LoadOf(5).Bytes != 160 || tb.LoadOf(5).Term != 3 {
		t.Errorf("an older lease's report replaced the newer: %+v", tb.LoadOf(5))
	}
}

// A report stands for the range's span: a replica change since (a newer
// generation over the same span) keeps its size and freshness and does not
// count as crossing the split line again; a split since makes it the old
// span's, with no size and stale, and a half still above the line crosses.
func TestTableReportFollowsSpan(t *testing.T) {
	tb := NewTable()
	desc := func(gen uint64, end string) *tidekvpb.RangeDescriptor {
		return &tidekvpb.RangeDescriptor{RangeId: 5, Generation: gen, StartKey: []byte("a"), EndKey: []byte(end)}
	}
	report := func(d *tidekvpb.RangeDescriptor, bytes uint64) bool {
		return tb.Report(&tidekvpb.ReportRangeRequest{Desc: d, LeaderNodeId: 1, LeaseTerm: 3, Bytes: bytes, Qps: 40}, 100)
	}
	if !report(desc(1, "z"), 150) {
		t.Fatal("first report above the line: want crossed")
	}
	if ri := tb.RangeInfos([]*tidekvpb.RangeDescriptor{desc(2, "z")})[0]; ri.GetBytes() != 150 || ri.GetLoadStale() || ri.GetQps() != 40 {
		t.Errorf("after a replica change: %+v, want the report's 150 bytes and 40 qps, fresh", ri)
	}
	if report(desc(2, "z"), 160) {
		t.Error("a replica change counted as crossing the split line again")
	}
	if ri := tb.RangeInfos([]*tidekvpb.RangeDescriptor{desc(3, "m")})[0]; ri.GetBytes() != 0 || !ri.GetLoadStale() {
		t.Errorf("after a split: %+v, want no size, stale", ri)
	}
	if !report(desc(3, "m"), 120) {
		t.Error("the left half still above the line: want crossed")
	}
}
