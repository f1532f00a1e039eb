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

// Derivations keep at most the budget's cores busy: a slot under a budget
// of one core rests 1/budget - 1 times as long as its derivation took; a
// budget of whole cores needs no rest.
func TestDerivationRest(t *testing.T) {
	for _, c := range []struct {
		budget float64
		slots  int
		want   time.Duration
	}{
		{0.2, 1, 120 * time.Millisecond}, // the default share on 2 CPUs
		{0.1, 1, 270 * time.Millisecond}, // the default share on one CPU's quota
		{0.5, 1, 30 * time.Millisecond},
		{1, 1, 0},
		{1.5, 1, 0},
		{3.2, 3, 0},
	} {
		if got := restAfter(30*time.Millisecond, c.budget, c.slots); got != c.want {
			t.Errorf("restAfter(30ms, budget %g, slots %d) = %v, want %v", c.budget, c.slots, got, c.want)
		}
	}
}

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
		h.done <- b.do(func() {
			close(started)
			<-h.release
			during()
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
	err := b.do(func() { ran = true })
	var busy *LoginBusyError
	if !errors.As(err, &busy) || ran || busy.After != after {
		t.Fatalf("derivation: ran %v, %v, want a refusal with a wait of %v and nothing derived", ran, err, after)
	}
	if busy.RetryAfter() != time.Second || busy.Error() != "too many login attempts, retry later" {
		t.Fatalf("refusal %q, retry after %v", busy.Error(), busy.RetryAfter())
	}
}

// A budget of whole cores derives that many hashes at once and refuses
// the next at once; a slot given back is taken again.
func TestDerivationBudgetRefusesWhenHeld(t *testing.T) {
	b := newDerivationBudget(LoginConfig{DerivationShare: 1})
	b.procs = func() int { return 2 }
	var clock fakeClock
	b.now = clock.now
	first, second := hold(t, b, func() {}), hold(t, b, func() {})
	wantBusy(t, b, 0)
	first.finish(t)
	third := hold(t, b, func() {})
	wantBusy(t, b, 0)
	second.finish(t)
	third.finish(t)
	if err := b.do(func() {}); err != nil {
		t.Fatal(err)
	}
}

// The default share on a node of 2 CPUs, or of 4 CPUs' GOMAXPROCS and
// one CPU's quota: one slot, resting after each derivation until it has
// been busy the share of the time, refusing meanwhile.
func TestDerivationBudgetRests(t *testing.T) {
	for _, c := range []struct {
		name  string
		procs int
		quota float64
		rest  time.Duration
	}{{"2 CPUs", 2, 0, 120 * time.Millisecond}, {"one CPU's quota", 4, 1, 270 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			b := newDerivationBudget(DefaultLoginConfig())
			b.procs, b.quota = func() int { return c.procs }, func() float64 { return c.quota }
			var clock fakeClock
			b.now = clock.now
			h := hold(t, b, func() { clock.advance(30 * time.Millisecond) })
			wantBusy(t, b, 0)
			h.finish(t)
			wantBusy(t, b, c.rest)
			clock.advance(c.rest - time.Millisecond)
			wantBusy(t, b, time.Millisecond)
			clock.advance(time.Millisecond)
			hold(t, b, func() {}).finish(t)
		})
	}
}

// The share must be of the node's CPUs, and not so small that a rest
// outlasts reason.
func TestLoginConfigValidate(t *testing.T) {
	if err := DefaultLoginConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, share := range []float64{0, -0.1, 0.0001, 1.01} {
		if err := (LoginConfig{DerivationShare: share}).Validate(); err == nil {
			t.Errorf("share %v accepted", share)
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
	dir.derivations.procs = func() int { return 1 } // share 1: one slot, no rest
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
	dir.derivations.procs = func() int { return 1 } // one slot, no rest
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
// flood's refused logins must not each open cgroup files.
func TestDerivationBudgetReadsCPUsOncePerSecond(t *testing.T) {
	b := newDerivationBudget(DefaultLoginConfig())
	reads := 0
	b.procs, b.quota = func() int { return 2 }, func() float64 { reads++; return 1 }
	var clock fakeClock
	b.now = clock.now
	hold(t, b, func() { clock.advance(30 * time.Millisecond) }).finish(t)
	for range 3 {
		wantBusy(t, b, 270*time.Millisecond)
	}
	clock.advance(time.Second)
	hold(t, b, func() {}).finish(t)
	if reads != 2 {
		t.Errorf("the quota was read %d times in two seconds, want 2", reads)
	}
}
