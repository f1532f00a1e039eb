package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// When a delayed message or snapshot arrives is tested on a manual clock
// (useManualClock), exactly; the wall-clock assertions left have lower
// bounds that the code's own reading follows, and upper bounds that only
// tell a hang.
const testDelay = 50 * time.Millisecond

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

// manualDelayClock is the twin of the monotonic clock that times delayed
// messages: it moves only when the test sets it, and a wait returns once
// it reaches the wait's due time. A message is then delivered exactly when
// the clock reaches its due time, which the test can assert without
// racing the scheduler.
type manualDelayClock struct {
	mu    sync.Mutex
	t     int64
	moved chan struct{} // closed and replaced when t moves
	gen   int           // how many times t moved
	// blocked counts, per generation, the waits that saw the clock at
	// that generation short of their due time and are blocked.
	blocked map[int]int
}

// useManualClock times c's delayed messages by a manual clock; the test
// calls it before it sets any delay.
func useManualClock(c delayCase) *manualDelayClock {
	clk := &manualDelayClock{t: int64(time.Hour), moved: make(chan struct{}), blocked: map[int]int{}}
	c.delays.clock = clk
	return clk
}

func (c *manualDelayClock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualDelayClock) set(t int64) {
	c.mu.Lock()
	c.t = t
	c.gen++
	close(c.moved)
	c.moved = make(chan struct{})
	c.mu.Unlock()
}

func (c *manualDelayClock) waitUntil(_ **time.Timer, due int64, stop <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if c.t >= due {
			c.mu.Unlock()
			return true
		}
		gen, moved := c.gen, c.moved
		c.blocked[gen]++
		c.mu.Unlock()
		select {
		case <-stop:
			return false
		case <-moved:
		}
	}
}

// awaitBlocked waits until n waits have seen the clock where it is now
// and are blocked short of their due times. Whatever they hold is then
// held by the clock: a message that should be delayed but was not (or is
// released early) never makes the count, and the test fails here. A
// wait's due time is fixed when it starts, so a test moves the clock only
// after.
func (c *manualDelayClock) awaitBlocked(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		b := c.blocked[c.gen]
		c.mu.Unlock()
		if b >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waits blocked on the clock after 10s, want %d", b, n)
		}
	}
}

// notYet fails t if h has received anything.
func notYet(t *testing.T, h *recorder, what string) {
	t.Helper()
	select {
	case m := <-h.msgs:
		t.Fatalf("%s: message %d delivered", what, m.GetMessage().GetIndex())
	default:
	}
}

// TestDelayOrderedAndNeverEarly: each message arrives in order, no sooner
// than the delay after its own Send and as soon as that has passed; Send
// itself does not wait.
func TestDelayOrderedAndNeverEarly(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		clk := useManualClock(c)
		// Send returns under a delay its clock never reaches: one that
		// waited would not be back within the 10 s that tell a hang.
		// (Each Send used to be timed against the 50 ms delay, which a
		// loaded machine's scheduling can exceed without any wait.)
		c.delays.Set(1, 3, time.Hour)
		sent := make(chan bool, 1)
		go func() { sent <- c.send(1, 3, 1) }()
		select {
		case ok := <-sent:
			if !ok {
				t.Fatal("send under a delay dropped")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Send waited for its message's delay")
		}

		// Sends 2 ms apart on the clock: each message has its own due
		// time, so they leave in several batches. The clock stops just
		// short of each due time (nothing more may arrive), then at it
		// (the message must arrive, whatever the scheduler does: the
		// wall-clock bound of 1.55 s this replaces was exceeded on a
		// starved machine).
		c.delays.Set(1, 2, testDelay)
		const n = 20
		sendAt := make([]int64, n)
		for i := range sendAt {
			sendAt[i] = clk.now()
			if !c.send(1, 2, uint64(i)) {
				t.Fatalf("send %d dropped", i)
			}
			clk.set(clk.now() + int64(2*time.Millisecond))
		}
		for i := range n {
			due := sendAt[i] + int64(testDelay)
			clk.set(due - 1)
			// Two waits held by the clock: node 3's message and
			// message i, not merely not handled yet.
			clk.awaitBlocked(t, 2)
			notYet(t, c.rec(2), fmt.Sprintf("1ns before message %d's due time", i))
			clk.set(due)
			if m := receive(t, c.rec(2).msgs, 1)[0]; m.GetMessage().GetIndex() != uint64(i) {
				t.Fatalf("message %d arrived as %d-th", m.GetMessage().GetIndex(), i)
			}
		}
	})
}

