package main

// Tests of serve's security options (security.go, docs/security.md):
// `serve` runs in-process with certificates made by the test (a CA, a
// server certificate for 127.0.0.1/localhost, client certificates by
// common name), on real gRPC servers on 127.0.0.1.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// --- serve in-process ---

// served is `gnmi-sidecar serve` running in-process.
type served struct {
	addr string
	out  *lineWriter // stdout
	logs *lineWriter // stderr: the logs
	done chan struct{}
	err  error // once done is closed
}

// startServe runs `gnmi-sidecar serve args...` in-process until the test
// ends, and waits until it listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{out: newLineWriter(t, "serve stdout"), logs: newLineWriter(t, "serve log"), done: make(chan struct{})}
	root := newRootCommand(s.out, s.logs)
	root.SetArgs(append([]string{"serve"}, args...))
	root.SetOut(s.out)
	root.SetErr(s.logs)
	go func() {
		defer close(s.done)
		s.err = root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Error("serve still running 20 s after its context ended")
		}
	})
	const marker = "gnmi-sidecar listening on "
	line, err := s.out.waitLine(func(l string) bool { return strings.HasPrefix(l, marker) }, 20*time.Second, s.done)
	if err != nil {
		select {
		case <-s.done:
			t.Fatalf("serve %v: %v", args, s.err)
		default:
		}
		t.Fatalf("serve %v: no %q line: %v", args, marker, err)
	}
	s.addr = strings.TrimPrefix(line, marker)
	return s
}

// local returns the address to dial for a sidecar listening on all
// addresses.
func (s *served) local(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// wantNoSecret fails the test if the logs hold any of secrets.
func (s *served) wantNoSecret(t *testing.T, secrets ...string) {
	t.Helper()
	logs := s.logs.text()
	for _, sec := range secrets {
		if strings.Contains(logs, sec) {
			t.Errorf("the logs show the secret %q", sec)
		}
	}
}

// serveArgs are the arguments every test's serve needs: a journal, and a
// device (nil: an address where none listens).
func serveArgs(t *testing.T, dev *testbed.Device, more ...string) []string {
	target := "127.0.0.1:1"
	if dev != nil {
		target = dev.Addr()
	}
	// --metrics on a free port: the default one may be taken.
	return append([]string{"--target", target, "--journal-dir", t.TempDir(), "--log-level", "debug", "--metrics", "127.0.0.1:0"}, more...)
}

func wantCode(t *testing.T, what string, err error, want codes.Code, msg ...string) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: %v, want %v", what, err, want)
		return
	}
	for _, m := range msg {
		if !strings.Contains(status.Convert(err).Message(), m) {
			t.Errorf("%s: message %q does not mention %q", what, status.Convert(err).Message(), m)
		}
	}
}

func capabilities(c gpb.GNMIClient, ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Capabilities(ctx, &gpb.CapabilityRequest{})
	return err
}

// --- tests ---

func TestServeTLS(t *testing.T) {
	ca, dir := sidecartest.NewPKI(t), t.TempDir()
	certFile, keyFile := sidecartest.WriteCert(t, dir, "sidecar", ca.Server(t))
	caFile := ca.WriteCA(t, dir)
	dev := testbed.StartT(t, testbed.Options{Logger: sidecartest.Logger(t)})
	s := startServe(t, serveArgs(t, dev, "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)...)
	ctx := t.Context()

	if err := capabilities(sidecartest.DialTLS(t, s.addr, ca.Pool()), ctx); err != nil {
		t.Errorf("Capabilities over TLS trusting the CA: %v", err)
	}
	if err := capabilities(sidecartest.DialTLS(t, "localhost:"+strings.Split(s.addr, ":")[1], ca.Pool()), ctx); err != nil {
		t.Errorf("Capabilities over TLS to localhost: %v", err)
	}
	wantCode(t, "a plaintext client", capabilities(dial(t, s.addr), ctx), codes.Unavailable)
	wantCode(t, "a client not trusting the CA", capabilities(sidecartest.DialTLS(t, s.addr, x509.NewCertPool()), ctx), codes.Unavailable)

	// TLS 1.2 is the minimum.
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, NextProtos: []string{"h2"}}) //nolint:gosec // the point of the test
	if err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	} else if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.1 handshake: %v, want the server's protocol version alert", err)
	}

	// The operator CLI, trusting the CA.
	runOpsAt(t, s.addr, "status", "--tls-ca", caFile).wantCode(t, 0)
	runOpsAt(t, s.addr, "status", "--timeout", "3s").wantCode(t, exitUnreachable)
}

