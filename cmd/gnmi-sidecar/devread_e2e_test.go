package main

// End-to-end tests of devices that will not answer every kind of read
// (docs/drift.md): a device that refuses every read makes drift, diff and
// status exit 3 saying why (never "no drift"); gnxi's gnmi_target, which
// refuses Get CONFIG, is read with Get ALL and its drift reported.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// runCLI runs the gnmi-sidecar binary's operator command args against
// the sidecar at addr and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, bin, addr string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--address", addr)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("gnmi-sidecar %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// TestUnreadableDeviceE2E: a device that refuses every kind of read the
// sidecar tries (every Get; Subscribe in every encoding) makes drift,
// diff and status exit 3 with the device's answers, never "no drift";
// gnmi_sidecar_device_readable is 0.
func TestUnreadableDeviceE2E(t *testing.T) {
	s := startStack(t, []string{"--refuse-get", "--refuse-on-change", "--refuse-encoding", "JSON_IETF",
		"--refuse-encoding", "JSON:INVALID_ARGUMENT", "--refuse-encoding", "PROTO"},
		[]string{"--drift-policy", "report", "--drift-interval", "300ms"})
	mustSetDesc(t, s.client, "eth0", "uplink")
	metrics := s.sidecar.metricsAddr(t)

	poll(t, 20*time.Second, "gnmi-sidecar drift to say the device cannot be read", func() (bool, string) {
		code, out, errOut := runCLI(t, s.sidecarBin, s.sidecar.addr, "drift")
		return code == exitUnreachable && strings.Contains(out, "cannot be read"), fmt.Sprintf("exit %d: %s%s", code, out, errOut)
	})
	code, out, errOut := runCLI(t, s.sidecarBin, s.sidecar.addr, "drift")
	if code != exitUnreachable || strings.Contains(out, "no drift") || !strings.Contains(out, "refused every method") ||
		!strings.Contains(out, "subscribe-once/JSON: InvalidArgument: unsupported encoding: JSON") ||
		!strings.Contains(errOut, "gnmi-sidecar: drift: the device's configuration at /interfaces cannot be read") {
		t.Errorf("drift: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, s.sidecarBin, s.sidecar.addr, "drift", "-o", "json")
	var v struct {
		Readable  *bool  `json:"readable"`
		ReadError string `json:"read_error"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitUnreachable || v.Readable == nil || *v.Readable || v.ReadError == "" {
		t.Errorf("drift -o json: exit %d, %v\n%s", code, err, out)
	}

	code, out, errOut = runCLI(t, s.sidecarBin, s.sidecar.addr, "diff")
	if code != exitUnreachable || strings.Contains(out, "no differences") ||
		!strings.Contains(errOut, "cannot be read: the device refused every method: get-config/JSON_IETF: Unimplemented") {
		t.Errorf("diff: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	code, out, errOut = runCLI(t, s.sidecarBin, s.sidecar.addr, "status")
	if code != exitUnreachable || !strings.Contains(out, "readable:") || !strings.Contains(out, "read-error:") ||
		!strings.Contains(errOut, "cannot be read") {
		t.Errorf("status: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	m, err := scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m["gnmi_sidecar_device_readable"]; !ok || v != 0 {
		t.Errorf("gnmi_sidecar_device_readable %v (present %v), want 0", v, ok)
	}
	if got := strings.Count(s.sidecar.errOut.text(), "cannot be read: drift, diff and resolve adopt know nothing"); got != 1 {
		t.Errorf("%d WARN lines of the unreadable device, want 1", got)
	}
}

// TestGnmiTargetDriftE2E: gnxi's gnmi_target refuses Get of type CONFIG
// (and ON_CHANGE subscriptions); the sidecar reads it with Get ALL,
// pruned of state, and reports a change made on it behind its back.
func TestGnmiTargetDriftE2E(t *testing.T) {
	sidecarBin, _ := binaries(t)
	g := startGnmiTarget(t, sidecartest.GNMITarget(t))
	dir := t.TempDir()
	sidecar := startProcess(t, "gnmi-sidecar", sidecarBin, "serve", "--listen", "127.0.0.1:0", "--target", g.addr(),
		"--journal-dir", filepath.Join(dir, "journal"), "--trace", filepath.Join(dir, "trace.jsonl"), "--metrics", "127.0.0.1:0",
		"--journal-min-free", "0", "--drift-policy", "report", "--drift-interval", "300ms")
	client := dial(t, sidecar.addr)
	// gnmi_target needs the entry's config/name with its key.
	cfg := &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"name":"eth0","description":"uplink"}`)}}
	if _, err := sendRetrying(client, &gpb.SetRequest{Update: []*gpb.Update{{Path: leafPath("eth0"), Val: cfg}}}); err != nil {
		t.Fatalf("Set through the sidecar: %v", err)
	}
	poll(t, 20*time.Second, "a first comparison, no drift", func() (bool, string) {
		code, out, errOut := runCLI(t, sidecarBin, sidecar.addr, "drift")
		return code == 0 && strings.Contains(out, "read with: get-all/JSON_IETF") && strings.Contains(out, "no drift"),
			fmt.Sprintf("exit %d: %s%s", code, out, errOut)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.client().Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: descPath("eth0"), Val: strVal("hacked")}}}); err != nil {
		t.Fatalf("Set on gnmi_target: %v", err)
	}
	var code int
	var out string
	took := poll(t, 20*time.Second, "gnmi-sidecar drift to report the change", func() (bool, string) {
		var errOut string
		code, out, errOut = runCLI(t, sidecarBin, sidecar.addr, "drift")
		return code == exitDifferences, fmt.Sprintf("exit %d: %s%s", code, out, errOut)
	})
	t.Logf("reported %v after the change", took)
	if rows := tableRows(t, out, "PATH"); len(rows) != 1 || rows[0][0] != "/interfaces/interface[name=eth0]/config/description" ||
		rows[0][1] != "uplink" || rows[0][2] != "hacked" {
		t.Errorf("drift rows %q\n%s", rows, out)
	}
	m, err := scrape(sidecar.metricsAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	if m["gnmi_sidecar_drift_paths"] != 1 || m["gnmi_sidecar_device_readable"] != 1 {
		t.Errorf("gnmi_sidecar_drift_paths %v, gnmi_sidecar_device_readable %v", m["gnmi_sidecar_drift_paths"], m["gnmi_sidecar_device_readable"])
	}
	code, out, errOut := runCLI(t, sidecarBin, sidecar.addr, "diff")
	if code != exitDifferences || !strings.Contains(out, "hacked") {
		t.Errorf("diff: exit %d\n%s%s", code, out, errOut)
	}
}
