package introspection

// Unit tests of the introspection renderer, its paths and its views,
// without a server (introspection_test.go tests them through gNMI).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

// --- fixtures ---

var fixtureTime = time.Unix(1700000000, 0)

func stamp(sec int) *timestamppb.Timestamp {
	return timestamppb.New(fixtureTime.Add(time.Duration(sec) * time.Second))
}
func nanosText(sec int) string {
	return fmt.Sprintf("int:%d", fixtureTime.Add(time.Duration(sec)*time.Second).UnixNano())
}

func strLeaf(s string) *gpb.TypedValue { return text(s) }

// show renders a value compactly for comparisons: "str:x", "uint:3", ...
func showVal(v *gpb.TypedValue) string {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return "str:" + x.StringVal
	case *gpb.TypedValue_UintVal:
		return fmt.Sprintf("uint:%d", x.UintVal)
	case *gpb.TypedValue_IntVal:
		return fmt.Sprintf("int:%d", x.IntVal)
	case *gpb.TypedValue_BoolVal:
		return fmt.Sprintf("bool:%t", x.BoolVal)
	}
	return prototext.Format(v)
}

// flat is leaves as path (below base) → showVal(value).
func flatLeaves(leaves []treeLeaf, base string) map[string]string {
	out := map[string]string{}
	for _, l := range leaves {
		out[strings.TrimPrefix(l.key, base)] = showVal(l.val)
	}
	return out
}

// committedProposal is proposal 2 updating the description from "one"
// (written by proposal 1) to "two" and creating the MTU, applied.
func committedProposal(t testing.TB) *journal.Proposal {
	desc := fixture.Path(t, "/interfaces/interface[name=eth0]/config/description")
	mtu := fixture.Path(t, "/interfaces/interface[name=eth0]/config/mtu")
	return &journal.Proposal{
		Index: 2, Phase: journal.PhaseChange,
		Change: &journal.Change{
			Ops: []*journal.Op{
				{Kind: journal.OpUpdate, Path: desc, Values: []*journal.Leaf{{Path: desc, Value: strLeaf("two")}}},
				{Kind: journal.OpReplace, Path: mtu, Values: []*journal.Leaf{{Path: mtu, Value: scalar(uint64(9000))}}},
			},
			Values: []*journal.PathValue{
				{Path: desc, Index: 2, Value: strLeaf("two")},
				{Path: mtu, Index: 2, Value: scalar(uint64(9000))},
			},
			Commit: journal.StatusComplete, Apply: journal.StatusComplete,
			Proposed: stamp(1), Committed: stamp(2), ApplyStarted: stamp(3), Applied: stamp(4),
		},
		Rollback: &journal.Rollback{Index: 1, Values: []*journal.PathValue{
			{Path: mtu, Deleted: true}, // other order than the change's values
			{Path: desc, Index: 1, Value: strLeaf("one")},
		}},
	}
}

// --- the renderer ---

func TestCodeName(t *testing.T) {
	for code, want := range map[codes.Code]string{
		codes.OK:                 "OK",
		codes.InvalidArgument:    "INVALID_ARGUMENT",
		codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
		codes.FailedPrecondition: "FAILED_PRECONDITION",
		codes.Unavailable:        "UNAVAILABLE",
		codes.Unauthenticated:    "UNAUTHENTICATED",
	} {
		if got := codeName(code); got != want {
			t.Errorf("codeName(%v) = %q, want %q", code, got, want)
		}
	}
}

