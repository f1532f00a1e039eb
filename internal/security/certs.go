package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// File names inside a certs directory.
const (
	CACert   = "ca.crt"
	CAKey    = "ca.key"
	NodeCert = "node.crt"
	NodeKey  = "node.key"
)

// Subject conventions: the OU says what a certificate may act as.
const (
	NodeOU   = "tidekv-node"
	ClientOU = "tidekv-client"
	nodeCN   = "node"
)

// ClientCert and ClientKey name a user's certificate files.
func ClientCert(user string) string { return "client." + user + ".crt" }
func ClientKey(user string) string  { return "client." + user + ".key" }

// Files is where certificates go: the side effect behind cert creation.
type Files interface {
	ReadFile(path string) ([]byte, error)
	// WriteFile creates path with perm; it fails if path exists and
	// overwrite is false.
	WriteFile(path string, data []byte, perm os.FileMode, overwrite bool) error
	Exists(path string) bool
	Rename(oldPath, newPath string) error
}

// OSFiles is Files on the local file system.
type OSFiles struct{}

func (OSFiles) ReadFile(p string) ([]byte, error) { return os.ReadFile(p) }

func (OSFiles) Exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (OSFiles) Rename(oldPath, newPath string) error { return os.Rename(oldPath, newPath) }

func (OSFiles) WriteFile(p string, data []byte, perm os.FileMode, overwrite bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(p, flags, perm)
	if err != nil {
		return err
	}
	// OpenFile's perm is masked by the umask and ignored for an existing
	// file; keys must end up 0600 either way.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CertOptions says where and how long certificates are made for.
type CertOptions struct {
	Dir string
	// CAKeyPath is the CA key used to sign (default Dir/ca.key), so the
	// key can stay off the nodes.
	CAKeyPath string
	Lifetime  time.Duration
	Overwrite bool
	Files     Files
	Now       func() time.Time
}

func (o CertOptions) path(name string) string { return filepath.Join(o.Dir, name) }

func (o CertOptions) caKeyPath() string {
	if o.CAKeyPath != "" {
		return o.CAKeyPath
	}
	return o.path(CAKey)
}

// checkFree refuses to replace existing files without Overwrite.
func (o CertOptions) checkFree(paths ...string) error {
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if o.Files.Exists(p) {
			return fmt.Errorf("%s already exists; pass --overwrite to replace it", p)
		}
	}
	return nil
}

// CreateCA writes a new self-signed CA: ca.crt and ca.key.
func CreateCA(o CertOptions) error {
	certPath, keyPath := o.path(CACert), o.caKeyPath()
	if err := o.checkFree(certPath, keyPath); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl, err := o.template(pkix.Name{CommonName: "TideKV CA", Organization: []string{"TideKV"}})
	if err != nil {
		return err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return o.writePair(certPath, keyPath, der, key)
}

// CreateNode writes node.crt and node.key, signed by the CA, valid for
// the given host names and IP addresses (the addresses peers and clients
// dial) and usable both to serve and to dial other nodes.
func CreateNode(o CertOptions, hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("a node certificate needs at least one host name or IP address")
	}
	tmpl, err := o.template(pkix.Name{CommonName: nodeCN, OrganizationalUnit: []string{NodeOU}, Organization: []string{"TideKV"}})
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return o.sign(tmpl, o.path(NodeCert), o.path(NodeKey))
}

var userName = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,62}$`)

// ValidUser reports whether name can be a user: letters, digits, '_', '.'
// and '-' (it becomes part of file names); "node" is reserved.
func ValidUser(name string) error {
	if !userName.MatchString(name) {
		return fmt.Errorf("user name %q must be 1 to 63 letters, digits, '_', '.' or '-'", name)
	}
	if name == nodeCN {
		return errors.New("user name \"node\" is reserved for node certificates")
	}
	return nil
}

// CreateClient writes client.<user>.crt and .key, signed by the CA, that
// authenticate as user.
func CreateClient(o CertOptions, user string) error {
	if err := ValidUser(user); err != nil {
		return err
	}
	tmpl, err := o.template(pkix.Name{CommonName: user, OrganizationalUnit: []string{ClientOU}, Organization: []string{"TideKV"}})
	if err != nil {
		return err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return o.sign(tmpl, o.path(ClientCert(user)), o.path(ClientKey(user)))
}

func (o CertOptions) template(subject pkix.Name) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	// Backdated an hour: clocks of the machines involved differ.
	start := now().Add(-time.Hour)
	return &x509.Certificate{SerialNumber: serial, Subject: subject, NotBefore: start, NotAfter: start.Add(o.Lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature}, nil
}

// sign issues tmpl with the CA and writes it with a new key.
func (o CertOptions) sign(tmpl *x509.Certificate, certPath, keyPath string) error {
	if err := o.checkFree(certPath, keyPath); err != nil {
		return err
	}
	ca, caKey, err := o.loadCA()
	if err != nil {
		return err
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter // never outlive the CA
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return o.writePair(certPath, keyPath, der, key)
}

func (o CertOptions) loadCA() (*x509.Certificate, any, error) {
	certPEM, err := o.Files.ReadFile(o.path(CACert))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA certificate (run `tidekv cert create-ca` first): %w", err)
	}
	keyPEM, err := o.Files.ReadFile(o.caKeyPath())
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key (give --ca-key if it is kept elsewhere): %w", err)
	}
	ca, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.path(CACert), err)
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM key", o.caKeyPath())
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.caKeyPath(), err)
	}
	return ca, key, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate found")
	}
	return x509.ParseCertificate(block.Bytes)
}

// writePair writes the key first (0600) and then the certificate (0644).
func (o CertOptions) writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := o.Files.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600, o.Overwrite); err != nil {
		return fmt.Errorf("writing %s: %w", keyPath, err)
	}
	if err := o.Files.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644, o.Overwrite); err != nil {
		return fmt.Errorf("writing %s: %w", certPath, err)
	}
	return nil
}
