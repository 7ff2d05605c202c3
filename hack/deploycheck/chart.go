package main

// The Helm chart (deploy/helm/*/Chart.yaml): rendered with the Helm SDK for
// inventories of several sizes, each render checked as one set of manifests
// (checkManifests); its rule file parsed by Prometheus's rulefmt and PromQL
// parser, its Grafana dashboard's queries by the PromQL parser.

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// inventorySizes are the fleets every chart is rendered for, besides its
// own values.yaml.
var inventorySizes = []int{1, 3, 500}

// inventory returns n devices, every third with options of its own.
func inventory(n int) []any {
	devs := make([]any, n)
	for i := range devs {
		d := map[string]any{"name": fmt.Sprintf("dev%04d", i), "address": fmt.Sprintf("dev%04d.mgmt.example.net:57400", i)}
		if i%3 == 1 {
			d["options"] = map[string]any{"drift-policy": "revert", "device-target": fmt.Sprintf("dev%04d", i)}
			d["credentialsSecret"] = "shared-device-credentials"
			d["storage"] = "2Gi"
		}
		if i%3 == 2 {
			d["deviceTLS"] = false
		}
		devs[i] = d
	}
	return devs
}

// renderChart renders the chart with its values and devices (nil: its own)
// with the Helm SDK, as `helm template --namespace netops fleet` would.
func renderChart(ch *chart.Chart, devices []any) ([]file, error) {
	vals := map[string]any{}
	if devices != nil {
		vals["devices"] = devices
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "fleet", Namespace: "netops", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	var files []file
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range out {
			if !yield(k) {
				return
			}
		}
	}) {
		if base := path.Base(name); strings.HasPrefix(base, "_") || base == "NOTES.txt" || strings.TrimSpace(out[name]) == "" {
			continue
		}
		files = append(files, file{name, []byte(out[name])})
	}
	return files, nil
}

// checkChart loads a chart directory, renders it for each inventory size
// and checks every render as one set of manifests; then its monitoring
// files. It returns the StatefulSets of each render, by size, and how long
// each render and its check took.
func (c *checker) checkChart(dir string) {
	ch, err := loader.Load(dir)
	if err != nil {
		c.errorf(dir, "helm: %v", err)
		return
	}
	runs := []struct {
		label   string
		devices []any
	}{{"values.yaml", nil}}
	for _, n := range inventorySizes {
		runs = append(runs, struct {
			label   string
			devices []any
		}{fmt.Sprintf("%d devices", n), inventory(n)})
	}
	for _, r := range runs {
		start := time.Now()
		files, err := renderChart(ch, r.devices)
		where := fmt.Sprintf("%s (%s)", dir, r.label)
		if err != nil {
			c.errorf(where, "helm template: %v", err)
			continue
		}
		for i := range files {
			files[i].name = where + ": " + files[i].name
		}
		rendered := time.Since(start)
		set := c.checkManifests(files)
		want := len(r.devices)
		if r.devices == nil {
			devs, _ := ch.Values["devices"].([]any)
			want = len(devs)
		}
		n := 0
		for _, obj := range set {
			if isStatefulSet(obj) {
				n++
			}
		}
		if n != want {
			c.errorf(where, "%d StatefulSets rendered, want one per device (%d)", n, want)
		}
		c.timings = append(c.timings, fmt.Sprintf("%s: %d objects, rendered in %v, validated in %v", where, len(set), rendered.Round(time.Millisecond), (time.Since(start)-rendered).Round(time.Millisecond)))
	}
	for _, f := range ch.Files {
		switch {
		case strings.HasSuffix(f.Name, "rules.yaml"):
			c.ruleMetrics(filepath.Join(dir, f.Name), f.Data)
		case strings.HasSuffix(f.Name, "dashboard.json"):
			c.dashboardMetrics(filepath.Join(dir, f.Name), f.Data)
		}
	}
}

var promql = parser.NewParser(parser.Options{})

// ruleMetrics parses a Prometheus rule file with Prometheus's own parser
// (rulefmt: its structure, durations, templates; PromQL: every expr) and
// records the metrics its expressions name.
func (c *checker) ruleMetrics(where string, data []byte) {
	groups, errs := rulefmt.Parse(data, false, model.UTF8Validation, promql, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		c.errorf(where, "rulefmt: %v", err)
	}
	if groups == nil {
		return
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			c.exprMetrics(fmt.Sprintf("%s: %s", where, r.Alert+r.Record), r.Expr)
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Alert != "" && r.Annotations[k] == "" {
					c.errorf(where, "alert %s: no %s annotation", r.Alert, k)
				}
			}
			if r.Alert != "" && !strings.Contains(r.Annotations["description"], "`gnmi-sidecar ") && !strings.Contains(r.Annotations["description"], "`kubectl ") {
				c.errorf(where, "alert %s: the description names no command to run", r.Alert)
			}
		}
	}
}

// grafanaVars are the dashboard's variables, replaced by a value PromQL
// takes before parsing.
var grafanaVars = regexp.MustCompile(`\$(__rate_interval|__interval|\{[a-z_]+\}|[a-z_]+)`)

// dashboardMetrics parses every query ("expr") of a Grafana dashboard's
// panels with the PromQL parser and records the metrics they name.
func (c *checker) dashboardMetrics(where string, data []byte) {
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
			Panels  []json.RawMessage
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		c.errorf(where, "%v", err)
		return
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, t := range p.Targets {
			expr := grafanaVars.ReplaceAllStringFunc(t.Expr, func(v string) string {
				if strings.HasPrefix(v, "$__") {
					return "5m"
				}
				return "x"
			})
			c.exprMetrics(fmt.Sprintf("%s: panel %q", where, p.Title), expr)
			queries++
		}
	}
	if queries == 0 {
		c.errorf(where, "no panel queries")
	}
}

// exprMetrics parses a PromQL expression and records the metric names of
// its selectors (the series' names: a histogram's _bucket, _sum, _count).
func (c *checker) exprMetrics(where, expr string) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		c.errorf(where, "PromQL: %v", err)
		return
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			if c.metrics == nil {
				c.metrics = map[string][]string{}
			}
			if !slices.Contains(c.metrics[name], where) {
				c.metrics[name] = append(c.metrics[name], where)
			}
		}
		return nil
	})
}

// isChart reports whether dir holds a Helm chart.
func isChart(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "Chart.yaml"))
	return err == nil
}
