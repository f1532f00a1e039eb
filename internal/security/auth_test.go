package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestRequiredRoles(t *testing.T) {
	for method, want := range map[string]Role{
		"/tidekv.KV/Get":                     RoleRead,
		"/tidekv.KV/Scan":                    RoleRead,
		"/tidekv.KV/Put":                     RoleWrite,
		"/tidekv.KV/CompareAndSet":           RoleWrite,
		"/tidekv.Admin/Status":               RoleRead,
		"/tidekv.Admin/Ranges":               RoleRead,
		"/tidekv.Admin/ChangeReplicas":       RoleAdmin,
		"/tidekv.Admin/Decommission":         RoleAdmin,
		"/tidekv.Admin/TransferLease":        RoleAdmin,
		"/tidekv.Admin/Split":                RoleAdmin,
		"/tidekv.Admin/Settings":             RoleAdmin,
		"/tidekv.Admin/Join":                 RoleNode,
		"/tidekv.Admin/NodeHeartbeat":        RoleNode,
		"/tidekv.Admin/ReportRange":          RoleNode,
		"/tidekv.Admin/AllocRangeID":         RoleNode,
		"/tidekv.Admin/PushClosedTimestamps": RoleNode,
		"/tidekv.Raft/RaftStream":            RoleNode,
		"/tidekv.Raft/Snapshot":              RoleNode,
		"/tidekv.Admin/SomethingNew":         RoleNode,
		// Ending a transaction commits or rolls back writes.
		"/tidekv.Txn/End":                RoleWrite,
		"/tidekv.Txn/Get":                RoleRead,
		"/tidekv.Txn/BatchGet":           RoleRead,
		"/tidekv.Admin/ClusterTimestamp": RoleRead,
		"/tidekv.Admin/ProtectTimestamp": RoleRead,
	} {
		if got := RequiredRole(method); got != want {
			t.Errorf("%s needs %s, want %s", method, got, want)
		}
	}
}

