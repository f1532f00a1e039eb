package security

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeClock is a budget's clock, moved by hand from any goroutine.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// held is a derivation in progress: a blocking fake hasher that holds its
// slot until released.
type held struct {
	release chan struct{}
	done    chan error
}

// hold starts a derivation of b that blocks; it returns once the
// derivation holds its slot.
func hold(t *testing.T, b *derivationBudget, during func()) held {
	t.Helper()
	h := held{release: make(chan struct{}), done: make(chan error, 1)}
	started := make(chan struct{})
	go func() {
		h.done <- b.do(func() (time.Duration, bool) {
			close(started)
			<-h.release
			during()
			return 0, false
		})
	}()
	select {
	case <-started:
	case err := <-h.done:
		t.Fatalf("the held derivation was refused: %v", err)
	}
	return h
}

// finish releases h and waits for its slot to be given back.
func (h held) finish(t *testing.T) {
	t.Helper()
	close(h.release)
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
}

// wantBusy expects b to refuse a derivation, without running it, with a
// wait of after.
func wantBusy(t *testing.T, b *derivationBudget, after time.Duration) {
	t.Helper()
	ran := false
	err := b.do(func() (time.Duration, bool) { ran = true; return 0, false })
	var busy *LoginBusyError
	if !errors.As(err, &busy) || ran || busy.After != after {
		t.Fatalf("derivation: ran %v, %v, want a refusal with a wait of %v and nothing derived", ran, err, after)
	}
	if busy.RetryAfter() != time.Second || busy.Error() != "too many login attempts, retry later" {
		t.Fatalf("refusal %q, retry after %v", busy.Error(), busy.RetryAfter())
	}
}

// budgetOn returns a budget of c on a node of procs CPUs and a quota of
// quota CPUs (0: none), timed by the clock it returns.
func budgetOn(c LoginConfig, procs int, quota float64) (*derivationBudget, *fakeClock) {
	b := newDerivationBudget(c)
	b.procs, b.quota = func() int { return procs }, func() float64 { return quota }
	clock := &fakeClock{}
	b.now = clock.now
	return b, clock
}

// derive expects b to admit a derivation that takes d on clock, and d of
// CPU time.
func derive(t *testing.T, b *derivationBudget, clock *fakeClock, d time.Duration) {
	t.Helper()
	if err := b.do(func() (time.Duration, bool) { clock.advance(d); return d, true }); err != nil {
		t.Fatalf("a derivation of %v: %v, want it admitted", d, err)
	}
}

// The default budget admits a burst of derivations one after another, then
// refuses until the credit is repaid, and admits again; credit saved while
// idle is at most the burst. On 2 CPUs (0.2 cores) the first of 30 ms from
// a full burst of 1 s leaves 970 ms, each further one 24 ms less (6 ms
// refill while it derives): 42 are admitted, leaving 14 ms of debt, 70 ms
// of refill. On one CPU's quota (0.1 cores), 27 ms less each: 37, leaving
// 2 ms of debt, 20 ms.
func TestDerivationBudgetBurst(t *testing.T) {
	for _, c := range []struct {
		name     string
		procs    int
		quota    float64
		admitted int
		after    time.Duration
		// repay is the refill of a debt of 0.1 s.
		repay time.Duration
	}{{"2 CPUs", 2, 0, 42, 70 * time.Millisecond, 500 * time.Millisecond}, {"one CPU's quota", 4, 1, 37, 20 * time.Millisecond, time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			b, clock := budgetOn(DefaultLoginConfig(), c.procs, c.quota)
			for range c.admitted {
				derive(t, b, clock, 30*time.Millisecond)
			}
			wantBusy(t, b, c.after)
			clock.advance(c.after - time.Microsecond)
			wantBusy(t, b, time.Microsecond)
			clock.advance(time.Microsecond)
			derive(t, b, clock, 0)

			// An hour idle saves the burst and no more: a derivation of
			// 1.1 s is admitted and leaves a debt of 0.1 s.
			clock.advance(time.Hour)
			derive(t, b, clock, 1100*time.Millisecond)
			wantBusy(t, b, c.repay)
		})
	}
}

