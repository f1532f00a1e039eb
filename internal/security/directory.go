package security

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"
)

// Directory answers who a user is and what role they hold, from a users
// file it re-reads at most once per ReloadEvery, so that `tidekv user`
// changes reach running nodes without a restart. It bounds password
// guessing (loginLimiter) and rehashes outdated hashes in the file.
type Directory struct {
	load func() (*UserFile, error)
	// rehash replaces a user's hash in the file if it is still old's.
	rehash func(old, new User) error
	now    func() time.Time
	every  time.Duration

	limiter *loginLimiter
	// derivations keeps the hashes derived for logins not yet verified
	// to the node's LoginConfig: its share of the CPUs and its burst.
	derivations *derivationBudget
	onFailure   func(LoginFailure)
	// hold is how long a login refused unchecked waits for its answer
	// (LoginConfig.RefusalHold), sleep how it waits; held counts the
	// refusals waiting, at most maxHeld (beyond, answered at once: a
	// flood of connections that do not wait must not pile up goroutines).
	hold  time.Duration
	sleep func(time.Duration)
	held  atomic.Int64

	mu    sync.Mutex
	users map[string]User
	// extra are users served beside the file's (Add).
	extra    map[string]User
	loadedAt time.Time
	// verified remembers, per user, sha256(stored hash, password) of the
	// last password that checked out, so that only a user's first call
	// pays for the derivation. A changed password changes the stored hash and so
	// misses.
	verified map[string][32]byte
	// checking holds the derivations in progress by user name and
	// verifiedSum, so that a client opening a pool of connections with
	// one password derives it once rather than once per connection (the
	// rest of which the budget would refuse).
	checking map[checkKey]*checkCall
}

type checkKey struct {
	user string
	sum  [32]byte
}

// checkCall is one derivation in progress; ok and err are set when done
// is closed.
type checkCall struct {
	done chan struct{}
	ok   bool
	err  error
}

// ReloadEvery is how stale a node's view of the users file may be.
const ReloadEvery = time.Second

// NewDirectory serves the users file at path ("" for none: only root, by
// certificate).
func NewDirectory(f Files, path string) (*Directory, error) {
	load := func() (*UserFile, error) { return &UserFile{}, nil }
	if path != "" && !f.Exists(path) {
		// A mistyped path would otherwise lock out every password user.
		return nil, fmt.Errorf("users file %s does not exist (create it with `tidekv user add`)", path)
	}
	rehash := func(User, User) error { return nil }
	if path != "" {
		load = func() (*UserFile, error) { return ReadUserFile(f, path) }
		rehash = func(old, new User) error { return rehashInFile(f, path, old, new) }
	}
	d := &Directory{load: load, rehash: rehash, now: time.Now, sleep: time.Sleep, every: ReloadEvery, verified: map[string][32]byte{}, checking: map[checkKey]*checkCall{},
		limiter: newLoginLimiter(), derivations: newDerivationBudget(DefaultLoginConfig()), hold: DefaultLoginConfig().RefusalHold, onFailure: func(LoginFailure) {}}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d, d.reloadLocked()
}

func (d *Directory) reloadLocked() error {
	uf, err := d.load()
	if err != nil {
		return err
	}
	users := make(map[string]User, len(uf.Users))
	for _, u := range uf.Users {
		users[u.Name] = u
	}
	for name, u := range d.extra {
		users[name] = u
	}
	d.users, d.loadedAt = users, d.now()
	return nil
}

func (d *Directory) lookup(name string) (User, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookupLocked(name, d.now())
}

func (d *Directory) lookupLocked(name string, now time.Time) (User, bool) {
	if now.Sub(d.loadedAt) >= d.every {
		if err := d.reloadLocked(); err != nil {
			// Keep serving the last good list; the file is being fixed.
			log.Printf("security: keeping the previous users: %v", err)
			d.loadedAt = now
		}
	}
	u, ok := d.users[name]
	return u, ok
}

// errBadCredentials answers both an unknown user and a wrong password, so
// a guess does not learn which users exist.
var errBadCredentials = errors.New("invalid user name or password")

