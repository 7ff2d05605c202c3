package main

// End-to-end tests of drift detection (docs/drift.md) with real
// processes: gnmi-testbed, gnmi-sidecar serve --drift-policy ..., and the
// gnmi-sidecar binary's operator commands; the device changed behind the
// sidecar's back by a gNMI client of its own address.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// driftWithin is the bound: drift reported, and reverted, within
// 5 s of the change on the device.
const driftWithin = 5 * time.Second

// cli runs the gnmi-sidecar binary's operator command args against the
// stack's sidecar and returns its exit code and stdout.
func (s *stack) cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, out, errOut := runCLI(t, s.sidecarBin, s.sidecar.addr, args...)
	if errOut != "" {
		t.Logf("gnmi-sidecar %v: stderr %s", args, errOut)
	}
	return code, out
}

// driftJSON is `gnmi-sidecar drift -o json` as the tests read it: values
// as plain JSON.
type driftJSON struct {
	Policy, Mode string
	Reverts      uint64
	LastCheck    time.Time `json:"last_check"`
	Drift        []struct {
		Path         string
		JournalValue any `json:"journal_value"`
		DeviceValue  any `json:"device_value"`
	}
}

// driftStack starts a device and a sidecar with --drift-policy policy,
// sets the description of eth0 through the sidecar, and waits until the
// watcher has compared the device with the journal once.
func driftStack(t *testing.T, policy string) *stack {
	t.Helper()
	s := startStack(t, nil, []string{"--drift-policy", policy})
	mustSetDesc(t, s.client, "eth0", "uplink")
	poll(t, 10*time.Second, "the drift watcher's first comparison", func() (bool, string) {
		code, out := s.cli(t, "drift", "-o", "json")
		var v driftJSON
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			return false, fmt.Sprintf("exit %d: %s", code, out)
		}
		return !v.LastCheck.IsZero() && v.Policy == policy, out
	})
	return s
}

// setOnDeviceDesc sets eth0's description on the device itself.
func (s *stack) setOnDeviceDesc(t *testing.T, val string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := setDesc(ctx, s.devClient, "eth0", val); err != nil {
		t.Fatalf("Set on the device: %v", err)
	}
	return time.Now()
}

// TestDriftReportE2E: a value changed directly on the device shows in
// `gnmi-sidecar drift` (exit code 6, the path with both values) and in the
// metric gnmi_sidecar_drift_paths within 5 s.
func TestDriftReportE2E(t *testing.T) {
	s := driftStack(t, "report")
	metrics := s.sidecar.metricsAddr(t)
	changed := s.setOnDeviceDesc(t, "hacked")

	var v driftJSON
	took := poll(t, driftWithin, "gnmi-sidecar drift to list the change", func() (bool, string) {
		code, out := s.cli(t, "drift", "-o", "json")
		if code != exitDifferences {
			return false, fmt.Sprintf("exit %d: %s", code, out)
		}
		v = driftJSON{}
		err := json.Unmarshal([]byte(out), &v)
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("gnmi-sidecar drift listed the change %v after it", took)
	if len(v.Drift) != 1 || v.Drift[0].Path != "/interfaces/interface[name=eth0]/config/description" ||
		v.Drift[0].JournalValue != "uplink" || v.Drift[0].DeviceValue != "hacked" {
		t.Errorf("drift %+v", v.Drift)
	}
	poll(t, driftWithin-time.Since(changed), "gnmi_sidecar_drift_paths 1", func() (bool, string) {
		m, err := scrape(metrics)
		if err != nil {
			return false, err.Error()
		}
		return m["gnmi_sidecar_drift_paths"] == 1, fmt.Sprintf("gnmi_sidecar_drift_paths %v", m["gnmi_sidecar_drift_paths"])
	})
	t.Logf("the metric showed it %v after the change", time.Since(changed).Round(time.Millisecond))

	code, out := s.cli(t, "drift")
	if code != exitDifferences || !strings.Contains(out, "policy: report  mode: on-change") {
		t.Errorf("drift: exit %d\n%s", code, out)
	}
	if rows := tableRows(t, out, "PATH"); len(rows) != 1 || rows[0][1] != "uplink" || rows[0][2] != "hacked" {
		t.Errorf("drift rows %q", rows)
	}
	if code, out := s.cli(t, "diff"); code != exitDifferences || !strings.Contains(out, "hacked") {
		t.Errorf("diff: exit %d\n%s", code, out)
	}
	// status says so on its first line.
	if code, out := s.cli(t, "status"); code != 0 || !strings.HasPrefix(out, "Status: DRIFT: 1 paths changed on the device") {
		t.Errorf("status: exit %d, first line %q", code, strings.SplitN(out, "\n", 2)[0])
	}
	line, err := s.sidecar.errOut.waitLine(func(l string) bool { return strings.Contains(l, "configuration drift: the device differs") }, time.Second, nil)
	if err != nil || !strings.Contains(line, "level=WARN") || !strings.Contains(line, "journal=uplink") || !strings.Contains(line, "device=hacked") {
		t.Errorf("WARN log line %q (%v)", line, err)
	}

	// A dry run says what the revert would do, and does nothing.
	if code, out := s.cli(t, "resolve", "revert", "--all", "--dry-run"); code != 0 ||
		!strings.Contains(out, `/interfaces/interface[name=eth0]/config/description: `) || !strings.Contains(out, `uplink  (the device holds "hacked")`) {
		t.Errorf("resolve revert --all --dry-run: exit %d\n%s", code, out)
	}
	if got, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); got != "hacked" {
		t.Errorf("after the dry run the device holds %q, want hacked still", got)
	}
	// The operator reverts it: the journal's value is back on the device,
	// and the drift clears.
	if code, out := s.cli(t, "resolve", "revert", "--all"); code != 0 || !strings.Contains(out, "back on the device at 1 paths") {
		t.Fatalf("resolve revert --all: exit %d\n%s", code, out)
	}
	if got, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); got != "uplink" {
		t.Errorf("after resolve revert the device holds %q, want the journal's uplink", got)
	}
	poll(t, driftWithin, "the drift cleared", func() (bool, string) {
		code, out := s.cli(t, "drift")
		return code == 0, out
	})
}

