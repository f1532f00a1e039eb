package security

import (
	"fmt"
	"math"
	"net"
	"sync"
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
// out; it is still subject to its own address's.
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
func (e *RetryLaterError) RetryAfter() time.Duration {
	return time.Duration(math.Ceil(e.After.Seconds())) * time.Second
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
	trusted map[[2]string]time.Time // (user, source) → last successful login
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{users: map[string]failures{}, sources: map[string]failures{}, trusted: map[[2]string]time.Time{}}
}

// sourceHost is the address part of a source host:port (one client's
// connections differ only by port).
func sourceHost(source string) string {
	if h, _, err := net.SplitHostPort(source); err == nil {
		return h
	}
	return source
}

// wait is how long a login of user from source must wait (0: go ahead).
func (l *loginLimiter) wait(user, source string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.sources[source].wait(now)
	if _, ok := l.trusted[[2]string{user, source}]; !ok {
		w = max(w, l.users[user].wait(now))
	}
	return w
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

// succeeded trusts the pair of user and source.
func (l *loginLimiter) succeeded(user, source string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := [2]string{user, source}
	if _, ok := l.trusted[key]; !ok {
		makeRoom(l.trusted, now, func(t time.Time) time.Time { return t })
	}
	l.trusted[key] = now
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
