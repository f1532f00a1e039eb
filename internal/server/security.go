package server

import (
	"crypto/subtle"
	"crypto/tls"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

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
}

// nodeSecurity is what a secure node runs with; nil when insecure.
type nodeSecurity struct {
	tls   security.NodeTLS
	users *security.Directory
	http  security.HTTPAuth
}

// loadSecurity loads the certificates and users of a secure node (nil for
// an insecure one). Start calls it before it touches the data directory,
// so a bad --certs-dir leaves nothing behind.
func loadSecurity(sc SecurityConfig) (*nodeSecurity, error) {
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
	return &nodeSecurity{tls: nt, users: users,
		http: security.HTTPAuth{Authenticator: security.Authenticator{Users: users}, Sessions: security.NewSessions()}}, nil
}

// setupSecurity points the transport, the Redis listener and node-to-node
// dialing at the loaded certificates and users; an insecure node says so
// once.
func (s *Server) setupSecurity() {
	if s.sec == nil {
		log.Printf("INSECURE: no TLS and no authentication: anyone who can reach this node's ports can read, write and administer the cluster (start with --certs-dir to secure it)")
		return
	}
	s.cfg.Transport.Credentials = credentials.NewTLS(s.sec.tls.Client)
	s.cfg.Redis.TLS = s.sec.tls.Server
	s.cfg.Redis.Auth = redisUsers{users: s.sec.users, defaultPassword: s.cfg.Redis.Password}
	log.Printf("secure: TLS with certificates from %s; users from %q", s.cfg.Security.CertsDir, s.cfg.Security.UsersFile)
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

// redisUsers authenticates Redis connections of a secure node: users of
// the users file, plus the default user's --redis-password if one is set.
type redisUsers struct {
	users           *security.Directory
	defaultPassword string
}

func (u redisUsers) Authenticate(user, password string) (resp.Access, error) {
	if user == "default" && u.defaultPassword != "" &&
		subtle.ConstantTimeCompare([]byte(password), []byte(u.defaultPassword)) == 1 {
		return resp.AccessWrite, nil
	}
	role, err := u.users.PasswordRole(user, password)
	switch {
	case err != nil:
		return resp.AccessNone, err
	case role >= security.RoleWrite:
		return resp.AccessWrite, nil
	}
	return resp.AccessRead, nil
}