func writeUsers(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.json")
	uf := &UserFile{}
	for _, u := range []struct {
		name string
		role Role
		pw   string
	}{{"reader", RoleRead, "rpw"}, {"writer", RoleWrite, "wpw"}, {"alice", RoleAdmin, ""}} {
		if err := uf.Add(u.name, u.role, u.pw); err != nil {
			t.Fatal(err)
		}
	}
	if err := uf.Write(OSFiles{}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func withBasic(user, pass string) context.Context {
	md, _ := PasswordCredentials{User: user, Password: pass}.GetRequestMetadata(context.Background())
	return metadata.NewIncomingContext(context.Background(), metadata.New(md))
}

// withCert is a call whose TLS handshake verified cert.
func withCert(cert *x509.Certificate) context.Context {
	info := credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
}

func TestAuthorize(t *testing.T) {
	dir, err := NewDirectory(OSFiles{}, writeUsers(t))
	if err != nil {
		t.Fatal(err)
	}
	freeDerivations(dir)
	a := Authenticator{Users: dir}
	o := testCerts(t)
	if err := CreateClient(o, RootUser); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(o, "mallory"); err != nil {
		t.Fatal(err)
	}
	node := readCert(t, o.path(NodeCert))
	cases := []struct {
		name   string
		ctx    context.Context
		method string
		want   codes.Code
	}{
		{"no credentials", context.Background(), "/tidekv.KV/Get", codes.Unauthenticated},
		{"wrong password", withBasic("reader", "nope"), "/tidekv.KV/Get", codes.Unauthenticated},
		{"unknown user", withBasic("nobody", "rpw"), "/tidekv.KV/Get", codes.Unauthenticated},
		{"reader reads", withBasic("reader", "rpw"), "/tidekv.KV/Get", codes.OK},
		{"reader writes", withBasic("reader", "rpw"), "/tidekv.KV/Put", codes.PermissionDenied},
		{"writer writes", withBasic("writer", "wpw"), "/tidekv.KV/Put", codes.OK},
		{"writer moves a replica", withBasic("writer", "wpw"), "/tidekv.Admin/ChangeReplicas", codes.PermissionDenied},
		{"admin by cert", withCert(readCert(t, o.path(ClientCert("alice")))), "/tidekv.Admin/ChangeReplicas", codes.OK},
		{"root by cert", withCert(readCert(t, o.path(ClientCert(RootUser)))), "/tidekv.Admin/Decommission", codes.OK},
		{"root poses as a node", withCert(readCert(t, o.path(ClientCert(RootUser)))), "/tidekv.Raft/RaftStream", codes.PermissionDenied},
		{"cert of no user", withCert(readCert(t, o.path(ClientCert("mallory")))), "/tidekv.KV/Get", codes.Unauthenticated},
		{"node", withCert(node), "/tidekv.Raft/Snapshot", codes.OK},
		{"node forwards admin", withCert(node), "/tidekv.Admin/Split", codes.OK},
	}
	for _, c := range cases {
		if got := status.Code(a.authorize(c.ctx, c.method)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDirectoryRefusesAMissingUsersFile(t *testing.T) {
	if _, err := NewDirectory(OSFiles{}, filepath.Join(t.TempDir(), "nope.json")); err == nil {
		t.Error("a missing users file was accepted")
	}
	if _, err := NewDirectory(OSFiles{}, ""); err != nil {
		t.Errorf("no users file: %v", err)
	}
}

func TestDirectoryReloadsTheUsersFile(t *testing.T) {
	path := writeUsers(t)
	dir, err := NewDirectory(OSFiles{}, path)
	if err != nil {
		t.Fatal(err)
	}
	freeDerivations(dir)
	now := time.Now()
	dir.now = func() time.Time { return now }
	if r, err := dir.PasswordRole("reader", "rpw", "10.0.0.1:5000"); err != nil || r != RoleRead {
		t.Fatalf("reader: %v %v", r, err)
	}
	uf, _ := ReadUserFile(OSFiles{}, path)
	if err := uf.Passwd("reader", "new"); err != nil {
		t.Fatal(err)
	}
	if err := uf.Remove("writer"); err != nil {
		t.Fatal(err)
	}
	if err := uf.Write(OSFiles{}, path); err != nil {
		t.Fatal(err)
	}
	now = now.Add(ReloadEvery)
	if _, err := dir.PasswordRole("reader", "rpw", "10.0.0.1:5000"); err == nil {
		t.Error("the old password still works after passwd")
	}
	if _, err := dir.PasswordRole("reader", "new", "10.0.0.1:5000"); err != nil {
		t.Errorf("the new password: %v", err)
	}
	if _, err := dir.PasswordRole("writer", "wpw", "10.0.0.1:5000"); err == nil {
		t.Error("a removed user still authenticates")
	}
}

func TestUserFileStoresNoPassword(t *testing.T) {
	path := writeUsers(t)
	b, err := OSFiles{}.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"rpw", "wpw"} {
		if bytes.Contains(b, []byte(pw)) {
			t.Errorf("the users file holds the password %q in clear", pw)
		}
	}
	uf, _ := ReadUserFile(OSFiles{}, path)
	if err := uf.Add("reader", RoleRead, "x"); err == nil {
		t.Error("a duplicate user was added")
	}
	if _, err := ParseRole("superuser"); err == nil {
		t.Error("an unknown role parsed")
	}
}

// nodeOnly are the methods of the services that only nodes call.
var nodeOnly = []string{
	// A transaction's range-level steps, sent by coordinators and intent
	// resolvers through their node's routing client.
	"/tidekv.Txn/WriteIntents", "/tidekv.Txn/CommitOnePhase", "/tidekv.Txn/Record", "/tidekv.Txn/ResolveIntents", "/tidekv.Txn/Refresh",
	"/tidekv.Admin/Join", "/tidekv.Admin/NodeHeartbeat", "/tidekv.Admin/ReportRange",
	"/tidekv.Admin/AllocRangeID", "/tidekv.Admin/PushClosedTimestamps", "/tidekv.Admin/FreezeRange",
	"/tidekv.Raft/RaftStream", "/tidekv.Raft/Snapshot",
	"/tidekv.Geo/Epoch",
}

// Every method of the services is placed: given a client role, or listed
// above as node-only. A method left out would be closed to every client of
// a secure cluster, root included, as `ctl keyspace create` once was.
func TestEveryMethodIsPlaced(t *testing.T) {
	services := tidekvpb.File_tidekv_proto.Services()
	for i := range services.Len() {
		svc := services.Get(i)
		for j := range svc.Methods().Len() {
			m := fmt.Sprintf("/%s/%s", svc.FullName(), svc.Methods().Get(j).Name())
			_, placed := methodRoles[m]
			if placed == slices.Contains(nodeOnly, m) {
				t.Errorf("%s: give it a client role in methodRoles or list it in nodeOnly, exactly one (placed: %v)", m, placed)
			}
		}
	}
}
