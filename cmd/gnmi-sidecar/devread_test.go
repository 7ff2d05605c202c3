package main

import (
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// TestOpsDriftGetConfigRefused: a device that refuses Get CONFIG (as
// gnxi's gnmi_target) is read with Get ALL: drift, diff and status say so,
// and a change on the device is drift (exit 6).
func TestOpsDriftGetConfigRefused(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{RefuseGetConfig: true, RefuseOnChange: true},
		DriftInterval: 200 * time.Millisecond})
	opsSet(t, s.Client, descA, "uplink")
	sidecartest.Eventually(t, 10*time.Second, "a first comparison", func() bool { return s.Drift.Status().Checks > 0 })
	out := mustOps(t, s.Addr, "drift")
	if !strings.Contains(out, "read with: get-all/JSON_IETF") || !strings.Contains(out, "no drift") {
		t.Errorf("drift:\n%s", out)
	}
	if out := mustOps(t, s.Addr, "status"); !strings.Contains(out, "read-method:") || !strings.Contains(out, "get-all/JSON_IETF") {
		t.Errorf("status:\n%s", out)
	}
	setOnDevice(t, sidecartest.Dial(t, s.Target), descA, "hacked")
	sidecartest.Eventually(t, 10*time.Second, "the drift", func() bool { return s.Drift.Status().Paths == 1 })
	for _, cmd := range []string{"drift", "diff"} {
		if r := runOpsAt(t, s.Addr, cmd); r.code != exitDifferences || !strings.Contains(r.stdout, "hacked") {
			t.Errorf("%s: exit %d, want %d with the change", cmd, r.code, exitDifferences)
		}
	}
}

// TestOpsDeviceUnreadable: a device that refuses every kind of read makes
// drift, diff and status exit 3 naming why; never "no drift".
func TestOpsDeviceUnreadable(t *testing.T) {
	all := map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented, gpb.Encoding_JSON: codes.Unimplemented, gpb.Encoding_PROTO: codes.InvalidArgument}
	s := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{RefuseGet: true, RefuseOnChange: true, RefuseEncodings: all},
		DriftInterval: 200 * time.Millisecond})
	opsSet(t, s.Client, descA, "uplink")
	sidecartest.Eventually(t, 10*time.Second, "the device found unreadable", func() bool {
		st := s.Drift.Status()
		return st.ReadChecked && !st.Readable
	})
	r := runOpsAt(t, s.Addr, "drift")
	r.wantCode(t, exitUnreachable, "drift: the device's configuration at", "refused every method")
	if strings.Contains(r.stdout, "no drift") || !strings.Contains(r.stdout, "drift unknown") {
		t.Errorf("drift of an unreadable device:\n%s", r.stdout)
	}
	runOpsAt(t, s.Addr, "diff").wantCode(t, exitUnreachable, "compare the device with the journal", "cannot be read",
		"subscribe-once/PROTO: InvalidArgument: unsupported encoding: PROTO")
	r = runOpsAt(t, s.Addr, "status")
	r.wantCode(t, exitUnreachable, "status: the device's configuration at")
	if !strings.Contains(r.stdout, "readable:") || !strings.Contains(r.stdout, "false") {
		t.Errorf("status of an unreadable device:\n%s", r.stdout)
	}
}
