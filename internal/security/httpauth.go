package security

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// HTTP requests are authenticated as gRPC calls are, against the same
// users and roles: a verified client certificate, else "Authorization:
// Basic" (over TLS: a secure node serves nothing else), else the session
// cookie a password login on the dashboard's login page handed out.

// SessionCookie names the dashboard's session cookie.
const SessionCookie = "tidekv_session"

// SessionLifetime is how long a login lasts; a session also ends when its
// user leaves the users file (its role is looked up on every request).
const SessionLifetime = 12 * time.Hour

// Sessions are the logins of one node, in memory: a restart logs everyone
// out, and a session opened on one node is unknown to the others (each
// node's dashboard is its own origin).
type Sessions struct {
	now func() time.Time

	mu sync.Mutex
	// byHash is keyed by the SHA-256 of the token, so that neither the map
	// lookup's timing nor a memory dump gives a usable token.
	byHash map[[32]byte]session
}

type session struct {
	user    string
	expires time.Time
}

// NewSessions makes an empty session store.
func NewSessions() *Sessions {
	return &Sessions{now: time.Now, byHash: map[[32]byte]session{}}
}

// start opens a session for user and returns its token.
func (s *Sessions) start(user string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, se := range s.byHash {
		if !now.Before(se.expires) {
			delete(s.byHash, h)
		}
	}
	s.byHash[sha256.Sum256([]byte(token))] = session{user: user, expires: now.Add(SessionLifetime)}
	return token, nil
}

// user is the user of a live session.
func (s *Sessions) user(token string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.byHash[sha256.Sum256([]byte(token))]
	if !ok || !s.now().Before(se.expires) {
		return "", false
	}
	return se.user, true
}

// end closes a session.
func (s *Sessions) end(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byHash, sha256.Sum256([]byte(token)))
}

// HTTPAuth authenticates and authorizes a secure node's HTTP requests.
type HTTPAuth struct {
	Authenticator
	Sessions *Sessions
}

// IdentifyHTTP authenticates r: its client certificate, else its Basic
// credentials, else its session cookie.
func (a HTTPAuth) IdentifyHTTP(r *http.Request) (Identity, error) {
	if r.TLS != nil {
		if id, ok, err := a.certIdentity(*r.TLS); ok || err != nil {
			return id, err
		}
	}
	if user, pass, ok := r.BasicAuth(); ok {
		return a.passwordIdentity(user, pass, r.RemoteAddr)
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		user, ok := a.Sessions.user(c.Value)
		if !ok {
			return Identity{}, errors.New("the session has ended: log in again")
		}
		role, ok := a.Users.role(user)
		if !ok {
			return Identity{}, fmt.Errorf("user %s is no longer a user of this cluster", user)
		}
		return Identity{User: user, Role: role}, nil
	}
	return Identity{}, errNoCredentials
}

// Login checks a password from source (the caller's address, for the
// login back-off) and opens a session: the cookie to set.
func (a HTTPAuth) Login(user, pass, source string) (*http.Cookie, error) {
	if _, err := a.passwordIdentity(user, pass, source); err != nil {
		return nil, err
	}
	token, err := a.Sessions.start(user)
	if err != nil {
		return nil, err
	}
	return sessionCookie(token, int(SessionLifetime.Seconds())), nil
}

// Logout ends r's session, if any: the cookie to set, which clears it.
func (a HTTPAuth) Logout(r *http.Request) *http.Cookie {
	if c, err := r.Cookie(SessionCookie); err == nil {
		a.Sessions.end(c.Value)
	}
	return sessionCookie("", -1)
}

// sessionCookie is never sent over plaintext nor read by scripts, and
// SameSite=Strict keeps other sites' pages from riding on it (a form
// posted to the node from elsewhere arrives without it).
func sessionCookie(token string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: token, Path: "/", MaxAge: maxAge,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// RefusalStatus is the HTTP status of a failed authentication: 429 for a
// login the node's derivation budget refused, with Retry-After set in h
// (the login may be retried as it is), else 401.
func RefusalStatus(h http.Header, err error) int {
	var busy *LoginBusyError
	if !errors.As(err, &busy) {
		return http.StatusUnauthorized
	}
	h.Set("Retry-After", strconv.Itoa(int(busy.RetryAfter().Seconds())))
	return http.StatusTooManyRequests
}

type identityKey struct{}

// IdentityOf is who made r, as Require established it; ok is false on an
// insecure node, where no one is asked.
func IdentityOf(r *http.Request) (Identity, bool) {
	id, ok := r.Context().Value(identityKey{}).(Identity)
	return id, ok
}

// Require serves h to requests whose identity holds role need (name is
// what the refusal calls the endpoint). A request without valid
// credentials gets 401, or unauthenticated's answer when it is given (the
// dashboard's page sends people to the login page); one whose role is too
// low gets 403.
func (a HTTPAuth) Require(need Role, name string, h, unauthenticated http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.IdentifyHTTP(r)
		if err != nil {
			if unauthenticated != nil {
				unauthenticated.ServeHTTP(w, r)
				return
			}
			code := RefusalStatus(w.Header(), err)
			// A browser answers a Basic challenge with a password dialog:
			// the dashboard's own requests (they carry its cookie) go back
			// to the login page instead.
			if _, cerr := r.Cookie(SessionCookie); cerr != nil && code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="tidekv", charset="UTF-8"`)
			}
			http.Error(w, err.Error(), code)
			return
		}
		if id.Role < need {
			http.Error(w, denial(id, name, need), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}
