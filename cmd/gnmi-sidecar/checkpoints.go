package main

// The operator commands for checkpoints and changes: journal tag|tags,
// rollback --to (in ops.go, through rollbackTo), and set (with --dry-run
// and --comment). See docs/cli.md.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// parsePoint reads the argument of rollback --to: a proposal index (0:
// before the journal's first change) or a tag name.
func parsePoint(s string) (tag string, index uint64, err error) {
	if s == "" {
		return "", 0, errors.New("name a tag or a proposal index")
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return "", n, nil
	}
	if err := journal.ValidateTagName(s); err != nil {
		return "", 0, errors.New("neither a proposal index nor a tag name (letters, digits, '.', '_', '-')")
	}
	return s, 0, nil
}

// RestoreResult is what `rollback --to` prints in JSON: the sidecar's
// Response (the change that goes back, index 0 if none was needed) and the
// point.
type RestoreResult struct {
	ResponseView
	Tag        string `json:"tag,omitempty"`
	PointIndex uint64 `json:"point_index"`
	Unchanged  bool   `json:"unchanged"`
}

// rollbackTo goes back to a point (rollback --to).
func (o *ops) rollbackTo(ctx context.Context, c gpb.GNMIClient, tag string, index uint64, mode sidecarpb.SetMode, comment string) error {
	point := fmt.Sprintf("proposal %d", index)
	switch {
	case tag != "":
		point = "tag " + tag
	case index == 0:
		point = "before the journal's first change"
	}
	r, _, err := client.RollbackTo(ctx, c, tag, index, mode, comment)
	if err != nil {
		return failed("rollback to "+point, err)
	}
	res := RestoreResult{Tag: r.GetRestored().GetTag(), PointIndex: r.GetRestored().GetPointIndex(), Unchanged: r.GetRestored().GetUnchanged()}
	if v := responseView(r); v != nil {
		res.ResponseView = *v
	}
	if o.json() {
		return o.printJSON(res)
	}
	switch {
	case res.Unchanged:
		_, err = fmt.Fprintf(o.stdout, "nothing to roll back: the configuration is as at %s\n", point)
	case res.Apply == "COMPLETE":
		_, err = fmt.Fprintf(o.stdout, "rolled back to %s: proposal %d undid every later change, applied to the device as one Set\n", point, res.Index)
	default:
		_, err = fmt.Fprintf(o.stdout, "rolling back to %s: proposal %d (commit %s, apply %s)\n", point, res.Index, res.Commit, res.Apply)
	}
	return err
}

// --- journal tag, journal tags ---