// TestDriftRevertE2E: with --drift-policy revert the device holds the
// journal's value again within 5 s of a change on it.
func TestDriftRevertE2E(t *testing.T) {
	s := driftStack(t, "revert")
	changed := s.setOnDeviceDesc(t, "hacked")
	poll(t, driftWithin, "the device to hold the journal's value again", func() (bool, string) {
		got, _ := mustGetLeaf(t, s.devClient, descPath("eth0"))
		return got == "uplink", "the device holds " + got
	})
	t.Logf("reverted %v after the change", time.Since(changed).Round(time.Millisecond))
	poll(t, driftWithin, "the drift cleared", func() (bool, string) {
		code, out := s.cli(t, "drift")
		return code == 0, out
	})
	code, out := s.cli(t, "drift", "-o", "json")
	var v driftJSON
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Reverts != 1 {
		t.Errorf("drift after the revert: exit %d\n%s", code, out)
	}
}

// TestDriftAdoptE2E: with --drift-policy adopt, the journal shows a
// proposal authored "device", adopted, recording the device's value.
func TestDriftAdoptE2E(t *testing.T) {
	s := driftStack(t, "adopt")
	s.setOnDeviceDesc(t, "theirs")
	var adopted ProposalState
	poll(t, 10*time.Second, "an adopted proposal authored device", func() (bool, string) {
		code, out := s.cli(t, "journal", "list", "-o", "json")
		var l struct{ Proposals []ProposalState }
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
			return false, fmt.Sprintf("exit %d: %s", code, out)
		}
		for _, p := range l.Proposals {
			if p.Author == "device" {
				adopted = p
				return true, ""
			}
		}
		return false, out
	})
	if !adopted.Adopted || adopted.ApplyStatus != "COMPLETE" {
		t.Errorf("proposal %+v", adopted)
	}
	code, out := s.cli(t, "journal", "show", fmt.Sprint(adopted.Index), "-o", "json")
	var d struct {
		State   ProposalState
		Changes []struct {
			Path  string
			Value any
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("journal show: exit %d\n%s", code, out)
	}
	found := false
	for _, c := range d.Changes {
		if c.Path == "/interfaces/interface[name=eth0]/config/description" && c.Value == "theirs" {
			found = true
		}
	}
	if !found || d.State.Author != "device" {
		t.Errorf("journal show %d:\n%s", adopted.Index, out)
	}
	poll(t, driftWithin, "the drift gone", func() (bool, string) {
		code, out := s.cli(t, "drift")
		return code == 0, out
	})
	if code, out := s.cli(t, "diff"); code != 0 {
		t.Errorf("diff after the adoption: exit %d\n%s", code, out)
	}
}
