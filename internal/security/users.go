package security

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Role is what a user may do; each role includes the ones below it.
type Role int

const (
	RoleNone Role = iota
	RoleRead
	RoleWrite
	RoleAdmin
	// RoleNode is held only by node certificates: node-to-node methods.
	RoleNode
)

// RootUser is always an admin, by client certificate, without being listed.
const RootUser = "root"

var roleNames = map[Role]string{RoleNone: "none", RoleRead: "read", RoleWrite: "write", RoleAdmin: "admin", RoleNode: "node"}

func (r Role) String() string { return roleNames[r] }

// ParseRole parses a user's role: read, write or admin.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s && r >= RoleRead && r <= RoleAdmin {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("role %q is not one of read, write, admin", s)
}

// Passwords are hashed with Argon2id at OWASP's first recommended setting
// (19 MiB, 2 passes, 1 lane): about 30 ms of one core per check, and
// memory-hard against guessing on GPUs. Servers cache successful checks so
// that only the first call of a user pays it.
const (
	argon2id       = "argon2id"
	argon2Time     = 2
	argon2MemoryKB = 19 * 1024
	argon2Threads  = 1
)

// User is one entry of a users file. The password is stored as a salted
// hash: Argon2id, or PBKDF2-SHA256 (Algorithm "") in files written before
// Argon2id, which a node replaces at the user's next successful login. A
// user without a hash authenticates by certificate only.
type User struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Algorithm string `json:"algorithm,omitempty"`
	Salt      []byte `json:"salt,omitempty"`
	Hash      []byte `json:"hash,omitempty"`
	// Iterations is PBKDF2's iteration count or Argon2id's passes.
	Iterations int    `json:"iterations,omitempty"`
	MemoryKB   uint32 `json:"memory_kib,omitempty"`
	Threads    uint8  `json:"threads,omitempty"`
}

// SetPassword replaces the user's password hash with a fresh salt,
// derived in this process.
func (u *User) SetPassword(password string) error {
	r, err := newPassword(password)
	if err != nil {
		return err
	}
	u.setHash(r, r.run())
	return nil
}

// newPassword is the derivation of a hash of password at today's setting,
// with a fresh salt.
func newPassword(password string) (derivation, error) {
	if password == "" {
		return derivation{}, errors.New("a password must not be empty")
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return derivation{}, err
	}
	return derivation{algorithm: argon2id, password: []byte(password), salt: salt,
		iterations: argon2Time, memoryKB: argon2MemoryKB, threads: argon2Threads, keyLen: 32}, nil
}

// setHash makes hash, r's result, the user's password hash.
func (u *User) setHash(r derivation, hash []byte) {
	u.Algorithm, u.Salt, u.Hash = r.algorithm, r.salt, hash
	u.Iterations, u.MemoryKB, u.Threads = int(r.iterations), r.memoryKB, r.threads
}

// CheckPassword reports whether password is the user's, in constant time,
// derived in this process.
func (u User) CheckPassword(password string) bool {
	r, ok := u.derivation(password)
	return ok && u.matches(r.run())
}

// derivation is the derivation of password's hash at the user's setting;
// false if the user has no hash that can be checked.
func (u User) derivation(password string) (derivation, bool) {
	r := derivation{algorithm: u.Algorithm, password: []byte(password), salt: u.Salt, keyLen: uint32(len(u.Hash)), memoryKB: u.MemoryKB, threads: u.Threads}
	if len(u.Hash) == 0 || len(u.Hash) > maxKeyLen || u.Iterations <= 0 || uint64(u.Iterations) > 1<<32-1 {
		return r, false
	}
	r.iterations = uint32(u.Iterations)
	switch u.Algorithm {
	case argon2id:
		return r, u.MemoryKB != 0 && u.Threads != 0
	case "":
		return r, true
	}
	return r, false
}

// matches reports whether hash, derived from a password, is the user's,
// in constant time.
func (u User) matches(hash []byte) bool { return subtle.ConstantTimeCompare(hash, u.Hash) == 1 }

