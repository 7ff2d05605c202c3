package main

// The operator commands of drift detection (docs/drift.md): drift, the
// paths the sidecar's watcher found changed on the device behind its back
// (introspection drift/), and diff, a fresh comparison of the device with
// the journal (introspection diff/). Both exit 6 when the device differs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/spf13/cobra"

	"github.com/gnmi-sidecar/gnmi-sidecar/introspection"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// exitDifferences is the exit code of drift and diff when the device's
// configuration differs from the journal's.
const exitDifferences = 6

// errDifferences ends drift and diff with exitDifferences; the table or
// JSON already said what differs, so nothing more is printed.
var errDifferences = errors.New("the device's configuration differs from the journal's")

// DiffPath is one path where the device differs from the journal
// (diff/path[path=P]/state).
type DiffPath struct {
	Path           string  `json:"path"`
	Kind           string  `json:"kind"` // CHANGED, MISSING or RECREATED
	JournalValue   *Value  `json:"journal_value,omitempty"`
	JournalDeleted bool    `json:"journal_deleted"`
	DeviceValue    *Value  `json:"device_value,omitempty"`
	DeviceAbsent   bool    `json:"device_absent"`
	Proposal       *uint64 `json:"proposal,omitempty"`
}

// Journal is the JOURNAL column: the journal's value, "(deleted)".
func (d *DiffPath) Journal(max int) string {
	if d.JournalDeleted || d.JournalValue == nil {
		return "(deleted)"
	}
	return truncate(cellText(d.JournalValue), max)
}

// Device is the DEVICE column: the device's value, "(absent)".
func (d *DiffPath) Device(max int) string {
	if d.DeviceAbsent || d.DeviceValue == nil {
		return "(absent)"
	}
	return truncate(cellText(d.DeviceValue), max)
}

// cellText is Value.Text, except that a JSON string shows as the string:
// the device answers a Get in JSON, so its "hacked" and the journal's
// string hacked read alike.
func cellText(v *Value) string {
	var s string
	if raw := valueJSON(v.TV); (v.TV.GetJsonIetfVal() != nil || v.TV.GetJsonVal() != nil) && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return v.Text()
}

// DriftPath is a drifted path as the watcher keeps it
// (drift/path[path=P]/state).
type DriftPath struct {
	DiffPath
	Since   time.Time `json:"since,omitzero"`
	Reverts uint64    `json:"reverts"`
	Capped  bool      `json:"capped,omitempty"`
}

// DriftView is what `gnmi-sidecar drift` shows: drift/.
type DriftView struct {
	Policy     string    `json:"policy"`
	Mode       string    `json:"mode"`
	Interval   int64     `json:"interval"` // nanoseconds
	Paths      uint64    `json:"paths"`
	LastCheck  time.Time `json:"last_check,omitzero"`
	WatchError string    `json:"watch_error,omitempty"`
	ReadState
	Checks    uint64 `json:"checks"`
	Detected  uint64 `json:"detected"`
	Reverts   uint64 `json:"reverts"`
	Adoptions uint64 `json:"adoptions"`
	// Drift are the drifted paths, in path order.
	Drift []DriftPath `json:"drift"`
}

// DiffView is what `gnmi-sidecar diff` shows: diff/.
type DiffView struct {
	Time  time.Time `json:"time"`
	Paths uint64    `json:"paths"` // all the paths that differ, before any PATH filter
	// Differences are the paths that differ (at or under the PATHs
	// asked for), in path order.
	Differences []DiffPath `json:"differences"`
}

func diffPathOf(m map[string]*gpb.TypedValue) DiffPath {
	return DiffPath{
		Path:           stringOf(m[introspection.Path]),
		Kind:           stringOf(m[introspection.Kind]),
		JournalValue:   newValue(m[introspection.JournalValue]),
		JournalDeleted: boolOf(m[introspection.JournalDeleted]),
		DeviceValue:    newValue(m[introspection.DeviceValue]),
		DeviceAbsent:   boolOf(m[introspection.DeviceAbsent]),
		Proposal:       optUint(m[introspection.Proposal]),
	}
}

// fetchDriftTree reads the whole subtree container (drift or diff) in one
// Get and returns its state leaves and its entries' state leaves by path.
func fetchDriftTree(ctx context.Context, c gpb.GNMIClient, container string) (map[string]*gpb.TypedValue, map[string]map[string]*gpb.TypedValue, error) {
	leaves, err := getIntrospection(ctx, c, []*gpb.PathElem{elem(container)})
	if err != nil {
		return nil, nil, err
	}
	return stateLeaves(leaves, container), entriesOf(leaves, introspection.Path, introspection.Path), nil
}

