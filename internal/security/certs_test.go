package security

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testCerts(t *testing.T) CertOptions {
	t.Helper()
	o := CertOptions{Dir: t.TempDir(), Lifetime: 24 * time.Hour, Files: OSFiles{}}
	if err := CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := CreateNode(o, []string{"127.0.0.1", "localhost", "node1.example"}); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(o, "alice"); err != nil {
		t.Fatal(err)
	}
	return o
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCert(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertChainsVerifyWithRolesAndSANs(t *testing.T) {
	o := testCerts(t)
	ca := readCert(t, o.path(CACert))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	node := readCert(t, o.path(NodeCert))
	for _, host := range []string{"127.0.0.1", "localhost", "node1.example"} {
		if _, err := node.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("node cert for %s: %v", host, err)
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example"}); err == nil {
		t.Error("node cert verified for a host not among its SANs")
	}
	if !node.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || node.Subject.OrganizationalUnit[0] != NodeOU {
		t.Errorf("node cert: IPs %v OU %v", node.IPAddresses, node.Subject.OrganizationalUnit)
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node cert cannot dial other nodes: %v", err)
	}
	cl := readCert(t, o.path(ClientCert("alice")))
	if _, err := cl.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert: %v", err)
	}
	if _, err := cl.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verified as a server")
	}
	if cl.Subject.CommonName != "alice" || cl.Subject.OrganizationalUnit[0] != ClientOU {
		t.Errorf("client cert subject %v", cl.Subject)
	}
}

func TestKeysAreOwnerOnly(t *testing.T) {
	o := testCerts(t)
	for _, k := range []string{CAKey, NodeKey, ClientKey("alice")} {
		st, err := os.Stat(o.path(k))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", k, st.Mode().Perm())
		}
	}
}

func TestCertsRefuseToOverwrite(t *testing.T) {
	o := testCerts(t)
	before, _ := os.ReadFile(o.path(NodeCert))
	for name, err := range map[string]error{
		"ca":     CreateCA(o),
		"node":   CreateNode(o, []string{"127.0.0.1"}),
		"client": CreateClient(o, "alice"),
	} {
		if err == nil || !strings.Contains(err.Error(), "already exists; pass --overwrite") {
			t.Errorf("%s: got %v, want a refusal naming --overwrite", name, err)
		}
	}
	if after, _ := os.ReadFile(o.path(NodeCert)); string(after) != string(before) {
		t.Error("a refused create changed node.crt")
	}
	o.Overwrite = true
	if err := CreateNode(o, []string{"127.0.0.1"}); err != nil {
		t.Fatalf("with Overwrite: %v", err)
	}
	if after, _ := os.ReadFile(o.path(NodeCert)); string(after) == string(before) {
		t.Error("Overwrite did not replace node.crt")
	}
}

func TestCertErrors(t *testing.T) {
	o := CertOptions{Dir: t.TempDir(), Lifetime: time.Hour, Files: OSFiles{}}
	if err := CreateNode(o, []string{"127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "create-ca") {
		t.Errorf("node cert without a CA: %v", err)
	}
	if err := CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := CreateNode(o, nil); err == nil {
		t.Error("node cert without hosts was made")
	}
	for _, bad := range []string{"node", "", "a/b", "../x"} {
		if err := CreateClient(o, bad); err == nil {
			t.Errorf("client cert for user %q was made", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(o.Dir, ClientCert("node"))); err == nil {
		t.Error("client.node.crt exists")
	}
}
