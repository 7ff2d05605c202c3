// Package authz authorizes the sidecar's northbound clients
// (docs/security.md): who a client is (a verified client certificate, or
// username/password metadata checked against bcrypt hashes), the role its
// Policy gives it, and the role each RPC needs. The role an RPC needs is
// decided by pure functions (RequiredAction, SetAction); Authorizer's gRPC
// interceptors only look it up and compare.
package authz

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
)

// Role is what an authenticated client may do. Each role includes the
// ones below it.
type Role int

const (
	// RoleNone may do nothing (an identity without a role); as the role an
	// RPC needs, it means the RPC needs no identity at all.
	RoleNone Role = iota
	// RoleRead may call Capabilities, Get and Subscribe.
	RoleRead
	// RoleWrite may also Set: changes, and commit-confirmed commits.
	RoleWrite
	// RoleAdmin may also roll back (the sidecar extension) and confirm,
	// cancel or extend a commit-confirmed.
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole parses "read", "write" or "admin".
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return RoleRead, nil
	case "write":
		return RoleWrite, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want read, write or admin)", s)
}

// Action is an RPC as authorization sees it: its name in messages and the
// role it needs.
type Action struct {
	Name string
	Role Role
}

// The authorizer's table: every action a client may ask for and the role
// it needs. RequiredAction returns one of these (or, for a method of an
// unknown service, that method with RoleAdmin). docs/security.md's Roles
// table lists exactly these (TestRolesTableDocumented).
var (
	actCapabilities  = Action{"Capabilities", RoleRead}
	actGet           = Action{"Get", RoleRead}
	actSubscribe     = Action{"Subscribe", RoleRead}
	actReflection    = Action{"server reflection", RoleRead}
	actSet           = Action{"Set", RoleWrite}
	actCommit        = Action{"commit-confirmed commit", RoleWrite}
	actRollback      = Action{"rollback", RoleAdmin}
	actResolve       = Action{"resolve", RoleAdmin}
	actTag           = Action{"tag", RoleAdmin}
	actSyncFrom      = Action{"sync-from", RoleAdmin}
	actConfirm       = Action{"commit-confirmed confirm", RoleAdmin}
	actCancel        = Action{"commit-confirmed cancel", RoleAdmin}
	actExtend        = Action{"commit-confirmed set_rollback_duration", RoleAdmin}
	actHealth        = Action{"health check", RoleNone}
	actOtherMethod   = Action{"any other method", RoleAdmin}
	actSetOtherThing = Action{"Set", RoleAdmin} // the Set method with another message: the strictest
)

// Actions is the authorizer's table: every action RequiredAction may
// return, and the role it needs ("any other method" stands for a method
// of another service, named by its full method name).
var Actions = []Action{
	actCapabilities, actGet, actSubscribe, actReflection, actSet, actCommit, actRollback, actResolve, actTag,
	actSyncFrom, actConfirm, actCancel, actExtend, actHealth, actOtherMethod,
}

// Health-check methods (grpc.health.v1), which need no identity: they
// tell whether the sidecar serves, nothing else.
const (
	healthCheck = "/grpc.health.v1.Health/Check"
	healthWatch = "/grpc.health.v1.Health/Watch"
	healthList  = "/grpc.health.v1.Health/List"
)

// RequiredAction returns what a call of the gRPC method fullMethod is and
// the role it needs. req is the request of a unary call (nil for a
// stream); only Set's matters. gNMI reads need read; Set is decided by
// SetAction; server reflection needs read; health checks need no identity
// (RoleNone); any other method needs admin.
func RequiredAction(fullMethod string, req any) Action {
	switch fullMethod {
	case gpb.GNMI_Capabilities_FullMethodName:
		return actCapabilities
	case gpb.GNMI_Get_FullMethodName:
		return actGet
	case gpb.GNMI_Subscribe_FullMethodName:
		return actSubscribe
	case gpb.GNMI_Set_FullMethodName:
		set, ok := req.(*gpb.SetRequest)
		if !ok {
			return actSetOtherThing // not a gNMI Set after all: the strictest
		}
		return SetAction(set)
	case healthCheck, healthWatch, healthList:
		return actHealth
	}
	if strings.HasPrefix(fullMethod, "/grpc.reflection.") {
		return actReflection
	}
	return Action{fullMethod, actOtherMethod.Role}
}

