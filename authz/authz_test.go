package authz_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"maps"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/authz"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

func TestRequiredAction(t *testing.T) {
	set := func(exts ...*gnmi_ext.Extension) *gpb.SetRequest {
		return sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("x"), exts...)
	}
	rollback := sidecartest.SidecarExtension(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{}})
	master := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{}}}
	for _, tt := range []struct {
		name   string
		method string
		req    any
		want   authz.Action
	}{
		{"Capabilities", gpb.GNMI_Capabilities_FullMethodName, &gpb.CapabilityRequest{}, authz.Action{Name: "Capabilities", Role: authz.RoleRead}},
		{"Get", gpb.GNMI_Get_FullMethodName, &gpb.GetRequest{}, authz.Action{Name: "Get", Role: authz.RoleRead}},
		{"Get of the introspection tree", gpb.GNMI_Get_FullMethodName, &gpb.GetRequest{Prefix: &gpb.Path{Origin: proxy.IntrospectionOrigin}}, authz.Action{Name: "Get", Role: authz.RoleRead}},
		{"Subscribe", gpb.GNMI_Subscribe_FullMethodName, nil, authz.Action{Name: "Subscribe", Role: authz.RoleRead}},
		{"Set", gpb.GNMI_Set_FullMethodName, set(), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"Set ASYNC", gpb.GNMI_Set_FullMethodName, set(sidecartest.SidecarExtension(t, sidecartest.AsyncMode())), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"Set with MasterArbitration", gpb.GNMI_Set_FullMethodName, set(master), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"rollback", gpb.GNMI_Set_FullMethodName, sidecartest.RollbackRequest(t, 0), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"rollback of proposal 7", gpb.GNMI_Set_FullMethodName, sidecartest.RollbackRequest(t, 7), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"rollback ASYNC", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Mode: sidecarpb.SetMode_SET_MODE_ASYNC, Rollback: &sidecarpb.Rollback{Index: 3}})), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"rollback with operations (refused by Set)", gpb.GNMI_Set_FullMethodName, set(rollback), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"rollback to a tag", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{ToTag: "good"}})), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"tag", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "good"}})), authz.Action{Name: "tag", Role: authz.RoleAdmin}},
		{"dry run", gpb.GNMI_Set_FullMethodName, set(sidecartest.SidecarExtension(t, &sidecarpb.Request{DryRun: true})), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"rollback with MasterArbitration", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(master, rollback), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"commit-confirmed commit", gpb.GNMI_Set_FullMethodName, set(sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Minute))), authz.Action{Name: "commit-confirmed commit", Role: authz.RoleWrite}},
		{"commit-confirmed commit ASYNC", gpb.GNMI_Set_FullMethodName, set(sidecartest.SidecarExtension(t, sidecartest.AsyncMode()), sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Minute))), authz.Action{Name: "commit-confirmed commit", Role: authz.RoleWrite}},
		{"commit-confirmed confirm", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})), authz.Action{Name: "commit-confirmed confirm", Role: authz.RoleAdmin}},
		{"commit-confirmed cancel", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitCancel{})), authz.Action{Name: "commit-confirmed cancel", Role: authz.RoleAdmin}},
		{"commit-confirmed set_rollback_duration", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.ExtendTo(time.Hour))), authz.Action{Name: "commit-confirmed set_rollback_duration", Role: authz.RoleAdmin}},
		{"commit-confirmed without action (refused by Set)", gpb.GNMI_Set_FullMethodName, set(sidecartest.CommitExtension("c1", nil)), authz.Action{Name: "commit-confirmed commit", Role: authz.RoleWrite}},
		{"commit-confirmed and rollback (refused by Set)", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Minute)), rollback), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		{"confirm and rollback (refused by Set)", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(rollback, sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})), authz.Action{Name: "rollback", Role: authz.RoleAdmin}},
		// Sets whose extensions Set refuses change nothing: write.
		{"undecodable sidecar extension", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.RegisteredExtension(proxy.ExtensionID, []byte{0x12, 0x05})), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"two sidecar extensions", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(rollback, rollback), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"unknown registered extension", gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.RegisteredExtension(gnmi_ext.ExtensionID_EID_UNSET, []byte{0x12, 0x00})), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"History on Set", gpb.GNMI_Set_FullMethodName, set(&gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}), authz.Action{Name: "Set", Role: authz.RoleWrite}},
		{"Set method with another message", gpb.GNMI_Set_FullMethodName, &gpb.GetRequest{}, authz.Action{Name: "Set", Role: authz.RoleAdmin}},
		{"health check", "/grpc.health.v1.Health/Check", nil, authz.Action{Name: "health check", Role: authz.RoleNone}},
		{"health watch", "/grpc.health.v1.Health/Watch", nil, authz.Action{Name: "health check", Role: authz.RoleNone}},
		{"reflection", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", nil, authz.Action{Name: "server reflection", Role: authz.RoleRead}},
		{"unknown method", "/other.Service/Do", nil, authz.Action{Name: "/other.Service/Do", Role: authz.RoleAdmin}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := authz.RequiredAction(tt.method, tt.req); got != tt.want {
				t.Errorf("RequiredAction(%s) = %+v, want %+v", tt.method, got, tt.want)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	for s, want := range map[string]authz.Role{"read": authz.RoleRead, "write": authz.RoleWrite, "admin": authz.RoleAdmin} {
		if got, err := authz.ParseRole(s); err != nil || got != want || got.String() != s {
			t.Errorf("ParseRole(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "none", "Admin", "root"} {
		if _, err := authz.ParseRole(s); err == nil || !strings.Contains(err.Error(), "want read, write or admin") {
			t.Errorf("ParseRole(%q): %v, want an error", s, err)
		}
	}
	if !(authz.RoleNone < authz.RoleRead && authz.RoleRead < authz.RoleWrite && authz.RoleWrite < authz.RoleAdmin) {
		t.Error("roles are not ordered none < read < write < admin")
	}
}

func hashOf(t testing.TB, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestParsePolicy(t *testing.T) {
	hash := hashOf(t, "pw")
	p, err := authz.ParsePolicy([]byte(`
users:
  alice: {role: admin, password_hash: "` + hash + `"}
  bob:
    role: read
    password_hash: '` + hash + `'
certificates:
  ops-bot: {role: write}
default_role: read
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Users["alice"].Role != authz.RoleAdmin || p.Users["bob"].Role != authz.RoleRead || string(p.Users["alice"].PasswordHash) != hash {
		t.Errorf("users: %+v", p.Users)
	}
	if p.Certificates["ops-bot"] != authz.RoleWrite || len(p.Certificates) != 1 {
		t.Errorf("certificates: %+v", p.Certificates)
	}
	if p.DefaultRole != authz.RoleRead {
		t.Errorf("default_role: %v", p.DefaultRole)
	}

	if p, err := authz.ParsePolicy([]byte("certificates: {ops-bot: {role: write}}\ndefault_role: \"\"\n")); err != nil || p.DefaultRole != authz.RoleNone {
		t.Errorf("certificates only, no default role: %+v, %v", p, err)
	}

	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "usres: {}\ndefault_role: read\n", []string{"usres"}},
		{"unknown user key", "users:\n  alice: {role: admin, pasword_hash: x}\n", []string{"pasword_hash"}},
		{"password hash on a certificate", "certificates:\n  bot: {role: read, password_hash: x}\n", []string{"password_hash"}},
		{"unknown user role", "users:\n  alice: {role: superuser, password_hash: '" + hash + "'}\n", []string{"users.alice.role", `"superuser"`}},
		{"missing user role", "users:\n  alice: {password_hash: '" + hash + "'}\n", []string{"users.alice.role"}},
		{"unknown certificate role", "certificates:\n  bot: {role: root}\n", []string{"certificates.bot.role", `"root"`}},
		{"unknown default role", "default_role: everything\n", []string{"default_role", `"everything"`}},
		{"missing password hash", "users:\n  alice: {role: read}\n", []string{"users.alice.password_hash is required"}},
		{"password in clear", "users:\n  alice: {role: read, password_hash: hunter2}\n", []string{"users.alice.password_hash: not a bcrypt hash"}},
		{"a user twice", "users:\n  alice: {role: read, password_hash: '" + hash + "'}\n  alice: {role: admin, password_hash: '" + hash + "'}\n", []string{"alice"}},
		{"empty", "", []string{"grants no role to anyone"}},
		{"nobody", "users: {}\ncertificates: {}\ndefault_role: ''\n", []string{"grants no role to anyone"}},
		{"not a mapping", "- alice\n", []string{"cannot unmarshal"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := authz.ParsePolicy([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("ParsePolicy accepted:\n%s", tt.yaml)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// --- authorization end to end ---

// as returns a context carrying username/password metadata.
func as(ctx context.Context, user, password string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "username", user, "password", password)
}

// TestAuthorization runs a sidecar with TLS (a client certificate
// optional, so that both kinds of identity reach one server) and an
// authorization policy, and checks what each role may do.
func TestAuthorization(t *testing.T) {
	pki := sidecartest.NewPKI(t)
	policy, err := authz.ParsePolicy([]byte(`
users:
  reader: {role: read, password_hash: "` + hashOf(t, "read-pw") + `"}
  writer: {role: write, password_hash: "` + hashOf(t, "write-pw") + `"}
  boss:   {role: admin, password_hash: "` + hashOf(t, "admin-pw") + `"}
certificates:
  ops-bot: {role: write}
  noc:     {role: admin}
default_role: read
`))
	if err != nil {
		t.Fatal(err)
	}
	a := authz.NewAuthorizer(policy, sidecartest.Logger(t))
	r := sidecartest.Start(t, sidecartest.Options{ServerOptions: []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{pki.Server(t)},
			ClientCAs:    pki.Pool(),
			ClientAuth:   tls.VerifyClientCertIfGiven,
			MinVersion:   tls.VersionTLS12,
		})),
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(a.StreamInterceptor()),
	}})
	anon := sidecartest.DialTLS(t, r.Addr, pki.Pool())
	opsBot := sidecartest.DialTLS(t, r.Addr, pki.Pool(), pki.Client(t, "ops-bot"))
	noc := sidecartest.DialTLS(t, r.Addr, pki.Pool(), pki.Client(t, "noc"))
	stranger := sidecartest.DialTLS(t, r.Addr, pki.Pool(), pki.Client(t, "stranger"))

	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(t.Context(), waitFor)
		t.Cleanup(cancel)
		return c
	}
	get := func(c gpb.GNMIClient, ctx context.Context) error {
		_, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}, Encoding: gpb.Encoding_JSON_IETF})
		if status.Code(err) == codes.NotFound {
			return nil // nothing there yet: the Get was allowed
		}
		return err
	}
	subscribe := func(c gpb.GNMIClient, ctx context.Context) error {
		st, err := c.Subscribe(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
			Prefix: &gpb.Path{Origin: proxy.IntrospectionOrigin}, Mode: gpb.SubscriptionList_ONCE,
			Subscription: []*gpb.Subscription{{Path: sidecartest.Path(t, "/configuration/state")}},
		}}}); err != nil && err != io.EOF {
			return err
		}
		for {
			resp, err := st.Recv()
			if err != nil {
				return err
			}
			if resp.GetSyncResponse() {
				return nil
			}
		}
	}
	set := func(c gpb.GNMIClient, ctx context.Context, val string) error {
		_, err := c.Set(ctx, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal(val)))
		return err
	}

	t.Run("no credentials", func(t *testing.T) {
		err := get(anon, ctx(t))
		sidecartest.WantStatus(t, err, codes.Unauthenticated, "authenticate")
		_, err = anon.Capabilities(ctx(t), &gpb.CapabilityRequest{})
		sidecartest.WantStatus(t, err, codes.Unauthenticated)
		sidecartest.WantStatus(t, subscribe(anon, ctx(t)), codes.Unauthenticated)
	})
	t.Run("wrong password", func(t *testing.T) {
		sidecartest.WantStatus(t, get(anon, as(ctx(t), "boss", "read-pw")), codes.Unauthenticated, "not accepted")
		sidecartest.WantStatus(t, set(anon, as(ctx(t), "boss", ""), "x"), codes.Unauthenticated, "not accepted")
		// A verified certificate does not make up for a wrong password.
		sidecartest.WantStatus(t, get(noc, as(ctx(t), "reader", "nope")), codes.Unauthenticated, "not accepted")
	})
	t.Run("unknown user", func(t *testing.T) {
		sidecartest.WantStatus(t, get(anon, as(ctx(t), "mallory", "read-pw")), codes.Unauthenticated, "not accepted")
	})

	t.Run("read", func(t *testing.T) {
		c := as(ctx(t), "reader", "read-pw")
		if err := get(anon, c); err != nil {
			t.Errorf("reader Get: %v", err)
		}
		if _, err := anon.Capabilities(c, &gpb.CapabilityRequest{}); err != nil {
			t.Errorf("reader Capabilities: %v", err)
		}
		if err := subscribe(anon, c); err != nil {
			t.Errorf("reader Subscribe: %v", err)
		}
		// A denied Set carrying the highest election id changes no record.
		records, err := r.Journal.Records(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		maxID := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{
			ElectionId: &gnmi_ext.Uint128{High: math.MaxUint64, Low: math.MaxUint64}}}}
		_, err = anon.Set(c, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("by reader"), maxID))
		sidecartest.WantStatus(t, err, codes.PermissionDenied, `user "reader" has role read; Set needs write`)
		if after, err := r.Journal.Records(t.Context()); err != nil || !maps.EqualFunc(records, after, bytes.Equal) {
			t.Errorf("a denied Set with MasterArbitration changed the journal (%v)", err)
		}
		before := r.LastIndex(t)
		sidecartest.WantStatus(t, set(anon, c, "by reader"), codes.PermissionDenied, `user "reader" has role read; Set needs write`)
		if got := r.LastIndex(t); got != before {
			t.Errorf("the journal's last index went from %d to %d on a denied Set", before, got)
		}
		r.WantDeviceLeaf(t, descPath, nil)
		// A certificate not listed has the default role.
		if err := get(stranger, ctx(t)); err != nil {
			t.Errorf("unlisted certificate Get: %v", err)
		}
		sidecartest.WantStatus(t, set(stranger, ctx(t), "by stranger"), codes.PermissionDenied, `certificate "stranger" has role read; Set needs write`)
		if got := r.LastIndex(t); got != before {
			t.Errorf("the journal's last index went from %d to %d on a denied Set", before, got)
		}
	})

	t.Run("write", func(t *testing.T) {
		c := as(ctx(t), "writer", "write-pw")
		if err := set(anon, c, "by writer"); err != nil {
			t.Fatalf("writer Set: %v", err)
		}
		r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("by writer"))
		if err := set(opsBot, ctx(t), "by ops-bot"); err != nil {
			t.Fatalf("ops-bot (certificate) Set: %v", err)
		}
		// A certificate with credentials of an unlisted user (meant for
		// the device) is the certificate.
		if err := set(opsBot, as(ctx(t), "device-user", "device-pw"), "by ops-bot again"); err != nil {
			t.Fatalf("ops-bot (certificate) Set with device credentials: %v", err)
		}
		before := r.LastIndex(t)
		_, err := anon.Set(c, sidecartest.RollbackRequest(t, 0))
		sidecartest.WantStatus(t, err, codes.PermissionDenied, `user "writer" has role write; rollback needs admin`)
		_, err = opsBot.Set(ctx(t), sidecartest.RollbackRequest(t, 0))
		sidecartest.WantStatus(t, err, codes.PermissionDenied, `certificate "ops-bot" has role write; rollback needs admin`)
		if got := r.LastIndex(t); got != before {
			t.Errorf("the journal's last index went from %d to %d on a denied rollback", before, got)
		}
		r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("by ops-bot again"))

		// commit-confirmed: write commits, admin confirms.
		if _, err := anon.Set(c, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("committed"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Hour)))); err != nil {
			t.Fatalf("writer commit-confirmed commit: %v", err)
		}
		for _, action := range []any{&gnmi_ext.CommitConfirm{}, &gnmi_ext.CommitCancel{}, sidecartest.ExtendTo(time.Hour)} {
			_, err := anon.Set(c, sidecartest.BareRequest(sidecartest.CommitExtension("c1", action)))
			sidecartest.WantStatus(t, err, codes.PermissionDenied, `user "writer" has role write; commit-confirmed`, "needs admin")
		}
		if r.OutstandingCommit(t) == nil {
			t.Fatal("the commit is no longer outstanding after denied actions")
		}
		if _, err := noc.Set(ctx(t), sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{}))); err != nil {
			t.Fatalf("noc (admin certificate) confirm: %v", err)
		}
	})

	t.Run("admin", func(t *testing.T) {
		c := as(ctx(t), "boss", "admin-pw")
		resp, err := anon.Set(c, sidecartest.RollbackRequest(t, 0))
		if err != nil {
			t.Fatalf("admin rollback: %v", err)
		}
		if got := sidecartest.ResponseExtension(t, resp); got.GetPhase() != sidecarpb.Phase_PHASE_ROLLBACK {
			t.Errorf("rollback response %v", got)
		}
		r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("by ops-bot again"))
		// The password is verified again from its cache: same answer.
		if _, err := anon.Set(as(ctx(t), "boss", "admin-pw"), sidecartest.RollbackRequest(t, 0)); err != nil {
			t.Fatalf("admin second rollback: %v", err)
		}
		sidecartest.WantStatus(t, get(anon, as(ctx(t), "boss", "admin-pw-")), codes.Unauthenticated)
	})

	// One identity rule for authorization and authorship: the identity
	// authorization accepted is the one the journal names as the author.
	t.Run("author is the authorized identity", func(t *testing.T) {
		author := func() string { return r.Proposal(t, r.LastIndex(t)).GetChange().GetAuthor() }
		for _, tc := range []struct {
			name   string
			client gpb.GNMIClient
			ctx    context.Context
			want   string
		}{
			{"a user over a shared admin certificate", noc, as(ctx(t), "writer", "write-pw"), "writer"},
			{"a certificate alone", noc, ctx(t), "cert:CN=noc"},
			{"a certificate with a device user's credentials", opsBot, as(ctx(t), "device-user", "device-pw"), "cert:CN=ops-bot"},
			{"a user without a certificate", anon, as(ctx(t), "boss", "admin-pw"), "boss"},
		} {
			if err := set(tc.client, tc.ctx, tc.name); err != nil {
				t.Fatalf("%s: Set: %v", tc.name, err)
			}
			if got := author(); got != tc.want {
				t.Errorf("%s: journaled author %q, want %q", tc.name, got, tc.want)
			}
		}
		// Authorized as writer, even with the admin certificate.
		_, err := noc.Set(as(ctx(t), "writer", "write-pw"), sidecartest.RollbackRequest(t, 0))
		sidecartest.WantStatus(t, err, codes.PermissionDenied, `user "writer" has role write; rollback needs admin`)
	})
}

// docs/security.md's operations table lists exactly the authorizer's own
// table (authz.Actions), with the same roles.
func TestRolesTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	start := strings.Index(sec, "| operation | what it is | operator CLI | role |")
	if start < 0 {
		t.Fatal("docs/security.md has no operations table (| operation | what it is | operator CLI | role |)")
	}
	documented := map[string]string{}
	for _, line := range strings.Split(sec[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), "|")
		if len(cells) != 6 {
			t.Fatalf("table row %q: %d cells, want 4", line, len(cells)-2)
		}
		name, role := strings.Trim(strings.TrimSpace(cells[1]), "`"), strings.TrimSpace(cells[4])
		if _, dup := documented[name]; dup {
			t.Errorf("docs/security.md lists %q twice", name)
		}
		documented[name] = role
	}
	for _, a := range authz.Actions {
		want := a.Role.String()
		if a.Role == authz.RoleNone {
			want = "none"
		}
		switch got, ok := documented[a.Name]; {
		case !ok:
			t.Errorf("docs/security.md's operations table lacks %q (role %s)", a.Name, want)
		case got != want:
			t.Errorf("docs/security.md: %q needs %q, the authorizer says %q", a.Name, got, want)
		}
		delete(documented, a.Name)
	}
	for name := range documented {
		t.Errorf("docs/security.md lists %q, which the authorizer does not know", name)
	}
}

// Every action RequiredAction returns for a gNMI or sidecar operation is
// one of the authorizer's table, with the table's role.
func TestRequiredActionInTable(t *testing.T) {
	roles := map[string]authz.Role{}
	for _, a := range authz.Actions {
		roles[a.Name] = a.Role
	}
	ext := func(r *sidecarpb.Request) *gpb.SetRequest {
		return sidecartest.BareRequest(sidecartest.SidecarExtension(t, r))
	}
	for _, tc := range []struct {
		method string
		req    any
	}{
		{gpb.GNMI_Capabilities_FullMethodName, nil}, {gpb.GNMI_Get_FullMethodName, nil}, {gpb.GNMI_Subscribe_FullMethodName, nil},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", nil}, {"/grpc.health.v1.Health/Check", nil},
		{gpb.GNMI_Set_FullMethodName, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("x"))},
		{gpb.GNMI_Set_FullMethodName, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("x"), sidecartest.CommitExtension("c", sidecartest.CommitFor(time.Minute)))},
		{gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c", &gnmi_ext.CommitConfirm{}))},
		{gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c", &gnmi_ext.CommitCancel{}))},
		{gpb.GNMI_Set_FullMethodName, sidecartest.BareRequest(sidecartest.CommitExtension("c", sidecartest.ExtendTo(time.Minute)))},
		{gpb.GNMI_Set_FullMethodName, ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{}})},
		{gpb.GNMI_Set_FullMethodName, ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "t", Delete: true}})},
		{gpb.GNMI_Set_FullMethodName, ext(&sidecarpb.Request{Resolve: &sidecarpb.Resolve{Action: sidecarpb.Resolve_ACTION_RETRY}})},
		{gpb.GNMI_Set_FullMethodName, ext(&sidecarpb.Request{SyncFrom: &sidecarpb.SyncFrom{}})},
	} {
		got := authz.RequiredAction(tc.method, tc.req)
		if role, ok := roles[got.Name]; !ok || role != got.Role {
			t.Errorf("RequiredAction(%s) = %+v: not in authz.Actions (%v, %v)", tc.method, got, role, ok)
		}
	}
	if got := authz.RequiredAction("/other.Service/Do", nil); got.Role != roles["any other method"] {
		t.Errorf("another service's method needs %v, the table says %v", got.Role, roles["any other method"])
	}
}
