package security

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"
)

// Directory answers who a user is and what role they hold, from a users
// file it re-reads at most once per ReloadEvery, so that `tidekv user`
// changes reach running nodes without a restart.
type Directory struct {
	load  func() (*UserFile, error)
	now   func() time.Time
	every time.Duration

	mu       sync.Mutex
	users    map[string]User
	loadedAt time.Time
	// verified remembers, per user, sha256(stored hash, password) of the
	// last password that checked out, so that only a user's first call
	// pays for PBKDF2. A changed password changes the stored hash and so
	// misses.
	verified map[string][32]byte
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
	if path != "" {
		load = func() (*UserFile, error) { return ReadUserFile(f, path) }
	}
	d := &Directory{load: load, now: time.Now, every: ReloadEvery, verified: map[string][32]byte{}}
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
	d.users, d.loadedAt = users, d.now()
	return nil
}

func (d *Directory) lookup(name string) (User, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.now().Sub(d.loadedAt) >= d.every {
		if err := d.reloadLocked(); err != nil {
			// Keep serving the last good list; the file is being fixed.
			log.Printf("security: keeping the previous users: %v", err)
			d.loadedAt = d.now()
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

// PasswordRole checks a user's password and returns their role.
func (d *Directory) PasswordRole(name, password string) (Role, error) {
	u, ok := d.lookup(name)
	if !ok {
		return RoleNone, errBadCredentials
	}
	sum := sha256.Sum256(append(append([]byte(nil), u.Hash...), password...))
	d.mu.Lock()
	known, hit := d.verified[name]
	d.mu.Unlock()
	if !hit || subtle.ConstantTimeCompare(known[:], sum[:]) != 1 {
		if !u.CheckPassword(password) {
			return RoleNone, errBadCredentials
		}
		d.mu.Lock()
		d.verified[name] = sum
		d.mu.Unlock()
	}
	return ParseRole(u.Role)
}