func TestRenderer(t *testing.T) {
	const state = "/proposals/proposal[index=2]/state/"
	for _, tc := range []struct {
		name   string
		leaves func() []treeLeaf
		base   string
		want   map[string]string
	}{{
		name: "configuration",
		leaves: func() []treeLeaf {
			return configurationLeaves(&journal.Configuration{
				Committed: &journalpb.Committed{Proposal: 5, Index: 4},
				Applied:   &journalpb.Applied{Proposal: 4, Index: 4, Term: 3, Target: 77},
				Status:    journal.StatusComplete, LastIndex: 5, FirstIndex: 2, HistoryFloor: stamp(9), OutOfSync: 2,
			})
		},
		base: "/configuration/state/",
		want: map[string]string{
			"committed-index": "uint:4", "committed-proposal": "uint:5", "applied-index": "uint:4",
			"applied-proposal": "uint:4", "applied-term": "uint:3", "applied-target": "uint:77",
			"status": "str:COMPLETE", "first-index": "uint:2", "last-index": "uint:5", "history-floor": nanosText(9),
			"out-of-sync": "uint:2", "resolutions": "uint:0",
		},
	}, {
		name:   "empty configuration: no rolling-back, no history-floor, no status",
		leaves: func() []treeLeaf { return configurationLeaves(&journal.Configuration{FirstIndex: 1}) },
		base:   "/configuration/state/",
		want: map[string]string{
			"committed-index": "uint:0", "committed-proposal": "uint:0", "applied-index": "uint:0",
			"applied-proposal": "uint:0", "applied-term": "uint:0", "applied-target": "uint:0",
			"first-index": "uint:1", "last-index": "uint:0", "out-of-sync": "uint:0", "resolutions": "uint:0",
		},
	}, {
		name:   "nothing out of sync",
		leaves: func() []treeLeaf { return outOfSyncLeaves(nil) },
		want:   map[string]string{},
	}, {
		name: "a value a rollback could not restore",
		leaves: func() []treeLeaf {
			return outOfSyncLeaves([]*journal.OutOfSync{{
				Value: &journal.PathValue{Path: fixture.Path(t, "/a/b"), Index: 3, Value: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "x"}}},
				Cause: journal.CauseRollback, Proposal: 4, Error: &journalpb.Error{Code: 3, Message: "no"}, Since: stamp(5),
			}})
		},
		base: "/out-of-sync/path[path=/a/b]/state/",
		want: map[string]string{
			"path": "str:/a/b", "deleted": "bool:false", "value": "str:x", "cause": "str:ROLLBACK", "proposal": "uint:4",
			"error-code": "str:INVALID_ARGUMENT", "error-message": "str:no", "since": nanosText(5),
		},
	}, {
		name: "connected device after a re-push",
		leaves: func() []treeLeaf {
			return deviceLeaves("dev:1", agent.Status{Connected: true, Term: 4, LastRepush: fixtureTime,
				LastRepushValues: 12, LastRepushDuration: 3 * time.Millisecond, LastRepushDeviceDuration: 2 * time.Millisecond, LastError: "boom"})
		},
		base: "/device/state/",
		want: map[string]string{
			"address": "str:dev:1", "connected": "bool:true", "term": "uint:4", "repushing": "bool:false",
			"last-repush-time": nanosText(0), "last-repush-values": "uint:12", "last-repush-duration": "int:3000000",
			"last-repush-device-duration": "int:2000000",
			"last-error":                  "str:boom",
			"fenced":                      "bool:false",
		},
	}, {
		name:   "disconnected device: no term",
		leaves: func() []treeLeaf { return deviceLeaves("dev:1", agent.Status{Term: 4, Repushing: true}) },
		base:   "/device/state/",
		want:   map[string]string{"address": "str:dev:1", "connected": "bool:false", "repushing": "bool:true", "fenced": "bool:false"},
	}, {
		name:   "no commit-confirmed",
		leaves: func() []treeLeaf { return commitConfirmLeaves(nil) },
		want:   map[string]string{},
	}, {
		name: "commit-confirmed",
		leaves: func() []treeLeaf {
			return commitConfirmLeaves(&journal.CommitConfirm{Id: "c1", Proposal: 3, Started: stamp(1), Deadline: stamp(60)})
		},
		base: "/commit-confirm/state/",
		want: map[string]string{"id": "str:c1", "proposal": "uint:3", "started": nanosText(1), "deadline": nanosText(60), "cancelled": "bool:false"},
	}, {
		name: "pending proposal: no times but proposed, no changes",
		leaves: func() []treeLeaf {
			p := committedProposal(t)
			p.Change.Commit, p.Change.Apply = journal.StatusPending, journal.StatusPending
			p.Change.Values, p.Rollback = nil, nil
			p.Change.Committed, p.Change.ApplyStarted, p.Change.Applied = nil, nil, nil
			p.Change.Ops = p.Change.Ops[:1]
			return proposalLeaves(p)
		},
		base: "/proposals/proposal[index=2]/",
		want: map[string]string{
			"state/index": "uint:2", "state/phase": "str:CHANGE", "state/commit-status": "str:PENDING",
			"state/apply-status": "str:PENDING", "state/proposed": nanosText(1), "state/operations": "uint:1",
			"operations/operation[seq=1]/state/kind":  "str:UPDATE",
			"operations/operation[seq=1]/state/path":  "str:/interfaces/interface[name=eth0]/config/description",
			"operations/operation[seq=1]/state/value": "str:two",
		},
	}, {
		name:   "applied proposal: operations and changes with previous values",
		leaves: func() []treeLeaf { return proposalLeaves(committedProposal(t)) },
		base:   "/proposals/proposal[index=2]/",
		want: map[string]string{
			"state/index": "uint:2", "state/phase": "str:CHANGE", "state/commit-status": "str:COMPLETE",
			"state/apply-status": "str:COMPLETE", "state/proposed": nanosText(1), "state/committed": nanosText(2),
			"state/apply-started": nanosText(3), "state/applied": nanosText(4), "state/operations": "uint:2",
			"operations/operation[seq=1]/state/kind":                                                              "str:UPDATE",
			"operations/operation[seq=1]/state/path":                                                              "str:/interfaces/interface[name=eth0]/config/description",
			"operations/operation[seq=1]/state/value":                                                             "str:two",
			"operations/operation[seq=2]/state/kind":                                                              "str:REPLACE",
			"operations/operation[seq=2]/state/path":                                                              "str:/interfaces/interface[name=eth0]/config/mtu",
			"operations/operation[seq=2]/state/value":                                                             "uint:9000",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/description]/state/path":             "str:/interfaces/interface[name=eth0]/config/description",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/description]/state/deleted":          "bool:false",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/description]/state/value":            "str:two",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/description]/state/previous-index":   "uint:1",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/description]/state/previous-deleted": "bool:false",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/description]/state/previous-value":   "str:one",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/mtu]/state/path":                     "str:/interfaces/interface[name=eth0]/config/mtu",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/mtu]/state/deleted":                  "bool:false",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/mtu]/state/value":                    "uint:9000",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/mtu]/state/previous-index":           "uint:0",
			"changes/change[path=/interfaces/interface[name\\=eth0\\]/config/mtu]/state/previous-deleted":         "bool:true",
		},
	}, {
		name: "failed proposal: error code and message",
		leaves: func() []treeLeaf {
			p := committedProposal(t)
			p.Change.Apply = journal.StatusFailed
			p.Change.Error = &journalpb.Error{Code: uint32(codes.InvalidArgument), Message: "bad mtu"}
			return slices.DeleteFunc(proposalLeaves(p), func(l treeLeaf) bool { return !strings.HasPrefix(l.key, state) })
		},
		base: state,
		want: map[string]string{
			"index": "uint:2", "phase": "str:CHANGE", "commit-status": "str:COMPLETE", "apply-status": "str:FAILED",
			"proposed": nanosText(1), "committed": nanosText(2), "apply-started": nanosText(3), "applied": nanosText(4), "operations": "uint:2",
			"error-code": "str:INVALID_ARGUMENT", "error-message": "str:bad mtu",
		},
	}, {
		name: "rolled-back proposal: the rollback leaves",
		leaves: func() []treeLeaf {
			p := committedProposal(t)
			p.Phase = journal.PhaseRollback
			rb := p.Rollback
			rb.Commit, rb.Apply = journal.StatusComplete, journal.StatusInProgress
			rb.Proposed, rb.Committed, rb.ApplyStarted = stamp(10), stamp(11), stamp(12)
			return slices.DeleteFunc(proposalLeaves(p), func(l treeLeaf) bool { return !strings.HasPrefix(l.key, state+"rollback-") })
		},
		base: state,
		want: map[string]string{
			"rollback-index": "uint:1", "rollback-commit-status": "str:COMPLETE", "rollback-apply-status": "str:IN_PROGRESS",
			"rollback-proposed": nanosText(10), "rollback-committed": nanosText(11), "rollback-apply-started": nanosText(12),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, flatLeaves(tc.leaves(), tc.base)); diff != "" {
				t.Errorf("leaves (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchemaMatchesRenderer checks that schema lists exactly the
// leaves the renderer produces for records with every field set.
func TestSchemaMatchesRenderer(t *testing.T) {
	p := committedProposal(t)
	p.Phase = journal.PhaseRollback
	p.Change.Error = &journalpb.Error{Code: 3, Message: "x"}
	p.Rollback.Commit, p.Rollback.Apply = journal.StatusComplete, journal.StatusComplete
	p.Rollback.Proposed, p.Rollback.Committed, p.Rollback.ApplyStarted, p.Rollback.Applied = stamp(1), stamp(2), stamp(3), stamp(4)
	p.Rollback.Error = &journalpb.Error{Code: 3, Message: "refused"}
	p.Change.Author, p.Change.Adopted, p.Change.Comment = "alice", true, "why"
	p.Change.Restores = &journal.Restore{Index: 1, Tag: "good"}
	p.Change.Prefix = &gpb.Path{Target: "dev1"}
	p.Rollback.Author, p.Rollback.Comment = "bob", "undo"
	p.Change.CommitActions = []*journal.CommitAction{{Action: journal.CommitActionExtend, Author: "carol", Time: stamp(1)},
		{Action: journal.CommitActionConfirm, Author: "dave", Time: stamp(2)}, {Action: journal.CommitActionCancel, Author: "erin", Time: stamp(3)}}
	var leaves []treeLeaf
	leaves = append(leaves, configurationLeaves(&journal.Configuration{Status: journal.StatusComplete, RollingBack: 2, HistoryFloor: stamp(1), BaselineIndex: 3})...)
	leaves = append(leaves, deviceLeaves("a", agent.Status{Connected: true, Term: 1, LastRepush: fixtureTime, LastError: "e",
		Fenced: true, FencedBy: "f", Retrying: &agent.Retrying{Proposal: 4, Attempts: 2, Since: fixtureTime}})...)
	leaves = append(leaves, commitConfirmLeaves(&journal.CommitConfirm{Id: "c", Started: stamp(1), Deadline: stamp(2),
		Author: "alice", CancelledBy: "bob", ExtendedBy: "carol", Extended: stamp(3)})...)
	leaves = append(leaves, proposalLeaves(p)...)
	leaves = append(leaves, resolutionLeaves([]*journal.Resolution{{Seq: 1, Time: stamp(1), Author: "alice", Action: "SKIP",
		Settled: []*gpb.Path{fixture.Path(t, "/a")}, StillOutOfSync: []*gpb.Path{fixture.Path(t, "/b")}, Proposal: 3}})...)
	leaves = append(leaves, tagLeaves([]tag{{rec: &journal.Tag{Name: "good", Index: 1, Time: stamp(1), Created: stamp(2),
		Author: "alice", Comment: "known good"}, restorable: true}})...)
	leaves = append(leaves, tagDeletionLeaves([]*journal.TagDeletion{{Seq: 2, Tag: &journal.Tag{Name: "old", Index: 1}, Deleted: stamp(3),
		Author: "bob", Comment: "gone"}})...)
	leaves = append(leaves, outOfSyncLeaves([]*journal.OutOfSync{{Value: &journal.PathValue{Path: fixture.Path(t, "/a"),
		Value: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 1}}}, Proposal: 1, Error: &journalpb.Error{Code: 3, Message: "m"}, Since: stamp(1)}})...)
	d := drift.Diff{Path: fixture.Path(t, "/a"), Kind: drift.Changed, Journal: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 1}}, Device: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 2}}, Index: 1}
	leaves = append(leaves, driftLeaves(drift.Status{Policy: drift.PolicyRevert, Mode: drift.ModeOnChange, Interval: time.Second,
		Paths: 1, LastCheck: fixtureTime, WatchError: "e", Checks: 1, ReadMethod: "get-all/JSON", ReadChecked: true, ReadError: "r"}, []drift.Record{{Diff: d, Since: fixtureTime, Reverts: 3, Capped: true}})...)
	leaves = append(leaves, diffLeaves([]drift.Diff{d}, fixtureTime)...)

	rendered := map[string]bool{}
	for _, l := range leaves {
		// Leaf names, list keys replaced by the key name.
		var names []string
		for _, e := range l.path {
			names = append(names, e.GetName())
		}
		rendered[strings.Join(names, "/")] = true
		if _, err := newPattern(nil, &gpb.Path{Elem: l.path}); err != nil {
			t.Errorf("rendered leaf %s does not fit the schema: %v", l.key, err)
		}
	}
	var walk func(n *schemaNode, at string)
	walk = func(n *schemaNode, at string) {
		if len(n.children) == 0 {
			if !rendered[at] {
				t.Errorf("schema leaf %s is never rendered", at)
			}
			return
		}
		for _, c := range n.children {
			walk(c, strings.TrimPrefix(at+"/"+c.name, "/"))
		}
	}
	walk(schema(), "")
}