// A derivation is charged the time it took, not a count: a thousand that
// take no time cost nothing, one of 800 ms leaves 200 ms of the default
// burst (on 2 CPUs), and one of 300 ms admitted with it is charged in
// full, less the 60 ms refilled meanwhile: a debt of 40 ms, 200 ms of
// refill.
func TestDerivationBudgetChargesMeasuredTime(t *testing.T) {
	b, clock := budgetOn(DefaultLoginConfig(), 2, 0)
	for range 1000 {
		derive(t, b, clock, 0)
	}
	derive(t, b, clock, 800*time.Millisecond)
	derive(t, b, clock, 300*time.Millisecond)
	wantBusy(t, b, 200*time.Millisecond)
}

// A derivation is charged the lesser of its wall time and the CPU time it
// reports: 800 ms on the wall for 30 ms of CPU (other processes held the
// cores) costs 30 ms; 30 ms on the wall for 800 ms of CPU (the node's
// other goroutines, when derived in its process) costs 30 ms. From
// the default burst on 2 CPUs (0.2 cores) that leaves 946 ms (6 ms
// refilled in the second); a derivation of 1.1 s then refills the burst
// whole and leaves a debt of 100 ms, 500 ms of refill. Charged the wall
// time, the first would have left 200 ms and the debt been 704 ms.
func TestDerivationBudgetChargesTheLesserOfWallAndCPU(t *testing.T) {
	b, wall := budgetOn(DefaultLoginConfig(), 2, 0)
	for _, d := range []struct{ wall, cpu time.Duration }{{800 * time.Millisecond, 30 * time.Millisecond}, {30 * time.Millisecond, 800 * time.Millisecond}} {
		if err := b.do(func() (time.Duration, bool) { wall.advance(d.wall); return d.cpu, true }); err != nil {
			t.Fatalf("a derivation of %v on the wall and %v of CPU: %v", d.wall, d.cpu, err)
		}
	}
	if b.credit != float64(946*time.Millisecond) {
		t.Fatalf("credit %v after the two, want 946ms", time.Duration(b.credit))
	}
	if err := b.do(func() (time.Duration, bool) {
		wall.advance(1100 * time.Millisecond)
		return 1100 * time.Millisecond, true
	}); err != nil {
		t.Fatalf("a derivation of 1.1 s with the burst nearly whole: %v", err)
	}
	wantBusy(t, b, 500*time.Millisecond)
}

// A derivation whose CPU time is not known is charged its wall time.
func TestDerivationBudgetChargesWallWithoutCPUTime(t *testing.T) {
	b, wall := budgetOn(DefaultLoginConfig(), 2, 0)
	if err := b.do(func() (time.Duration, bool) { wall.advance(1100 * time.Millisecond); return 0, false }); err != nil {
		t.Fatal(err)
	}
	wantBusy(t, b, 500*time.Millisecond)
}

// The process's CPU clock moves with the work the process does.
func TestProcessCPUMoves(t *testing.T) {
	start, ok := processCPU()
	if !ok {
		t.Skip("the kernel gives no process CPU time here")
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if now, _ := processCPU(); now-start >= 20*time.Millisecond {
			return
		}
	}
	t.Fatal("a second of spinning did not add 20 ms to the process's CPU time")
}