// CertRole is the role of a user who presented a client certificate.
func (d *Directory) CertRole(name string) (Role, error) {
	role, ok := d.role(name)
	if !ok {
		return RoleNone, fmt.Errorf("user %s of the client certificate is not a user of this cluster", name)
	}
	return role, nil
}

// role is the role of a listed user (root always), without a password:
// for a client certificate or a session a password opened.
func (d *Directory) role(name string) (Role, bool) {
	if name == RootUser {
		return RoleAdmin, true
	}
	u, ok := d.lookup(name)
	if !ok {
		return RoleNone, false
	}
	r, err := ParseRole(u.Role)
	return r, err == nil
}

// Add serves u beside the users file's users, in place of one of the same
// name, until the node stops: the Redis default user of a node's Redis
// password.
func (d *Directory) Add(u User) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.extra == nil {
		d.extra = map[string]User{}
	}
	d.extra[u.Name], d.users[u.Name] = u, u
}

// LoginFailure is one refused password login, for the node's metrics and
// events.
type LoginFailure struct {
	User, Source string
	Result       LoginResult
	// BackOff is how long the user or source is refused after this
	// failure (0: not yet), or for LoginBusy when to retry.
	BackOff time.Duration
}

// LoginResult is why a login was refused; its value is the result label
// of the node's login failure counter.
type LoginResult string

const (
	// LoginWrong: a wrong user name or password (one derivation).
	LoginWrong LoginResult = "wrong"
	// LoginBackoff: during a back-off of the user or the address,
	// unchecked (*RetryLaterError).
	LoginBackoff LoginResult = "backoff"
	// LoginBusy: the node's derivation budget was spent, unchecked
	// (*LoginBusyError).
	LoginBusy LoginResult = "busy"
)

// SetDerivationBudget sets the share of the node's CPUs that derivations
// of logins not yet verified may use and their burst (c is valid), and
// where the directory reads the node's CPU quota (0: none), which bounds
// the CPUs beside GOMAXPROCS. Call it before the directory is used. The
// budget is also the quota of the derivation workers' cgroup, where a
// sized node has one (workercgroup.go), and its grace the derivation
// workers' (workeraging.go).
func (d *Directory) SetDerivationBudget(c LoginConfig, quota func() float64) {
	d.derivations = newDerivationBudget(c)
	d.derivations.quota = quota
	d.hold = c.RefusalHold
	derivationWorkers.mu.Lock()
	derivationWorkers.cores = d.derivations.cores
	derivationWorkers.mu.Unlock()
	derivationWorkers.aging.setGrace(c.DerivationGrace)
}

// maxHeld bounds the refused logins held at once.
const maxHeld = 4096

// holdRefusal waits out the refusal hold before a login refused unchecked
// is answered.
func (d *Directory) holdRefusal() {
	if d.hold <= 0 {
		return
	}
	if d.held.Add(1) <= maxHeld {
		d.sleep(d.hold)
	}
	d.held.Add(-1)
}

// OnLoginFailure sets fn to be called, outside locks, for every refused
// password login. Call it before the directory is used.
func (d *Directory) OnLoginFailure(fn func(LoginFailure)) { d.onFailure = fn }

