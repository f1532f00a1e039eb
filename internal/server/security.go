package server

import (
	"crypto/tls"
	"log"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/resp"
	"github.com/tidekv/tidekv/internal/security"
)

// SecurityConfig turns on TLS and authentication (docs/security.md).
type SecurityConfig struct {
	// CertsDir holds ca.crt, node.crt and node.key: with it every listener
	// (gRPC, Redis, HTTP) serves TLS only, nodes dial each other with their
	// node certificate, and every gRPC call and Redis connection must
	// authenticate. "" runs insecure: plaintext, no authentication.
	CertsDir string
	// UsersFile lists users, their roles and password hashes (`tidekv
	// user`); "" leaves only root, by client certificate.
	UsersFile string
	// RedisPassword, when not empty, is the password of the Redis user
	// "default" (write access, and admin on an insecure node: FLUSHDB),
	// secure or not: every Redis connection must
	// AUTH before anything else. It is hashed at start and checked, and its
	// failures limited, as every user's password is.
	RedisPassword string
	// Login bounds the CPU that logins not yet verified may cost the
	// node (security.LoginConfig: its default and bounds).
	Login security.LoginConfig
}

// nodeSecurity is what a secure node runs with; nil when insecure.
type nodeSecurity struct {
	tls   security.NodeTLS
	users *security.Directory
	// gossipKeys encrypt gossip (CertsDir/gossip.key); nil when gossip
	// is off.
	gossipKeys [][]byte
	http       security.HTTPAuth
}

