package main

// End-to-end tests of the observability of serve: Prometheus metrics on
// --metrics, the gRPC health service, reflection.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

const metricsMarker = "gnmi-sidecar metrics on "

// metricsAddr returns where the sidecar serves its metrics: the line
// right after its "listening" line.
func (p *process) metricsAddr(t *testing.T) string {
	t.Helper()
	line, err := p.out.waitLine(func(l string) bool { return strings.HasPrefix(l, metricsMarker) }, 10*time.Second, p.done)
	if err != nil {
		t.Fatalf("%s: no %q line: %v", p.name, metricsMarker, err)
	}
	p.out.mu.Lock()
	second := ""
	if len(p.out.lines) > 1 {
		second = p.out.lines[1]
	}
	p.out.mu.Unlock()
	if second != line {
		t.Errorf("%s: second output line %q, want the metrics line %q", p.name, second, line)
	}
	return strings.TrimPrefix(line, metricsMarker)
}

// scrape returns every sample of the sidecar's /metrics, keyed by the
// series as exposed: name{label="value",...} (labels in name order).
func scrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k := strings.LastIndexByte(line, ' ')
		if k < 0 {
			return nil, fmt.Errorf("bad line %q", line)
		}
		v, err := strconv.ParseFloat(line[k+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %v", line, err)
		}
		out[line[:k]] = v
	}
	return out, sc.Err()
}

// Series of the tests.
const (
	appliedComplete = `gnmi_sidecar_proposals{phase="change",status="complete",step="apply"}`
	applyCount      = `gnmi_sidecar_apply_duration_seconds_count{phase="change"}`
	commitCount     = `gnmi_sidecar_commit_duration_seconds_count{phase="change"}`
	setOK           = `gnmi_sidecar_grpc_server_handled_total{grpc_code="OK",grpc_method="Set",grpc_service="gnmi.gNMI",grpc_type="unary"}`
	repushes        = `gnmi_sidecar_repushes_total`
	repushCount     = `gnmi_sidecar_repush_duration_seconds_count`
	term            = `gnmi_sidecar_mastership_term`
	connected       = `gnmi_sidecar_device_connected`
)

// waitMetrics polls the metrics until cond accepts them.
func waitMetrics(t *testing.T, addr, what string, cond func(m map[string]float64) (bool, string)) map[string]float64 {
	t.Helper()
	var last map[string]float64
	poll(t, 10*time.Second, what, func() (bool, string) {
		m, err := scrape(addr)
		if err != nil {
			return false, err.Error()
		}
		last = m
		return cond(m)
	})
	return last
}

// waitHealthz polls http://addr/healthz until it answers code with body.
func waitHealthz(t *testing.T, addr string, code int, body string) {
	t.Helper()
	poll(t, 10*time.Second, fmt.Sprintf("/healthz to answer %d %s", code, body), func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got := strings.TrimSpace(string(b))
		return resp.StatusCode == code && got == body, fmt.Sprintf("%d %s", resp.StatusCode, got)
	})
}