func TestServeMTLS(t *testing.T) {
	ca, other, dir := sidecartest.NewPKI(t), sidecartest.NewPKI(t), t.TempDir()
	certFile, keyFile := sidecartest.WriteCert(t, dir, "sidecar", ca.Server(t))
	caFile := ca.WriteCA(t, dir)
	dev := testbed.StartT(t, testbed.Options{Logger: sidecartest.Logger(t)})
	s := startServe(t, serveArgs(t, dev, "--listen", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile)...)
	ctx := t.Context()

	bot := ca.Client(t, "ops-bot")
	botCert, botKey := sidecartest.WriteCert(t, dir, "ops-bot", bot)
	if err := capabilities(sidecartest.DialTLS(t, s.addr, ca.Pool(), bot), ctx); err != nil {
		t.Errorf("Capabilities with a client certificate from the CA: %v", err)
	}
	wantCode(t, "a client without a certificate", capabilities(sidecartest.DialTLS(t, s.addr, ca.Pool()), ctx), codes.Unavailable)
	wantCode(t, "a client with a certificate from another CA", capabilities(sidecartest.DialTLS(t, s.addr, ca.Pool(), other.Client(t, "ops-bot")), ctx), codes.Unavailable)
	wantCode(t, "a plaintext client", capabilities(dial(t, s.addr), ctx), codes.Unavailable)

	runOpsAt(t, s.addr, "status", "--tls-ca", caFile, "--tls-cert", botCert, "--tls-key", botKey).wantCode(t, 0)
	runOpsAt(t, s.addr, "status", "--tls-ca", caFile, "--timeout", "3s").wantCode(t, exitUnreachable)
}

