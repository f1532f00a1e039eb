package elastic

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A planner restored from another's snapshot, through its JSON form,
// decides exactly what the original decides for the same observations:
// the same forecast, capacity, bandwidth and plan, round after round.
func TestPlannerSnapshotRestoreSameDecisions(t *testing.T) {
	p := testPolicy(Combined)
	p.Season = 120 * time.Second
	wave := func(i int) float64 { return 16000 - 12000*math.Cos(2*math.Pi*float64(i%120)/120) }
	a := newCluster(t, p, 3)
	for i := range 300 { // past two seasons: the forecast is trusted
		if o := a.round(wave(i)); o.Delta > 0 {
			a.nodes += o.Delta
		} else if o.Delta < 0 {
			a.nodes--
		}
	}
	if st := a.pl.Snapshot(); st.Lead <= 0 {
		t.Fatalf("no lead time measured in %d nodes' scale-outs: the test would not carry it", a.nodes)
	}
	raw, err := json.Marshal(a.pl.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var st PlannerState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	b := newCluster(t, p, a.nodes)
	b.now = a.now
	if err := b.pl.Restore(st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.pl.Snapshot(), a.pl.Snapshot()) {
		t.Fatalf("restored state differs:\n%+v\n%+v", b.pl.Snapshot(), a.pl.Snapshot())
	}
	fresh := newCluster(t, p, a.nodes)
	fresh.now = a.now
	differs := false
	for i := 300; i < 500; i++ {
		oa, ob, of := a.round(wave(i)), b.round(wave(i)), fresh.round(wave(i))
		if !reflect.DeepEqual(oa, ob) {
			t.Fatalf("round %d: restored planner decided\n%+v\nthe original\n%+v", i, ob, oa)
		}
		differs = differs || !reflect.DeepEqual(oa.Forecast, of.Forecast)
		a.nodes += oa.Delta
		b.nodes, fresh.nodes = a.nodes, a.nodes
	}
	if !differs {
		t.Fatal("a fresh planner forecasts as the restored one: the test shows nothing")
	}
}

// A snapshot taken under another season or planning window is refused
// whole, and the planner keeps its own state.
func TestPlannerRestoreRefusesAnotherShape(t *testing.T) {
	p := testPolicy(Combined)
	p.Season = 60 * time.Second
	a := newCluster(t, p, 3)
	for range 10 {
		a.round(5000)
	}
	p.Season = 90 * time.Second
	b := newCluster(t, p, 3)
	before := b.pl.Snapshot()
	err := b.pl.Restore(a.pl.Snapshot())
	if err == nil || !strings.Contains(err.Error(), "season of 60 steps") {
		t.Fatalf("restore across seasons: %v", err)
	}
	if !reflect.DeepEqual(b.pl.Snapshot(), before) {
		t.Fatal("a refused restore changed the planner")
	}
}

// A saved negative lead time (or a negative node count it was timed
// from) is refused whole.
func TestPlannerRestoreRefusesNegativeLead(t *testing.T) {
	a := newCluster(t, testPolicy(Combined), 3)
	a.round(5000)
	for _, bad := range []func(*PlannerState){
		func(st *PlannerState) { st.Lead = -time.Second },
		func(st *PlannerState) { st.LeadFrom = -1 },
	} {
		st := a.pl.Snapshot()
		bad(&st)
		b := newCluster(t, testPolicy(Combined), 3)
		before := b.pl.Snapshot()
		if err := b.pl.Restore(st); err == nil || !strings.Contains(err.Error(), "lead time") {
			t.Fatalf("restore of lead %v from %d nodes: %v", st.Lead, st.LeadFrom, err)
		}
		if !reflect.DeepEqual(b.pl.Snapshot(), before) {
			t.Fatal("a refused restore changed the planner")
		}
	}
}

// A state stored by a binary whose forecaster had one fit (no Fits)
// resumes every fit from that one, forecasting as it did; a state whose
// fits have other constants is refused whole.
func TestPlannerRestoreForecasterFits(t *testing.T) {
	p := testPolicy(Combined)
	a := newCluster(t, p, 3)
	for i := range 50 {
		a.round(5000 + 100*float64(i))
	}
	st := a.pl.Snapshot()
	st.Forecaster.Fits, st.Forecaster.Best = nil, 0
	b := newCluster(t, p, 3)
	if err := b.pl.Restore(st); err != nil {
		t.Fatal(err)
	}
	got := b.pl.Snapshot().Forecaster
	for i, ft := range got.Fits {
		if ft.Level != st.Forecaster.Level || ft.Trend != st.Forecaster.Trend || ft.Score != 0 {
			t.Fatalf("fit %d resumed at level %v trend %v score %v, want the stored fit's %v, %v, unscored", i, ft.Level, ft.Trend, ft.Score,
				st.Forecaster.Level, st.Forecaster.Trend)
		}
	}
	if want := a.pl.fc.fits[0].forecast(a.pl.fc.n, 10); b.pl.fc.Forecast(10) != want {
		t.Fatalf("resumed forecast %v, the stored fit's %v", b.pl.fc.Forecast(10), want)
	}

	st = a.pl.Snapshot()
	st.Forecaster.Fits[1].Alpha = 0.3
	c := newCluster(t, p, 3)
	before := c.pl.Snapshot()
	if err := c.pl.Restore(st); err == nil || !strings.Contains(err.Error(), "fits are not this binary's") {
		t.Fatalf("restore of other constants: %v", err)
	}
	if !reflect.DeepEqual(c.pl.Snapshot(), before) {
		t.Fatal("a refused restore changed the planner")
	}
}