// SetAction returns what a SetRequest is and the role it needs, from its
// extensions, decoded exactly as Set decodes them:
//
//   - the sidecar extension with a rollback (of a proposal, or to a
//     point), a resolve, a tag or a sync-from: admin;
//   - commit-confirmed confirm, cancel or set_rollback_duration: admin;
//   - anything else (a change, its dry run, a commit-confirmed commit):
//     write.
//
// A Set whose extensions Set refuses needs write: it changes nothing.
func SetAction(req *gpb.SetRequest) Action {
	ext, commit, err := proxy.RequestExtensions(req.GetExtension())
	if err != nil {
		return actSet
	}
	if ext.GetRollback() != nil {
		return actRollback // with a commit extension too: Set refuses it
	}
	if ext.GetResolve() != nil {
		return actResolve
	}
	if ext.GetTag() != nil {
		return actTag
	}
	if ext.GetSyncFrom() != nil {
		return actSyncFrom
	}
	if commit == nil {
		return actSet
	}
	switch commit.GetAction().(type) {
	case *gnmi_ext.Commit_Confirm:
		return actConfirm
	case *gnmi_ext.Commit_Cancel:
		return actCancel
	case *gnmi_ext.Commit_SetRollbackDuration:
		return actExtend
	}
	return actCommit // no action: Set refuses it
}

// --- the policy ---

// Policy says who has which role: the content of --authz-file.
type Policy struct {
	// Users are the username/password clients, by username.
	Users map[string]User
	// Certificates are the mTLS clients' roles, by the common name of
	// their verified certificate.
	Certificates map[string]Role
	// DefaultRole is the role of an authenticated identity not listed
	// (RoleNone: none): in practice, of a certificate whose common name
	// is not in Certificates.
	DefaultRole Role
}

// User is a username/password client.
type User struct {
	Role Role
	// PasswordHash is the bcrypt hash of the password.
	PasswordHash []byte
}

// policyFile is the YAML form of a Policy.
type policyFile struct {
	Users        map[string]userEntry `yaml:"users"`
	Certificates map[string]certEntry `yaml:"certificates"`
	DefaultRole  string               `yaml:"default_role"`
}

type userEntry struct {
	Role         string `yaml:"role"`
	PasswordHash string `yaml:"password_hash"`
}

type certEntry struct {
	Role string `yaml:"role"`
}

// ParsePolicy parses a policy in YAML:
//
//	users:            # username/password clients; passwords as bcrypt hashes
//	  alice: {role: admin, password_hash: "$2a$10$..."}
//	certificates:     # mTLS clients by certificate common name
//	  ops-bot: {role: write}
//	default_role: ""  # role of an authenticated identity not listed ("" = none)
//
// Unknown keys, unknown roles, missing or malformed hashes are errors
// naming the key; so is a policy granting no role to anyone.
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	p := &Policy{Users: map[string]User{}, Certificates: map[string]Role{}}
	for _, name := range sortedKeys(f.Users) {
		u := f.Users[name]
		if name == "" {
			return nil, errors.New("users: an empty username")
		}
		role, err := ParseRole(u.Role)
		if err != nil {
			return nil, fmt.Errorf("users.%s.role: %w", name, err)
		}
		if u.PasswordHash == "" {
			return nil, fmt.Errorf("users.%s.password_hash is required (a bcrypt hash, see docs/security.md)", name)
		}
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			// Not the hash itself in the message: it is half a secret.
			return nil, fmt.Errorf("users.%s.password_hash: not a bcrypt hash ($2a$..., $2b$... or $2y$...)", name)
		}
		p.Users[name] = User{Role: role, PasswordHash: []byte(u.PasswordHash)}
	}
	for _, cn := range sortedKeys(f.Certificates) {
		if cn == "" {
			return nil, errors.New("certificates: an empty common name")
		}
		role, err := ParseRole(f.Certificates[cn].Role)
		if err != nil {
			return nil, fmt.Errorf("certificates.%s.role: %w", cn, err)
		}
		p.Certificates[cn] = role
	}
	if f.DefaultRole != "" {
		role, err := ParseRole(f.DefaultRole)
		if err != nil {
			return nil, fmt.Errorf("default_role: %w", err)
		}
		p.DefaultRole = role
	}
	if len(p.Users) == 0 && len(p.Certificates) == 0 && p.DefaultRole == RoleNone {
		return nil, errors.New("grants no role to anyone: list users or certificates, or set default_role")
	}
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// --- identities ---

