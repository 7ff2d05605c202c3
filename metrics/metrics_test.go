package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/buildinfo"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

func TestDeviceMetrics(t *testing.T) {
	d := NewDevice()
	if got := series(t, d, "gnmi_sidecar_device_connected"); len(got) != 0 {
		t.Errorf("before Attach: %v", got)
	}
	st := agent.Status{Connected: true, Term: 3}
	d.Attach(func() agent.Status { return st })
	for name, want := range map[string]float64{
		"gnmi_sidecar_device_connected":              1,
		"gnmi_sidecar_device_repushing":              0,
		"gnmi_sidecar_repushes_total":                0,
		"gnmi_sidecar_repush_last_timestamp_seconds": 0,
		"gnmi_sidecar_repush_duration_seconds":       0, // sample count
		"gnmi_sidecar_repush_last_values":            0,
		"gnmi_sidecar_repush_last_duration_seconds":  0,
	} {
		if got := one(t, d, name); got != want {
			t.Errorf("connected, never re-pushed: %s = %v, want %v", name, got, want)
		}
	}

	done := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st = agent.Status{Connected: true, Term: 3, Repushes: 1, LastRepush: done, LastRepushValues: 42, LastRepushDuration: 1500 * time.Millisecond}
	d.Update(st)
	d.Update(st) // the same re-push, seen again
	st.Repushing, st.Connected = true, false
	for name, want := range map[string]float64{
		"gnmi_sidecar_device_connected":              0,
		"gnmi_sidecar_device_repushing":              1,
		"gnmi_sidecar_repushes_total":                1,
		"gnmi_sidecar_repush_last_timestamp_seconds": float64(done.Unix()),
		"gnmi_sidecar_repush_duration_seconds":       1,
		"gnmi_sidecar_repush_last_values":            42,
		"gnmi_sidecar_repush_last_duration_seconds":  1.5,
	} {
		if got := one(t, d, name); got != want {
			t.Errorf("after a re-push: %s = %v, want %v", name, got, want)
		}
	}
	st.Repushes, st.LastRepushDuration = 2, 10*time.Millisecond
	d.Update(st)
	if got := one(t, d, "gnmi_sidecar_repush_duration_seconds"); got != 2 {
		t.Errorf("after a second re-push: histogram count %v, want 2", got)
	}
}

// TestSidecarMetrics serves a whole set over HTTP, with RPCs counted by a
// real gRPC server, and lints the exposition.
func TestSidecarMetrics(t *testing.T) {
	m := New()
	j, err := journal.Open(t.TempDir(), journal.Options{NoSync: true, MemTableSize: 1 << 20, Observer: m.Journal.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	if err := m.Journal.Load(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	m.Device.Attach(func() agent.Status { return agent.Status{Connected: true, Term: 1} })

	g := grpc.NewServer(grpc.ChainUnaryInterceptor(m.RPC.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(m.RPC.StreamServerInterceptor()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
		t.Fatal("Check of an unknown service succeeded")
	}

	srv := httptest.NewServer(m.Handler(nil))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s\n%s", resp.Status, body)
	}
	text := string(body)
	for _, want := range []string{
		`gnmi_sidecar_grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1`,
		`gnmi_sidecar_grpc_server_handled_total{grpc_code="NotFound",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1`,
		`gnmi_sidecar_grpc_server_handling_seconds_count{grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 2`,
		`gnmi_sidecar_proposals{phase="change",status="pending",step="commit"} 0`,
		`gnmi_sidecar_journal_transitions_total{action="ProposeChange"} 0`,
		"gnmi_sidecar_device_connected 1",
		"gnmi_sidecar_journal_size_bytes ",
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, Namespace) {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// TestBuildInfo: gnmi_sidecar_build_info is 1, labelled with the build.
func TestBuildInfo(t *testing.T) {
	s := New()
	families, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := buildinfo.Read()
	for _, f := range families {
		if f.GetName() != Namespace+"_build_info" {
			continue
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if m.GetGauge().GetValue() != 1 || labels["version"] != want.Version || labels["goversion"] != want.GoVersion {
			t.Errorf("build_info = %v %v, want 1 with version %q and goversion %q", m.GetGauge().GetValue(), labels, want.Version, want.GoVersion)
		}
		return
	}
	t.Error("no gnmi_sidecar_build_info")
}

// TestDeviceConnects: the device's sessions established and ended are
// counters from the agent's status.
func TestDeviceConnects(t *testing.T) {
	d := NewDevice()
	d.Attach(func() agent.Status { return agent.Status{Connected: true, Connects: 3, Disconnects: 2} })
	for name, want := range map[string]float64{
		"gnmi_sidecar_device_connects_total":    3,
		"gnmi_sidecar_device_disconnects_total": 2,
		"gnmi_sidecar_device_set_retrying":      0,
	} {
		if got := testutil.ToFloat64(filtered{d, name}); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// filtered is c's metric named name only.
type filtered struct {
	c    prometheus.Collector
	name string
}

func (f filtered) Describe(ch chan<- *prometheus.Desc) { f.c.Describe(ch) }
func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}
