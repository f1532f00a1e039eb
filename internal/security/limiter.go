package security

import (
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Password guessing is bounded per claimed user name and per source
// address: after freeFailures failed logins in a row, the next one is
// allowed only backoffBase after the last, then twice that, and so on up
// to backoffMax. Meanwhile every login of that user or from that address
// is refused at once, without deriving a hash, so a flood costs the node
// next to nothing and a guess during the back-off learns nothing (not even
// a right password is accepted). A source that has logged in as a user
// before (a trusted pair) is exempt from that user's back-off, so that
// someone guessing a user's password from elsewhere does not lock the user
// out; it is still subject to its own address's. A success resets no
// failure count: a guesser who also knows one password would otherwise
// clear its record between guesses (docs/security.md).
const (
	freeFailures = 5
	backoffBase  = time.Second
	backoffMax   = 5 * time.Minute
	// forgetAfter: failures this old no longer count.
	forgetAfter = 15 * time.Minute
	// maxTracked bounds each of the limiter's maps: names, addresses and
	// trusted pairs an attacker can make up.
	maxTracked = 100_000
)

// RetryLaterError refuses a login during a back-off, before its password is
// checked.
type RetryLaterError struct{ After time.Duration }

func (e *RetryLaterError) Error() string {
	return fmt.Sprintf("too many failed logins for this user or from this address: retry in %v", e.RetryAfter())
}

// RetryAfter is the wait, rounded up to whole seconds.
func (e *RetryLaterError) RetryAfter() time.Duration { return wholeSeconds(e.After) }

// wholeSeconds rounds d up to whole seconds, as Retry-After counts them.
func wholeSeconds(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(d.Seconds())) * time.Second
}

// failures is one user's or address's run of failed logins.
type failures struct {
	n    int
	last time.Time
}

// wait is how long from now the next login must wait.
func (f failures) wait(now time.Time) time.Duration {
	if f.n < freeFailures {
		return 0
	}
	b := backoffMax
	if shift := f.n - freeFailures; shift < 20 {
		b = min(backoffBase<<shift, backoffMax)
	}
	return max(0, f.last.Add(b).Sub(now))
}

// loginLimiter counts failed logins per user and per source address.
type loginLimiter struct {
	mu      sync.Mutex
	users   map[string]failures
	sources map[string]failures
	// trusted: (user, source) → the last successful login, in Unix
	// nanoseconds. A logged-in user's every call succeeds again, so a
	// known pair is refreshed in place (atomically, after the lock of wait
	// is released) rather than written to the map under a second lock.
	trusted map[pair]*atomic.Int64
}

type pair struct{ user, source string }

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{users: map[string]failures{}, sources: map[string]failures{}, trusted: map[pair]*atomic.Int64{}}
}

// sourceHost is the address part of a source host:port (one client's
// connections differ only by port).
func sourceHost(source string) string {
	if h, _, err := net.SplitHostPort(source); err == nil {
		return h
	}
	return source
}

// wait is how long a login of user from source must wait (0: go ahead),
// and the pair's trust record if it has logged in before (for succeeded).
func (l *loginLimiter) wait(user, source string, now time.Time) (time.Duration, *atomic.Int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.sources[source].wait(now)
	t := l.trusted[pair{user, source}]
	if t == nil {
		w = max(w, l.users[user].wait(now))
	}
	return w, t
}

// failed counts a failed login and returns the back-off it leaves.
func (l *loginLimiter) failed(user, source string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w time.Duration
	for _, c := range []struct {
		m   map[string]failures
		key string
	}{{l.users, user}, {l.sources, source}} {
		f := c.m[c.key]
		if now.Sub(f.last) >= forgetAfter {
			f.n = 0
		}
		f.n++
		f.last = now
		if _, ok := c.m[c.key]; !ok {
			makeRoom(c.m, now, func(f failures) time.Time { return f.last })
		}
		c.m[c.key] = f
		w = max(w, f.wait(now))
	}
	return w
}

// succeeded trusts the pair of user and source; t is its record as wait
// returned it (nil: a new pair).
func (l *loginLimiter) succeeded(user, source string, now time.Time, t *atomic.Int64) {
	if t != nil {
		t.Store(now.UnixNano())
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := pair{user, source}
	if t = l.trusted[key]; t == nil {
		makeRoom(l.trusted, now, func(t *atomic.Int64) time.Time { return time.Unix(0, t.Load()) })
		t = new(atomic.Int64)
		l.trusted[key] = t
	}
	t.Store(now.UnixNano())
}

// makeRoom keeps m under maxTracked entries before one is added: it drops
// the entries whose last use is forgetAfter old, and if none is, any one.
func makeRoom[K comparable, V any](m map[K]V, now time.Time, last func(V) time.Time) {
	if len(m) < maxTracked {
		return
	}
	for k, v := range m {
		if now.Sub(last(v)) >= forgetAfter {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) < maxTracked {
			return
		}
		delete(m, k)
	}
}