// TestServeAuthorization runs serve with mTLS and an --authz-file, and
// the operator CLI as clients of each role.
func TestServeAuthorization(t *testing.T) {
	ca, dir := sidecartest.NewPKI(t), t.TempDir()
	certFile, keyFile := sidecartest.WriteCert(t, dir, "sidecar", ca.Server(t))
	caFile := ca.WriteCA(t, dir)
	const alicePW, bobPW = "alice-Pa55", "bob-Pa55"
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	aliceHash := hash(alicePW)
	authz := filepath.Join(t.TempDir(), "authz.yaml")
	if err := os.WriteFile(authz, []byte(`
users:
  alice: {role: admin, password_hash: "`+aliceHash+`"}
  bob:   {role: read, password_hash: "`+hash(bobPW)+`"}
certificates:
  ops-bot: {role: write}
  viewer:  {role: read}
default_role: ""
`), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := testbed.StartT(t, testbed.Options{Logger: sidecartest.Logger(t)})
	s := startServe(t, serveArgs(t, dev, "--listen", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile, "--authz-file", authz)...)
	// client issues a client certificate with common name cn, and returns
	// it with the operator CLI's options presenting it.
	client := func(cn string) (tls.Certificate, []string) {
		cert := ca.Client(t, cn)
		certFile, keyFile := sidecartest.WriteCert(t, dir, cn, cert)
		return cert, []string{"--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile}
	}
	bot, botArgs := client("ops-bot")
	_, viewerArgs := client("viewer")
	_, nobodyArgs := client("nobody")

	// ops-bot (write) sets; the sidecar may still be connecting.
	botClient := sidecartest.DialTLS(t, s.addr, ca.Pool(), bot)
	poll(t, 10*time.Second, "a Set by ops-bot", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := setDesc(ctx, botClient, "eth0", "by ops-bot")
		if status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
			t.Fatalf("Set by ops-bot: %v", err)
		}
		return err == nil, "Set by ops-bot: " + errString(err)
	})

	// viewer (read) reads, and may not roll back.
	runOpsAt(t, s.addr, append([]string{"status"}, viewerArgs...)...).wantCode(t, 0)
	runOpsAt(t, s.addr, append([]string{"rollback"}, viewerArgs...)...).
		wantCode(t, exitDenied, `certificate "viewer" has role read; rollback needs admin`)
	runOpsAt(t, s.addr, append([]string{"rollback"}, botArgs...)...).
		wantCode(t, exitDenied, `certificate "ops-bot" has role write; rollback needs admin`)
	// A certificate not listed has the default role: none.
	runOpsAt(t, s.addr, append([]string{"status"}, nobodyArgs...)...).
		wantCode(t, exitDenied, `certificate "nobody" has no role; Get needs read`)

	// Username and password, over the same certificate.
	t.Setenv(opsPasswordEnv, bobPW)
	runOpsAt(t, s.addr, append([]string{"status", "--username", "bob"}, nobodyArgs...)...).wantCode(t, 0)
	runOpsAt(t, s.addr, append([]string{"commit", "confirm", "c1", "--username", "bob"}, nobodyArgs...)...).
		wantCode(t, exitDenied, `user "bob" has role read; commit-confirmed confirm needs admin`)
	t.Setenv(opsPasswordEnv, "Wr0ng-Pa55")
	runOpsAt(t, s.addr, append([]string{"status", "--username", "alice"}, botArgs...)...).
		wantCode(t, exitDenied, "username or password not accepted")
	// Bad credentials are "not authenticated", never "not a gnmi-sidecar".
	runOpsAt(t, s.addr, append([]string{"set", "--dry-run", "--delete", "/system/config/login-banner", "--username", "alice"}, botArgs...)...).
		wantCode(t, exitDenied, "set --dry-run", "username or password not accepted")
	t.Setenv(opsPasswordEnv, alicePW)
	out := mustOps(t, s.addr, append([]string{"rollback", "--username", "alice"}, nobodyArgs...)...)
	if !strings.Contains(out, "rolled back proposal 1") {
		t.Errorf("rollback by alice: %q", out)
	}

	// A write user's commit-confirmed of 100 years is refused, naming the
	// limit; one within it is cancelled by an admin, whom journal show
	// then names as who rolled it back.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := setDesc(ctx, botClient, "eth0", "for a century", sidecartest.CommitExtension("c9", sidecartest.CommitFor(876000*time.Hour)))
	sidecartest.WantStatus(t, err, codes.InvalidArgument, "above the sidecar's limit of 1h0m0s (serve --max-rollback-duration)")
	resp, err := setDesc(ctx, botClient, "eth0", "for a while", sidecartest.CommitExtension("c9", sidecartest.CommitFor(time.Hour)))
	if err != nil {
		t.Fatalf("ops-bot's commit-confirmed: %v", err)
	}
	r, err := responseExt(resp)
	if err != nil {
		t.Fatal(err)
	}
	statusOut := mustOps(t, s.addr, append([]string{"status", "--username", "alice"}, nobodyArgs...)...)
	for _, want := range []string{"author:", "cert:CN=ops-bot", "deadline:"} {
		if !strings.Contains(statusOut, want) {
			t.Errorf("status while a commit-confirmed is outstanding lacks %q:\n%s", want, statusOut)
		}
	}
	mustOps(t, s.addr, append([]string{"commit", "cancel", "c9", "--username", "alice"}, nobodyArgs...)...)
	show := mustOps(t, s.addr, append([]string{"journal", "show", strconv.FormatUint(r.GetIndex(), 10), "--username", "alice"}, nobodyArgs...)...)
	for _, want := range []string{"rollback-author:", "commit-cancelled-by:"} {
		if !strings.Contains(show, want) || !strings.Contains(show[strings.Index(show, want):], "alice") {
			t.Errorf("journal show of the cancelled commit-confirmed does not name alice after %q:\n%s", want, show)
		}
	}

	s.wantNoSecret(t, alicePW, bobPW, "Wr0ng-Pa55", aliceHash)
	for _, want := range []string{"authorization on", `msg="permission denied"`, "certificate=viewer", "user=alice"} {
		if !strings.Contains(s.logs.text(), want) {
			t.Errorf("the logs lack %q", want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func TestServeListenRule(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.1.2.3:9339", "example.com:9339"} {
			journalDir := filepath.Join(t.TempDir(), "journal")
			err := runServe(t, "--target", "127.0.0.1:1", "--journal-dir", journalDir, "--listen", listen)
			want := "--listen " + listen + " is not a loopback address: serve TLS (--tls-cert/--tls-key) or pass --insecure to allow plaintext"
			if err == nil || err.Error() != want {
				t.Errorf("--listen %s: %v, want %q", listen, err, want)
			}
			// Refused before anything else: not even the journal.
			if _, err := os.Stat(journalDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--listen %s: the journal directory exists after the refusal (%v)", listen, err)
			}
		}
	})
	t.Run("with --insecure", func(t *testing.T) {
		s := startServe(t, serveArgs(t, nil, "--listen", "0.0.0.0:0", "--insecure")...)
		if err := capabilities(dial(t, s.local(t)), t.Context()); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "device 127.0.0.1:1") {
			t.Errorf("plaintext Capabilities (the device is away): %v", err)
		}
		for _, want := range []string{"plaintext gNMI on a non-loopback address", "no --authz-file: every client that can connect has admin rights"} {
			if !strings.Contains(s.logs.text(), want) {
				t.Errorf("the logs lack the warning %q", want)
			}
		}
	})
	t.Run("with TLS", func(t *testing.T) {
		ca := sidecartest.NewPKI(t)
		certFile, keyFile := sidecartest.WriteCert(t, t.TempDir(), "sidecar", ca.Server(t))
		s := startServe(t, serveArgs(t, nil, "--listen", "0.0.0.0:0", "--tls-cert", certFile, "--tls-key", keyFile)...)
		_ = capabilities(sidecartest.DialTLS(t, s.local(t), ca.Pool()), t.Context()) // served; the device is away
		if !strings.Contains(s.logs.text(), "no --authz-file: every client that can connect has admin rights") {
			t.Error("no warning that every client is admin")
		}
	})
	t.Run("loopback", func(t *testing.T) {
		for host, want := range map[string]bool{
			"127.0.0.1": true, "127.1.2.3": true, "::1": true, "localhost": true, "LocalHost": true, "::ffff:127.0.0.1": true,
			"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "192.168.1.1": false, "fe80::1%eth0": false, "example.com": false, "localhost.example.com": false,
		} {
			if got := isLoopback(host); got != want {
				t.Errorf("isLoopback(%q) = %v, want %v", host, got, want)
			}
		}
		var c securityConfig
		if err := c.checkListen("0.0.0.0:9339"); err == nil || err.Error() != "--listen 0.0.0.0:9339 is not a loopback address: serve TLS (--tls-cert/--tls-key) or pass --insecure to allow plaintext" {
			t.Errorf("checkListen(0.0.0.0:9339): %v", err)
		}
		for _, l := range []string{"127.0.0.1:9339", "[::1]:0", "localhost:9339"} {
			var c securityConfig
			if err := c.checkListen(l); err != nil {
				t.Errorf("checkListen(%s): %v", l, err)
			}
		}
	})
}