// Credit is not concurrency: max(1, floor(budget)) derivations run at
// once, and the next is refused at once, credit or not, with no wait to
// name (a slot frees within a derivation's time); a slot given back is
// taken again.
func TestDerivationBudgetSlots(t *testing.T) {
	t.Run("default on a 1-CPU quota: one slot", func(t *testing.T) {
		b, _ := budgetOn(DefaultLoginConfig(), 2, 1)
		h := hold(t, b, func() {})
		wantBusy(t, b, 0)
		h.finish(t)
		hold(t, b, func() {}).finish(t)
	})
	t.Run("default on 2 CPUs: a slot per core", func(t *testing.T) {
		b, _ := budgetOn(DefaultLoginConfig(), 2, 0)
		first, second := hold(t, b, func() {}), hold(t, b, func() {})
		wantBusy(t, b, 0)
		first.finish(t)
		third := hold(t, b, func() {})
		wantBusy(t, b, 0)
		second.finish(t)
		third.finish(t)
		hold(t, b, func() {}).finish(t)
	})
}

// The share must be of the node's CPUs, and not so small that a
// derivation's debt outlasts reason; the burst must admit a login and
// not let a flood take the node for long.
func TestLoginConfigValidate(t *testing.T) {
	if err := DefaultLoginConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, share := range []float64{0, -0.1, 0.0001, 1.01} {
		if err := (LoginConfig{DerivationShare: share, DerivationBurst: time.Second}).Validate(); err == nil {
			t.Errorf("share %v accepted", share)
		}
	}
	for _, burst := range []time.Duration{0, -time.Second, time.Minute + time.Nanosecond} {
		if err := (LoginConfig{DerivationShare: 0.1, DerivationBurst: burst}).Validate(); err == nil {
			t.Errorf("burst %v accepted", burst)
		}
	}
	for _, grace := range []time.Duration{-time.Nanosecond, 5*time.Second + time.Nanosecond} {
		if err := (LoginConfig{DerivationShare: 0.1, DerivationBurst: time.Second, DerivationGrace: grace}).Validate(); err == nil {
			t.Errorf("grace %v accepted", grace)
		}
	}
}

// While the derivation budget is held, a login that would derive is
// refused unchecked, as busy: over gRPC ResourceExhausted, over HTTP 429
// with Retry-After, counted as neither user's nor address's failure. A
// user whose password was verified before, a client certificate and a
// session are not refused; once the budget frees, the login goes through.
func TestLoginBusy(t *testing.T) {
	dir, _, seen := testDirectory(t)
	// Share 1 of one CPU: one slot. The budget's clock stands still, so
	// the held derivation is charged nothing however long the test holds
	// it on a loaded machine: the login after it finds credit.
	dir.derivations.procs, dir.derivations.now = func() int { return 1 }, (&fakeClock{}).now
	a := HTTPAuth{Authenticator: Authenticator{Users: dir}, Sessions: NewSessions()}
	o := testCerts(t)
	if _, err := dir.PasswordRole("reader", "rpw", "10.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	session, err := a.Login("reader", "rpw", "10.0.0.1:1000")
	if err != nil {
		t.Fatal(err)
	}

	h := hold(t, dir.derivations, func() {})
	if _, err := dir.PasswordRole("writer", "wpw", "10.0.0.2:1000"); !IsLoginBusy(err) {
		t.Fatalf("a login while the budget is held: %v, want it refused as busy", err)
	}
	if f := (*seen)[len(*seen)-1]; f.Result != LoginBusy || f.User != "writer" || f.Source != "10.0.0.2" || f.BackOff != time.Second {
		t.Errorf("reported %+v, want writer from 10.0.0.2 busy for 1s", f)
	}
	if w, _ := dir.limiter.wait("writer", "10.0.0.2", time.Now().Add(time.Hour)); dir.limiter.users["writer"].n != 0 || dir.limiter.sources["10.0.0.2"].n != 0 || w != 0 {
		t.Errorf("a busy refusal counted as a failure of the user or the address")
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"a login that would derive", withBasic("writer", "wpw"), codes.ResourceExhausted},
		{"a wrong password of a verified user", withBasic("reader", "guess"), codes.ResourceExhausted},
		{"a verified user", withSource(withBasic("reader", "rpw"), "10.0.0.1:1001"), codes.OK},
		{"a client certificate", withCert(readCert(t, o.path(ClientCert("alice")))), codes.OK},
	} {
		if got := status.Code(a.authorize(c.ctx, "/tidekv.KV/Get")); got != c.want {
			t.Errorf("%s while the budget is held: %v, want %v", c.name, got, c.want)
		}
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		name       string
		req        func(*http.Request)
		want       int
		retryAfter string
	}{
		{"Basic that would derive", func(r *http.Request) { r.SetBasicAuth("writer", "wpw") }, http.StatusTooManyRequests, "1"},
		{"Basic of a verified user", func(r *http.Request) { r.SetBasicAuth("reader", "rpw") }, http.StatusOK, ""},
		{"a session", func(r *http.Request) { r.AddCookie(session) }, http.StatusOK, ""},
	} {
		r := httptest.NewRequest("GET", "/api/ranges", nil)
		r.RemoteAddr = "10.0.0.1:2000"
		c.req(r)
		w := httptest.NewRecorder()
		a.Require(RoleRead, "ranges", ok, nil).ServeHTTP(w, r)
		if w.Code != c.want || w.Header().Get("Retry-After") != c.retryAfter || (c.want == http.StatusTooManyRequests && w.Header().Get("WWW-Authenticate") != "") {
			t.Errorf("%s while the budget is held: %d, Retry-After %q, WWW-Authenticate %q, want %d, %q, none",
				c.name, w.Code, w.Header().Get("Retry-After"), w.Header().Get("WWW-Authenticate"), c.want, c.retryAfter)
		}
	}
	if _, err := a.Login("writer", "wpw", "10.0.0.2:1000"); !IsLoginBusy(err) {
		t.Errorf("a dashboard login while the budget is held: %v, want busy", err)
	}

	h.finish(t)
	if r, err := dir.PasswordRole("writer", "wpw", "10.0.0.2:1000"); err != nil || r != RoleWrite {
		t.Fatalf("the login once the budget is free: %v %v", r, err)
	}
}

