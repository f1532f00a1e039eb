package security

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// methodRoles is the role each gRPC method needs. A method not listed
// needs RoleNode, so a new RPC is closed to clients until it is placed.
var methodRoles = map[string]Role{
	"/tidekv.KV/Get":      RoleRead,
	"/tidekv.KV/Scan":     RoleRead,
	"/tidekv.KV/BatchGet": RoleRead,
	// A Batch stream may carry writes: each is checked against RoleWrite
	// as it arrives (Permit).
	"/tidekv.KV/Batch": RoleRead,

	"/tidekv.KV/Put":           RoleWrite,
	"/tidekv.KV/Delete":        RoleWrite,
	"/tidekv.KV/Write":         RoleWrite,
	"/tidekv.KV/CompareAndSet": RoleWrite,

	// Transactions: a coordinator's operations. Ending one (committing
	// or rolling back) needs the role to write, and the coordinator takes
	// it only from the client that began the transaction (its owner
	// token and user: docs/transactions.md, "Who may end a transaction").
	"/tidekv.Txn/Get":      RoleRead,
	"/tidekv.Txn/BatchGet": RoleRead,
	"/tidekv.Txn/Scan":     RoleRead,
	"/tidekv.Txn/End":      RoleWrite,
	"/tidekv.Txn/Write":    RoleWrite,
	"/tidekv.Txn/If":       RoleWrite,

	// Geo transactions (one-shot, may write) and reads of a DC's
	// validated copy; the epoch exchange between gateways is node-only.
	"/tidekv.Geo/Commit": RoleWrite,
	"/tidekv.Geo/Scan":   RoleRead,

	"/tidekv.Admin/Ranges":      RoleRead,
	"/tidekv.Admin/Status":      RoleRead,
	"/tidekv.Admin/Readiness":   RoleRead,
	"/tidekv.Admin/LocalStatus": RoleRead,
	// The cut of a backup, which needs no more than reading.
	"/tidekv.Admin/ClusterTimestamp": RoleRead,
	// A backup's hold on GC at its cut: a reader may back up, and a
	// grant lasts at most a day unless renewed (docs/backup.md).
	"/tidekv.Admin/ProtectTimestamp": RoleRead,
	"/tidekv.Admin/Events":           RoleRead,
	"/tidekv.Admin/NodeLoads":        RoleRead,
	"/tidekv.Admin/AutoscaleStatus":  RoleRead,
	"/tidekv.Admin/ListKeySpaces":    RoleRead,

	"/tidekv.Admin/Split":          RoleAdmin,
	"/tidekv.Admin/Merge":          RoleAdmin,
	"/tidekv.Admin/ChangeReplicas": RoleAdmin,
	"/tidekv.Admin/TransferLease":  RoleAdmin,
	"/tidekv.Admin/Decommission":   RoleAdmin,
	"/tidekv.Admin/CreateKeySpace": RoleAdmin,
	// A restore's staged key spaces take their names.
	"/tidekv.Admin/PublishKeySpaces": RoleAdmin,
	// Settings both lists and changes cluster settings (autoscale too).
	"/tidekv.Admin/Settings": RoleAdmin,
}

// RequiredRole is the role a call of fullMethod needs.
func RequiredRole(fullMethod string) Role {
	if r, ok := methodRoles[fullMethod]; ok {
		return r
	}
	return RoleNode
}

// Identity is who made a call.
type Identity struct {
	User string // "node" for a node certificate
	Role Role
}

// Authenticator decides who made a call: its TLS client certificate, else
// its "authorization: Basic" metadata.
type Authenticator struct {
	Users *Directory
}