// credentialDevice is a gNMI target recording the username and password
// metadata of every call; it holds subscriptions open.
type credentialDevice struct {
	gpb.UnimplementedGNMIServer
	addr  string
	mu    sync.Mutex
	calls []credCall
}

type credCall struct {
	method, username, password string
	test                       bool // carried x-test metadata: a test client's
}

func newCredentialDevice(t *testing.T) *credentialDevice {
	d := &credentialDevice{}
	d.addr = sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, d) })
	return d
}

func (d *credentialDevice) record(method string, ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	one := func(k string) string { return strings.Join(md.Get(k), ",") }
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, credCall{method: method, username: one("username"), password: one("password"), test: len(md.Get("x-test")) > 0})
}

func (d *credentialDevice) seen() []credCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]credCall(nil), d.calls...)
}

func (d *credentialDevice) Capabilities(ctx context.Context, _ *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	d.record("Capabilities", ctx)
	return &gpb.CapabilityResponse{GNMIVersion: "0.10.0"}, nil
}

func (d *credentialDevice) Get(ctx context.Context, _ *gpb.GetRequest) (*gpb.GetResponse, error) {
	d.record("Get", ctx)
	return &gpb.GetResponse{}, nil
}

func (d *credentialDevice) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	d.record("Subscribe", stream.Context())
	if _, err := stream.Recv(); err != nil {
		return err
	}
	// No liveness data: the agent watches the connection instead.
	return status.Error(codes.Unimplemented, "credential device: no subscriptions")
}

