package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Timing assertions: lower bounds are exact (a delayed message must never
// be early); upper bounds are loose so a loaded machine cannot fail them.
const (
	testDelay = 50 * time.Millisecond
	// slack bounds how late anything may be beyond its delay.
	slack = 1500 * time.Millisecond
)

func TestDelaysTable(t *testing.T) {
	var nilD *Delays
	if nilD.Get(1, 2) != 0 {
		t.Fatal("nil table has a delay")
	}
	var d Delays
	if d.Get(1, 2) != 0 {
		t.Fatal("zero table has a delay")
	}
	d.Set(1, 2, 30*time.Millisecond)
	if d.Get(1, 2) != 30*time.Millisecond || d.Get(2, 1) != 0 {
		t.Fatalf("Set is one-way: 1→2 %v, 2→1 %v", d.Get(1, 2), d.Get(2, 1))
	}
	d.SetSymmetric(2, 3, 40*time.Millisecond)
	if d.Get(2, 3) != 40*time.Millisecond || d.Get(3, 2) != 40*time.Millisecond || d.Get(1, 2) != 30*time.Millisecond {
		t.Fatal("SetSymmetric")
	}
	d.Set(1, 2, -time.Second)
	if d.Get(1, 2) != 0 {
		t.Fatal("negative delay not treated as none")
	}

	// Three localities, two nodes each, 100ms round trip between them:
	// SetLocalities replaces what was there.
	locs := map[uint64]string{1: "us", 2: "us", 3: "eu", 4: "eu", 5: "ap", 6: "ap"}
	d.SetLocalities(locs, UniformRTT(100*time.Millisecond))
	for a := range locs {
		for b := range locs {
			want := time.Duration(0)
			if locs[a] != locs[b] {
				want = 50 * time.Millisecond
			}
			if got := d.Get(a, b); got != want {
				t.Fatalf("%d→%d: got %v, want %v", a, b, got, want)
			}
		}
	}
	d.Set(1, 3, time.Second) // a single override on top
	if d.Get(1, 3) != time.Second || d.Get(3, 1) != 50*time.Millisecond {
		t.Fatal("Set after SetLocalities")
	}
	d.Clear()
	if d.Get(1, 3) != 0 || d.Get(3, 1) != 0 {
		t.Fatal("Clear left delays")
	}
}

// TestDelaysConcurrent is for -race: readers on the send path run while
// the table is rewritten.
func TestDelaysConcurrent(t *testing.T) {
	var d Delays
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if g := d.Get(1, 2); g != 0 && g != time.Millisecond {
					t.Errorf("torn read %v", g)
					return
				}
			}
		}()
	}
	for i := 0; i < 1000; i++ {
		d.Set(1, 2, time.Duration(i%2)*time.Millisecond)
		d.SetLocalities(map[uint64]string{3: "a", 4: "b"}, UniformRTT(time.Millisecond))
	}
	close(stop)
	wg.Wait()
}

type arrival struct {
	m  *tidekvpb.RaftMessage
	at time.Time
}

// receiveTimed collects n messages that h received, each with the time
// the transport handed it to h: not the time the test took it, which
// follows by however long the test was busy or not scheduled (arrivals
// taken that way ran 1.6 s late on a loaded machine).
func receiveTimed(t *testing.T, h *recorder, n int) []arrival {
	t.Helper()
	out := make([]arrival, 0, n)
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m := <-h.msgs:
			at, _ := h.delivered.Load(m)
			out = append(out, arrival{m, at.(time.Time)})
		case <-timeout:
			t.Fatalf("received %d of %d messages", len(out), n)
		}
	}
	return out
}

// delayCase abstracts the two transports for the shared tests below:
// send(from, to, index) sends one message, rec(node) is what node got.
type delayCase struct {
	delays *Delays
	send   func(from, to, index uint64) bool
	rec    func(node uint64) *recorder
	snap   func(ctx context.Context, from, to uint64, sst io.Reader) error
	// setSnap installs node's snapshot handler.
	setSnap func(node uint64, f func(*tidekvpb.RaftMessage, io.Reader) error)
}

// grpcDelayCase starts three GRPC nodes sharing one Delays table and
// warms up every stream, so connection setup is not part of any timing.
func grpcDelayCase(t *testing.T) delayCase {
	book := &addrBook{}
	d := &Delays{}
	cfg := DefaultConfig()
	cfg.Delays = d
	trs := map[uint64]*GRPC{}
	hs := map[uint64]*recorder{}
	for n := uint64(1); n <= 3; n++ {
		hs[n] = newRecorder()
		trs[n] = startNode(t, cfg, book, n, hs[n])
	}
	c := delayCase{
		delays: d,
		send:   func(from, to, i uint64) bool { return trs[from].Send(msg(1, from, to, i)) },
		rec:    func(n uint64) *recorder { return hs[n] },
		snap: func(ctx context.Context, from, to uint64, sst io.Reader) error {
			h := snapHeader()
			h.FromNodeId, h.ToNodeId = from, to
			return trs[from].SendSnapshot(ctx, h, sst)
		},
		setSnap: func(n uint64, f func(*tidekvpb.RaftMessage, io.Reader) error) { hs[n].setSnap(f) },
	}
	warmUp(t, c)
	return c
}

