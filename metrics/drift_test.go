package metrics

import (
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
)

// TestDriftMetrics: nothing before Attach; then the watcher's status, and
// the watching gauge 1 for its mode only, 0 for all while it cannot watch.
func TestDriftMetrics(t *testing.T) {
	d := NewDrift()
	if got := series(t, d, "gnmi_sidecar_drift_paths"); len(got) != 0 {
		t.Errorf("before Attach: %v", got)
	}
	st := drift.Status{Policy: drift.PolicyRevert, Mode: drift.ModeOnChange, Paths: 2, Checks: 7, Detected: 3, Reverts: 2, Adoptions: 1}
	d.Attach(func() drift.Status { return st })
	for name, want := range map[string]float64{
		"gnmi_sidecar_drift_paths":           2,
		"gnmi_sidecar_drift_checks_total":    7,
		"gnmi_sidecar_drift_detected_total":  3,
		"gnmi_sidecar_drift_reverts_total":   2,
		"gnmi_sidecar_drift_adoptions_total": 1,
	} {
		if got := one(t, d, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	watching := func() map[string]float64 { return series(t, d, "gnmi_sidecar_drift_watching") }
	want := map[string]float64{"mode=on-change,policy=revert": 1, "mode=poll,policy=revert": 0, "mode=off,policy=revert": 0}
	if got := watching(); len(got) != 3 || got["mode=on-change,policy=revert"] != 1 || got["mode=poll,policy=revert"] != 0 {
		t.Errorf("watching %v, want %v", got, want)
	}
	st.WatchError = "no credentials"
	for k, v := range watching() {
		if v != 0 {
			t.Errorf("watching %s = %v while the device cannot be watched", k, v)
		}
	}
}

// TestDeviceReadableMetrics: the readability gauge and the read method,
// absent before the first read.
func TestDeviceReadableMetrics(t *testing.T) {
	d := NewDrift()
	st := drift.Status{Policy: drift.PolicyReport, Mode: drift.ModePoll}
	d.Attach(func() drift.Status { return st })
	if got := series(t, d, "gnmi_sidecar_device_readable"); len(got) != 0 {
		t.Errorf("before any read: %v", got)
	}
	if got := series(t, d, "gnmi_sidecar_device_read_method"); len(got) != 0 {
		t.Errorf("before any read: %v", got)
	}
	st.ReadChecked, st.Readable, st.ReadMethod = true, true, "get-all/JSON_IETF"
	if got := one(t, d, "gnmi_sidecar_device_readable"); got != 1 {
		t.Errorf("readable = %v", got)
	}
	if got := series(t, d, "gnmi_sidecar_device_read_method"); len(got) != 1 || got["method=get-all/JSON_IETF"] != 1 {
		t.Errorf("read method %v", got)
	}
	st.Readable, st.ReadError = false, "the device refused every method"
	if got := one(t, d, "gnmi_sidecar_device_readable"); got != 0 {
		t.Errorf("readable = %v while it is not", got)
	}
	for k, v := range series(t, d, "gnmi_sidecar_drift_watching") {
		if v != 0 {
			t.Errorf("watching %s = %v while the device cannot be read", k, v)
		}
	}
}
