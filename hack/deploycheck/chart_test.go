package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// The chart renders, for 1, 3 and 500 devices, into objects that pass
// every check; each device gets its StatefulSet, claim and options.
func TestChart(t *testing.T) {
	c := &checker{sidecar: sidecar}
	start := time.Now()
	c.checkChart(chartDir)
	for _, p := range c.problems {
		t.Error(p)
	}
	for _, tm := range c.timings {
		t.Log(tm)
	}
	t.Logf("all renders and checks: %v", time.Since(start).Round(time.Millisecond))

	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := renderChart(ch, inventory(500))
	if err != nil {
		t.Fatal(err)
	}
	set := (&checker{}).checkManifests(files)
	for i := range 500 {
		name := fmt.Sprintf("gnmi-sidecar-dev%04d", i)
		s, ok := set["StatefulSet/"+name].(*appsv1.StatefulSet)
		if !ok {
			t.Fatalf("no StatefulSet %s", name)
		}
		if len(s.Spec.VolumeClaimTemplates) != 1 || s.Spec.VolumeClaimTemplates[0].Name != "journal" {
			t.Errorf("%s: want one claim template, journal", name)
		}
		wantStorage := map[bool]string{true: "2Gi", false: "1Gi"}[i%3 == 1]
		if got := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String(); got != wantStorage {
			t.Errorf("%s: claim of %s, want %s", name, got, wantStorage)
		}
		cm, _ := set["ConfigMap/"+name].(*corev1.ConfigMap)
		var opts map[string]any
		if cm == nil || yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &opts) != nil {
			t.Fatalf("%s: no config.yaml", name)
		}
		if opts["target"] != fmt.Sprintf("dev%04d.mgmt.example.net:57400", i) {
			t.Errorf("%s: target %v", name, opts["target"])
		}
		wantPolicy := map[bool]string{true: "revert", false: "report"}[i%3 == 1]
		if opts["drift-policy"] != wantPolicy {
			t.Errorf("%s: drift-policy %v, want %s", name, opts["drift-policy"], wantPolicy)
		}
		if _, tls := opts["device-ca"]; tls != (i%3 != 2) {
			t.Errorf("%s: device-ca %v, want it iff deviceTLS", name, opts["device-ca"])
		}
	}
	if _, ok := set["PodDisruptionBudget/fleet-gnmi-sidecar"]; !ok {
		t.Error("no PodDisruptionBudget")
	}
}

