package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
)

// Drift is the metrics of drift detection (package drift): the watcher's
// Status, read at every scrape once Attach gave it. Until then nothing is
// collected.
type Drift struct {
	pathsDesc     *prometheus.Desc
	checksDesc    *prometheus.Desc
	detectedDesc  *prometheus.Desc
	revertsDesc   *prometheus.Desc
	adoptionsDesc *prometheus.Desc
	watchingDesc  *prometheus.Desc
	readableDesc  *prometheus.Desc
	methodDesc    *prometheus.Desc

	mu     sync.Mutex
	status func() drift.Status
}

// NewDrift returns the drift collector.
func NewDrift() *Drift {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &Drift{
		pathsDesc: desc("drift_paths",
			"Paths where the device's configuration differs from the journal's applied configuration, changed behind the sidecar's back (gnmi-sidecar drift lists them)."),
		checksDesc:   desc("drift_checks_total", "Comparisons of a managed subtree of the device with the journal since the sidecar started."),
		detectedDesc: desc("drift_detected_total", "Paths found drifted since the sidecar started (each time a path drifts anew)."),
		revertsDesc: desc("drift_reverts_total",
			"Drifted paths whose journal values the sidecar put back on the device (--drift-policy revert) since it started."),
		adoptionsDesc: desc("drift_adoptions_total",
			"Drifted paths whose device values the sidecar journaled as an adopted proposal authored \"device\" (--drift-policy adopt) since it started."),
		watchingDesc: desc("drift_watching",
			"1 for the way the sidecar watches the device for drift (mode: on-change, poll or off), with the policy; 0 for the others. 0 for every mode while it cannot watch (a watch error, or the device's configuration cannot be read).",
			"mode", "policy"),
		readableDesc: desc("device_readable",
			"1 while the device's configuration can be read (the last read worked, by one method or another), 0 while it cannot (gnmi-sidecar drift and diff say why); absent before the first read."),
		methodDesc: desc("device_read_method",
			"1 for the method the device's configuration is read with (method: get-config/JSON_IETF, get-all/JSON, subscribe-once/PROTO, ...): the last that worked; absent before one did.",
			"method"),
	}
}

// Attach gives the collector the watcher's status (drift.Watcher.Status).
func (d *Drift) Attach(status func() drift.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status = status
}

// Describe implements prometheus.Collector.
func (d *Drift) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{d.pathsDesc, d.checksDesc, d.detectedDesc, d.revertsDesc, d.adoptionsDesc, d.watchingDesc, d.readableDesc, d.methodDesc} {
		ch <- desc
	}
}

// Collect implements prometheus.Collector.
func (d *Drift) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	status := d.status
	d.mu.Unlock()
	if status == nil {
		return
	}
	st := status()
	ch <- prometheus.MustNewConstMetric(d.pathsDesc, prometheus.GaugeValue, float64(st.Paths))
	ch <- prometheus.MustNewConstMetric(d.checksDesc, prometheus.CounterValue, float64(st.Checks))
	ch <- prometheus.MustNewConstMetric(d.detectedDesc, prometheus.CounterValue, float64(st.Detected))
	ch <- prometheus.MustNewConstMetric(d.revertsDesc, prometheus.CounterValue, float64(st.Reverts))
	ch <- prometheus.MustNewConstMetric(d.adoptionsDesc, prometheus.CounterValue, float64(st.Adoptions))
	for _, m := range []drift.Mode{drift.ModeOnChange, drift.ModePoll, drift.ModeOff} {
		ch <- prometheus.MustNewConstMetric(d.watchingDesc, prometheus.GaugeValue,
			boolValue(m == st.Mode && st.WatchError == "" && (st.Readable || !st.ReadChecked)), string(m), string(st.Policy))
	}
	if st.ReadChecked {
		ch <- prometheus.MustNewConstMetric(d.readableDesc, prometheus.GaugeValue, boolValue(st.Readable))
	}
	if st.ReadMethod != "" {
		ch <- prometheus.MustNewConstMetric(d.methodDesc, prometheus.GaugeValue, 1, st.ReadMethod)
	}
}