// outdated reports whether the user's hash is not today's (an older
// algorithm or setting): a node rehashes it at the next successful login.
func (u User) outdated() bool {
	return len(u.Hash) > 0 && (u.Algorithm != argon2id || u.Iterations != argon2Time ||
		u.MemoryKB != argon2MemoryKB || u.Threads != argon2Threads)
}

// describeHash names the user's hash algorithm and setting, for logs.
func (u User) describeHash() string {
	if u.Algorithm == "" {
		return fmt.Sprintf("PBKDF2-SHA256 (%d iterations)", u.Iterations)
	}
	return fmt.Sprintf("%s (%d passes, %d KiB)", u.Algorithm, u.Iterations, u.MemoryKB)
}

// rehashInFile replaces old's hash with new's in the users file at path,
// if the file still holds old's: `tidekv user passwd` may have changed it
// since it was read.
func rehashInFile(f Files, path string, old, new User) error {
	uf, err := ReadUserFile(f, path)
	if err != nil {
		return err
	}
	i := uf.Find(old.Name)
	if i < 0 || !bytes.Equal(uf.Users[i].Hash, old.Hash) {
		return nil
	}
	uf.Users[i] = new
	return uf.Write(f, path)
}

// UserFile is the users file: every user of the cluster.
type UserFile struct {
	Users []User `json:"users"`
}

// ReadUserFile reads path; a missing file is an empty list.
func ReadUserFile(f Files, path string) (*UserFile, error) {
	b, err := f.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &UserFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	uf := &UserFile{}
	if err := json.Unmarshal(b, uf); err != nil {
		return nil, fmt.Errorf("%s is not a users file: %v", path, err)
	}
	for _, u := range uf.Users {
		if _, err := ParseRole(u.Role); err != nil {
			return nil, fmt.Errorf("%s: user %s: %w", path, u.Name, err)
		}
	}
	return uf, nil
}

// Write replaces path with the list, readable by its owner only (it holds
// password hashes). The new file is renamed over the old one so that a
// node reloading it never reads half a file.
func (uf *UserFile) Write(f Files, path string) error {
	sort.Slice(uf.Users, func(i, j int) bool { return uf.Users[i].Name < uf.Users[j].Name })
	b, err := json.MarshalIndent(uf, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := f.WriteFile(tmp, append(b, '\n'), 0o600, true); err != nil {
		return err
	}
	return f.Rename(tmp, path)
}

// Find returns the index of the named user, or -1.
func (uf *UserFile) Find(name string) int {
	for i, u := range uf.Users {
		if u.Name == name {
			return i
		}
	}
	return -1
}

// Add adds a user; password "" makes a certificate-only user.
func (uf *UserFile) Add(name string, role Role, password string) error {
	if err := ValidUser(name); err != nil {
		return err
	}
	if uf.Find(name) >= 0 {
		return fmt.Errorf("user %s already exists", name)
	}
	u := User{Name: name, Role: role.String()}
	if password != "" {
		if err := u.SetPassword(password); err != nil {
			return err
		}
	}
	uf.Users = append(uf.Users, u)
	return nil
}

// Remove removes a user.
func (uf *UserFile) Remove(name string) error {
	i := uf.Find(name)
	if i < 0 {
		return fmt.Errorf("user %s does not exist", name)
	}
	uf.Users = append(uf.Users[:i], uf.Users[i+1:]...)
	return nil
}

// Passwd changes a user's password.
func (uf *UserFile) Passwd(name, password string) error {
	i := uf.Find(name)
	if i < 0 {
		return fmt.Errorf("user %s does not exist", name)
	}
	return uf.Users[i].SetPassword(password)
}

// Describe lists users as "name role [password|certificate only]" lines.
func (uf *UserFile) Describe() string {
	var sb strings.Builder
	for _, u := range uf.Users {
		how := "password"
		if len(u.Hash) == 0 {
			how = "certificate only"
		}
		fmt.Fprintf(&sb, "%s\t%s\t%s\n", u.Name, u.Role, how)
	}
	return sb.String()
}
