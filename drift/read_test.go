package drift_test

import (
	"context"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// gnxiLike answers as gnxi's gnmi_target: no Get of type CONFIG, no PROTO,
// no ON_CHANGE subscription.
var gnxiLike = testbed.Options{RefuseGetConfig: true, RefuseOnChange: true,
	RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_PROTO: codes.Unimplemented}}

// TestWatcherGetConfigRefused: a device that refuses Get CONFIG (gnxi's
// gnmi_target) is read with Get ALL, pruned of state, and a change behind
// the sidecar's back is reported; Diff finds it too.
func TestWatcherGetConfigRefused(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Device: gnxiLike, DriftInterval: 300 * time.Millisecond})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	s.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
	sidecartest.Eventually(t, within, "a first comparison", func() bool {
		st := s.Drift.Status()
		return st.Mode == drift.ModePoll && st.Checks > 0
	})
	if recs := s.Drift.Records(); len(recs) != 0 {
		t.Fatalf("drift before any change (state data taken for drift?): %v", recPaths(recs))
	}
	onDevice(t, s).update(eth0Desc, sidecartest.StringVal("hacked"))
	recs, took := waitRecords(t, s.Drift, eth0Desc)
	t.Logf("reported after %v, read with Get ALL", took)
	if r := recs[0]; r.Kind != drift.Changed || drift.Text(r.Device) != "hacked" {
		t.Errorf("record %+v", r)
	}
	st := s.Drift.Status()
	if st.ReadMethod != "get-all/JSON_IETF" || !st.Readable || st.ReadError != "" || st.WatchError != "" {
		t.Errorf("status %+v", st)
	}
	diffs, _, err := s.Drift.Diff(context.Background(), nil)
	if err != nil || len(diffs) != 1 || drift.Text(diffs[0].Device) != "hacked" {
		t.Errorf("Diff: %v, %v", wants(diffs), err)
	}
}

// TestWatcherUnreadable: a device that refuses every read is reported as
// unreadable (never as "no drift"), Diff fails with Unavailable naming
// why, and the watcher does not loop hot.
func TestWatcherUnreadable(t *testing.T) {
	all := map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented, gpb.Encoding_JSON: codes.Unimplemented, gpb.Encoding_PROTO: codes.Unimplemented}
	s := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{RefuseGet: true, RefuseOnChange: true, RefuseEncodings: all},
		DriftInterval: 300 * time.Millisecond})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	sidecartest.Eventually(t, within, "the device found unreadable", func() bool {
		st := s.Drift.Status()
		return st.ReadChecked && !st.Readable
	})
	st := s.Drift.Status()
	if !strings.Contains(st.ReadError, "refused every method") || !strings.Contains(st.ReadError, "unsupported encoding: JSON_IETF") ||
		st.Checks != 0 || st.Paths != 0 {
		t.Errorf("status %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := s.Drift.Diff(ctx, nil)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "cannot be read") {
		t.Errorf("Diff of an unreadable device: %v (code %v)", err, status.Code(err))
	}
}
