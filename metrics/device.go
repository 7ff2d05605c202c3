package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
)

// repushBuckets (seconds): a re-push sends the whole applied configuration.
var repushBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Device is the metrics of the agent's view of the device. Attach gives
// it the agent's Status, read at every scrape; Update, called whenever the
// status may have changed (after each close of agent.Changes), feeds the
// re-push duration histogram. Until Attach only the histogram is
// collected.
type Device struct {
	repushDuration prometheus.Histogram

	connectedDesc    *prometheus.Desc
	repushingDesc    *prometheus.Desc
	repushesDesc     *prometheus.Desc
	lastDurationDesc *prometheus.Desc
	lastValuesDesc   *prometheus.Desc
	lastTimeDesc     *prometheus.Desc
	retriesDesc      *prometheus.Desc
	retryingDesc     *prometheus.Desc
	connectsDesc     *prometheus.Desc
	disconnectsDesc  *prometheus.Desc
	fencedDesc       *prometheus.Desc
	refusedDesc      *prometheus.Desc

	mu     sync.Mutex
	status func() agent.Status
	seen   uint64 // re-pushes already in the histogram
}

// NewDevice returns the device's collector.
func NewDevice() *Device {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, nil, nil)
	}
	return &Device{
		repushDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "repush_duration_seconds",
			Help:    "Duration of the completed re-pushes of the applied configuration to the device.",
			Buckets: repushBuckets,
		}),
		connectedDesc:    desc("device_connected", "1 while a session with the device is up (connected, liveness stream open), else 0."),
		repushingDesc:    desc("device_repushing", "1 while the applied configuration is being re-pushed to the device, else 0."),
		repushesDesc:     desc("repushes_total", "Re-pushes of the applied configuration completed since the sidecar started."),
		lastDurationDesc: desc("repush_last_duration_seconds", "Duration of the last completed re-push (0 before the first)."),
		lastValuesDesc:   desc("repush_last_values", "Path values the last completed re-push sent (0 before the first)."),
		fencedDesc: desc("fenced",
			"1 once the device answered that another client holds a higher MasterArbitration election id: the sidecar no longer writes to it until restarted."),
		retriesDesc: desc("device_set_retries_total",
			"Device Sets sent again since the sidecar started: after a lost connection (on a new session, after a backoff), or an acknowledged change answered with one of --retry-codes."),
		connectsDesc:    desc("device_connects_total", "Sessions established with the device since the sidecar started (each with a new term)."),
		disconnectsDesc: desc("device_disconnects_total", "Sessions with the device that ended since the sidecar started (the device restarted, the connection broke, a Set went unanswered and the device could not be read back)."),
		retryingDesc: desc("device_set_retrying",
			"The proposal index of the acknowledged change being sent again after an answer with one of --retry-codes, 0 if none."),
		refusedDesc: desc("device_sets_refused_total",
			"Definitive refusals of a Set by the device since the sidecar started (a failed proposal, or a rollback or re-push value marked out of sync)."),
		lastTimeDesc: desc("repush_last_timestamp_seconds", "When the last re-push completed, in seconds since the Unix epoch (0 before the first)."),
	}
}

// Attach gives the collector the agent's status (agent.Agent.Status).
func (d *Device) Attach(status func() agent.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status = status
}

// Update records in the histogram a re-push st reports completed since
// the previous Update. If several completed in between, only the last
// one's duration is known and recorded, so the histogram's count may lag
// behind gnmi_sidecar_repushes_total when Update is not called after
// every change.
func (d *Device) Update(st agent.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st.Repushes > d.seen {
		d.seen = st.Repushes
		d.repushDuration.Observe(st.LastRepushDuration.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (d *Device) Describe(ch chan<- *prometheus.Desc) {
	d.repushDuration.Describe(ch)
	for _, desc := range []*prometheus.Desc{d.connectedDesc, d.repushingDesc, d.repushesDesc,
		d.lastDurationDesc, d.lastValuesDesc, d.lastTimeDesc, d.retriesDesc, d.retryingDesc, d.refusedDesc, d.fencedDesc,
		d.connectsDesc, d.disconnectsDesc} {
		ch <- desc
	}
}

// Collect implements prometheus.Collector.
func (d *Device) Collect(ch chan<- prometheus.Metric) {
	d.repushDuration.Collect(ch)
	d.mu.Lock()
	status := d.status
	d.mu.Unlock()
	if status == nil {
		return
	}
	st := status()
	gauge := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}
	gauge(d.connectedDesc, boolValue(st.Connected))
	gauge(d.repushingDesc, boolValue(st.Repushing))
	ch <- prometheus.MustNewConstMetric(d.repushesDesc, prometheus.CounterValue, float64(st.Repushes))
	gauge(d.lastDurationDesc, st.LastRepushDuration.Seconds())
	gauge(d.lastValuesDesc, float64(st.LastRepushValues))
	last := 0.0
	if !st.LastRepush.IsZero() {
		last = float64(st.LastRepush.UnixNano()) / 1e9
	}
	gauge(d.lastTimeDesc, last)
	gauge(d.fencedDesc, boolValue(st.Fenced))
	ch <- prometheus.MustNewConstMetric(d.retriesDesc, prometheus.CounterValue, float64(st.SetRetries))
	ch <- prometheus.MustNewConstMetric(d.connectsDesc, prometheus.CounterValue, float64(st.Connects))
	ch <- prometheus.MustNewConstMetric(d.disconnectsDesc, prometheus.CounterValue, float64(st.Disconnects))
	retrying := 0.0
	if st.Retrying != nil {
		retrying = float64(st.Retrying.Proposal)
	}
	gauge(d.retryingDesc, retrying)
	ch <- prometheus.MustNewConstMetric(d.refusedDesc, prometheus.CounterValue, float64(st.SetsRefused))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