// loadSecurity loads the certificates, users and, when gossip is on, the
// gossip keys of a secure node (nil for an insecure one). Start calls it
// before it touches the data directory, so a bad --certs-dir leaves
// nothing behind.
func loadSecurity(sc SecurityConfig, gossipOn bool) (*nodeSecurity, error) {
	if sc.CertsDir == "" {
		return nil, nil
	}
	nt, err := security.LoadNodeTLS(security.OSFiles{}, sc.CertsDir)
	if err != nil {
		return nil, err
	}
	users, err := security.NewDirectory(security.OSFiles{}, sc.UsersFile)
	if err != nil {
		return nil, err
	}
	ns := &nodeSecurity{tls: nt, users: users,
		http: security.HTTPAuth{Authenticator: security.Authenticator{Users: users}, Sessions: security.NewSessions()}}
	if gossipOn {
		// Plaintext gossip would let anyone who reaches the port forge
		// membership and liveness: a secure node without the key stops.
		if ns.gossipKeys, err = security.LoadGossipKeys(security.OSFiles{}, sc.CertsDir); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// setupSecurity points the transport, the Redis listener and node-to-node
// dialing at the loaded certificates and users; an insecure node says so
// once.
func (s *Server) setupSecurity() error {
	var users *security.Directory
	if s.sec == nil {
		log.Printf("INSECURE: no TLS and no authentication: anyone who can reach this node's ports can read, write and administer the cluster (start with --certs-dir to secure it)")
		if s.cfg.Security.RedisPassword == "" {
			return nil
		}
		// An insecure node's Redis password is the one user of an
		// otherwise empty directory: the same hashed compare and login
		// limiter as a secure node's, not a plain-text compare anyone may
		// retry at will.
		var err error
		if users, err = security.NewDirectory(security.OSFiles{}, ""); err != nil {
			return err
		}
	} else {
		s.cfg.Transport.Credentials = credentials.NewTLS(s.sec.tls.Client)
		s.cfg.Transport.TLS = s.sec.tls.Client
		s.cfg.Transport.ServerTLS, s.cfg.Transport.Authorize = s.sec.tls.Server, security.RequireNode
		s.cfg.Redis.TLS = s.sec.tls.Server
		users = s.sec.users
		log.Printf("secure: TLS with certificates from %s; users from %q", s.cfg.Security.CertsDir, s.cfg.Security.UsersFile)
	}
	if pw := s.cfg.Security.RedisPassword; pw != "" {
		// The Redis password is the default user's, with write access;
		// on an insecure node, where anyone may administer the cluster,
		// admin access too, so that it may FLUSHALL as Redis's default
		// user does (test harnesses start with it).
		role := security.RoleWrite
		if s.sec == nil {
			role = security.RoleAdmin
		}
		u := security.User{Name: redisDefaultUser, Role: role.String()}
		if err := u.SetPassword(pw); err != nil {
			return err
		}
		users.Add(u)
	}
	users.OnLoginFailure((&loginEvents{s: s}).failed)
	quota := func() float64 { return 0 }
	if q := ownQuota(); q != nil {
		quota = func() float64 {
			st, err := q.ReadCPUQuota()
			if err != nil {
				return 0
			}
			return st.CPUs
		}
	}
	users.SetDerivationBudget(s.cfg.Security.Login, quota)
	s.cfg.Redis.Auth = redisUsers{users: users}
	return nil
}

// redisDefaultUser is whom Redis's one-argument AUTH names.
const redisDefaultUser = "default"

// loginEvents counts refused password logins and records their events.
type loginEvents struct {
	s    *Server
	busy loginBusyEvents
}

// failed counts a refused password login, and records an event when it
// starts or lengthens a back-off, and at most one a minute while the
// derivation budget refuses logins (refusals during a back-off are only
// counted: a flood must not fill the event log).
func (e *loginEvents) failed(f security.LoginFailure) {
	s := e.s
	s.metrics.LoginFailures.WithLabelValues(string(f.Result)).Inc()
	switch {
	case f.Result == security.LoginWrong && f.BackOff > 0:
		s.events.Record("login-backoff", "address "+f.Source, "failed password logins as %.64q from %s: this user's and this address's logins wait up to %v",
			f.User, f.Source, f.BackOff.Round(time.Millisecond))
	case f.Result == security.LoginBusy:
		if n, ok := e.busy.refused(time.Now()); ok {
			s.events.Record("login-busy", events.NodeSubject(s.id.node), "%d password logins refused unchecked in the last minute, the latest as %.64q from %s: "+
				"their derivations would exceed the share of this node's CPUs for logins not yet verified (%v)", n, f.User, f.Source, s.cfg.Security.Login.DerivationShare)
		}
	}
}

// loginBusyEvents keeps login-busy events to one a minute: a flood is
// refused thousands of times a second.
type loginBusyEvents struct {
	mu   sync.Mutex
	last time.Time
	// n counts the refusals since the last event.
	n int
}

// loginBusyEvery is how often a node records a login-busy event at most.
const loginBusyEvery = time.Minute

// refused counts one refusal at now; ok says to record an event of the
// n refusals since the last.
func (e *loginBusyEvents) refused(now time.Time) (n int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if !e.last.IsZero() && now.Sub(e.last) < loginBusyEvery {
		return 0, false
	}
	n, e.last, e.n = e.n, now, 0
	return n, true
}

// grpcSecurity is the gRPC server's TLS and authentication options.
func (s *Server) grpcSecurity() []grpc.ServerOption {
	if s.sec == nil {
		return nil
	}
	a := security.Authenticator{Users: s.sec.users}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(s.sec.tls.Server)),
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor()), grpc.ChainStreamInterceptor(a.StreamInterceptor())}
}

// peerCreds is how this node dials other nodes (and itself): with its node
// certificate, which passes every method's role check.
func (s *Server) peerCreds() credentials.TransportCredentials {
	if s.sec == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(s.sec.tls.Client)
}

// peerTLS is peerCreds for the routing client; nil when insecure.
func (s *Server) peerTLS() *tls.Config {
	if s.sec == nil {
		return nil
	}
	return s.sec.tls.Client
}

// redisUsers authenticates Redis connections as users of the users file
// (secure nodes) and the default user of the node's Redis password.
type redisUsers struct {
	users *security.Directory
}

func (u redisUsers) Authenticate(user, password, source string) (resp.Access, error) {
	role, err := u.users.PasswordRole(user, password, source)
	switch {
	case err != nil:
		return resp.AccessNone, err
	case role >= security.RoleAdmin:
		return resp.AccessAdmin, nil
	case role >= security.RoleWrite:
		return resp.AccessWrite, nil
	}
	return resp.AccessRead, nil
}
