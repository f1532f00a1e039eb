package admission

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// policy is the default policy shedding at any count in flight: these
// tests drive one request at a time (MinInflight has its own test).
func policy() Config {
	c := DefaultConfig()
	c.MinInflight = 0
	return c
}

// fakeClock is the injected clock.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time          { return f.t }
func (f *fakeClock) advance(d time.Duration) { f.t = f.t.Add(d) }

// newTest returns a controller whose random draws come from draws, in
// turn (0.5 when it runs out).
func newTest(t *testing.T, cfg Config, draws ...float64) (*Controller, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c, err := New(cfg, clk.now, func() float64 {
		if len(draws) == 0 {
			return 0.5
		}
		d := draws[0]
		draws = draws[1:]
		return d
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func reason(err error) (Reason, bool) {
	var r *Rejection
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return 0, false
}

// window admits one request that waited d, closes the window and returns
// the admission error.
func window(c *Controller, clk *fakeClock, d time.Duration) error {
	err := c.Admit(Normal, clk.now().Add(-d), true)
	if err == nil {
		c.Done(Normal)
	}
	clk.advance(c.cfg.Interval)
	c.Tick(0)
	return err
}

func TestShortQueuesAreNotOverload(t *testing.T) {
	c, clk := newTest(t, policy())
	for range 20 {
		// A burst: one request waits 50 ms, but most start within 1 ms.
		if err := c.Admit(Normal, clk.now().Add(-50*time.Millisecond), false); err != nil {
			t.Fatalf("a request that waited less than Interval was refused: %v", err)
		}
		c.Done(Normal)
		for range 2 {
			if err := c.Admit(Normal, clk.now().Add(-time.Millisecond), false); err != nil {
				t.Fatal(err)
			}
			c.Done(Normal)
		}
		if err := window(c, clk, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.State(); st.Overloaded || st.AdmitShare != 1 || st.RejectedTotal() != 0 {
		t.Fatalf("state %+v, want not overloaded, everything admitted", st)
	}
}

func TestStandingQueueShedsThenRecovers(t *testing.T) {
	cfg := policy()
	c, clk := newTest(t, cfg)
	// Three windows whose smallest delay is 20 ms, above the 10 ms target.
	for i := range 3 {
		err := window(c, clk, 20*time.Millisecond)
		if r, _ := reason(err); i > 0 && (err == nil || r != Delay) {
			t.Fatalf("window %d: a request that waited 20 ms while overloaded: %v, want a queue-delay refusal", i, err)
		}
	}
	st := c.State()
	if !st.Overloaded || st.AdmitShare > 0.35 || st.AdmitShare < 0.34 {
		t.Fatalf("after 3 standing windows: %+v, want overloaded with share 0.7^3", st)
	}
	// The gate admits draws below the share and refuses the others.
	c2, clk2 := newTest(t, cfg, 0.2, 0.9)
	for range 3 {
		_ = window(c2, clk2, 20*time.Millisecond)
	}
	if err := c2.Gate(Normal); err != nil {
		t.Fatalf("draw 0.2 under share 0.34 refused: %v", err)
	}
	err := c2.Gate(Normal)
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Reason != Shed {
		t.Fatalf("draw 0.9 over share 0.34: %v, want shed", err)
	}
	if rej.RetryAfter < 150*time.Millisecond || rej.RetryAfter > 250*time.Millisecond {
		t.Fatalf("retry hint %v at share 0.34, want about 2 intervals", rej.RetryAfter)
	}
	if msg := rej.Error(); strings.Count(msg, "\n") > 0 || !strings.Contains(msg, "retry after") || !strings.Contains(msg, "34%") {
		t.Fatalf("message %q", msg)
	}
	// Fresh requests are admitted while overloaded; good windows give the
	// share back a tenth at a time.
	for i := range 7 {
		if err := window(c, clk, time.Millisecond); err != nil {
			t.Fatalf("good window %d: %v", i, err)
		}
	}
	if st := c.State(); st.Overloaded || st.AdmitShare != 1 {
		t.Fatalf("after 7 good windows: %+v, want recovered", st)
	}
}

// Goroutines do not start in arrival order: a few requests start at once
// while most wait. The window's median sees the standing queue that its
// minimum would hide.
func TestUnorderedQueueIsOverload(t *testing.T) {
	c, clk := newTest(t, policy())
	for range 3 {
		for _, d := range []time.Duration{100 * time.Microsecond, 40 * time.Millisecond, 40 * time.Millisecond} {
			if err := c.Admit(Normal, clk.now().Add(-d), true); err == nil {
				c.Done(Normal)
			}
		}
		clk.advance(c.cfg.Interval)
		c.Tick(0)
	}
	if st := c.State(); !st.Overloaded || st.QueueDelay < 30*time.Millisecond || st.QueueDelay > 40*time.Millisecond {
		t.Fatalf("state %+v, want overloaded with a window delay of about 40 ms", st)
	}
}

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for d := time.Duration(0); d < 10*time.Second; d = d*5/4 + time.Microsecond {
		i := bucketOf(d)
		if i < prev {
			t.Fatalf("bucket of %v is %d, below the bucket %d of a shorter delay", d, i, prev)
		}
		prev = i
		if lb := lowerBound(i); lb > d || (d >= 40*time.Microsecond && float64(d-lb) > 0.25*float64(d)) {
			t.Fatalf("%v in bucket %d with lower bound %v", d, i, lb)
		}
	}
	var h delayHistogram
	if h.quantile(0.5) != -1 {
		t.Fatal("empty histogram has a quantile")
	}
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 20 * time.Millisecond} {
		h.add(d)
	}
	if q := h.quantile(0.5); q < 1600*time.Microsecond || q > 2*time.Millisecond {
		t.Fatalf("median %v, want about 2ms", q)
	}
	if q := h.quantile(0.99); q < 16*time.Millisecond {
		t.Fatalf("p99 %v, want about 20ms", q)
	}
}

func TestShareHasAFloor(t *testing.T) {
	c, clk := newTest(t, policy())
	for range 50 {
		_ = window(c, clk, 30*time.Millisecond)
	}
	if s := c.State().AdmitShare; s != c.cfg.MinAdmitShare {
		t.Fatalf("share %v, want the floor %v", s, c.cfg.MinAdmitShare)
	}
	var rej *Rejection
	if err := c.Gate(Normal); !errors.As(err, &rej) || rej.RetryAfter != c.cfg.MaxRetryAfter {
		t.Fatalf("gate at the floor: %v, want shed with the longest hint", err)
	}
}

func TestSchedulerLatencyAloneMeansOverload(t *testing.T) {
	c, clk := newTest(t, policy())
	clk.advance(c.cfg.Interval)
	c.Tick(25 * time.Millisecond) // no request measured, the run queue is long
	if st := c.State(); !st.Overloaded || st.AdmitShare != 0.7 || st.SchedLatency != 25*time.Millisecond {
		t.Fatalf("state %+v, want overloaded by the scheduler's latency", st)
	}
}

func TestWaitPastIntervalIsRefused(t *testing.T) {
	c, clk := newTest(t, policy())
	err := c.Admit(Normal, clk.now().Add(-150*time.Millisecond), true)
	if r, ok := reason(err); !ok || r != Delay {
		t.Fatalf("a request that waited 150 ms: %v, want a queue-delay refusal", err)
	}
}

func TestHardCap(t *testing.T) {
	cfg := policy()
	cfg.MaxInflight = 2
	c, clk := newTest(t, cfg)
	for range 2 {
		if err := c.Admit(Normal, clk.now(), false); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := reason(c.Admit(Normal, clk.now(), false)); !ok || r != Inflight {
		t.Fatal("third request admitted past MaxInflight 2")
	}
	c.Done(Normal)
	if err := c.Admit(Normal, clk.now(), false); err != nil {
		t.Fatalf("after one finished: %v", err)
	}
	if st := c.State(); st.Inflight != 2 || st.Rejected[Inflight] != 1 || st.Admitted != 3 {
		t.Fatalf("state %+v", st)
	}
}

func TestBackgroundYields(t *testing.T) {
	cfg := policy()
	cfg.MaxInflight, cfg.BackgroundShare = 8, 0.25
	c, clk := newTest(t, cfg)
	for range 2 {
		if err := c.Admit(Background, clk.now(), false); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := reason(c.Admit(Background, clk.now(), false)); !ok || r != Deferred {
		t.Fatal("a third background request admitted past a quarter of 8 slots")
	}
	if err := c.Admit(Normal, clk.now(), false); err != nil {
		t.Fatalf("normal request refused next to background ones: %v", err)
	}
	c.Done(Background)
	if c.State().Inflight != 2 {
		t.Fatalf("in flight %d, want 2", c.State().Inflight)
	}
	// Overloaded: background requests are refused at the gate whatever
	// the draw.
	o, oclk := newTest(t, cfg, 0, 0, 0)
	_ = window(o, oclk, 20*time.Millisecond)
	if r, ok := reason(o.Gate(Background)); !ok || r != Deferred {
		t.Fatal("background request passed the gate of an overloaded node")
	}
	if err := o.Gate(Normal); err != nil {
		t.Fatalf("normal request with draw 0 refused: %v", err)
	}
}

func TestTargetZeroCountsOnly(t *testing.T) {
	cfg := policy()
	cfg.Target = 0
	c, clk := newTest(t, cfg)
	for range 10 {
		if err := window(c, clk, time.Second); err != nil {
			t.Fatalf("delay-based admission is off, yet: %v", err)
		}
	}
	if st := c.State(); st.Overloaded || st.AdmitShare != 1 {
		t.Fatalf("state %+v", st)
	}
}

func TestValidate(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no inflight":        func(c *Config) { c.MaxInflight = 0 },
		"quantile 1":         func(c *Config) { c.Quantile = 1 },
		"negative target":    func(c *Config) { c.Target = -1 },
		"target ≥ interval":  func(c *Config) { c.Target = c.Interval },
		"zero interval":      func(c *Config) { c.Interval, c.Target = 0, 0 },
		"share 0":            func(c *Config) { c.MinAdmitShare = 0 },
		"background share 2": func(c *Config) { c.BackgroundShare = 2 },
		"no retry bound":     func(c *Config) { c.MaxRetryAfter = 0 },
		"negative min":       func(c *Config) { c.MinInflight = -1 },
	} {
		cfg := DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMedian(t *testing.T) {
	bounds := []float64{0, 0.001, 0.002, 0.004, 0.008}
	if d := median([]uint64{1, 1, 5, 1}, 8, bounds); d != 2*time.Millisecond {
		t.Fatalf("median %v, want 2ms", d)
	}
	if d := median([]uint64{0, 0, 0, 0}, 0, bounds); d != 0 {
		t.Fatalf("empty: %v", d)
	}
	s := NewSchedSampler()
	s.Sample()
	done := make(chan struct{})
	go func() { close(done) }()
	<-done
	if d := s.Sample(); d < 0 || d > time.Second {
		t.Fatalf("sampled %v", d)
	}
}

// With fewer than MinInflight requests in progress the delay is not this
// node's queue: nothing is shed, however overloaded the windows say it is.
func TestNearlyEmptyQueueIsNotShed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinInflight = 3
	c, clk := newTest(t, cfg, 0.99, 0.99)
	for range 3 {
		clk.advance(cfg.Interval)
		c.Tick(50 * time.Millisecond)
	}
	if !c.State().Overloaded {
		t.Fatal("not overloaded")
	}
	if err := c.Admit(Normal, clk.now().Add(-30*time.Millisecond), false); err != nil {
		t.Fatalf("a lone request refused: %v", err)
	}
	for range 2 {
		if err := c.Admit(Normal, time.Time{}, true); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := reason(c.Gate(Normal)); !ok || r != Shed {
		t.Fatal("with 3 in flight, a draw over the share passed the gate")
	}
}

// High priority is never shed by delay, on an overloaded node or after a
// long wait; only the in-flight cap bounds it.
func TestHighIsBoundedByTheCapOnly(t *testing.T) {
	cfg := policy()
	cfg.MaxInflight = 2
	c, clk := newTest(t, cfg, 0.99, 0.99, 0.99, 0.99)
	_ = window(c, clk, 50*time.Millisecond)
	if !c.State().Overloaded {
		t.Fatal("not overloaded after a standing 50 ms queue")
	}
	if r, ok := reason(c.Gate(Normal)); !ok || r != Shed {
		t.Fatal("a normal request passed the gate with draw 0.99")
	}
	if err := c.Gate(High); err != nil {
		t.Fatalf("gate refused a high-priority request: %v", err)
	}
	for range 2 {
		if err := c.Admit(High, clk.now().Add(-150*time.Millisecond), false); err != nil {
			t.Fatalf("high-priority request that waited 150 ms: %v", err)
		}
	}
	if r, ok := reason(c.Admit(High, clk.now(), false)); !ok || r != Inflight {
		t.Fatal("a high-priority request admitted past MaxInflight 2")
	}
}

// The queue MinInflight counts includes the requests waiting to start, by
// Little's law over the last window: a thousand reads each waiting 20 ms
// in 100 ms are a queue of about 200 though each is in progress for no
// time at all, and the node sheds; fifty such (a closed pool's worth) are
// a queue of 10, and it does not.
func TestQueueByLittlesLaw(t *testing.T) {
	for _, tc := range []struct {
		requests int
		shed     bool
	}{{1000, true}, {50, false}} {
		cfg := DefaultConfig() // MinInflight 64
		c, clk := newTest(t, cfg, 0.99, 0.99)
		for range tc.requests {
			if err := c.Admit(Normal, clk.now().Add(-20*time.Millisecond), false); err != nil {
				t.Fatalf("%d requests: admitted before any window ended: %v", tc.requests, err)
			}
			c.Done(Normal)
		}
		clk.advance(cfg.Interval)
		c.Tick(0)
		if st := c.State(); !st.Overloaded || st.Inflight != 0 {
			t.Fatalf("%d requests: state %+v, want overloaded with nothing in progress", tc.requests, st)
		}
		_, gateShed := reason(c.Gate(Normal))
		r, late := reason(c.Admit(Normal, clk.now().Add(-30*time.Millisecond), true))
		if gateShed != tc.shed || late != tc.shed || (late && r != Delay) {
			t.Fatalf("%d requests of 20 ms in a window: gate shed %v, 30 ms wait refused %v (%v), want %v", tc.requests, gateShed, late, r, tc.shed)
		}
	}
}