// TestDelayPipelines: a burst under delay d arrives d later as a whole,
// not d per message or per batch.
func TestDelayPipelines(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		clk := useManualClock(c)
		c.delays.Set(1, 2, testDelay)
		const n = 200
		start := clk.now()
		for i := uint64(0); i < n; i++ {
			if !c.send(1, 2, i) {
				t.Fatalf("send %d dropped", i)
			}
		}
		clk.set(start + int64(testDelay) - 1)
		clk.awaitBlocked(t, 1) // the burst is held by the clock
		notYet(t, c.rec(2), "1ns before the burst's due time")
		// Every message arrives with the clock at the delay: serialised,
		// the clock would have to move on by the delay per message or per
		// batch. (The burst used to be timed against 2 s of wall time.)
		clk.set(start + int64(testDelay))
		for i, m := range receive(t, c.rec(2).msgs, n) {
			if m.GetMessage().GetIndex() != uint64(i) {
				t.Fatalf("message %d arrived as %d-th", m.GetMessage().GetIndex(), i)
			}
		}
	})
}

// TestDelayChangesAtRuntime: a new delay applies to messages sent after
// the change, in both directions (longer and shorter).
func TestDelayChangesAtRuntime(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		clk := useManualClock(c)
		// arrivesAfter sends message i and checks it arrives once the
		// clock has moved on by delay, not before.
		arrivesAfter := func(i uint64, delay time.Duration) {
			t.Helper()
			start := clk.now()
			c.send(1, 2, i)
			if delay > 0 {
				clk.set(start + int64(delay) - 1)
				clk.awaitBlocked(t, 1) // the message is held by the clock
				notYet(t, c.rec(2), fmt.Sprintf("%v into a %v delay", delay-1, delay))
				clk.set(start + int64(delay))
			}
			if m := receive(t, c.rec(2).msgs, 1)[0]; m.GetMessage().GetIndex() != i {
				t.Fatalf("got %v, want index %d", m, i)
			}
		}
		const long = 400 * time.Millisecond
		c.delays.Set(1, 2, long)
		arrivesAfter(1, long)
		// Removed, a delay no longer applies: the message arrives with
		// the clock where it was. (It used to be timed against the 400 ms
		// delay, which a loaded machine's scheduling can exceed.)
		c.delays.Set(1, 2, 0)
		arrivesAfter(2, 0)
		c.delays.SetLocalities(map[uint64]string{1: "a", 2: "b"}, UniformRTT(2*testDelay))
		arrivesAfter(3, testDelay)
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

// TestDelaySnapshot: a snapshot reaches the receiver when the pair's
// delay has passed on the clock, not before; a caller giving up during the
// delay gets its context's error.
func TestDelaySnapshot(t *testing.T) {
	forBoth(t, func(t *testing.T, c delayCase) {
		clk := useManualClock(c)
		c.delays.Set(1, 2, testDelay)
		reached := make(chan struct{}, 1)
		c.setSnap(2, func(_ *tidekvpb.RaftMessage, r io.Reader) error {
			reached <- struct{}{}
			_, err := io.Copy(io.Discard, r)
			return err
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := clk.now()
		done := make(chan error, 1)
		go func() { done <- c.snap(ctx, 1, 2, bytes.NewReader(make([]byte, 100<<10))) }()
		clk.awaitBlocked(t, 1) // the snapshot's wait began with the clock at start
		clk.set(start + int64(testDelay) - 1)
		clk.awaitBlocked(t, 1)
		select {
		case <-reached:
			t.Fatal("snapshot reached the receiver before its delay passed")
		default:
		}
		// At the delay it must go through, whatever the scheduler does:
		// the wall-clock bound of 1.55 s this replaces could be exceeded
		// on a starved machine.
		clk.set(start + int64(testDelay))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		default:
			t.Fatal("snapshot sent but not received")
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
	// A wait that ignored stop would take the hour: not back within the
	// 10 s that tell a hang. (It was bounded by 1.5 s of wall time.)
	ended := make(chan bool, 1)
	go func() { ended <- waitUntil(&timer, monoNow()+int64(time.Hour), stop) }()
	select {
	case ok := <-ended:
		if ok {
			t.Fatal("wait ignored stop")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not end the wait")
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
