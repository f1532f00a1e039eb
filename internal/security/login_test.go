package security

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// testDirectory serves writeUsers' users on a clock the test moves, and
// records the failures it reports.
func testDirectory(t *testing.T) (*Directory, *time.Time, *[]LoginFailure) {
	t.Helper()
	dir, err := NewDirectory(OSFiles{}, writeUsers(t))
	if err != nil {
		t.Fatal(err)
	}
	freeDerivations(dir)
	// Refusals are held on no clock here (TestRefusalsHeld checks the
	// hold).
	dir.sleep = func(time.Duration) {}
	now := time.Now()
	dir.now = func() time.Time { return now }
	var seen []LoginFailure
	dir.OnLoginFailure(func(f LoginFailure) { seen = append(seen, f) })
	return dir, &now, &seen
}

// login expects PasswordRole's outcome: ok, a wrong pair, or a back-off
// of wait.
func login(t *testing.T, dir *Directory, user, pw, source string, wait time.Duration) {
	t.Helper()
	_, err := dir.PasswordRole(user, pw, source)
	var later *RetryLaterError
	switch {
	case wait > 0:
		if !errors.As(err, &later) || later.After != wait {
			t.Fatalf("%s from %s: %v, want a back-off of %v", user, source, err, wait)
		}
	case wait < 0:
		if !errors.Is(err, errBadCredentials) {
			t.Fatalf("%s from %s: %v, want %v", user, source, err, errBadCredentials)
		}
	case err != nil:
		t.Fatalf("%s from %s: %v", user, source, err)
	}
}

const wrong = -1

// After freeFailures failed logins of a user or from an address, the next
// waits backoffBase, then twice as long each time; during a back-off even
// the right password is refused at once, and the refusals do not extend
// it. A source that logged in as the user before is exempt from the
// user's back-off, not from its own address's.
func TestLoginBackOff(t *testing.T) {
	dir, now, seen := testDirectory(t)
	login(t, dir, "reader", "rpw", "10.0.0.9:1000", 0) // a trusted pair from now on
	for i := 0; i < freeFailures; i++ {
		login(t, dir, "reader", "guess", "10.0.0.1:1000", wrong)
	}
	login(t, dir, "reader", "rpw", "10.0.0.1:1001", time.Second) // the source, and the user, back off
	login(t, dir, "writer", "wpw", "10.0.0.1:1002", time.Second) // the source backs off for any user
	login(t, dir, "reader", "rpw", "10.0.0.2:1000", time.Second) // the user backs off from a new source
	login(t, dir, "reader", "rpw", "10.0.0.9:1001", 0)           // but not from the trusted one
	login(t, dir, "writer", "wpw", "10.0.0.2:1001", 0)

	*now = now.Add(time.Second)
	login(t, dir, "reader", "guess", "10.0.0.1:1000", wrong)
	login(t, dir, "reader", "rpw", "10.0.0.1:1000", 2*time.Second)
	*now = now.Add(1500 * time.Millisecond)
	login(t, dir, "reader", "rpw", "10.0.0.1:1000", 500*time.Millisecond)
	*now = now.Add(500 * time.Millisecond)
	login(t, dir, "reader", "rpw", "10.0.0.1:1000", 0)

	// An unknown name counts as a known one, per name and per address.
	for i := 0; i < freeFailures; i++ {
		login(t, dir, "nobody", "x", "10.0.0.3:1000", wrong)
	}
	login(t, dir, "nobody", "x", "10.0.0.4:1000", time.Second)
	login(t, dir, "writer", "wpw", "10.0.0.3:1001", time.Second)

	var refused, failed, backOffs int
	for _, f := range *seen {
		switch {
		case f.Result == LoginBackoff:
			refused++
		case f.BackOff > 0:
			backOffs++
			failed++
		default:
			failed++
		}
	}
	if failed != 2*freeFailures+1 || backOffs != 3 || refused != 7 {
		t.Errorf("reported %d failures (%d leaving a back-off) and %d refusals, want %d (3) and 7: %+v",
			failed, backOffs, refused, 2*freeFailures+1, *seen)
	}
	if msg := (&RetryLaterError{After: 1500 * time.Millisecond}).Error(); msg != "too many failed logins for this user or from this address: retry in 2s" {
		t.Errorf("message %q", msg)
	}
}

// A successful login resets no failure count, of the user or of the
// address: a guesser who knows one password (its own user's, or the
// guessed user's from a trusted address) cannot clear its record between
// guesses. A trusted pair stays under its address's back-off.
func TestLoginSuccessForgivesNoFailure(t *testing.T) {
	dir, _, _ := testDirectory(t)
	login(t, dir, "reader", "rpw", "10.0.0.9:1000", 0) // trusted from now on
	for i := 0; i < freeFailures-1; i++ {
		login(t, dir, "reader", "guess", "10.0.0.9:1000", wrong)
		login(t, dir, "reader", "rpw", "10.0.0.9:1000", 0)
		login(t, dir, "writer", "wpw", "10.0.0.9:1000", 0)
	}
	login(t, dir, "reader", "guess", "10.0.0.9:1000", wrong)
	// The fifth failure in a row starts the back-off although logins
	// succeeded between them, and the trusted pair waits too: the wait is
	// the address's.
	login(t, dir, "reader", "rpw", "10.0.0.9:1000", backoffBase)
	login(t, dir, "writer", "wpw", "10.0.0.9:1001", backoffBase)
	// The user's count was not reset either: a new address waits.
	login(t, dir, "reader", "rpw", "10.0.0.10:1000", backoffBase)
}

