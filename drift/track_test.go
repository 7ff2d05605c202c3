package drift_test

import (
	"slices"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

func changed(t *testing.T, path, journal, device string) drift.Diff {
	return drift.Diff{Path: fixture.Path(t, path), Kind: drift.Changed, Journal: str(journal), Device: str(device), Index: 1}
}

func recPaths(recs []drift.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, gnmipath.String(r.Path))
	}
	return out
}

func wantPaths(t *testing.T, what string, recs []drift.Record, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := recPaths(recs); !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

var t0 = time.Date(2026, 11, 25, 5, 0, 0, 0, time.UTC)

// TestTrackerReport: paths drift anew once (with the time of the first
// sign of them), stay while they drift, clear when a comparison of their
// subtree no longer finds them, and stay when another subtree is
// compared; the report policy asks for nothing else.
func TestTrackerReport(t *testing.T) {
	tr := drift.NewTracker(drift.PolicyReport, 3, 10*time.Minute)
	interfaces, system := []*gpb.Path{fixture.Path(t, "/interfaces")}, []*gpb.Path{fixture.Path(t, "/system")}
	r := tr.Update(interfaces, []drift.Diff{changed(t, eth0Desc, "a", "b")}, t0, t0.Add(-time.Second))
	wantPaths(t, "new", r.New, eth0Desc)
	if got := r.New[0].Since; !got.Equal(t0.Add(-time.Second)) {
		t.Errorf("since %v, want the first sign's time", got)
	}
	if len(r.Revert)+len(r.Adopt)+len(r.Capped) > 0 {
		t.Errorf("report policy asked for %+v", r)
	}
	r = tr.Update(interfaces, []drift.Diff{changed(t, eth0Desc, "a", "c")}, t0.Add(time.Second), time.Time{})
	wantPaths(t, "new again", r.New)
	if rec := tr.Records()[0]; !rec.Since.Equal(t0.Add(-time.Second)) || drift.Text(rec.Device) != "c" {
		t.Errorf("a path still drifting keeps its since and gets the new device value: %+v", rec)
	}
	r = tr.Update(system, nil, t0.Add(2*time.Second), time.Time{})
	wantPaths(t, "cleared by another subtree", r.Cleared)
	r = tr.Update(interfaces, nil, t0.Add(3*time.Second), time.Time{})
	wantPaths(t, "cleared", r.Cleared, eth0Desc)
	if tr.Len() != 0 {
		t.Errorf("%d records left", tr.Len())
	}
	r = tr.Update(nil, []drift.Diff{changed(t, eth0Desc, "a", "b")}, t0.Add(4*time.Second), t0.Add(5*time.Second))
	wantPaths(t, "new once more", r.New, eth0Desc)
	if got := r.New[0].Since; !got.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("since %v: a first sign after now counts as now", got)
	}
}

// TestTrackerRevertCap: a drifted path is reverted at each comparison
// that finds it, until it was reverted RevertLimit times within the
// window: then it is capped once (reported only), and reverted again once
// the window has passed.
func TestTrackerRevertCap(t *testing.T) {
	tr := drift.NewTracker(drift.PolicyRevert, 3, 10*time.Minute)
	d := []drift.Diff{changed(t, eth0Desc, "a", "b")}
	p := []*gpb.Path{fixture.Path(t, eth0Desc)}
	now := t0
	for n := 1; n <= 3; n++ {
		r := tr.Update(nil, d, now, time.Time{})
		wantPaths(t, "revert", r.Revert, eth0Desc)
		tr.Reverted(p, now)
		if got := tr.Records()[0].Reverts; got != n {
			t.Errorf("reverts %d, want %d", got, n)
		}
		now = now.Add(time.Minute)
	}
	r := tr.Update(nil, d, now, time.Time{})
	wantPaths(t, "revert past the limit", r.Revert)
	wantPaths(t, "capped", r.Capped, eth0Desc)
	if !tr.Records()[0].Capped {
		t.Error("record not capped")
	}
	r = tr.Update(nil, d, now.Add(time.Minute), time.Time{})
	wantPaths(t, "capped again", r.Capped)
	wantPaths(t, "revert while capped", r.Revert)
	// Cleared and back: the reverts still count within the window.
	tr.Update(nil, nil, now.Add(2*time.Minute), time.Time{})
	r = tr.Update(nil, d, now.Add(3*time.Minute), time.Time{})
	wantPaths(t, "revert when it comes back within the window", r.Revert)
	wantPaths(t, "capped when it comes back", r.Capped, eth0Desc)
	// Past the window.
	r = tr.Update(nil, d, t0.Add(13*time.Minute), time.Time{})
	wantPaths(t, "revert after the window", r.Revert, eth0Desc)
	if tr.Records()[0].Capped {
		t.Error("still capped after the window")
	}
}

// TestTrackerAdopt: drifted paths are adopted; one whose adoption failed
// is not tried again until it drifts differently.
func TestTrackerAdopt(t *testing.T) {
	tr := drift.NewTracker(drift.PolicyAdopt, 3, 10*time.Minute)
	d := []drift.Diff{changed(t, eth0Desc, "a", "b"), changed(t, eth0MTU, "1", "2")}
	r := tr.Update(nil, d, t0, time.Time{})
	wantPaths(t, "adopt", r.Adopt, eth0Desc, eth0MTU)
	tr.AdoptFailed([]*gpb.Path{fixture.Path(t, eth0Desc)})
	r = tr.Update(nil, d, t0.Add(time.Second), time.Time{})
	wantPaths(t, "adopt after a failure", r.Adopt, eth0MTU)
	r = tr.Update(nil, []drift.Diff{changed(t, eth0Desc, "a", "c"), d[1]}, t0.Add(2*time.Second), time.Time{})
	wantPaths(t, "adopt once it drifts differently", r.Adopt, eth0Desc, eth0MTU)
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]drift.Policy{"": drift.PolicyReport, "report": drift.PolicyReport,
		"REVERT": drift.PolicyRevert, "adopt": drift.PolicyAdopt, "off": drift.PolicyOff} {
		if got, err := drift.ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := drift.ParsePolicy("fix"); err == nil {
		t.Error("ParsePolicy(fix) succeeded")
	}
}