func memDelayCase(t *testing.T) delayCase {
	net, hs, _ := memNet(t, 3)
	d := &Delays{}
	net.SetDelays(d)
	c := delayCase{
		delays: d,
		send:   func(from, to, i uint64) bool { return net.Transport(from).Send(msg(1, from, to, i)) },
		rec:    func(n uint64) *recorder { return hs[n] },
		snap: func(ctx context.Context, from, to uint64, sst io.Reader) error {
			h := snapHeader()
			h.FromNodeId, h.ToNodeId = from, to
			return net.Transport(from).SendSnapshot(ctx, h, sst)
		},
		setSnap: func(n uint64, f func(*tidekvpb.RaftMessage, io.Reader) error) { hs[n].setSnap(f) },
	}
	warmUp(t, c)
	return c
}

func warmUp(t *testing.T, c delayCase) {
	t.Helper()
	for from := uint64(1); from <= 3; from++ {
		for to := uint64(1); to <= 3; to++ {
			if from != to {
				c.send(from, to, 1<<40)
				receive(t, c.rec(to).msgs, 1)
			}
		}
	}
}

func forBoth(t *testing.T, test func(t *testing.T, c delayCase)) {
	t.Run("grpc", func(t *testing.T) { test(t, grpcDelayCase(t)) })
	t.Run("mem", func(t *testing.T) { test(t, memDelayCase(t)) })
}

// TestDelayOrderedAndNeverEarly: each message arrives in order and no
// sooner than the delay after its own Send; Send itself does not wait.
func TestDelayOrderedAndNeverEarly(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		// Send returns under an hour's delay: one that waited would not
		// be back within the 10 s that tell a hang. (Each Send used to be
		// timed against the 50 ms delay, which a loaded machine's
		// scheduling can exceed without any wait in Send.)
		c.delays.Set(1, 3, time.Hour)
		sent := make(chan bool, 1)
		go func() { sent <- c.send(1, 3, 1) }()
		select {
		case ok := <-sent:
			if !ok {
				t.Fatal("send under an hour's delay dropped")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Send waited for its message's delay")
		}

		c.delays.Set(1, 2, testDelay)
		const n = 20
		sendAt := make([]time.Time, n)
		for i := range sendAt {
			sendAt[i] = time.Now()
			if !c.send(1, 2, uint64(i)) {
				t.Fatalf("send %d dropped", i)
			}
			time.Sleep(2 * time.Millisecond) // spread sends across several batches
		}
		for i, a := range receiveTimed(t, c.rec(2), n) {
			if a.m.GetMessage().GetIndex() != uint64(i) {
				t.Fatalf("message %d arrived as %d-th", a.m.GetMessage().GetIndex(), i)
			}
			if lat := a.at.Sub(sendAt[i]); lat < testDelay || lat > testDelay+slack {
				t.Fatalf("message %d took %v with a %v delay", i, lat, testDelay)
			}
		}
	})
}

// TestDelayPipelines: a burst under delay d arrives about d later as a
// whole, not d per message or per batch.
func TestDelayPipelines(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		c.delays.Set(1, 2, testDelay)
		const n = 200
		start := time.Now()
		for i := uint64(0); i < n; i++ {
			if !c.send(1, 2, i) {
				t.Fatalf("send %d dropped", i)
			}
		}
		got := receiveTimed(t, c.rec(2), n)
		for i, a := range got {
			if a.m.GetMessage().GetIndex() != uint64(i) {
				t.Fatalf("message %d arrived as %d-th", a.m.GetMessage().GetIndex(), i)
			}
		}
		if first := got[0].at.Sub(start); first < testDelay {
			t.Fatalf("first message after %v, before the %v delay", first, testDelay)
		}
		// Serialised, this would take n*d = 10s.
		if total := got[n-1].at.Sub(start); total > 2*time.Second {
			t.Fatalf("%d messages under a %v delay took %v: not pipelined", n, testDelay, total)
		}
	})
}

