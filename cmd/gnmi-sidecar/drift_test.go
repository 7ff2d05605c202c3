package main

// Tests of `gnmi-sidecar drift` and `gnmi-sidecar diff`, run in-process
// against a whole sidecar (sidecartest.Start) whose device is changed
// behind its back by a gNMI client of the device's own address.

import (
	"context"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// setOnDevice sets path to the string val directly on the device at addr,
// behind the sidecar's back.
func setOnDevice(t *testing.T, c gpb.GNMIClient, path, val string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, path), Val: opsStr(val)}}}); err != nil {
		t.Fatalf("Set %s = %q on the device: %v", path, val, err)
	}
}

// TestOpsDrift: a value changed on the device shows in `drift` (table,
// JSON, exit code 6) and in `diff` (with and without PATH filters); once
// the device holds the journal's value again both exit 0.
func TestOpsDrift(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "uplink")
	opsSet(t, s.Client, "/system/config/hostname", "r1")
	out := mustOps(t, s.Addr, "drift")
	if !strings.Contains(out, "policy: report  mode: on-change") || !strings.Contains(out, "no drift") {
		t.Errorf("drift before any change:\n%s", out)
	}
	mustOps(t, s.Addr, "diff")

	dev := sidecartest.Dial(t, s.Target)
	setOnDevice(t, dev, descA, "hacked")
	var r opsResult
	poll(t, 5*time.Second, "drift to list the changed description", func() (bool, string) {
		r = runOpsAt(t, s.Addr, "drift")
		return r.code == exitDifferences, r.stdout
	})
	if r.stderr != "" {
		t.Errorf("drift printed on stderr: %q", r.stderr)
	}
	rows := tableRows(t, r.stdout, "PATH")
	if len(rows) != 1 || rows[0][0] != descA || rows[0][1] != "uplink" || rows[0][2] != "hacked" || !rfc3339UTC.MatchString(rows[0][3]) {
		t.Errorf("drift rows %q", rows)
	}
	var v struct {
		Policy, Mode    string
		Paths, Detected uint64
		LastCheck       time.Time `json:"last_check"`
		Drift           []struct {
			Path, Kind                   string
			JournalValue                 any       `json:"journal_value"`
			DeviceValue                  any       `json:"device_value"`
			JournalDeleted, DeviceAbsent bool      `json:"-"`
			Proposal                     *uint64   `json:"proposal"`
			Since                        time.Time `json:"since"`
		}
	}
	r = runOpsAt(t, s.Addr, "drift", "-o", "json")
	wantDifferences(t, r)
	decodeJSON(t, r.stdout, &v)
	if v.Policy != "report" || v.Mode != "on-change" || v.Paths != 1 || v.Detected != 1 || v.LastCheck.IsZero() || len(v.Drift) != 1 {
		t.Fatalf("drift JSON %+v", v)
	}
	d := v.Drift[0]
	if d.Path != descA || d.Kind != "CHANGED" || d.JournalValue != "uplink" || d.DeviceValue != "hacked" ||
		d.Proposal == nil || *d.Proposal != 1 || d.Since.IsZero() {
		t.Errorf("drift JSON path %+v", d)
	}
	for _, field := range []string{`"journal_deleted": false`, `"device_absent": false`} {
		if !strings.Contains(r.stdout, field) {
			t.Errorf("drift JSON lacks %s:\n%s", field, r.stdout)
		}
	}

	r = runOpsAt(t, s.Addr, "diff")
	wantDifferences(t, r)
	if rows := tableRows(t, r.stdout, "PATH"); len(rows) != 1 || rows[0][0] != descA || rows[0][1] != "uplink" || rows[0][2] != "hacked" {
		t.Errorf("diff rows %q", rows)
	}
	wantDifferences(t, runOpsAt(t, s.Addr, "diff", "/interfaces"))
	runOpsAt(t, s.Addr, "diff", "/system").wantCode(t, 0)
	var dv struct {
		Time        time.Time
		Paths       uint64
		Differences []struct{ Path string }
	}
	r = runOpsAt(t, s.Addr, "diff", "/interfaces/interface[name=eth0]", "-o", "json")
	wantDifferences(t, r)
	decodeJSON(t, r.stdout, &dv)
	if dv.Paths != 1 || dv.Time.IsZero() || len(dv.Differences) != 1 || dv.Differences[0].Path != descA {
		t.Errorf("diff JSON %+v", dv)
	}
	runOpsAt(t, s.Addr, "diff", "interfaces").wantCode(t, exitUsage, "want an absolute path")
	runOpsAt(t, s.Addr, "drift", "extra").wantCode(t, exitUsage)

	setOnDevice(t, dev, descA, "uplink")
	poll(t, 5*time.Second, "drift to clear", func() (bool, string) {
		r = runOpsAt(t, s.Addr, "drift")
		return r.code == 0, r.stdout
	})
	runOpsAt(t, s.Addr, "diff").wantCode(t, 0)
}

// wantDifferences requires exit code 6 and nothing on stderr: the output
// says what differs.
func wantDifferences(t *testing.T, r opsResult) {
	t.Helper()
	if r.code != exitDifferences || r.stderr != "" {
		t.Fatalf("exit code %d, stderr %q; want %d and nothing", r.code, r.stderr, exitDifferences)
	}
}

// TestOpsDiffDeviceUnreachable: diff cannot compare with a device that is
// down: exit 3, saying why.
func TestOpsDiffDeviceUnreachable(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "uplink")
	s.Dev.Stop()
	s.WaitConnected(t, false)
	runOpsAt(t, s.Addr, "diff", "--timeout", "2s").wantCode(t, exitUnreachable, "compare the device with the journal")
}