// PasswordRole checks a user's password, given from source (host:port),
// and returns their role. During a back-off of the user or the source it
// refuses with a *RetryLaterError at once, and when a password that is not
// the one last verified finds the node's derivation budget spent, with a
// *LoginBusyError; a wrong password and an unknown user cost the same
// derivation and read the same.
func (d *Directory) PasswordRole(name, password, source string) (Role, error) {
	src, now := sourceHost(source), d.now()
	wait, trusted := d.limiter.wait(name, src, now)
	if wait > 0 {
		d.onFailure(LoginFailure{User: name, Source: src, Result: LoginBackoff, BackOff: wait})
		d.holdRefusal()
		return RoleNone, &RetryLaterError{After: wait}
	}
	d.mu.Lock()
	u, known := d.lookupLocked(name, now)
	cached, hit := d.verified[name]
	d.mu.Unlock()
	sum := verifiedSum(u, password)
	if !known || !hit || subtle.ConstantTimeCompare(cached[:], sum[:]) != 1 {
		ok, err := d.checkOnce(name, sum, u, known, password)
		if err != nil {
			// Not a failure of the user's or the address's: the node's.
			d.onFailure(LoginFailure{User: name, Source: src, Result: LoginBusy, BackOff: err.(*LoginBusyError).RetryAfter()})
			d.holdRefusal()
			return RoleNone, err
		}
		if !ok {
			backOff := d.limiter.failed(name, src, d.now())
			d.onFailure(LoginFailure{User: name, Source: src, Result: LoginWrong, BackOff: backOff})
			return RoleNone, errBadCredentials
		}
		if u.outdated() {
			u = d.upgrade(u, password)
			sum = verifiedSum(u, password)
		}
		d.mu.Lock()
		d.verified[name] = sum
		d.mu.Unlock()
	}
	d.limiter.succeeded(name, src, now, trusted)
	return ParseRole(u.Role)
}

// checkOnce is check, or the outcome of the same check in progress.
func (d *Directory) checkOnce(name string, sum [32]byte, u User, known bool, password string) (bool, error) {
	key := checkKey{name, sum}
	d.mu.Lock()
	if c := d.checking[key]; c != nil {
		d.mu.Unlock()
		<-c.done
		return c.ok, c.err
	}
	c := &checkCall{done: make(chan struct{})}
	d.checking[key] = c
	d.mu.Unlock()
	c.ok, c.err = d.check(u, known, password)
	d.mu.Lock()
	delete(d.checking, key)
	d.mu.Unlock()
	close(c.done)
	return c.ok, c.err
}

// verifiedSum is what the cache of checked passwords holds for u's
// password: sha256(stored hash, password), computed in a buffer on the
// stack for the hashes and passwords of usual length.
func verifiedSum(u User, password string) [32]byte {
	var buf [256]byte
	return sha256.Sum256(append(append(buf[:0], u.Hash...), password...))
}

// check derives password's hash against the user's, or against a dummy
// hash of today's cost for an unknown user or one without a password, so
// that timing does not tell which users exist. Without derivation budget
// it checks nothing and returns a *LoginBusyError.
func (d *Directory) check(u User, known bool, password string) (bool, error) {
	if !known || len(u.Hash) == 0 {
		u, known = dummyUser(), false
	}
	r, ok := u.derivation(password)
	if !ok {
		return false, nil
	}
	hash, err := d.derive(r)
	return known && err == nil && u.matches(hash), err
}

// derive derives r in a derivation worker if the budget admits it, else
// refuses with *LoginBusyError.
func (d *Directory) derive(r derivation) (hash []byte, err error) {
	err = d.derivations.do(func() (time.Duration, bool) {
		var cpu time.Duration
		var known bool
		hash, cpu, known = derivationWorkers.derive(r)
		return cpu, known
	})
	return hash, err
}

// dummyUser has a hash of a random password at today's setting, derived
// once in a worker, outside any budget.
var dummyUser = sync.OnceValue(func() User {
	r, err := newPassword(rand.Text())
	if err != nil {
		panic(err)
	}
	var u User
	hash, _, _ := derivationWorkers.derive(r)
	u.setHash(r, hash)
	return u
})

// upgrade rehashes an outdated hash with today's algorithm and writes it
// to the users file, returning the user to remember. If the derivation
// budget is spent (the login is verified: it is not refused for that) or
// the file cannot be written the old hash stays, and is tried again at the
// user's next login that misses the cache.
func (d *Directory) upgrade(u User, password string) User {
	old := u
	r, err := newPassword(password)
	if err == nil {
		var hash []byte
		if hash, err = d.derive(r); err == nil {
			u.setHash(r, hash)
		}
	}
	if err == nil {
		err = d.rehash(old, u)
	}
	if err != nil {
		log.Printf("security: keeping user %s's %s password hash: %v", u.Name, old.describeHash(), err)
		u = old
	}
	return u
}
