package trace

import (
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// VerifyOptions selects the checks Verify runs besides Check.
type VerifyOptions struct {
	// Quiescent says the trace ends at rest, so Liveness must hold (see
	// Report.CheckQuiescent).
	Quiescent bool
	// Applied are the journal's applied values (Journal.Applied), compared
	// with the trace's (CheckApplied). nil skips the comparison; pass an
	// empty slice for a journal with no applied values.
	Applied []*journal.PathValue
	// Device is the device's configuration (testbed.Device.ConfigLeaves),
	// checked against Applied, or against the trace's applied values if
	// Applied is nil (CheckDevice). nil skips the check.
	Device map[string]*gnmi.TypedValue
	// OutOfSync are the journal's out-of-sync records (Journal.OutOfSync):
	// the device check leaves their paths out.
	OutOfSync []*journal.OutOfSync
	// DeviceOwnsUnjournaled lets through device leaves that no applied
	// value names: none at the leaf's path, no tombstone or opaque value
	// above it. A sidecar run with --baseline off journals only what its
	// Sets touched; the rest of the device's configuration is the
	// device's own, and the check covers it only where a Set touched it.
	DeviceOwnsUnjournaled bool
	// Proposals are the journal's proposals (Journal.Proposals, read once
	// the sidecar stopped). When set, the lines lost to crashes are put
	// back from them first (Recover), so a trace across SIGKILLs checks;
	// a line cut short by a SIGKILL is then let through
	// (ReadFileAfterCrashes).
	Proposals []*journal.Proposal
}

// maxReported bounds the violations Verify reports one by one.
const maxReported = 20

// Verify checks the trace in the file at path: Check, then the checks opts
// asks for. It reports each violation (the first maxReported of them) as a
// test error, logs the trace's counts, and returns the report.
func Verify(t testing.TB, path string, opts VerifyOptions) *Report {
	t.Helper()
	var lines []Line
	var err error
	if opts.Proposals != nil {
		var cut int
		lines, cut, err = ReadFileAfterCrashes(path)
		if cut > 0 {
			t.Logf("trace %s: %d lines cut short by a crash", path, cut)
		}
	} else {
		lines, err = ReadFile(path)
	}
	if err != nil {
		t.Fatalf("%v", err)
		return nil
	}
	var lost []Violation
	if opts.Proposals != nil {
		lines, lost = Recover(lines, opts.Proposals)
	}
	r := Check(lines)
	r.Violations = append(lost, r.Violations...)
	if opts.Quiescent {
		r.CheckQuiescent()
	}
	if opts.Applied != nil {
		r.Violations = append(r.Violations, CheckApplied(r.Applied, opts.Applied)...)
	}
	if opts.Device != nil {
		applied := opts.Applied
		if applied == nil {
			if applied, err = r.AppliedValues(); err != nil {
				t.Fatalf("%v", err)
				return nil
			}
		}
		violations, stats := checkDevice(applied, opts.Device, opts.OutOfSync, opts.DeviceOwnsUnjournaled)
		r.Violations = append(r.Violations, violations...)
		t.Logf("trace %s: checked %d device leaves against %d applied values (%d opaque values and container markers not compared)",
			path, len(opts.Device), stats.compared, stats.opaque)
	}
	t.Logf("trace %s: %v", path, r.Counts)
	for n, v := range r.Violations {
		if n == maxReported {
			t.Errorf("trace %s: %d more violations", path, len(r.Violations)-n)
			break
		}
		t.Errorf("trace %s: %v", path, v)
	}
	return r
}
