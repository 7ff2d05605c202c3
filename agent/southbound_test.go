package agent_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// recordingTarget is a minimal gNMI target that answers the liveness
// stream and accepts every Set, recording the credentials it came with.
type recordingTarget struct {
	gpb.UnimplementedGNMIServer
	mu    sync.Mutex
	creds []string // "username/password" of each Set
}

func (s *recordingTarget) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (s *recordingTarget) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creds = append(s.creds, first(md["username"])+"/"+first(md["password"]))
	return &gpb.SetResponse{Timestamp: time.Now().UnixNano()}, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// serve runs a gNMI server for target on loopback (TLS with cert if given)
// and returns its address.
func serve(t *testing.T, target gpb.GNMIServer, cert *tls.Certificate) string {
	t.Helper()
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})))
	}
	return sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, target) }, opts...)
}

// newAgent opens a journal and an agent on it (not running).
func newAgent(t *testing.T, opts agent.Options) (*journal.Journal, *agent.Agent) {
	t.Helper()
	opts.Logger = sidecartest.Logger(t)
	j := sidecartest.OpenJournal(t, opts.Logger)
	a, err := agent.New(j, opts)
	if err != nil {
		t.Fatal(err)
	}
	return j, a
}

// applyOne journals one change and waits for the device's answer.
func applyOne(t *testing.T, j *journal.Journal, a *agent.Agent, value string) *journal.Proposal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := j.ProposeChange(ctx, []*journal.Op{updateOp(t, descPath("eth0"), str(value))})
	if err != nil {
		t.Fatal(err)
	}
	a.Notify()
	got, err := a.Wait(ctx, p.GetIndex(), agent.Applied)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestSouthboundTLSWithCredentials(t *testing.T) {
	pki := sidecartest.NewPKI(t)
	cert, pool := pki.Server(t), pki.Pool()
	target := &recordingTarget{}
	addr := serve(t, target, &cert)
	j, a := newAgent(t, agent.Options{
		Target:   addr,
		TLS:      &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Username: "admin",
		Password: "s3cret",
	})
	sidecartest.RunAgent(t, a)
	if got := applyOne(t, j, a, "over tls"); got.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("apply over TLS = %v", got.GetChange().GetApply())
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if len(target.creds) == 0 || target.creds[len(target.creds)-1] != "admin/s3cret" {
		t.Errorf("credentials the device saw: %v, want admin/s3cret on every Set", target.creds)
	}
}

func TestSouthboundTLSRefusesUntrustedDevice(t *testing.T) {
	cert := sidecartest.NewPKI(t).Server(t)
	otherPool := sidecartest.NewPKI(t).Pool()
	addr := serve(t, &recordingTarget{}, &cert)
	j, a := newAgent(t, agent.Options{
		Target:         addr,
		TLS:            &tls.Config{RootCAs: otherPool, MinVersion: tls.VersionTLS12},
		BackoffInitial: 10 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := a.Status()
	if st.Connected || st.LastError == "" {
		t.Errorf("status with an untrusted device certificate: %+v, want not connected and the TLS error", st)
	}
	if m, _ := j.Mastership(context.Background()); m.GetTerm() != 0 {
		t.Errorf("a term was recorded (%d) without a trusted connection", m.GetTerm())
	}
}

// noSubscribeTarget cannot stream: the agent must fall back to watching the
// connection state.
type noSubscribeTarget struct{ recordingTarget }

func (*noSubscribeTarget) Subscribe(gpb.GNMI_SubscribeServer) error {
	return status.Error(codes.Unimplemented, "subscribe not supported")
}

func TestTargetWithoutSubscribeIsWatchedByConnectionState(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	gpb.RegisterGNMIServer(srv, &noSubscribeTarget{})
	go func() { _ = srv.Serve(lis) }()
	j, a := newAgent(t, agent.Options{Target: lis.Addr().String()})
	sidecartest.RunAgent(t, a)
	if got := applyOne(t, j, a, "no stream"); got.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("apply without a liveness stream: %v", got.GetChange().GetApply())
	}
	srv.Stop() // the device goes away: the connection state must show it
	sidecartest.Eventually(t, 5*time.Second, "the lost connection to be detected without a liveness stream", func() bool {
		return !a.Status().Connected
	})
}