// Identify authenticates the call in ctx; the error is a gRPC
// Unauthenticated status.
func (a Authenticator) Identify(ctx context.Context) (Identity, error) {
	var source string
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			source = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if id, ok, err := a.certIdentity(ti.State); ok || err != nil {
				return id, unauthenticated(err)
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(authorizationKey)
	if len(vals) == 0 {
		return Identity{}, status.Error(codes.Unauthenticated, errNoCredentials.Error())
	}
	user, pass, ok := parseBasic(vals[0])
	if !ok {
		return Identity{}, status.Error(codes.Unauthenticated, "the authorization metadata is not \"Basic base64(user:password)\"")
	}
	id, err := a.passwordIdentity(user, pass, source)
	return id, unauthenticated(err)
}

// unauthenticated is the status of a failed authentication: the node's
// derivation budget spent is ResourceExhausted (the call may be retried
// as it is), anything else Unauthenticated.
func unauthenticated(err error) error {
	switch {
	case err == nil:
		return nil
	case IsLoginBusy(err):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.Unauthenticated, err.Error())
}

var errNoCredentials = errors.New("authentication required: present a client certificate or a user name and password")

// certIdentity is who a verified client certificate names; ok is false
// when the connection presented none (or one of neither OU).
func (a Authenticator) certIdentity(cs tls.ConnectionState) (id Identity, ok bool, err error) {
	if len(cs.VerifiedChains) == 0 {
		return Identity{}, false, nil
	}
	leaf := cs.VerifiedChains[0][0]
	if slices.Contains(leaf.Subject.OrganizationalUnit, NodeOU) {
		return Identity{User: nodeCN, Role: RoleNode}, true, nil
	}
	if !slices.Contains(leaf.Subject.OrganizationalUnit, ClientOU) {
		return Identity{}, false, nil
	}
	role, err := a.Users.CertRole(leaf.Subject.CommonName)
	if err != nil {
		return Identity{}, false, err
	}
	return Identity{User: leaf.Subject.CommonName, Role: role}, true, nil
}

// passwordIdentity checks a user name and password.
func (a Authenticator) passwordIdentity(user, pass, source string) (Identity, error) {
	role, err := a.Users.PasswordRole(user, pass, source)
	if err != nil {
		return Identity{}, err
	}
	return Identity{User: user, Role: role}, nil
}

// authorize authenticates a call and checks its method's role.
func (a Authenticator) authorize(ctx context.Context, method string) error {
	id, err := a.Identify(ctx)
	if err != nil {
		return err
	}
	return Permit(id, method)
}

// Permit checks that id's role may call method (a PermissionDenied
// status if not): for the requests a stream carries, whose identity was
// established when it opened.
func Permit(id Identity, method string) error {
	if need := RequiredRole(method); id.Role < need {
		return status.Error(codes.PermissionDenied, denial(id, method[strings.LastIndexByte(method, '/')+1:], need))
	}
	return nil
}

// denial says why id may not do what is called name.
func denial(id Identity, name string, need Role) string {
	if need == RoleNode {
		return fmt.Sprintf("%s is a node-to-node call: it needs a node certificate, and user %s has none", name, id.User)
	}
	return fmt.Sprintf("user %s has role %s; %s needs role %s", id.User, id.Role, name, need)
}

// UnaryInterceptor refuses unary calls that fail authorize.
func (a Authenticator) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := a.authorize(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// StreamInterceptor refuses streams that fail authorize.
func (a Authenticator) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := a.authorize(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

const authorizationKey = "authorization"

func parseBasic(v string) (user, pass string, ok bool) {
	enc, found := strings.CutPrefix(v, "Basic ")
	if !found {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

// PasswordCredentials sends a user name and password with every call. It
// requires TLS: gRPC refuses to send them over plaintext.
type PasswordCredentials struct {
	User, Password string
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c PasswordCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{authorizationKey: "Basic " + base64.StdEncoding.EncodeToString([]byte(c.User+":"+c.Password))}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (PasswordCredentials) RequireTransportSecurity() bool { return true }

// RequireNode accepts a TLS connection whose verified client certificate
// is a node's and refuses any other: for node-to-node connections outside
// gRPC (Raft frames, internal/transport), which no user may open.
func RequireNode(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || !slices.Contains(cs.VerifiedChains[0][0].Subject.OrganizationalUnit, NodeOU) {
		return errors.New("a node certificate is required")
	}
	return nil
}