// TestServeDeviceCredentials checks the credentials the device receives:
// from the agent and on passthrough, with a password file, from the
// environment, or the clients' own.
func TestServeDeviceCredentials(t *testing.T) {
	const filePW, envPW, clientPW = "file-S3cret", "env-S3cret", "client-S3cret"
	pwFile := filepath.Join(t.TempDir(), "device-password")
	if err := os.WriteFile(pwFile, []byte(filePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clientCtx := metadata.AppendToOutgoingContext(t.Context(), "username", "carol", "password", clientPW, "x-test", "1")

	for _, tt := range []struct {
		name               string
		env                string
		args               []string
		wantUser, wantPass string // on passthrough
		agentUser          string // "" : the agent sends none
	}{
		{name: "password file", args: []string{"--device-username", "sidecar", "--device-password-file", pwFile},
			wantUser: "sidecar", wantPass: filePW, agentUser: "sidecar"},
		{name: "password from the environment", env: envPW, args: []string{"--device-username", "sidecar"},
			wantUser: "sidecar", wantPass: envPW, agentUser: "sidecar"},
		{name: "the clients' own", wantUser: "carol", wantPass: clientPW},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(passwordEnv, tt.env)
			dev := newCredentialDevice(t)
			s := startServe(t, append([]string{"--target", dev.addr, "--journal-dir", t.TempDir(), "--log-level", "debug",
				"--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"}, tt.args...)...)
			c := dial(t, s.addr)
			if _, err := c.Get(clientCtx, &gpb.GetRequest{Path: []*gpb.Path{descPath("eth0")}}); err != nil {
				t.Fatalf("passthrough Get: %v", err)
			}
			if err := capabilities(c, clientCtx); err != nil {
				t.Fatalf("passthrough Capabilities: %v", err)
			}
			poll(t, 10*time.Second, "the agent to reach the device", func() (bool, string) {
				for _, call := range dev.seen() {
					if !call.test {
						return true, ""
					}
				}
				return false, "no call from the agent"
			})
			for _, call := range dev.seen() {
				wantUser, wantPass := tt.wantUser, tt.wantPass
				if !call.test {
					wantUser, wantPass = tt.agentUser, ""
					if tt.agentUser != "" {
						wantPass = tt.wantPass
					}
				}
				if call.username != wantUser || call.password != wantPass {
					t.Errorf("%s (test client: %v): the device saw username %q password %q, want %q %q",
						call.method, call.test, call.username, call.password, wantUser, wantPass)
				}
			}
			s.wantNoSecret(t, filePW, envPW, clientPW)
		})
	}
}