// TestMetrics: the metrics are served on the printed address and follow
// a Set and a device restart.
func TestMetrics(t *testing.T) {
	s := startStack(t, nil, nil)
	addr := s.sidecar.metricsAddr(t)

	before := waitMetrics(t, addr, "the start-up re-push in the metrics", func(m map[string]float64) (bool, string) {
		return m[repushes] >= 1 && m[connected] == 1, fmt.Sprintf("%s %v, %s %v", repushes, m[repushes], connected, m[connected])
	})
	for _, name := range []string{
		appliedComplete, applyCount, commitCount, repushes, repushCount, term, connected,
		"gnmi_sidecar_queue_depth", "gnmi_sidecar_journal_retained_proposals", "gnmi_sidecar_journal_size_bytes",
		`gnmi_sidecar_journal_transitions_total{action="CompleteApply"}`, "gnmi_sidecar_device_repushing",
		"gnmi_sidecar_repush_last_duration_seconds", "gnmi_sidecar_repush_last_values",
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if before[appliedComplete] != 0 || before[setOK] != 0 || before[applyCount] != 0 || before[term] != 1 {
		t.Errorf("before any Set: %s %v, %s %v, %s %v, %s %v; want 0, 0, 0, 1",
			appliedComplete, before[appliedComplete], setOK, before[setOK], applyCount, before[applyCount], term, before[term])
	}
	if before["gnmi_sidecar_journal_size_bytes"] <= 0 {
		t.Errorf("journal size %v, want > 0", before["gnmi_sidecar_journal_size_bytes"])
	}

	mustSetDesc(t, s.client, "eth0", "uplink to spine1")
	after := waitMetrics(t, addr, "the Set in the metrics", func(m map[string]float64) (bool, string) {
		return m[appliedComplete] == 1 && m[applyCount] == 1 && m[setOK] == 1,
			fmt.Sprintf("%s %v, %s %v, %s %v", appliedComplete, m[appliedComplete], applyCount, m[applyCount], setOK, m[setOK])
	})
	for name, want := range map[string]float64{
		commitCount:                               1,
		"gnmi_sidecar_queue_depth":                0,
		"gnmi_sidecar_journal_retained_proposals": 1,
		`gnmi_sidecar_journal_transitions_total{action="ProposeChange"}`: 1,
	} {
		if after[name] != want {
			t.Errorf("after the Set: %s = %v, want %v", name, after[name], want)
		}
	}

	// /healthz, the readiness probe of the Kubernetes manifests, mirrors
	// the gRPC health status, and so does gnmi_sidecar_ready.
	waitHealthz(t, addr, http.StatusOK, "SERVING")
	waitMetrics(t, addr, "gnmi_sidecar_ready 1", func(m map[string]float64) (bool, string) {
		return m["gnmi_sidecar_ready"] == 1 && m["gnmi_sidecar_journal_writable"] == 1,
			fmt.Sprintf("ready %v, journal writable %v", m["gnmi_sidecar_ready"], m["gnmi_sidecar_journal_writable"])
	})

	// The device restarts empty: a new term and a re-push.
	s.dev.kill(t)
	waitMetrics(t, addr, "the disconnection in the metrics", func(m map[string]float64) (bool, string) {
		return m[connected] == 0, fmt.Sprintf("%s %v", connected, m[connected])
	})
	waitHealthz(t, addr, http.StatusServiceUnavailable, "NOT_SERVING")
	s.dev = startProcess(t, "gnmi-testbed", s.testbedBin, "--listen", s.dev.addr, "--admin", "127.0.0.1:0")
	waitHealthz(t, addr, http.StatusOK, "SERVING")
	restarted := waitMetrics(t, addr, "the re-push after the device restart in the metrics", func(m map[string]float64) (bool, string) {
		return m[repushes] == after[repushes]+1 && m[connected] == 1,
			fmt.Sprintf("%s %v (was %v), %s %v", repushes, m[repushes], after[repushes], connected, m[connected])
	})
	if restarted[term] <= after[term] {
		t.Errorf("after the device restart: term %v, want more than %v", restarted[term], after[term])
	}
	if restarted[repushCount] != after[repushCount]+1 {
		t.Errorf("after the device restart: re-push histogram count %v, want %v", restarted[repushCount], after[repushCount]+1)
	}
	if restarted["gnmi_sidecar_repush_last_values"] < 1 {
		t.Errorf("the re-push sent %v values, want at least the description", restarted["gnmi_sidecar_repush_last_values"])
	}
	s.stop(t)
}

// TestHealth: the health service follows the device (NOT_SERVING while it
// is down, SERVING once re-pushed), reflection lists the services, and a
// Watch stream does not hold up the shutdown. Metrics are off here.
func TestHealth(t *testing.T) {
	s := startStack(t, nil, []string{"--metrics", ""})
	if strings.Contains(s.sidecar.out.text(), metricsMarker) {
		t.Errorf("--metrics \"\" printed a metrics address:\n%s", s.sidecar.out.text())
	}
	conn, err := grpc.NewClient(s.sidecar.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	check := func(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return resp.GetStatus(), err
	}
	waitHealth := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, svc := range []string{"", "gnmi.gNMI"} {
			poll(t, 10*time.Second, fmt.Sprintf("health of %q to be %v", svc, want), func() (bool, string) {
				got, err := check(svc)
				return err == nil && got == want, fmt.Sprintf("%v, %v", got, err)
			})
		}
	}
	waitHealth(healthpb.HealthCheckResponse_SERVING)
	if _, err := check("no.such.Service"); status.Code(err) != codes.NotFound {
		t.Errorf("health of an unknown service: %v, want NotFound", err)
	}

	// A Watch sees the outage and the recovery.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "gnmi.gNMI"})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan healthpb.HealthCheckResponse_ServingStatus, 100)
	watchEnded := make(chan error, 1)
	go func() {
		for {
			resp, err := watch.Recv()
			if err != nil {
				watchEnded <- err
				return
			}
			seen <- resp.GetStatus()
		}
	}()
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case got := <-seen:
				if got == want {
					return
				}
			case err := <-watchEnded:
				t.Fatalf("Watch ended waiting for %v: %v", want, err)
			case <-timeout:
				t.Fatalf("Watch did not report %v", want)
			}
		}
	}
	next(healthpb.HealthCheckResponse_SERVING)

	s.dev.kill(t)
	waitHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	s.dev = startProcess(t, "gnmi-testbed", s.testbedBin, "--listen", s.dev.addr, "--admin", "127.0.0.1:0")
	waitHealth(healthpb.HealthCheckResponse_SERVING)
	next(healthpb.HealthCheckResponse_SERVING)

	t.Run("reflection", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, svc := range resp.GetListServicesResponse().GetService() {
			names = append(names, svc.GetName())
		}
		for _, want := range []string{"gnmi.gNMI", "grpc.health.v1.Health"} {
			if !slices.Contains(names, want) {
				t.Errorf("reflection lists %v, want %s among them", names, want)
			}
		}
	})

	// The open Watch does not hold up the shutdown: the sidecar ends it.
	stopped := time.Now()
	s.stop(t)
	if d := time.Since(stopped); d > 5*time.Second {
		t.Errorf("the sidecar took %v to stop with a health Watch open", d)
	}
	select {
	case err := <-watchEnded:
		t.Logf("the Watch ended with %v", err)
	case <-time.After(5 * time.Second):
		t.Error("the Watch stream is still open after the sidecar exited")
	}
}

// TestMetricsFlag: a malformed --metrics and a --metrics port in use stop
// serve at start-up, naming the flag.
func TestMetricsFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tt := range []struct{ name, addr string }{
		{"malformed", "not-an-address"},
		{"in use", busy.Addr().String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := runServe(t, "--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", tt.addr)
			if err == nil || !strings.Contains(err.Error(), "--metrics") {
				t.Errorf("serve --metrics %s: %v, want an error naming --metrics", tt.addr, err)
			}
		})
	}
}

// TestPprof: --pprof serves Go's profiles next to /metrics; without it the
// metrics listener serves none.
func TestPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("pprof=%v", on), func(t *testing.T) {
			var args []string
			if on {
				args = []string{"--pprof"}
			}
			s := startStack(t, nil, args)
			resp, err := http.Get("http://" + s.sidecar.metricsAddr(t) + "/debug/pprof/heap")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			want := http.StatusNotFound
			if on {
				want = http.StatusOK
			}
			if resp.StatusCode != want {
				t.Errorf("GET /debug/pprof/heap with --pprof=%v: %s, want %d", on, resp.Status, want)
			}
		})
	}
}