// A login whose password is being checked for another connection waits
// for that check rather than deriving again: a client opening a pool of
// connections with one password is not refused for want of budget.
func TestConcurrentLoginsDeriveOnce(t *testing.T) {
	dir, _, _ := testDirectory(t)
	dir.derivations.procs, dir.derivations.now = func() int { return 1 }, (&fakeClock{}).now // one slot, nothing charged
	writer, _ := dir.lookup("writer")
	// The first connection's check, in progress: it holds the one slot.
	first := &checkCall{done: make(chan struct{})}
	dir.checking[checkKey{"writer", verifiedSum(writer, "wpw")}] = first
	h := hold(t, dir.derivations, func() {})
	type result struct {
		r   Role
		err error
	}
	second := make(chan result, 1)
	go func() {
		r, err := dir.PasswordRole("writer", "wpw", "10.0.0.2:1001")
		second <- result{r, err}
	}()
	first.ok = true
	close(first.done)
	if got := <-second; got.err != nil || got.r != RoleWrite {
		t.Fatalf("a second login of the password in check: %v %v, want it to share the first's outcome", got.r, got.err)
	}
	h.finish(t)
}

// The node's CPUs are read at most once a second, refusals included: a
// flood's refused logins must not each open cgroup files. A burst of
// 10 ms on one CPU's quota (0.1 cores): a derivation of 30 ms leaves a
// debt of 20 ms, 200 ms of refill.
func TestDerivationBudgetReadsCPUsOncePerSecond(t *testing.T) {
	reads := 0
	b, clock := budgetOn(LoginConfig{DerivationShare: 0.1, DerivationBurst: 10 * time.Millisecond}, 2, 0)
	b.quota = func() float64 { reads++; return 1 }
	derive(t, b, clock, 30*time.Millisecond)
	for range 3 {
		wantBusy(t, b, 200*time.Millisecond)
	}
	clock.advance(time.Second)
	derive(t, b, clock, 0)
	if reads != 2 {
		t.Errorf("the quota was read %d times in two seconds, want 2", reads)
	}
}