func TestServeRefusesBadSecurityOptions(t *testing.T) {
	ca, dir := sidecartest.NewPKI(t), t.TempDir()
	certFile, keyFile := sidecartest.WriteCert(t, dir, "sidecar", ca.Server(t))
	_, otherKeyFile := sidecartest.WriteCert(t, dir, "other", sidecartest.NewPKI(t).Server(t))
	caFile := ca.WriteCA(t, dir)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notPEM := write("not.pem", "hello\n")
	emptyPW := write("empty-password", "\n")
	pw := write("password", "Secret-In-File\n")
	badKeyAuthz := write("authz-key.yaml", "users:\n  alice: {role: admin, pasword_hash: x}\n")
	badRoleAuthz := write("authz-role.yaml", "certificates:\n  ops-bot: {role: superuser}\n")
	missing := filepath.Join(dir, "missing.pem")

	journalDir := filepath.Join(dir, "journal")
	base := func(more ...string) []string {
		return append([]string{"--target", "127.0.0.1:1", "--journal-dir", journalDir, "--listen", "127.0.0.1:0"}, more...)
	}
	withTLS := func(more ...string) []string {
		return base(append([]string{"--tls-cert", certFile, "--tls-key", keyFile}, more...)...)
	}
	for _, tt := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"missing certificate", "", base("--tls-cert", missing, "--tls-key", keyFile), []string{"--tls-cert", "missing.pem"}},
		{"certificate not PEM", "", base("--tls-cert", notPEM, "--tls-key", keyFile), []string{"--tls-cert", "no PEM certificate"}},
		{"missing key", "", base("--tls-cert", certFile, "--tls-key", missing), []string{"--tls-key", "missing.pem"}},
		{"key not PEM", "", base("--tls-cert", certFile, "--tls-key", notPEM), []string{"--tls-key"}},
		{"key of another certificate", "", base("--tls-cert", certFile, "--tls-key", otherKeyFile), []string{"--tls-key", "does not match"}},
		{"certificate without key", "", base("--tls-cert", certFile), []string{"--tls-cert and --tls-key go together"}},
		{"key without certificate", "", base("--tls-key", keyFile), []string{"--tls-cert and --tls-key go together"}},
		{"client CA without TLS", "", base("--tls-client-ca", caFile), []string{"--tls-client-ca needs --tls-cert and --tls-key"}},
		{"missing client CA", "", withTLS("--tls-client-ca", missing), []string{"--tls-client-ca", "missing.pem"}},
		{"client CA not PEM", "", withTLS("--tls-client-ca", notPEM), []string{"--tls-client-ca", "no PEM certificate"}},
		{"missing authz file", "", base("--authz-file", missing), []string{"--authz-file", "missing.pem"}},
		{"unknown authz key", "", base("--authz-file", badKeyAuthz), []string{"--authz-file", "pasword_hash"}},
		{"unknown role", "", base("--authz-file", badRoleAuthz), []string{"--authz-file", "certificates.ops-bot.role", `"superuser"`}},
		{"missing password file", "", base("--device-password-file", missing), []string{"--device-password-file", "missing.pem"}},
		{"empty password file", "", base("--device-password-file", emptyPW), []string{"--device-password-file", "is empty"}},
		{"password file and environment", "Secret-In-Env", base("--device-password-file", pw),
			[]string{"--device-password-file and $" + passwordEnv + " are both set"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(passwordEnv, tt.env)
			err := runServe(t, tt.args...)
			if err == nil {
				t.Fatalf("serve %v started", tt.args)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("serve %v: %v; want it to mention %q", tt.args, err, w)
				}
			}
			for _, secret := range []string{"Secret-In-File", "Secret-In-Env"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows the password: %v", err)
				}
			}
			// Refused before anything else: not even the journal.
			if _, err := os.Stat(journalDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the journal directory exists after the refusal (%v)", err)
			}
		})
	}
}

// TestServePlaintextDefault: without TLS options nothing changes: a
// plaintext sidecar on loopback, every client admin, no warning.
func TestServePlaintextDefault(t *testing.T) {
	s := startServe(t, serveArgs(t, nil, "--listen", "127.0.0.1:0")...)
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = gpb.NewGNMIClient(conn).Get(t.Context(), &gpb.GetRequest{
		Prefix: &gpb.Path{Origin: introspectionOrigin},
		Path:   []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "configuration"}, {Name: "state"}}}},
	})
	if err != nil {
		t.Errorf("plaintext Get of the introspection tree: %v", err)
	}
	if strings.Contains(s.logs.text(), "admin rights") {
		t.Error("a loopback sidecar warns about authorization")
	}
}
