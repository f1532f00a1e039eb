package testcluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SecureEnv, when set to 1, runs the end-to-end tests against secure
// clusters: every cluster Start starts gets --certs-dir and --users-file,
// and the helpers below give clients TLS and credentials. Anything else
// (or unset) runs them insecure, as before.
const SecureEnv = "TIDEKV_E2E_SECURE"

// Secure reports whether the tests run in secure mode.
func Secure() bool { return os.Getenv(SecureEnv) == "1" }

// The credentials of secure mode. Go clients, the CLI and HTTP clients act
// as root, by its client certificate: root is an admin, and the tests
// split, move replicas, change settings and inject faults besides reading
// and writing. Redis has no certificate login, so Redis clients AUTH as a
// password user with role write, which is all the Redis tests need; the
// browser logs in to the dashboard as that user too (it presents no client
// certificate).
const (
	RootUser      = "root"
	RedisUser     = "e2e-redis"
	RedisPassword = "e2e-redis-password"
)

// Security is secure mode's certificate directory (CA, a node certificate
// for 127.0.0.1 and localhost, root's client certificate) and users file.
type Security struct {
	CertsDir, UsersFile string
}

// secured is secure mode's Security, made by Main before any test runs.
var secured struct {
	dir string // temporary directory holding both; Main removes it
	s   *Security
}

// makeSecured makes secure mode's certificates and users with the
// binary's own `cert` and `user` commands; in insecure mode it does
// nothing.
func makeSecured() error {
	if !Secure() {
		return nil
	}
	bin, err := binary(func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	if err != nil {
		return err
	}
	if secured.dir, err = os.MkdirTemp("", "tidekv-e2e-secure-"); err != nil {
		return err
	}
	s := &Security{CertsDir: filepath.Join(secured.dir, "certs"), UsersFile: filepath.Join(secured.dir, "users.json")}
	if err := s.create(bin); err != nil {
		return err
	}
	secured.s = s
	return nil
}

// Secured returns secure mode's certificates and users, or nil in
// insecure mode.
func Secured(t testing.TB) *Security {
	t.Helper()
	if Secure() && secured.s == nil {
		t.Fatalf("testcluster: %s=1 but nothing made the certificates: call testcluster.Main from TestMain", SecureEnv)
	}
	return secured.s
}

// create runs the CLI commands docs/security.md gives an operator.
func (s *Security) create(bin string) error {
	for _, step := range []struct {
		env  string
		args []string
	}{
		{"", []string{"cert", "create-ca", "--certs-dir", s.CertsDir}},
		{"", []string{"cert", "create-node", "--certs-dir", s.CertsDir, host, "localhost"}},
		{"", []string{"cert", "create-client", "--certs-dir", s.CertsDir, RootUser}},
		{"", []string{"cert", "create-gossip-key", "--certs-dir", s.CertsDir}},
		{"TIDEKV_NEW_PASSWORD=" + RedisPassword, []string{"user", "add", RedisUser, "--role", "write", "--users-file", s.UsersFile}},
	} {
		cmd := exec.Command(bin, step.args...)
		cmd.Env = append(os.Environ(), step.env)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tidekv %s: %v: %s", strings.Join(step.args, " "), err, out)
		}
	}
	return nil
}

// ServerArgs are the `tidekv server` arguments of a secure node.
func (s *Security) ServerArgs() []string {
	return []string{"--certs-dir", s.CertsDir, "--users-file", s.UsersFile}
}

// ClientTLS trusts the cluster's CA and presents user's client certificate
// (none for ""; only root has one).
func (s *Security) ClientTLS(t testing.TB, user string) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(s.CertsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("testcluster: %s holds no certificate", filepath.Join(s.CertsDir, "ca.crt"))
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if user != "" {
		pair, err := tls.LoadX509KeyPair(filepath.Join(s.CertsDir, "client."+user+".crt"), filepath.Join(s.CertsDir, "client."+user+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// CLIArgs are the flags by which `tidekv ctl` and `tidekv bench` reach the
// cluster as root: none in insecure mode. (It takes no testing.TB, so
// helpers without one can call it; Start has already checked that Main made
// the certificates.)
func CLIArgs() []string {
	if s := secured.s; s != nil {
		return []string{"--certs-dir", s.CertsDir, "--user", RootUser}
	}
	return nil
}

// ClientTLS is root's TLS configuration in secure mode, nil (plaintext)
// otherwise.
func ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	if s := Secured(t); s != nil {
		return s.ClientTLS(t, RootUser)
	}
	return nil
}

// CATLS trusts the cluster's CA and presents no client certificate, for
// Redis, where clients authenticate with AUTH. Nil in insecure mode.
func CATLS(t testing.TB) *tls.Config {
	t.Helper()
	if s := Secured(t); s != nil {
		return s.ClientTLS(t, "")
	}
	return nil
}

// HTTPClient returns an HTTP client for the nodes' HTTP ports, with the
// given timeout, acting as root in secure mode (every endpoint but
// /health, /ready and /metrics needs a role); pair it with HTTPURL.
func HTTPClient(t testing.TB, timeout time.Duration) *http.Client {
	t.Helper()
	hc := &http.Client{Timeout: timeout}
	if tc := ClientTLS(t); tc != nil {
		hc.Transport = &http.Transport{TLSClientConfig: tc}
	}
	return hc
}

// HTTPURL is the URL of path on a node's HTTP address: https in secure
// mode.
func HTTPURL(httpAddr, path string) string {
	if Secure() {
		return "https://" + httpAddr + path
	}
	return "http://" + httpAddr + path
}

// removeSecured removes what Secured made.
func removeSecured() {
	if secured.dir != "" {
		os.RemoveAll(secured.dir)
	}
}

// BrowserLogin is the user name and password a browser logs in to the
// dashboard with in secure mode; ok is false in insecure mode, where there
// is no login.
func BrowserLogin(t testing.TB) (user, password string, ok bool) {
	t.Helper()
	if Secured(t) == nil {
		return "", "", false
	}
	return RedisUser, RedisPassword, true
}

// BrowserTrust is what a browser must trust to load a node's pages in
// secure mode, the nodes' certificate (a browser takes single certificates
// on its command line, not a CA); nothing in insecure mode.
func BrowserTrust(t testing.TB) []*x509.Certificate {
	t.Helper()
	s := Secured(t)
	if s == nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(s.CertsDir, "node.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("testcluster: %s holds no PEM block", filepath.Join(s.CertsDir, "node.crt"))
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{c}
}
