package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
)

// TLS configurations built from a certs directory. Every one requires TLS
// 1.3: there are no older clients to accommodate.

func loadPool(f Files, dir string) (*x509.CertPool, error) {
	b, err := f.ReadFile(filepath.Join(dir, CACert))
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, CACert))
	}
	return pool, nil
}

func loadPair(f Files, dir, certName, keyName string) (tls.Certificate, error) {
	c, err := f.ReadFile(filepath.Join(dir, certName))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("reading a certificate: %w", err)
	}
	k, err := f.ReadFile(filepath.Join(dir, keyName))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("reading a key: %w", err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s and %s: %w", certName, keyName, err)
	}
	return pair, nil
}

// NodeTLS is a node's pair of configurations: Server for its listeners
// (gRPC, RESP, HTTP), Client for dialing other nodes with its node
// certificate.
type NodeTLS struct {
	Server, Client *tls.Config
}

// LoadNodeTLS reads ca.crt, node.crt and node.key from dir. The server
// side verifies a client certificate when one is given but does not
// require one: clients may authenticate with a password instead, and the
// interceptors refuse calls with neither.
func LoadNodeTLS(f Files, dir string) (NodeTLS, error) {
	pool, err := loadPool(f, dir)
	if err != nil {
		return NodeTLS{}, err
	}
	pair, err := loadPair(f, dir, NodeCert, NodeKey)
	if err != nil {
		return NodeTLS{}, err
	}
	return NodeTLS{
		Server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
			ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven},
		Client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: pool},
	}, nil
}

// LoadClientTLS reads ca.crt from dir and, if present, user's client
// certificate; hasCert says whether it was, so the caller knows whether a
// password is needed.
func LoadClientTLS(f Files, dir, user string) (cfg *tls.Config, hasCert bool, err error) {
	pool, err := loadPool(f, dir)
	if err != nil {
		return nil, false, err
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	if user == "" || !f.Exists(filepath.Join(dir, ClientCert(user))) {
		return cfg, false, nil
	}
	pair, err := loadPair(f, dir, ClientCert(user), ClientKey(user))
	if err != nil {
		return nil, false, err
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, true, nil
}