func newJournalTagCommand(o *ops) *cobra.Command {
	var del bool
	var comment string
	cmd := o.command(&cobra.Command{
		Use:   "tag NAME [INDEX] | tag --delete NAME",
		Short: "Name a point of the journal, to roll back to it later",
		Long: `tag names a point of the journal NAME: without INDEX the committed
configuration now, with INDEX the configuration right after proposal
INDEX was committed (0: before the journal's first change). Later,
"gnmi-sidecar rollback --to NAME" rolls every change made since back as one
operation, and a gNMI Get with the History extension at the tag's time
(printed, and shown by "journal tags") reads the configuration at the tag.

NAME: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or
digit, not all digits. A name in use fails with exit code 1
(ALREADY_EXISTS); --delete removes a tag (exit code 4 if there is none).
--comment is recorded with the tag. Admin role.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return errors.New("missing the tag's NAME")
		case del && len(args) > 1:
			return errors.New("--delete takes the NAME alone")
		case len(args) > 2:
			return fmt.Errorf("unexpected argument %q", args[2])
		case len(args) == 2:
			if _, err := strconv.ParseUint(args[1], 10, 64); err != nil {
				return fmt.Errorf("invalid proposal index %q: want a non-negative integer", args[1])
			}
		}
		if err := journal.ValidateTagName(args[0]); err != nil {
			return fmt.Errorf("tag name %q: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, not all digits", args[0])
		}
		return nil
	})
	cmd.Flags().BoolVar(&del, "delete", false, "remove the tag NAME")
	cmd.Flags().StringVar(&comment, "comment", "", "why: recorded with the tag")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t := &sidecarpb.Tag{Name: args[0], Delete: del}
		if len(args) == 2 {
			n, _ := strconv.ParseUint(args[1], 10, 64) // checked by Args
			t.Index = proto.Uint64(n)
		}
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			what := "tag " + t.GetName()
			if del {
				what = "delete tag " + t.GetName()
			}
			info, err := client.Tag(ctx, c, t, comment)
			if err != nil {
				return failed(what, err)
			}
			ts := tagInfoState(info)
			if o.json() {
				return o.printJSON(ts)
			}
			if del {
				_, err = fmt.Fprintf(o.stdout, "deleted tag %s (it named proposal %d)\n", ts.Name, ts.Index)
				return err
			}
			_, err = fmt.Fprintf(o.stdout, "tagged proposal %d as %s (History snapshot time %d, %s)\n",
				ts.Index, ts.Name, ts.HistoryTime, ts.Time.UTC().Format(time.RFC3339Nano))
			return err
		})
	}
	return cmd
}

// tagInfoState is the extension's answer to a tag Set as `journal tags`
// shows a tag.
func tagInfoState(t *sidecarpb.TagInfo) TagState {
	return TagState{
		Name:        t.GetName(),
		Index:       t.GetIndex(),
		Time:        time.Unix(0, t.GetTime()).UTC(),
		HistoryTime: t.GetTime(),
		Created:     time.Unix(0, t.GetCreated()).UTC(),
		Author:      t.GetAuthor(),
		Comment:     t.GetComment(),
		Restorable:  t.GetRestorable(),
	}
}

// TagList is what `journal tags -o json` prints.
type TagList struct {
	Tags []TagState `json:"tags"`
}

func newJournalTagsCommand(o *ops) *cobra.Command {
	cmd := o.command(&cobra.Command{
		Use:   "tags",
		Short: "List the named points of the journal",
		Long: `tags lists the tags, by name: NAME, INDEX (the proposal after whose commit
the point is), TIME (UTC; HISTORY TIME is the same in nanoseconds, for a
gNMI History snapshot), AUTHOR, RESTORABLE (whether the journal still
keeps the history "rollback --to NAME" needs) and COMMENT.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.NoArgs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			tags, err := fetchTags(ctx, c)
			if err != nil {
				return failed("list the tags", err)
			}
			if o.json() {
				return o.printJSON(TagList{Tags: tags})
			}
			if len(tags) == 0 {
				_, err := fmt.Fprintln(o.stdout, "no tags (gnmi-sidecar journal tag NAME makes one)")
				return err
			}
			tw := newTable(o.stdout)
			fmt.Fprintln(tw, "NAME\tINDEX\tTIME\tHISTORY TIME\tAUTHOR\tRESTORABLE\tCOMMENT")
			for _, t := range tags {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%t\t%s\n", t.Name, t.Index, fmtTime(t.Time), t.HistoryTime,
					orDash(truncate(t.Author, maxAuthorWidth)), t.Restorable, truncate(t.Comment, maxCommentWidth))
			}
			return tw.Flush()
		})
	}
	return cmd
}

// --- set ---

// SetResult is what `set -o json` prints: the sidecar's Response.
type SetResult struct {
	*ResponseView
}

// DryRunResult is what `set --dry-run -o json` prints: the leaf-level
// changes the Set would make, in path order (empty: none), and whether its
// values were checked against the device's YANG.
type DryRunResult struct {
	DryRun        bool        `json:"dry_run"`
	Diff          []DiffEntry `json:"diff"`
	SchemaChecked bool        `json:"schema_checked"`
}

func newSetCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	var updates, replaces, unionReplaces, deletes []string
	var encoding, comment, commitID string
	var dryRun, async, commitRequest bool
	var rollbackDuration time.Duration
	cmd := o.command(&cobra.Command{
		Use:   "set [--update PATH=JSON]... [--replace PATH=JSON]... [--union-replace PATH=JSON]... [--delete PATH]... [--commit-request --commit-id ID --rollback-duration D]",
		Short: "Send a gNMI Set through the sidecar, with a comment, or as a dry run",
		Long: `set sends one gNMI SetRequest through the sidecar: its deletes, then its
replaces, then its union_replaces (gNMI 0.10: the union of their values
replaces the data at each of their paths), then its updates. PATH is a gNMI path
string (/interfaces/interface[name=eth0]/config/mtu; ORIGIN:/... for an
origin); JSON is the value as JSON text, sent as JSON_IETF (--encoding
json: JSON): a string needs its quotes, e.g.
  --update '/system/config/hostname="core-1"'
  --update '/interfaces/interface[name=eth0]/config={"mtu":9000,"description":"uplink"}'

By default it returns once the device applied the change (--async: once
it is committed in the journal) and prints the proposal's index and
statuses. --comment is recorded with the proposal (journal list, journal
show), like a commit message.

--dry-run validates the Set as the sidecar would, and prints the
leaf-level changes it would make to the committed configuration ("- PATH:
OLD", "+ PATH: NEW"), without journaling or applying anything: every leaf
a Delete or Replace removes, with its value, and a path it removes where
the journal holds nothing shows as "- PATH: (whatever the device holds
there...)". With the device's YANG (serve --yang) it also refuses, as the
device would, a path or a value the schema does not allow; without it,
a note on stderr says the values were not checked. A Set the device
refuses fails with exit code 1 and the device's message.

--commit-request starts a commit-confirmed change (gNMI's commit-confirmed
extension, with gnmic's flag names): the change is rolled back by itself
after --rollback-duration unless "gnmi-sidecar commit confirm ID" comes
first (--commit-id names it; "commit cancel ID" rolls it back at once).

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.NoArgs)
	o.cfg.addFlags(cmd.Flags())
	cmd.Flags().StringArrayVar(&updates, "update", nil, "PATH=JSON to merge in (repeatable)")
	cmd.Flags().StringArrayVar(&replaces, "replace", nil, "PATH=JSON to replace (repeatable)")
	cmd.Flags().StringArrayVar(&unionReplaces, "union-replace", nil, "PATH=JSON to union_replace (repeatable: the union of all replaces the data at each PATH)")
	cmd.Flags().StringArrayVar(&deletes, "delete", nil, "PATH to delete (repeatable)")
	cmd.Flags().StringVar(&encoding, "encoding", "json_ietf", "encoding of the values: json_ietf or json")
	cmd.Flags().StringVar(&comment, "comment", "", "why: recorded with the proposal (at most 1024 bytes, one line)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what the Set would change; journal and apply nothing")
	cmd.Flags().BoolVar(&async, "async", false, "return once the Set is committed in the journal, before the device applied it")
	cmd.Flags().BoolVar(&commitRequest, "commit-request", false, "start a commit-confirmed change: rolled back after --rollback-duration unless confirmed (commit confirm ID)")
	cmd.Flags().StringVar(&commitID, "commit-id", "", "the commit-confirmed's id (with --commit-request)")
	cmd.Flags().DurationVar(&rollbackDuration, "rollback-duration", 0, "how long the commit-confirmed waits for its confirm before it is rolled back (with --commit-request; 0: the sidecar's default)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req, err := buildSetRequest(updates, replaces, unionReplaces, deletes, encoding)
		if err != nil {
			return o.usage(cmd, err)
		}
		if dryRun && async {
			return o.usage(cmd, errors.New("--dry-run applies nothing: --async means nothing with it"))
		}
		switch {
		case commitRequest && commitID == "":
			return o.usage(cmd, errors.New("--commit-request needs --commit-id: the id to confirm or cancel it by"))
		case !commitRequest && (commitID != "" || cmd.Flags().Changed("rollback-duration")):
			return o.usage(cmd, errors.New("--commit-id and --rollback-duration go with --commit-request"))
		case commitRequest && dryRun:
			return o.usage(cmd, errors.New("--dry-run journals nothing: there would be nothing to confirm (dry-run the change without --commit-request)"))
		case rollbackDuration < 0:
			return o.usage(cmd, fmt.Errorf("--rollback-duration %v: must not be negative", rollbackDuration))
		}
		if commitRequest {
			commit := &gnmi_ext.Commit{Id: commitID, Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{}}}
			if rollbackDuration > 0 {
				commit.GetCommit().RollbackDuration = durationpb.New(rollbackDuration)
			}
			req.Extension = append(req.Extension, &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: commit}})
		}
		r := &sidecarpb.Request{Comment: comment, DryRun: dryRun}
		if async {
			r.Mode = sidecarpb.SetMode_SET_MODE_ASYNC
		}
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			what := "set"
			if dryRun {
				what = "set --dry-run"
				// A device that ignores the sidecar's extension would
				// apply a "dry run": make sure the target is a sidecar.
				if _, err := fetchConfiguration(ctx, c); err != nil {
					switch status.Code(err) {
					case codes.Unavailable, codes.DeadlineExceeded, codes.Unauthenticated, codes.PermissionDenied:
						// Unreachable, or a sidecar (or a device) refusing
						// the credentials: not "not a sidecar".
						return failed(what, err)
					}
					return &exitError{code: exitUnreachable, err: fmt.Errorf(
						"%s: the target does not serve the origin gnmi-sidecar (%v): it is not a gnmi-sidecar, and a device would apply the Set; nothing was sent", what, err)}
				}
			}
			resp, err := c.Set(ctx, client.WithRequest(req, r))
			if err != nil {
				return failed(what, err)
			}
			ext, ok, err := client.ResponseOf(resp)
			switch {
			case err != nil:
				return failed(what, err)
			case !ok && dryRun:
				// A target that is not a sidecar ignored the dry run:
				// it may well have applied the Set.
				return &exitError{code: exitFailed, err: fmt.Errorf("%s: the target answered without the sidecar's extension: it is not a gnmi-sidecar, and may have applied the Set", what)}
			case !ok:
				fmt.Fprintln(o.stderr, "gnmi-sidecar: set: the target applied the Set but is not a gnmi-sidecar (no proposal to report)")
				if o.json() {
					return o.printJSON(SetResult{})
				}
				return nil
			case dryRun:
				return o.printSetDiff(ext)
			}
			v := responseView(ext)
			if o.json() {
				return o.printJSON(SetResult{ResponseView: v})
			}
			_, err = fmt.Fprintf(o.stdout, "proposal %d: commit %s, apply %s\n", v.Index, v.Commit, v.Apply)
			return err
		})
	}
	return cmd
}

// noSchemaNote is what set --dry-run says when the sidecar could not check
// the Set's values against the device's YANG.
const noSchemaNote = "gnmi-sidecar: set --dry-run: the values were not checked against the device's YANG (the sidecar runs without --yang): the device may still refuse them"

func (o *ops) printSetDiff(r *sidecarpb.Response) error {
	diff := diffEntries(r.GetDiff())
	if !r.GetSchemaChecked() {
		fmt.Fprintln(o.stderr, noSchemaNote)
	}
	if o.json() {
		return o.printJSON(DryRunResult{DryRun: true, Diff: diff, SchemaChecked: r.GetSchemaChecked()})
	}
	if len(diff) == 0 {
		_, err := fmt.Fprintln(o.stdout, "no changes: the committed configuration holds what this Set writes")
		return err
	}
	return printLeafChanges(o.stdout, diff)
}

// diffEntries is a dry run's answer as DiffEntries.
func diffEntries(changes []*sidecarpb.LeafChange) []DiffEntry {
	diff := make([]DiffEntry, 0, len(changes))
	for _, c := range changes {
		diff = append(diff, DiffEntry{Path: c.GetPath(), Old: newValue(c.GetOld()), New: newValue(c.GetNew()), OldUnknown: c.GetOldUnknown()})
	}
	return diff
}

// RollbackDryRunResult is what `rollback --dry-run -o json` prints: the
// proposal the rollback would roll back (index; 0 for --to), the point
// (--to) and the leaf-level changes it would make, in path order.
type RollbackDryRunResult struct {
	DryRun     bool        `json:"dry_run"`
	Index      uint64      `json:"index,omitempty"`
	Tag        string      `json:"tag,omitempty"`
	PointIndex *uint64     `json:"point_index,omitempty"`
	Unchanged  bool        `json:"unchanged"`
	Diff       []DiffEntry `json:"diff"`
}

// rollbackDryRun prints what a rollback (of proposal index, 0: the newest
// change in effect) or, with to, a rollback to a point would change.
func (o *ops) rollbackDryRun(ctx context.Context, c gpb.GNMIClient, index uint64, to bool, tag string, point uint64) error {
	rb := &sidecarpb.Rollback{Index: index}
	what := "rollback --dry-run"
	if to {
		rb = &sidecarpb.Rollback{ToTag: tag}
		if tag == "" {
			rb.ToIndex = proto.Uint64(point)
		}
		what = "rollback --to --dry-run"
	}
	r, _, err := client.Do(ctx, c, what, &gpb.SetRequest{}, &sidecarpb.Request{Rollback: rb, DryRun: true})
	if err != nil {
		return failed(what, err)
	}
	res := RollbackDryRunResult{DryRun: true, Index: r.GetIndex(), Diff: diffEntries(r.GetDiff()), Unchanged: len(r.GetDiff()) == 0}
	var subject string
	if to {
		res.Tag = r.GetRestored().GetTag()
		res.PointIndex = proto.Uint64(r.GetRestored().GetPointIndex())
		res.Unchanged = r.GetRestored().GetUnchanged()
		subject = fmt.Sprintf("rolling back to proposal %d", r.GetRestored().GetPointIndex())
		if tag != "" {
			subject = fmt.Sprintf("rolling back to tag %s (proposal %d)", tag, r.GetRestored().GetPointIndex())
		}
	} else {
		subject = fmt.Sprintf("rolling back proposal %d", r.GetIndex())
	}
	if o.json() {
		return o.printJSON(res)
	}
	if len(res.Diff) == 0 {
		_, err := fmt.Fprintf(o.stdout, "%s would change nothing: the committed configuration is as it would leave it (dry run: nothing was journaled)\n", subject)
		return err
	}
	if _, err := fmt.Fprintf(o.stdout, "%s would change (dry run: nothing was journaled):\n", subject); err != nil {
		return err
	}
	return printLeafChanges(o.stdout, res.Diff)
}

// buildSetRequest builds the SetRequest of `set`'s flags.
func buildSetRequest(updates, replaces, unionReplaces, deletes []string, encoding string) (*gpb.SetRequest, error) {
	if len(updates)+len(replaces)+len(unionReplaces)+len(deletes) == 0 {
		return nil, errors.New("nothing to set: give --update, --replace, --union-replace or --delete")
	}
	var enc func([]byte) *gpb.TypedValue
	switch strings.ToLower(encoding) {
	case "json_ietf":
		enc = func(b []byte) *gpb.TypedValue {
			return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
		}
	case "json":
		enc = func(b []byte) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}} }
	default:
		return nil, fmt.Errorf("--encoding %q: want json_ietf or json", encoding)
	}
	req := &gpb.SetRequest{}
	for _, s := range deletes {
		p, err := parseGNMIPath(s)
		if err != nil {
			return nil, fmt.Errorf("--delete %q: %w", s, err)
		}
		req.Delete = append(req.Delete, p)
	}
	for _, g := range []struct {
		flag string
		args []string
		dst  *[]*gpb.Update
	}{{"--replace", replaces, &req.Replace}, {"--union-replace", unionReplaces, &req.UnionReplace}, {"--update", updates, &req.Update}} {
		for _, s := range g.args {
			path, val, ok := cutAssignment(s)
			if !ok {
				return nil, fmt.Errorf("%s %q: want PATH=JSON", g.flag, s)
			}
			p, err := parseGNMIPath(path)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", g.flag, s, err)
			}
			if !json.Valid([]byte(val)) {
				return nil, fmt.Errorf("%s %q: the value %q is not JSON (a string needs its quotes: %s='\"text\"')", g.flag, s, val, path)
			}
			*g.dst = append(*g.dst, &gpb.Update{Path: p, Val: enc([]byte(val))})
		}
	}
	return req, nil
}

// cutAssignment splits PATH=VALUE at the first '=' outside the path's
// [key=value] brackets.
func cutAssignment(s string) (path, value string, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character, e.g. \] in a key
		case '[':
			depth++
		case ']':
			depth = max(depth-1, 0)
		case '=':
			if depth == 0 {
				return s[:i], s[i+1:], true
			}
		}
	}
	return "", "", false
}

// parseGNMIPath parses a gNMI path string, ORIGIN:/... for an origin (one
// without / or [).
func parseGNMIPath(s string) (*gpb.Path, error) {
	p, ok, err := parseOriginPath(s, "/[")
	if !ok {
		return nil, errors.New("a path starts with / (or ORIGIN:/)")
	}
	if err != nil {
		return nil, fmt.Errorf("not a gNMI path: %w", err)
	}
	return p, nil
}

// parseOriginPath parses s, "/a/b[k=v]" or "ORIGIN:/a/b[k=v]": ORIGIN is
// what comes before the first ":/", and holds none of the characters of
// notInOrigin. ok is false if s is neither form; err is ygot's if the path
// does not parse.
func parseOriginPath(s, notInOrigin string) (p *gpb.Path, ok bool, err error) {
	origin, path := "", s
	if !strings.HasPrefix(s, "/") {
		o, rest, found := strings.Cut(s, ":/")
		if !found || strings.ContainsAny(o, notInOrigin) {
			return nil, false, nil
		}
		origin, path = o, "/"+rest
	}
	if p, err = ygot.StringToStructuredPath(path); err != nil {
		return nil, true, err
	}
	p.Origin = origin
	return p, true, nil
}

// SyncFromState is what `sync-from -o json` prints.
type SyncFromState struct {
	FirstIndex uint64   `json:"first_index"`
	LastIndex  uint64   `json:"last_index"`
	Units      uint64   `json:"units"`
	Scopes     []string `json:"scopes"`
	ReadMillis float64  `json:"read_ms"`
}

func newSyncFromCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	var comment string
	cmd := o.command(&cobra.Command{
		Use:   "sync-from",
		Short: "Read the device's configuration into the journal as a new baseline",
		Long: `sync-from reads the device's configuration (the sidecar's --managed-paths,
by default the whole tree) and journals it as a baseline: proposals
authored "device", applied without a device Set, and the tag "baseline"
moved to the last of them. From then on the journal holds exactly what the
device holds there: values it held that the device no longer does are
deleted from it, and "gnmi-sidecar rollback --to baseline" returns the
device to what was read. Changes made before it can no longer be rolled
back one by one, nor can a rollback go back past it.

It waits for the device to be connected and every proposal to be finished.
A device that cannot be read fails it with nothing journaled. A new
sidecar in front of a device takes its baseline by itself (serve
--baseline auto). Admin role.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.NoArgs)
	o.cfg.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&comment, "comment", "", "why: recorded with the baseline's proposals")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			r, err := client.SyncFrom(ctx, c, comment)
			if err != nil {
				return failed("sync-from", err)
			}
			st := SyncFromState{FirstIndex: r.GetFirstIndex(), LastIndex: r.GetLastIndex(), Units: r.GetUnits(),
				Scopes: r.GetScopes(), ReadMillis: float64(r.GetReadNanos()) / 1e6}
			if o.json() {
				return o.printJSON(st)
			}
			if st.LastIndex == 0 {
				_, err = fmt.Fprintf(o.stdout, "the device holds no configuration in %s: nothing to journal\n", strings.Join(st.Scopes, ", "))
				return err
			}
			_, err = fmt.Fprintf(o.stdout, "baseline journaled: proposals %d-%d, %d values read from %s in %.1f ms; tagged %s\n",
				st.FirstIndex, st.LastIndex, st.Units, strings.Join(st.Scopes, ", "), st.ReadMillis, journal.BaselineTag)
			return err
		})
	}
	return cmd
}