// Identity is who a client is.
type Identity struct {
	// Kind is "user" (username/password) or "certificate" (the common name
	// of a verified client certificate).
	Kind string
	Name string
}

func (id Identity) String() string { return fmt.Sprintf("%s %q", id.Kind, id.Name) }

// Authorizer authenticates northbound clients and authorizes their RPCs
// against a Policy. Install its interceptors on the gRPC server.
type Authorizer struct {
	policy *Policy
	log    *slog.Logger

	// macKey keys the HMACs of verified passwords: bcrypt is slow on
	// purpose, so a password verified once is recognized by its HMAC
	// (never stored in clear) on the next RPCs.
	macKey []byte
	// dummyHash is compared against for an unknown username, so that its
	// answer takes as long as a wrong password's.
	dummyHash []byte

	mu       sync.Mutex
	verified map[string][]byte // username → HMAC of its verified password
}

// NewAuthorizer returns an Authorizer for p, logging denials to log (nil:
// slog.Default()). It never logs a password or a hash.
func NewAuthorizer(p *Policy, log *slog.Logger) *Authorizer {
	if log == nil {
		log = slog.Default()
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	cost := bcrypt.DefaultCost
	for _, u := range p.Users {
		if c, err := bcrypt.Cost(u.PasswordHash); err == nil {
			cost = c
			break
		}
	}
	dummy, err := bcrypt.GenerateFromPassword(key[:16], cost)
	if err != nil {
		dummy = nil // only timing suffers
	}
	return &Authorizer{policy: p, log: log.With("component", "authz"), macKey: key, dummyHash: dummy, verified: map[string][]byte{}}
}

// errNoCredentials is the answer to a client that sent neither a verified
// certificate nor a username.
var errNoCredentials = status.Error(codes.Unauthenticated,
	"authorization is on: authenticate with a client certificate or with username and password metadata")

// errBadPassword is the answer to a wrong password or an unknown username
// (the same, so as not to tell which usernames exist).
var errBadPassword = status.Error(codes.Unauthenticated, "username or password not accepted")

// Authenticate returns who the client of ctx is and its role:
//
//   - username metadata naming a listed user: that user, if the password
//     metadata matches its hash (Unauthenticated otherwise, whatever
//     certificate the client presented);
//   - otherwise the common name of the client's verified certificate
//     (mTLS), with its listed role or the default role;
//   - otherwise Unauthenticated.
func (a *Authorizer) Authenticate(ctx context.Context) (Identity, Role, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	usernames, passwords := md.Get("username"), md.Get("password")
	cn, hasCert := certificateName(ctx)
	if len(usernames) > 1 || len(passwords) > 1 {
		a.log.Info("unauthenticated: more than one username or password", "peer", peerAddr(ctx))
		return Identity{}, RoleNone, errBadPassword
	}
	if len(usernames) == 1 {
		name, password := usernames[0], ""
		if len(passwords) == 1 {
			password = passwords[0]
		}
		if u, ok := a.policy.Users[name]; ok {
			if !a.checkPassword(name, u.PasswordHash, password) {
				a.log.Warn("unauthenticated: wrong password", "user", name, "peer", peerAddr(ctx))
				return Identity{}, RoleNone, errBadPassword
			}
			return Identity{proxy.IdentityUser, name}, u.Role, nil
		}
		if !hasCert {
			// The same time as a wrong password.
			_ = bcrypt.CompareHashAndPassword(a.dummyHash, []byte(password))
			// Not the name: it might be a password typed in its place.
			a.log.Warn("unauthenticated: unknown user", "peer", peerAddr(ctx))
			return Identity{}, RoleNone, errBadPassword
		}
		// An unlisted username with a verified certificate: credentials
		// meant for the device; the certificate says who the client is.
	}
	if hasCert {
		role, ok := a.policy.Certificates[cn]
		if !ok {
			role = a.policy.DefaultRole
		}
		return Identity{proxy.IdentityCertificate, cn}, role, nil
	}
	a.log.Info("unauthenticated: no credentials", "peer", peerAddr(ctx))
	return Identity{}, RoleNone, errNoCredentials
}

// checkPassword reports whether password matches user's hash.
func (a *Authorizer) checkPassword(user string, hash []byte, password string) bool {
	m := hmac.New(sha256.New, a.macKey)
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(password))
	sum := m.Sum(nil)
	a.mu.Lock()
	known := a.verified[user]
	a.mu.Unlock()
	if known != nil && hmac.Equal(known, sum) {
		return true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return false
	}
	a.mu.Lock()
	a.verified[user] = sum
	a.mu.Unlock()
	return true
}

