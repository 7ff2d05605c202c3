// Package metrics holds the sidecar's Prometheus collectors, all on a
// registry of its own (never the global default registry):
//
//   - Journal: the journal's transitions (counted by action, commit and apply
//     latency histograms, fed by journal.Options.Observer), the retained
//     proposals by phase, step and status and the queue of proposals still
//     to be applied (kept up to date from the same events), and, read at
//     scrape time, the journal's indexes, mastership term and size on disk;
//   - Device: the agent's view of the device (connected, re-pushing,
//     re-push count, size and duration), read from agent.Status at scrape
//     time, and a histogram of re-push durations;
//   - Drift: drift detection (package drift): the drifted paths, the
//     comparisons, reverts and adoptions, read from the watcher's Status
//     at scrape time;
//   - the northbound gRPC server's RPCs by service, method and code, with a
//     handling-time histogram (go-grpc-middleware's providers/prometheus);
//   - the Go runtime and the process.
//
// Every metric is named gnmi_sidecar_* except the Go and process ones
// (go_*, process_*). docs/observability.md describes each.
package metrics

import (
	"fmt"
	"log/slog"
	"net/http"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gnmi-sidecar/gnmi-sidecar/buildinfo"
)

// Namespace prefixes every metric of the sidecar.
const Namespace = "gnmi_sidecar"

// Sidecar is one sidecar's metrics: its registry and the collectors
// registered on it.
type Sidecar struct {
	Registry *prometheus.Registry
	Journal  *Journal
	Device   *Device
	// Drift is drift detection's (package drift): attach the watcher.
	Drift *Drift
	// RPC counts the northbound RPCs: install its interceptors on the gRPC
	// server.
	RPC *grpcprom.ServerMetrics
	// Ready mirrors the gRPC health status of the whole server (and
	// /healthz): 1 while SERVING, 0 otherwise.
	Ready prometheus.Gauge
}

// rpcBuckets are the bounds (seconds) of the RPC handling-time histogram:
// a Set waits for the device, a Subscribe lasts as long as the client.
var rpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// New returns the sidecar's metrics on a new registry: the journal, device
// and RPC collectors, and the Go runtime and process collectors.
func New() *Sidecar {
	s := &Sidecar{
		Registry: prometheus.NewRegistry(),
		Journal:  NewJournal(),
		Device:   NewDevice(),
		Drift:    NewDrift(),
		RPC: grpcprom.NewServerMetrics(
			grpcprom.WithServerCounterOptions(grpcprom.WithNamespace(Namespace)),
			grpcprom.WithServerHandlingTimeHistogram(
				grpcprom.WithHistogramNamespace(Namespace),
				grpcprom.WithHistogramBuckets(rpcBuckets))),
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "ready",
			Help: "1 while the sidecar is ready (gRPC health SERVING, /healthz 200: the device connected and in step with the journal), else 0.",
		}),
	}
	bi := buildinfo.Read()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Always 1: the running build's version, source revision and Go version, as labels.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion}})
	buildInfo.Set(1)
	s.Registry.MustRegister(
		s.Journal, s.Device, s.Drift, s.RPC, s.Ready, buildInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return s
}

// Handler serves the registry in the Prometheus exposition formats. A
// collector that fails (the journal closed under a scrape) is logged and
// left out; the other metrics are still served.
func (s *Sidecar) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{
		ErrorLog:            slogAdapter{log},
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            s.Registry,
		MaxRequestsInFlight: 4,
	})
}

// slogAdapter is promhttp's error logger on slog.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Println(v ...any) {
	if a.log != nil {
		a.log.Warn("metrics scrape", "err", fmt.Sprint(v...))
	}
}