// TestDelayChangesAtRuntime: a new delay applies to messages sent after
// the change, in both directions (longer and shorter).
func TestDelayChangesAtRuntime(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		lat := func(i uint64) time.Duration {
			start := time.Now()
			c.send(1, 2, i)
			a := receiveTimed(t, c.rec(2), 1)[0]
			if a.m.GetMessage().GetIndex() != i {
				t.Fatalf("got %v, want index %d", a.m, i)
			}
			return a.at.Sub(start)
		}
		const long = 400 * time.Millisecond
		c.delays.Set(1, 2, long)
		if l := lat(1); l < long {
			t.Fatalf("after raising the delay to %v: %v", long, l)
		}
		// Removed, a delay no longer applies: an hour's would keep the
		// message past receiveTimed's 10 s. (The message used to be timed
		// against the 400 ms delay, which a loaded machine's scheduling
		// can exceed without any delay.)
		c.delays.Set(1, 2, time.Hour)
		c.delays.Set(1, 2, 0)
		lat(2)
		c.delays.SetLocalities(map[uint64]string{1: "a", 2: "b"}, UniformRTT(2*testDelay))
		if l := lat(3); l < testDelay {
			t.Fatalf("after SetLocalities with one-way %v: %v", testDelay, l)
		}
	})
}

// TestDelayOnlyItsPair: delays are per ordered pair; traffic on other
// pairs, and the reverse direction, is not held up behind a delayed one
// (receive's deadline is far shorter than the delay).
func TestDelayOnlyItsPair(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		c.delays.Set(1, 3, time.Hour)
		c.send(1, 3, 1) // on the emulated wire for the rest of the test
		c.send(1, 2, 2)
		c.send(3, 1, 3)
		receive(t, c.rec(2).msgs, 1)
		receive(t, c.rec(1).msgs, 1)
		select {
		case m := <-c.rec(3).msgs:
			t.Fatalf("delivered %v an hour early", m)
		default:
		}
	})
}

// TestDelayZeroUnaffected: a table with no delay for a pair behaves as no
// table: many messages pass in order, quickly.
func TestDelayZeroUnaffected(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		c.delays.Set(2, 1, time.Hour) // another pair only
		const n = 3000
		start := time.Now()
		for i := uint64(0); i < n; i++ {
			if !c.send(1, 2, i) {
				t.Fatalf("send %d dropped", i)
			}
		}
		for i, m := range receive(t, c.rec(2).msgs, n) {
			if m.GetMessage().GetIndex() != uint64(i) {
				t.Fatalf("message %d arrived as %d-th", m.GetMessage().GetIndex(), i)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%d undelayed messages took %v", n, d)
		}
	})
}

// TestDelaySnapshot: a snapshot reaches the receiver no sooner than the
// pair's delay; a caller giving up during the delay gets its context's
// error.
func TestDelaySnapshot(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		c.delays.Set(1, 2, testDelay)
		reached := make(chan time.Time, 1)
		c.setSnap(2, func(_ *tidekvpb.RaftMessage, r io.Reader) error {
			reached <- time.Now()
			_, err := io.Copy(io.Discard, r)
			return err
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := c.snap(ctx, 1, 2, bytes.NewReader(make([]byte, 100<<10))); err != nil {
			t.Fatal(err)
		}
		if l := (<-reached).Sub(start); l < testDelay || l > testDelay+slack {
			t.Fatalf("snapshot reached the receiver after %v with a %v delay", l, testDelay)
		}

		c.delays.Set(1, 2, time.Hour)
		short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancelShort()
		if err := c.snap(short, 1, 2, bytes.NewReader(nil)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("snapshot cancelled during its delay: %v", err)
		}
		select {
		case <-reached:
			t.Fatal("cancelled snapshot reached the receiver")
		default:
		}
	})
}

// TestWaitUntil: a due time already passed returns without making a
// timer (the undelayed path); a later one is waited for; stop ends a wait.
func TestWaitUntil(t *testing.T) {
	var timer *time.Timer
	stop := make(chan struct{})
	if !waitUntil(&timer, monoNow()-1, stop) || timer != nil {
		t.Fatal("past due time waited or made a timer")
	}
	start := time.Now()
	if !waitUntil(&timer, monoNow()+int64(20*time.Millisecond), stop) {
		t.Fatal("wait reported stop")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("woke after %v, before the due time", d)
	}
	close(stop)
	start = time.Now()
	if waitUntil(&timer, monoNow()+int64(time.Hour), stop) {
		t.Fatal("wait ignored stop")
	}
	if d := time.Since(start); d > slack {
		t.Fatalf("stop took %v to end the wait", d)
	}
}

func BenchmarkDelaysGet(b *testing.B) {
	full := &Delays{}
	locs := map[uint64]string{}
	for n := uint64(1); n <= 9; n++ {
		locs[n] = string(rune('a' + n%3))
	}
	full.SetLocalities(locs, UniformRTT(100*time.Millisecond))
	for _, c := range []struct {
		name string
		d    *Delays
	}{{"nil", nil}, {"empty", &Delays{}}, {"9nodes", full}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				_ = c.d.dueTime(uint64(i%9+1), 1)
			}
		})
	}
}