func TestPatterns(t *testing.T) {
	all := treeSelection{configuration: true, device: true, commitConfirm: true, outOfSync: true, resolutions: true, tags: true, proposals: true, drift: true}
	for _, tc := range []struct {
		path string
		code codes.Code
		msg  string
		sel  treeSelection
	}{
		{path: "/", sel: all},
		{path: "/*/state", sel: all},
		{path: "/.../apply-status", sel: all},
		{path: "/configuration/state/last-index", sel: treeSelection{configuration: true}},
		{path: "/device", sel: treeSelection{device: true}},
		{path: "/commit-confirm/state", sel: treeSelection{commitConfirm: true}},
		{path: "/out-of-sync/path[path=/a]/state", sel: treeSelection{outOfSync: true}},
		{path: "/proposals", sel: treeSelection{proposals: true}},
		{path: "/proposals/proposal/state", sel: treeSelection{proposals: true}},
		{path: "/proposals/proposal[index=*]/state", sel: treeSelection{proposals: true}},
		{path: "/proposals/proposal[index=007]/state", sel: treeSelection{proposals: true, indexes: []uint64{7}}},
		{path: "/proposals/*/state/nosuch", sel: treeSelection{proposals: true}}, // below a wildcard: not checked
		{path: "/nosuch", code: codes.NotFound, msg: `no element "nosuch" at the root of origin gnmi-sidecar (it has configuration, device, commit-confirm, out-of-sync, resolutions, tags, tag-deletions, drift, diff, proposals)`},
		{path: "/tags/tag[name=good]/state", sel: treeSelection{tags: true}},
		{path: "/configuration/stat", code: codes.NotFound, msg: `no element "stat" under /configuration`},
		{path: "/configuration/state/last-index/x", code: codes.NotFound, msg: "last-index is a leaf"},
		{path: "/proposals/proposal[index=x1]", code: codes.InvalidArgument, msg: `key index="x1" is not a number`},
		{path: "/proposals/*[index=-1]", code: codes.InvalidArgument, msg: "not a number"},
		{path: "/proposals/proposal[name=1]", code: codes.InvalidArgument, msg: "proposal has one key, index (not name)"},
		{path: "/configuration[x=1]", code: codes.InvalidArgument, msg: "configuration is not a list"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			p, err := newPattern(&gpb.Path{Origin: Origin}, fixture.Path(t, tc.path))
			if status.Code(err) != tc.code || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("newPattern(%s) = %v, want %v containing %q", tc.path, err, tc.code, tc.msg)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.sel, p.selection(), cmp.AllowUnexported(treeSelection{})); diff != "" {
				t.Errorf("selection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPatternMatches(t *testing.T) {
	leafPath := fixture.Path(t, "/proposals/proposal[index=7]/state/apply-status").GetElem()
	for pat, want := range map[string]bool{
		"/":                                       true,
		"/proposals":                              true,
		"/proposals/proposal[index=7]":            true,
		"/proposals/proposal[index=07]":           true,
		"/proposals/proposal[index=8]":            false,
		"/proposals/proposal[index=*]/state":      true,
		"/proposals/proposal/state/apply-status":  true,
		"/proposals/proposal/state/commit-status": false,
		"/.../apply-status":                       true,
		"/.../state/...":                          true,
		"/*/*/*/apply-status":                     true,
		"/*/apply-status":                         false,
		"/configuration":                          false,
	} {
		p, err := newPattern(nil, fixture.Path(t, pat))
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		if got := p.matches(leafPath); got != want {
			t.Errorf("%s matches %s = %v, want %v", pat, elemsString(leafPath), got, want)
		}
	}
}

// TestPatternMatchesManyAnyDepth: a client may send a path of many "...";
// matching it against a leaf must not take time that grows
// combinatorially with their number.
func TestPatternMatchesManyAnyDepth(t *testing.T) {
	leafPath := fixture.Path(t, "/proposals/proposal[index=7]/state/apply-status").GetElem()
	many := strings.Repeat("/...", 1000)
	for pat, want := range map[string]bool{
		many + "/nosuch":                   false,
		many + "/apply-status":             true,
		many + "/state" + many + "/nosuch": false,
		many + "/proposal[index=7]" + many: true,
	} {
		p, err := newPattern(nil, fixture.Path(t, pat))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.matches(leafPath); got != want {
			t.Errorf("%s…%s matches %s = %v, want %v", pat[:8], pat[len(pat)-20:], elemsString(leafPath), got, want)
		}
	}
}

// --- views ---

// fakeJournal is an in-memory journalReader counting the proposals read.
type fakeJournal struct {
	conf      *journal.Configuration
	proposals map[uint64]*journal.Proposal
	cc        *journal.CommitConfirm
	outOfSync []*journal.OutOfSync
}

func (f *fakeJournal) Configuration(context.Context) (*journal.Configuration, error) {
	return proto.CloneOf(f.conf), nil // a record per read, as the journal's
}

func (f *fakeJournal) Proposal(_ context.Context, i uint64) (*journal.Proposal, error) {
	if p, ok := f.proposals[i]; ok {
		return p, nil
	}
	return nil, journal.ErrNotFound
}

func (f *fakeJournal) Proposals(_ context.Context, from, to uint64, fn func(*journal.Proposal) error) error {
	for i := from; i <= to; i++ {
		if p, ok := f.proposals[i]; ok {
			if err := fn(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *fakeJournal) Resolutions(context.Context, int) ([]*journal.Resolution, error) {
	return nil, nil
}

func (f *fakeJournal) Tags(context.Context) ([]*journal.Tag, error) { return nil, nil }

func (f *fakeJournal) TagDeletions(context.Context) ([]*journal.TagDeletion, error) { return nil, nil }

func (f *fakeJournal) TagRestorable(context.Context, *journal.Tag) (bool, error) { return false, nil }

func (f *fakeJournal) OutOfSync(context.Context) ([]*journal.OutOfSync, error) {
	return f.outOfSync, nil
}

func (f *fakeJournal) CommitConfirm(context.Context) (*journal.CommitConfirm, error) {
	if f.cc == nil {
		return nil, journal.ErrNotFound
	}
	return f.cc, nil
}

// applied is a finished, applied proposal i.
func appliedProposal(i uint64) *journal.Proposal {
	return &journal.Proposal{Index: i, Phase: journal.PhaseChange, Change: &journal.Change{
		Commit: journal.StatusComplete, Apply: journal.StatusComplete},
		Rollback: &journal.Rollback{Index: i - 1}}
}

// newFakeJournal holds n applied proposals.
func newFakeJournal(n uint64) *fakeJournal {
	f := &fakeJournal{proposals: map[uint64]*journal.Proposal{}}
	for i := uint64(1); i <= n; i++ {
		f.proposals[i] = appliedProposal(i)
	}
	f.conf = &journal.Configuration{
		Committed:  &journalpb.Committed{Proposal: n, Index: n},
		Applied:    &journalpb.Applied{Proposal: n, Index: n},
		FirstIndex: 1, LastIndex: n,
	}
	return f
}

// rollBack marks proposal i rolled back, as the journal leaves it.
func (f *fakeJournal) rollBack(i uint64) {
	p := f.proposals[i]
	p.Phase = journal.PhaseRollback
	p.Rollback.Commit, p.Rollback.Apply = journal.StatusComplete, journal.StatusComplete
	f.conf.Committed.Index, f.conf.Applied.Index = p.Rollback.Index, p.Rollback.Index
}

func keysOf(d treeDelta) (updates, deletes []string) {
	for _, l := range d.updates {
		updates = append(updates, l.key+"="+showVal(l.val))
	}
	for _, p := range d.deletes {
		deletes = append(deletes, elemsString(p))
	}
	return updates, deletes
}

// TestViewRereadsOnlyWhatMayHaveChanged follows a journal through
// transitions and checks each refresh's reads and treeDelta.
func TestViewRereadsOnlyWhatMayHaveChanged(t *testing.T) {
	ctx := t.Context()
	f := newFakeJournal(100)
	p, err := newPattern(nil, fixture.Path(t, "/proposals/proposal/state/phase"))
	if err != nil {
		t.Fatal(err)
	}
	v := newView(treeSource{journal: f, status: func() agent.Status { return agent.Status{} }}, []treePattern{p})
	d, err := v.refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.updates) != 100 || v.reads != 100 {
		t.Fatalf("first refresh: %d updates after %d reads, want 100 and 100", len(d.updates), v.reads)
	}

	const phase = "/proposals/proposal[index=%d]/state/phase=str:%s"
	for _, step := range []struct {
		name     string
		change   func()
		maxReads int
		updates  []string
		deletes  []string
	}{{
		name:     "nothing changed: only committed.index is re-read",
		change:   func() {},
		maxReads: 1,
	}, {
		name: "a new pending proposal",
		change: func() {
			f.proposals[101] = &journal.Proposal{Index: 101, Phase: journal.PhaseChange,
				Change: &journal.Change{Commit: journal.StatusPending, Apply: journal.StatusPending}}
			f.conf.LastIndex = 101
		},
		maxReads: 2,
		updates:  []string{fmt.Sprintf(phase, 101, "CHANGE")},
	}, {
		name: "it is applied",
		change: func() {
			f.proposals[101] = appliedProposal(101)
			f.conf.Committed.Index, f.conf.Applied.Index = 101, 101
		},
		maxReads: 2,
	}, {
		name: "two rollbacks and a new commit between refreshes: the chain is followed",
		change: func() {
			f.rollBack(101)
			f.rollBack(100)
			f.proposals[102] = appliedProposal(102)
			f.proposals[102].Rollback.Index = 99
			f.conf.Committed.Index, f.conf.Applied.Index, f.conf.LastIndex = 102, 102, 102
		},
		maxReads: 4,
		updates: []string{fmt.Sprintf(phase, 101, "ROLLBACK"), fmt.Sprintf(phase, 102, "CHANGE"),
			fmt.Sprintf(phase, 100, "ROLLBACK")},
	}, {
		name:     "retention drops 1-50",
		change:   func() { f.conf.FirstIndex = 51 },
		maxReads: 1,
		deletes: func() []string {
			var out []string
			for i := 1; i <= 50; i++ {
				out = append(out, fmt.Sprintf("/proposals/proposal[index=%d]/state/phase", i))
			}
			return out
		}(),
	}} {
		step.change()
		d, err := v.refresh(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		updates, deletes := keysOf(d)
		if diff := cmp.Diff(step.updates, updates); diff != "" {
			t.Errorf("%s: updates (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(step.deletes, deletes); diff != "" {
			t.Errorf("%s: deletes (-want +got):\n%s", step.name, diff)
		}
		if v.reads > step.maxReads {
			t.Errorf("%s: the refresh read %d proposals, want at most %d", step.name, v.reads, step.maxReads)
		}
	}
	if got := len(v.all()); got != 52 {
		t.Errorf("the view holds %d leaves, want 52 (proposals 51-102)", got)
	}
}

func TestViewFixedParts(t *testing.T) {
	f := newFakeJournal(1)
	st := agent.Status{Connected: true, Term: 2}
	pats := func(paths ...string) []treePattern {
		var out []treePattern
		for _, s := range paths {
			p, err := newPattern(nil, fixture.Path(t, s))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return out
	}
	v := newView(treeSource{journal: f, status: func() agent.Status { return st }, address: "dev"},
		pats("/device/state/connected", "/device/state/term", "/commit-confirm"))
	if _, err := v.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.cc = &journal.CommitConfirm{Id: "c1", Proposal: 1}
	st = agent.Status{Term: 2}
	d, err := v.refresh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	updates, deletes := keysOf(d)
	wantUpdates := []string{"/device/state/connected=bool:false", "/commit-confirm/state/id=str:c1",
		"/commit-confirm/state/proposal=uint:1", "/commit-confirm/state/cancelled=bool:false"}
	if diff := cmp.Diff(wantUpdates, updates); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/device/state/term"}, deletes); diff != "" {
		t.Errorf("deletes (-want +got):\n%s", diff)
	}
	f.cc = nil
	d, err = v.refresh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, deletes := keysOf(d); len(deletes) != 3 || len(d.updates) != 0 {
		t.Errorf("commit-confirm cleared: updates %v, deletes %v; want the 3 commit-confirm leaves deleted", d.updates, deletes)
	}
}

// A Subscribe stream not starting with a SubscriptionList never reaches
// Tree.Subscribe through the proxy (it is relayed to the device), but
// Tree.Subscribe refuses one on its own.
func TestIntrospectSubscribeNeedsSubscriptionList(t *testing.T) {
	err := (&Tree{}).Subscribe(t.Context(), nil, &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "SubscriptionList") {
		t.Errorf("Subscribe(Poll first) = %v, want InvalidArgument naming the SubscriptionList", err)
	}
}

// elemsString renders elems as the tree's leaf keys are.
func elemsString(elems []*gpb.PathElem) string { return gnmipath.String(&gpb.Path{Elem: elems}) }
