package drift

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// Policy is what the sidecar does about drift (--drift-policy).
type Policy string

// The policies.
const (
	// PolicyReport reports drift: the metric, a WARN log line per newly
	// drifted path, introspection and `gnmi-sidecar drift`. The default.
	PolicyReport Policy = "report"
	// PolicyRevert reports it and puts the journal's values back on the
	// device (at most RevertLimit times per path within RevertWindow).
	PolicyRevert Policy = "revert"
	// PolicyAdopt reports it and journals the device's values as an
	// adopted proposal authored "device".
	PolicyAdopt Policy = "adopt"
	// PolicyOff does not watch the device at all (`gnmi-sidecar diff`
	// still compares on request).
	PolicyOff Policy = "off"
)

// Policies lists the policies, as --drift-policy takes them.
var Policies = []Policy{PolicyReport, PolicyRevert, PolicyAdopt, PolicyOff}

// ParsePolicy returns the policy named s ("" is PolicyReport).
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return PolicyReport, nil
	}
	for _, p := range Policies {
		if strings.EqualFold(s, string(p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown drift policy %q: want report, revert, adopt or off", s)
}

// Record is a drifted path as the watcher keeps it.
type Record struct {
	Diff
	// Since is when the sidecar first saw the path drift (this time).
	Since time.Time
	// Reverts counts the reverts of the path within the revert window.
	Reverts int
	// Capped: the path was reverted RevertLimit times within
	// RevertWindow, so it is no longer reverted, only reported.
	Capped bool
	// AdoptFailed: adopting the device's value failed; it is not tried
	// again while the path drifts the same way.
	AdoptFailed bool
}

// Ready is what one comparison means under the policy: for the driver to
// log and carry out.
type Ready struct {
	// New are the paths newly drifted; Cleared those no longer drifted.
	New, Cleared []Record
	// Revert are the drifted paths to put back (PolicyRevert); Capped
	// those that just reached the revert limit (reported only from now).
	Revert, Capped []Record
	// Adopt are the drifted paths whose device values to journal
	// (PolicyAdopt).
	Adopt []Record
}

// Tracker keeps the drifted paths and decides what each comparison means
// (the pure core of the watcher's bookkeeping). Its memory is the drifted
// paths and the paths reverted within the revert window, never the
// configuration. It is not safe for concurrent use.
type Tracker struct {
	policy  Policy
	limit   int
	window  time.Duration
	records map[string]*Record
	reverts map[string][]time.Time // by path key: within window
}

// NewTracker returns a tracker for policy that reverts a path at most
// limit times within window.
func NewTracker(policy Policy, limit int, window time.Duration) *Tracker {
	return &Tracker{policy: policy, limit: limit, window: window, records: map[string]*Record{}, reverts: map[string][]time.Time{}}
}

// Update takes the diffs a comparison of scopes (nil: everything) found at
// now: paths that drift anew are recorded (Since since, when the first
// sign of them came, at the latest now), paths of scopes that no longer
// drift are cleared, and under the policy the drifted paths are to be
// reverted (unless capped) or adopted (unless that failed already for the
// same drift).
func (t *Tracker) Update(scopes []*gpb.Path, diffs []Diff, now, since time.Time) Ready {
	var r Ready
	if since.IsZero() || since.After(now) {
		since = now
	}
	t.prune(now)
	seen := make(map[string]bool, len(diffs))
	for _, d := range diffs {
		k := key(d.Path)
		seen[k] = true
		rec, ok := t.records[k]
		switch {
		case !ok:
			rec = &Record{Diff: d, Since: since}
			t.records[k] = rec
			r.New = append(r.New, *rec)
		case !sameDiff(rec.Diff, d):
			rec.Diff, rec.AdoptFailed = d, false
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.records)) {
		rec := t.records[k]
		if seen[k] || !inScopes(rec.Path, scopes) {
			continue
		}
		delete(t.records, k)
		r.Cleared = append(r.Cleared, *rec)
	}
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		rec := t.records[k]
		rec.Reverts = len(t.reverts[k])
		switch t.policy {
		case PolicyRevert:
			switch {
			case rec.Capped:
			case rec.Reverts >= t.limit:
				rec.Capped = true
				r.Capped = append(r.Capped, *rec)
			default:
				r.Revert = append(r.Revert, *rec)
			}
		case PolicyAdopt:
			if !rec.AdoptFailed {
				r.Adopt = append(r.Adopt, *rec)
			}
		}
	}
	return r
}

// Reverted records that paths were reverted at now.
func (t *Tracker) Reverted(paths []*gpb.Path, now time.Time) {
	for _, p := range paths {
		k := key(p)
		t.reverts[k] = append(t.reverts[k], now)
		if rec := t.records[k]; rec != nil {
			rec.Reverts = len(t.reverts[k])
		}
	}
}

// AdoptFailed records that adopting paths failed: not tried again while
// they drift the same way.
func (t *Tracker) AdoptFailed(paths []*gpb.Path) {
	for _, p := range paths {
		if rec := t.records[key(p)]; rec != nil {
			rec.AdoptFailed = true
		}
	}
}

// prune forgets the reverts older than the window, and the records' cap
// once their reverts are all older.
func (t *Tracker) prune(now time.Time) {
	for k, times := range t.reverts {
		times = slices.DeleteFunc(times, func(at time.Time) bool { return now.Sub(at) >= t.window })
		if len(times) == 0 {
			delete(t.reverts, k)
			if rec := t.records[k]; rec != nil {
				rec.Capped = false
			}
			continue
		}
		t.reverts[k] = times
	}
}

// Records returns the drifted paths, in path order.
func (t *Tracker) Records() []Record {
	out := make([]Record, 0, len(t.records))
	for _, k := range slices.Sorted(maps.Keys(t.records)) {
		out = append(out, *t.records[k])
	}
	return out
}

// Len is the number of drifted paths.
func (t *Tracker) Len() int { return len(t.records) }

// sameDiff reports whether a and b describe the same drift.
func sameDiff(a, b Diff) bool {
	return a.Kind == b.Kind && a.Index == b.Index && sameOptional(a.Journal, b.Journal) && sameOptional(a.Device, b.Device)
}

func sameOptional(a, b *gpb.TypedValue) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameValue(a, b)
}

// inScopes reports whether p lies in one of scopes (nil: everywhere).
func inScopes(p *gpb.Path, scopes []*gpb.Path) bool {
	if scopes == nil {
		return true
	}
	for _, s := range scopes {
		if under(p, s) {
			return true
		}
	}
	return false
}