func fetchDrift(ctx context.Context, c gpb.GNMIClient) (*DriftView, error) {
	st, entries, err := fetchDriftTree(ctx, c, introspection.Drift)
	if err != nil {
		return nil, err
	}
	v := &DriftView{
		Policy: stringOf(st[introspection.Policy]), Mode: stringOf(st[introspection.Mode]), Interval: intOf(st[introspection.Interval]),
		Paths: uintOf(st[introspection.Paths]), LastCheck: timeOf(st[introspection.LastCheck]), WatchError: stringOf(st[introspection.WatchError]),
		Checks: uintOf(st[introspection.Checks]), Detected: uintOf(st[introspection.Detected]),
		Reverts: uintOf(st[introspection.Reverts]), Adoptions: uintOf(st[introspection.Adoptions]),
		ReadState: readState(st), Drift: []DriftPath{},
	}
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		m := entries[k]
		d := DriftPath{DiffPath: diffPathOf(m), Since: timeOf(m[introspection.Since]), Reverts: uintOf(m[introspection.Reverts]),
			Capped: boolOf(m[introspection.Capped])}
		if d.Path == "" {
			d.Path = k
		}
		v.Drift = append(v.Drift, d)
	}
	return v, nil
}

// fetchDiff reads diff/, keeping the differences at or under one of
// paths (all of them when paths is empty).
func fetchDiff(ctx context.Context, c gpb.GNMIClient, paths []*gpb.Path) (*DiffView, error) {
	st, entries, err := fetchDriftTree(ctx, c, introspection.Diff)
	if err != nil {
		return nil, err
	}
	v := &DiffView{Time: timeOf(st[introspection.Time]), Paths: uintOf(st[introspection.Paths]), Differences: []DiffPath{}}
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		d := diffPathOf(entries[k])
		if d.Path == "" {
			d.Path = k
		}
		if len(paths) > 0 {
			p, err := parsePathArg(d.Path)
			if err != nil || !slices.ContainsFunc(paths, func(q *gpb.Path) bool { return journal.IsUnder(p, q) }) {
				continue
			}
		}
		v.Differences = append(v.Differences, d)
	}
	return v, nil
}

// parsePathArg parses a path as the sidecar renders it: "/a/b[k=v]", or
// "origin:/a/..." with an origin (one without ':').
func parsePathArg(s string) (*gpb.Path, error) {
	p, ok, err := parseOriginPath(s, ":")
	if !ok {
		return nil, fmt.Errorf("path %q: want an absolute path, /a/b[k=v] or origin:/a/b", s)
	}
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", s, err)
	}
	if err := journal.ValidatePath(p); err != nil {
		return nil, fmt.Errorf("path %q: %w", s, err)
	}
	return p, nil
}

func newDriftCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	cmd := o.command(&cobra.Command{
		Use:   "drift",
		Short: "Show the paths changed on the device behind the sidecar's back",
		Long: `drift prints the paths where the sidecar's drift watcher found the device's
configuration differing from the journal's applied configuration (changed by
someone else: a CLI session, another management system), one row each:
PATH, JOURNAL (the journal's value, "(deleted)" when the journal deletes the
path), DEVICE (the device's value, "(absent)" when it holds nothing there) and
SINCE (when the sidecar first saw it, UTC), after a line with the policy
(--drift-policy of serve), how the device is watched (on-change or poll) and
when the configuration was last compared. What the sidecar does about drift
depends on the policy: report, revert or adopt (docs/drift.md).

It exits 6 when paths drift, 0 when none does, and 3 when the sidecar cannot
tell: the device's configuration cannot be read (the device refuses every kind
of read the sidecar tries, or cannot be reached) or the device cannot be
watched; a line says why, and the drifted paths shown are the last known.

What next, under --drift-policy report: "gnmi-sidecar resolve revert
PATH...|--all" puts the journal's values back on the device; "gnmi-sidecar
resolve adopt PATH..." makes the device's values the journal's.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.NoArgs)
	o.cfg.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runDiffering(o, cmd, "read the drift watcher's state", fetchDrift,
			func(v *DriftView) bool { return len(v.Drift) > 0 }, driftUnknown, printDrift)
	}
	return cmd
}

// runDiffering runs the call of drift and diff: it reads a view with fetch
// (what names the read in its error) and prints it, as JSON or with show,
// then exits 3 (exitUnreachable) if unknown says why the view tells
// nothing of the device now (nil: it does), else 6 (exitDifferences) if
// the view differs.
func runDiffering[V any](o *ops, cmd *cobra.Command, what string, fetch func(context.Context, gpb.GNMIClient) (V, error),
	differs func(V) bool, unknown func(V) error, show func(io.Writer, V) error) error {
	var differ bool
	err := o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
		v, err := fetch(ctx, c)
		if err != nil {
			return failed(what, err)
		}
		differ = differs(v)
		if o.json() {
			err = o.printJSON(v)
		} else {
			err = show(o.stdout, v)
		}
		if err != nil {
			return err
		}
		if why := unknown(v); why != nil {
			return &exitError{code: exitUnreachable, err: fmt.Errorf("%s: %w", cmd.Name(), why)}
		}
		return nil
	})
	if err == nil && differ {
		return &exitError{code: exitDifferences, err: errDifferences}
	}
	return err
}

// driftUnknown says why the watcher's view tells nothing of the device
// now (nil when it does): its configuration cannot be read, or the
// device cannot be watched.
func driftUnknown(v *DriftView) error {
	if err := v.unreadable(); err != nil {
		return err
	}
	if v.WatchError != "" {
		return fmt.Errorf("cannot watch the device: %s", v.WatchError)
	}
	return nil
}

func printDrift(w io.Writer, v *DriftView) error {
	head := fmt.Sprintf("policy: %s  mode: %s", v.Policy, v.Mode)
	if v.Mode == "poll" {
		head += "  interval: " + time.Duration(v.Interval).String()
	}
	head += "  last check: " + fmtTime(v.LastCheck)
	fmt.Fprintln(w, head)
	if v.ReadMethod != "" {
		fmt.Fprintf(w, "read with: %s\n", v.ReadMethod)
	}
	unknown := driftUnknown(v)
	if unknown != nil {
		fmt.Fprintln(w, unknown)
	}
	if len(v.Drift) == 0 {
		if unknown != nil {
			_, err := fmt.Fprintln(w, "drift unknown: nothing is compared until then")
			return err
		}
		_, err := fmt.Fprintln(w, "no drift: the device holds the journal's configuration")
		return err
	}
	if unknown != nil {
		fmt.Fprintln(w, "last known drift:")
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PATH\tJOURNAL\tDEVICE\tSINCE")
	var capped []string
	for _, d := range v.Drift {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Path, d.Journal(maxValueWidth), d.Device(maxValueWidth), fmtTime(d.Since))
		if d.Capped {
			capped = append(capped, d.Path)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range capped {
		fmt.Fprintf(w, "no longer reverted (it keeps coming back): %s\n", p)
	}
	return nil
}

func newDiffCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	cmd := o.command(&cobra.Command{
		Use:   "diff [PATH...]",
		Short: "Compare the device's configuration with the journal's now",
		Long: `diff has the sidecar compare the device's configuration with the journal's
applied configuration now (not the drift watcher's findings: it reads the
device afresh), in every subtree the journal manages, and prints the paths
that differ, at or under PATH if given, one row each: PATH, JOURNAL (the
journal's value, "(deleted)") and DEVICE (the device's value, "(absent)").
The comparison waits until the sidecar is applying nothing (within
--timeout). It reads only: nothing is reverted or adopted.

It exits 6 when paths differ, 0 when none does, 3 when the device's
configuration cannot be read (the message says why: the device refuses every
kind of read the sidecar tries, or cannot be reached).

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(func(_ *cobra.Command, args []string) error {
		for _, a := range args {
			if _, err := parsePathArg(a); err != nil {
				return err
			}
		}
		return nil
	})
	o.cfg.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var paths []*gpb.Path
		for _, a := range args {
			p, _ := parsePathArg(a) // checked by Args
			paths = append(paths, p)
		}
		fetch := func(ctx context.Context, c gpb.GNMIClient) (*DiffView, error) { return fetchDiff(ctx, c, paths) }
		return runDiffering(o, cmd, "compare the device with the journal", fetch,
			func(v *DiffView) bool { return len(v.Differences) > 0 }, func(*DiffView) error { return nil }, printDiff)
	}
	return cmd
}

func printDiff(w io.Writer, v *DiffView) error {
	if len(v.Differences) == 0 {
		_, err := fmt.Fprintf(w, "no differences: the device holds the journal's configuration (compared at %s)\n", fmtTime(v.Time))
		return err
	}
	differ := strconv.Itoa(len(v.Differences)) + " paths differ"
	if len(v.Differences) == 1 {
		differ = "1 path differs"
	}
	fmt.Fprintf(w, "compared at %s: %s\n", fmtTime(v.Time), differ)
	tw := newTable(w)
	fmt.Fprintln(tw, "PATH\tJOURNAL\tDEVICE")
	for _, d := range v.Differences {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Path, d.Journal(maxValueWidth), d.Device(maxValueWidth))
	}
	return tw.Flush()
}