// certificateName returns the common name of the client's verified
// certificate, if it presented one the server verified (mTLS) and it has
// a common name.
func certificateName(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", false
	}
	cn := info.State.VerifiedChains[0][0].Subject.CommonName
	return cn, cn != ""
}

// peerAddr is the network address of the client of ctx, for logs.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// Authorize authenticates the client of ctx and checks that its role
// allows the call of fullMethod with req (nil for a stream):
// Unauthenticated without a valid identity, PermissionDenied, naming the
// identity, its role and the role needed, without the role.
func (a *Authorizer) Authorize(ctx context.Context, fullMethod string, req any) error {
	_, err := a.authorize(ctx, fullMethod, req)
	return err
}

// authorize is Authorize, returning ctx naming the identity it accepted
// (proxy.WithAuthorized): the identity the journal records as the author
// of what the RPC does.
func (a *Authorizer) authorize(ctx context.Context, fullMethod string, req any) (context.Context, error) {
	act := RequiredAction(fullMethod, req)
	if act.Role == RoleNone {
		return ctx, nil
	}
	id, role, err := a.Authenticate(ctx)
	if err != nil {
		return ctx, err
	}
	if role < act.Role {
		a.log.Warn("permission denied", id.Kind, id.Name, "role", role.String(), "action", act.Name, "needs", act.Role.String())
		return ctx, status.Error(codes.PermissionDenied, deniedMessage(id, role, act))
	}
	if act.Role >= RoleWrite {
		a.log.Info("authorized", id.Kind, id.Name, "role", role.String(), "action", act.Name)
	} else {
		a.log.Debug("authorized", id.Kind, id.Name, "role", role.String(), "action", act.Name)
	}
	return proxy.WithAuthorized(ctx, id.Kind, id.Name), nil
}

// deniedMessage is `user "alice" has role read; Set needs write`.
func deniedMessage(id Identity, role Role, act Action) string {
	has := "has role " + role.String()
	if role == RoleNone {
		has = "has no role"
	}
	return fmt.Sprintf("%s %s; %s needs %s", id, has, act.Name, act.Role)
}

// UnaryInterceptor authorizes unary RPCs (Capabilities, Get, Set).
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := a.authorize(ctx, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor authorizes streaming RPCs (Subscribe).
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := a.Authorize(ss.Context(), info.FullMethod, nil); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}