// Failures are forgotten after forgetAfter, and the limiter's maps stay
// under maxTracked entries whatever names and addresses are made up.
func TestLoginLimiterForgetsAndIsBounded(t *testing.T) {
	l := newLoginLimiter()
	now := time.Now()
	for i := 0; i < freeFailures; i++ {
		l.failed("u", "s", now)
	}
	if w, _ := l.wait("u", "s", now); w != backoffBase {
		t.Fatalf("wait %v, want %v", w, backoffBase)
	}
	now = now.Add(forgetAfter)
	l.failed("u", "s", now)
	if w, _ := l.wait("u", "s", now); w != 0 {
		t.Fatalf("after forgetAfter one more failure leaves a wait of %v, want none", w)
	}
	for i := 0; i < maxTracked+10; i++ {
		l.failed(string(rune(i)), "s", now)
	}
	if len(l.users) > maxTracked {
		t.Fatalf("%d users tracked, more than %d", len(l.users), maxTracked)
	}
}

// A PBKDF2 hash from an older users file is replaced by an Argon2id one at
// the user's next successful login, in the file, and the password still
// works.
func TestOutdatedHashUpgradedAtLogin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	u := User{Name: "old", Role: "write", Salt: []byte("0123456789abcdef"), Iterations: 100_000}
	var err error
	if u.Hash, err = pbkdf2.Key(sha256.New, "opw", u.Salt, u.Iterations, 32); err != nil {
		t.Fatal(err)
	}
	if err := (&UserFile{Users: []User{u}}).Write(OSFiles{}, path); err != nil {
		t.Fatal(err)
	}
	dir, err := NewDirectory(OSFiles{}, path)
	if err != nil {
		t.Fatal(err)
	}
	freeDerivations(dir)
	if r, err := dir.PasswordRole("old", "opw", "10.0.0.1:1"); err != nil || r != RoleWrite {
		t.Fatalf("login with the PBKDF2 hash: %v %v", r, err)
	}
	uf, err := ReadUserFile(OSFiles{}, path)
	if err != nil {
		t.Fatal(err)
	}
	got := uf.Users[0]
	if got.Algorithm != argon2id || got.outdated() || !got.CheckPassword("opw") || got.CheckPassword("nope") {
		t.Fatalf("after the login the file holds %s, want a current Argon2id hash of the password", got.describeHash())
	}
	fresh, err := NewDirectory(OSFiles{}, path)
	if err != nil {
		t.Fatal(err)
	}
	freeDerivations(fresh)
	if _, err := fresh.PasswordRole("old", "opw", "10.0.0.1:1"); err != nil {
		t.Fatalf("login with the upgraded hash: %v", err)
	}
}

// freeDerivations lets d derive on every CPU of the machine, for tests of
// what it decides rather than of its budget: credit refills at a second a
// second or more, so derivations one after another never spend the burst,
// however slow a loaded machine makes them.
func freeDerivations(d *Directory) { d.derivations.share = 1 }

// A login refused unchecked, in a back-off or with the derivation budget
// spent, is answered only after the refusal hold; a wrong password (which
// cost its derivation) and a good one are not held; beyond maxHeld
// refusals waiting at once, one is answered at once.
func TestRefusalsHeld(t *testing.T) {
	dir, _, _ := testDirectory(t)
	var holds []time.Duration
	dir.sleep = func(d time.Duration) { holds = append(holds, d) }
	want := DefaultLoginConfig().RefusalHold
	login(t, dir, "reader", "rpw", "10.0.0.9:1", 0)
	var err error
	for range 20 {
		if _, err = dir.PasswordRole("reader", "guess", "10.0.0.1:1"); !errors.Is(err, errBadCredentials) {
			break
		}
		if len(holds) != 0 {
			t.Fatalf("a good and a wrong password were held %v, want not held", holds)
		}
	}
	var later *RetryLaterError
	if !errors.As(err, &later) || len(holds) != 1 || holds[0] != want {
		t.Fatalf("a login in a back-off: %v, held %v; want a back-off held %v", err, holds, want)
	}
	dir.derivations.share, dir.derivations.credit = 0.001, -float64(time.Second)
	if _, err := dir.PasswordRole("writer", "wpw", "10.0.0.2:1"); !IsLoginBusy(err) || len(holds) != 2 {
		t.Fatalf("a login with the budget spent: %v, held %v; want busy and held", err, holds)
	}
	dir.held.Store(maxHeld)
	if _, err := dir.PasswordRole("writer", "wpw", "10.0.0.2:1"); !IsLoginBusy(err) || len(holds) != 2 || dir.held.Load() != maxHeld {
		t.Fatalf("with %d refusals held: %v, held %v (count %d); want answered at once", maxHeld, err, holds, dir.held.Load())
	}
}