// Inventories the chart refuses, with the reason.
func TestChartRefuses(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		devices []any
		want    string
	}{
		{"no address", []any{map[string]any{"name": "a"}}, "devices: a has no address"},
		{"twice", []any{map[string]any{"name": "a", "address": "a:1"}, map[string]any{"name": "a", "address": "b:1"}}, "devices: a is listed twice"},
		{"no name", []any{map[string]any{"address": "a:1"}}, "devices: an entry has no name"},
	} {
		if _, err := renderChart(ch, tt.devices); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
	// A device name that is no DNS label, and an option serve refuses.
	files, err := renderChart(ch, []any{map[string]any{"name": "Leaf_1", "address": "a:1", "options": map[string]any{"log-colour": "auto"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{sidecar: sidecar}
	c.checkManifests(files)
	got := strings.Join(c.problems, "\n")
	for _, w := range []string{`metadata.name: Invalid value: "gnmi-sidecar-Leaf_1"`, "unknown flag: --log-colour"} {
		if !strings.Contains(got, w) {
			t.Errorf("no problem contains %q; got:\n%s", w, got)
		}
	}
}

// The rule file and the dashboard parse, and what they name is checked.
func TestMonitoringFiles(t *testing.T) {
	c := &checker{}
	c.checkChart(chartDir)
	for _, p := range c.problems {
		t.Error(p)
	}
	for _, m := range []string{"gnmi_sidecar_device_connected", "gnmi_sidecar_apply_duration_seconds_bucket", "gnmi_sidecar_commit_confirmed_deadline_timestamp_seconds"} {
		if len(c.metrics[m]) == 0 {
			t.Errorf("%s: used by no rule or panel", m)
		}
	}
	bad := &checker{}
	bad.ruleMetrics("rules.yaml", []byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: rate(x[5m]) >\n        for: 5x\n"))
	bad.dashboardMetrics("dash.json", []byte(`{"panels":[{"title":"p","targets":[{"expr":"sum(rate(y{device=~\"$device\"}[$__rate_interval])"}]}]}`))
	got := strings.Join(bad.problems, "\n")
	for _, w := range []string{"rulefmt:", "PromQL:"} {
		if !strings.Contains(got, w) {
			t.Errorf("no problem contains %q; got:\n%s", w, got)
		}
	}
}

// Every metric an alert or a dashboard panel names is exported by a real
// sidecar: gnmi-sidecar demo (serve in front of an in-process simulated
// device) is started and its /metrics scraped once connected and after one
// RPC (the gRPC families appear with the first one) and a commit-confirmed
// outstanding. A family declared by HELP/TYPE counts even before its first
// sample.
func TestMetricsExported(t *testing.T) {
	c := &checker{}
	c.checkChart(chartDir)
	if len(c.problems) > 0 {
		t.Fatalf("chart: %v", c.problems)
	}
	addr, gnmi := startDemo(t)
	st := exec.Command(sidecar, "status", "--address", gnmi, "--timeout", "10s")
	if out, err := st.CombinedOutput(); err != nil {
		t.Logf("gnmi-sidecar status: %v\n%s", err, out)
	}
	// A commit-confirmed outstanding: the metrics about it exist only then.
	cc := exec.Command(sidecar, "set", "--address", gnmi, "--timeout", "20s", "--update", `/system/config/hostname="metrics"`,
		"--commit-request", "--commit-id", "metrics", "--rollback-duration", "10m")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gnmi-sidecar set --commit-request: %v\n%s", err, out)
	}
	c.checkExported(addr)
	for _, p := range c.problems {
		t.Error(p)
	}
	// A name the sidecar does not export is reported.
	c.problems = nil
	c.metrics["gnmi_sidecar_no_such_metric"] = []string{"test"}
	c.checkExported(addr)
	if len(c.problems) != 1 || !strings.Contains(c.problems[0], "metric gnmi_sidecar_no_such_metric is not exported") {
		t.Errorf("problems: %v", c.problems)
	}
}

// startDemo starts gnmi-sidecar demo and returns its metrics and gNMI
// addresses once its device is connected.
func startDemo(t *testing.T) (metrics, gnmi string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sidecarDev, "demo", "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0",
		"--metrics", "127.0.0.1:0", "--journal-dir", t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	timeout := time.After(30 * time.Second)
	for metrics == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("demo exited before printing its addresses")
			}
			if a, ok := strings.CutPrefix(l, "gnmi-sidecar listening on "); ok {
				gnmi = a
			}
			if a, ok := strings.CutPrefix(l, "gnmi-sidecar metrics on "); ok {
				metrics = a
			}
		case <-timeout:
			t.Fatal("demo printed no metrics address in 30 s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		names, err := exportedNames(metrics)
		if err == nil && names["gnmi_sidecar_device_connected"] && names["gnmi_sidecar_journal_size_bytes"] {
			return metrics, gnmi
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo's metrics incomplete after 30 s: %v", err)
		}
	}
}

// Every alert's runbook link names a section of docs/runbook.md.
func TestRunbookLinks(t *testing.T) {
	rules, err := os.ReadFile(chartDir + "/files/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	book, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, l := range strings.Split(string(book), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			sections[strings.ReplaceAll(strings.ToLower(h), " ", "-")] = true
		}
	}
	groups, errs := rulefmt.Parse(rules, false, model.UTF8Validation, promql, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "docs/runbook.md#")
			if !sections[anchor] {
				t.Errorf("alert %s: runbook_url %q: no section %q in docs/runbook.md", r.Alert, r.Annotations["runbook_url"], anchor)
			}
		}
	}
}
