package trace

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// leafPV is the journal value of a string leaf /name written by proposal index
// ("" for a tombstone).
func leafPV(name string, index uint64, s string) *journal.PathValue {
	v := &journal.PathValue{Path: &gnmi.Path{Elem: []*gnmi.PathElem{{Name: name}}}, Index: index}
	if s == "" {
		v.Deleted = true
	} else {
		v.Value = strVal(s)
	}
	return v
}

// change is a journal record of a change proposal.
func change(i uint64, commit, apply journal.Status, values ...*journal.PathValue) *journal.Proposal {
	return &journal.Proposal{Index: i, Phase: journal.PhaseChange,
		Change: &journalpb.Change{Commit: commit, Apply: apply, Values: values}}
}

// rolledBack makes p a rolled-back proposal, its rollback writing values.
func rolledBack(p *journal.Proposal, values ...*journal.PathValue) *journal.Proposal {
	p.Phase = journal.PhaseRollback
	p.Rollback = &journalpb.Rollback{Commit: journal.StatusComplete, Apply: journal.StatusComplete, Values: values}
	return p
}

// lifecycleJournal is the journal's proposals at the end of lifecycle.
func lifecycleJournal() []*journal.Proposal {
	c, f, a := journal.StatusComplete, journal.StatusFailed, journal.StatusAborted
	return []*journal.Proposal{
		rolledBack(change(1, c, c, leafPV("a", 1, "1")), leafPV("a", 0, "")),
		change(2, c, f, leafPV("b", 2, "2")),
		change(3, c, a, leafPV("c", 3, "3")),
		change(4, f, a),
		rolledBack(change(5, c, c, leafPV("b", 5, "5")), leafPV("b", 0, "")),
	}
}

// without returns lines without those for which drop is true.
func without(lines []Line, drop func(n int, l Line) bool) []Line {
	var out []Line
	for n, l := range lines {
		if !drop(n, l) {
			out = append(out, l)
		}
	}
	return out
}

// is matches the line of action on proposal i.
func is(action journal.Action, i uint64) func(int, Line) bool {
	return func(_ int, l Line) bool { return l.Action == string(action) && l.Index == i }
}

func recoverAndCheck(lines []Line, proposals []*journal.Proposal) (*Report, []Violation) {
	lines, lost := Recover(lines, proposals)
	r := Check(lines)
	r.CheckQuiescent()
	return r, lost
}

// A trace with no line missing is left as it is, an unclean restart or not.
func TestRecoverNothingLost(t *testing.T) {
	lines := lifecycle(t).lines
	got, lost := Recover(lines, lifecycleJournal())
	if len(lost) != 0 || len(got) != len(lines) {
		t.Fatalf("Recover of a whole trace: %d lines (of %d), violations %v", len(got), len(lines), lost)
	}
	closed := append(slices.Clone(lines), Line{Action: ActionClose})
	if got, lost := Recover(closed, lifecycleJournal()); len(lost) != 0 || len(got) != len(closed) {
		t.Fatalf("Recover of a closed trace: %d lines (of %d), violations %v", len(got), len(closed), lost)
	}
}

// The sidecar is killed after proposal 5's commit and start of apply
// became durable, before their lines were written: Check alone reports
// them missing; with Recover the trace checks, the lines put back before
// the Open.
func TestRecoverLinesLostInACrash(t *testing.T) {
	lines := without(lifecycle(t).lines, func(n int, l Line) bool {
		return is(journal.ActionCommitChange, 5)(n, l) || is(journal.ActionStartApply, 5)(n, l)
	})
	if r := Check(lines); len(r.Violations) == 0 {
		t.Fatal("Check alone accepts a trace with lost lines; the test proves nothing")
	}
	r, lost := recoverAndCheck(lines, lifecycleJournal())
	for _, v := range append(lost, r.Violations...) {
		t.Errorf("%v", v)
	}
	if r.Counts.Recovered != 2 {
		t.Errorf("%d lines recovered; want 2", r.Counts.Recovered)
	}
	recovered, _ := Recover(lines, lifecycleJournal())
	var order []string
	for _, l := range recovered {
		if l.Recovered || l.Action == ActionOpen {
			order = append(order, l.Action)
		}
	}
	if want := []string{"Open", "CommitChange", "StartApply", "Open"}; !slices.Equal(order, want) {
		t.Errorf("recovered lines and opens in order %v; want %v", order, want)
	}
}

// The same crash, but retention dropped every proposal by the time the
// journal is read (a long run): the lost lines are put back from the
// statuses proposal 5's later lines left; with a clean stop in their place
// nothing explains them, and they are reported.
func TestRecoverLinesLostInACrashOfDroppedProposals(t *testing.T) {
	lines := without(lifecycle(t).lines, func(n int, l Line) bool {
		return is(journal.ActionCommitChange, 5)(n, l) || is(journal.ActionStartApply, 5)(n, l)
	})
	dropped := []*journal.Proposal{} // the journal holds none of them any more
	r, lost := recoverAndCheck(lines, dropped)
	for _, v := range append(lost, r.Violations...) {
		t.Errorf("%v", v)
	}
	if r.Counts.Recovered != 2 {
		t.Errorf("%d lines recovered; want 2", r.Counts.Recovered)
	}

	second := slices.IndexFunc(lines[1:], func(l Line) bool { return l.Action == ActionOpen }) + 1
	if second == 0 {
		t.Fatal("the lifecycle has one Open")
	}
	clean := slices.Insert(slices.Clone(lines), second, Line{Action: ActionClose})
	if _, lost := Recover(clean, dropped); len(lost) == 0 {
		t.Error("lines missing before a clean stop are not reported")
	}
}

// The sidecar is killed after proposal 2's apply completed and before its
// line was written; retention later dropped proposal 2. Its last line
// leaves its apply in progress, but retention drops only a proposal whose
// every step finished: the completion is put back before the Open, with
// the values its commit wrote, and the next proposal's apply is in order.
// With a clean stop in place of the crash, the missing line is reported.
func TestRecoverTheLostEndOfADroppedProposalsApply(t *testing.T) {
	s := synced()
	s.apply(1, val(t, "/a", 1, "1"))
	s.propose(2).commit(2, val(t, "/b", 2, "2")).startApply(2)
	s.open().connect().reconcile()
	s.apply(3, val(t, "/c", 3, "3"))
	if r := Check(s.lines); len(r.Violations) == 0 {
		t.Fatal("Check alone accepts proposal 3's apply while 2's is in progress; the test proves nothing")
	}
	dropped := []*journal.Proposal{} // retention dropped all three
	r, lost := recoverAndCheck(s.lines, dropped)
	for _, v := range append(lost, r.Violations...) {
		t.Errorf("%v", v)
	}
	if r.Counts.Recovered != 1 {
		t.Errorf("%d lines recovered; want 1", r.Counts.Recovered)
	}
	if got := r.Applied["/b"]; got.Index != 2 {
		t.Errorf("applied /b after the recovered completion: %+v; want proposal 2's value", got)
	}

	crash := slices.IndexFunc(s.lines[1:], func(l Line) bool { return l.Action == ActionOpen }) + 1
	clean := append(slices.Insert(slices.Clone(s.lines), crash, Line{Action: ActionClose}), Line{Action: ActionClose})
	if _, lost := Recover(clean, dropped); len(lost) == 0 {
		t.Error("a completion missing before a clean stop is not reported")
	}
}

// The last lines of a trace that does not end with Close (the sidecar was
// killed, not restarted) are recovered at its end, values included.
func TestRecoverLostAtTheEnd(t *testing.T) {
	lines := lifecycle(t).lines
	lines = lines[:len(lines)-1] // Compact
	if l := lines[len(lines)-1]; l.Action != string(journal.ActionCompleteApplyRollback) || l.Index != 1 {
		t.Fatalf("the lifecycle ends with %s(%d)", l.Action, l.Index)
	}
	lines = lines[:len(lines)-3] // CommitRollback, StartApplyRollback, CompleteApplyRollback of 1
	r, lost := recoverAndCheck(lines, lifecycleJournal())
	for _, v := range append(lost, r.Violations...) {
		t.Errorf("%v", v)
	}
	if r.Counts.Recovered != 3 {
		t.Errorf("%d lines recovered; want 3", r.Counts.Recovered)
	}
	applied := []*journal.PathValue{} // both rolled back: nothing applied
	for _, v := range CheckApplied(r.Applied, applied) {
		t.Errorf("%v", v)
	}
	// A Close line says the sidecar stopped cleanly: then nothing may be
	// missing.
	closed := append(slices.Clone(lines), Line{Action: ActionClose})
	if _, lost := Recover(closed, lifecycleJournal()); len(lost) != 3 {
		t.Errorf("Recover after a clean stop: %v; want 3 Trace violations", lost)
	}
}

// What a crash cannot explain is still reported.
func TestRecoverViolations(t *testing.T) {
	lifecycleLines := lifecycle(t).lines
	// Positions of the Open of the restart, and of the lines around it.
	restart := slices.IndexFunc(lifecycleLines[1:], func(l Line) bool { return l.Action == ActionOpen }) + 1
	tests := []struct {
		name     string
		lines    []Line
		journal  []*journal.Proposal
		wantLost string // a Trace violation Recover reports
		wantProp string // a property Check reports after recovery
	}{{
		name:     "a line lost in the middle of a run",
		lines:    without(lifecycleLines, is(journal.ActionCommitChange, 2)),
		journal:  lifecycleJournal(),
		wantLost: "CommitChange(2) is in the journal but not in the trace, and no crash explains it",
	}, {
		name: "a line lost before a clean stop",
		lines: slices.Concat(lifecycleLines[:restart-1], []Line{{Action: ActionClose}},
			lifecycleLines[restart:]), // StartApply(5) gone, then Close
		journal:  lifecycleJournal(),
		wantLost: "StartApply(5) is in the journal but not in the trace",
	}, {
		name:  "the journal holds more than a trace without a crash showed",
		lines: slices.Concat(synced().apply(1).lines, []Line{{Action: ActionClose}}),
		journal: []*journal.Proposal{
			change(1, journal.StatusComplete, journal.StatusComplete),
			change(2, journal.StatusPending, journal.StatusPending),
		},
		wantLost: "ProposeChange(2) is in the journal but not in the trace",
	}, {
		// A crash may have lost ProposeChange(6), but then the next run
		// would have committed and applied it.
		name:     "a proposal lost in a crash and never finished",
		lines:    slices.Concat(lifecycleLines, []Line{{Action: ActionClose}}),
		journal:  append(lifecycleJournal(), change(6, journal.StatusPending, journal.StatusPending)),
		wantProp: PropertyLiveness,
	}, {
		name: "a lost ProposeChange before a traced later one",
		lines: without(lifecycleLines, func(_ int, l Line) bool {
			return l.Index == 3 // 3 never shows up; 4 is proposed after it
		}),
		journal:  lifecycleJournal(),
		wantLost: "ProposeChange(3) is in the journal but not in the trace",
	}, {
		// The crash can explain the missing CompleteApply(1) (nothing of
		// proposal 1 is traced after it), but put back at the crash it
		// finishes after proposal 2's apply: Order.
		name: "a lost line the order of the trace contradicts",
		lines: without(synced().apply(1).apply(2).open().lines, func(_ int, l Line) bool {
			return l.Action == string(journal.ActionCompleteApply) && l.Index == 1
		}),
		journal: []*journal.Proposal{
			change(1, journal.StatusComplete, journal.StatusComplete),
			change(2, journal.StatusComplete, journal.StatusComplete),
		},
		wantProp: PropertyOrder,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, lost := recoverAndCheck(tt.lines, tt.journal)
			if tt.wantLost != "" {
				found := false
				for _, v := range lost {
					found = found || (v.Property == PropertyTrace && strings.Contains(v.Message, tt.wantLost))
				}
				if !found {
					t.Errorf("Recover: %v; want a Trace violation %q", lost, tt.wantLost)
				}
			}
			if tt.wantProp != "" && !slices.Contains(properties(r.Violations), tt.wantProp) {
				t.Errorf("Check after Recover: %v; want a %s violation", r.Violations, tt.wantProp)
			}
		})
	}
}

// A line cut short by a SIGKILL, with the next run's Open appended to it,
// reads as that Open; a cut last line is dropped; anything else malformed
// is still an error.
func TestReadFileAfterCrashes(t *testing.T) {
	dir := t.TempDir()
	whole := `{"seq":1,"time":"2026-01-01T00:00:00Z","action":"Open","term":1,"conn":1}` + "\n" +
		`{"seq":2,"time":"2026-01-01T00:00:00Z","action":"ProposeChange","index":1,"term":1,"conn":1}` + "\n"
	cutThenOpen := `{"seq":3,"time":"2026-01-01T00:00:00Z","action":"Comm` +
		`{"seq":1,"time":"2026-01-01T00:00:01Z","action":"Open","term":1,"conn":1}` + "\n"
	cutAtEnd := `{"seq":2,"time":"2026-01-01T00:00:01Z","act`
	tests := []struct {
		name     string
		text     string
		want     []string // actions
		wantCut  int
		wantErrs string
	}{
		{"whole", whole, []string{"Open", "ProposeChange"}, 0, ""},
		{"cut, then the next run", whole + cutThenOpen + cutAtEnd, []string{"Open", "ProposeChange", "Open"}, 2, ""},
		{"cut in the middle", whole + `{"seq":3,"act` + "\n" + whole, nil, 0, "line 3"},
		{"cut, then not an Open", whole + `{"seq":3,"act` + `{"seq":1,"action":"Connect"}` + "\n", nil, 0, "line 3"},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(n))
			if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			lines, cut, err := ReadFileAfterCrashes(path)
			if tt.wantErrs != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrs) {
					t.Fatalf("error %v; want one naming %s", err, tt.wantErrs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range lines {
				got = append(got, l.Action)
			}
			if !slices.Equal(got, tt.want) || cut != tt.wantCut {
				t.Errorf("read %v, %d cut; want %v, %d cut", got, cut, tt.want, tt.wantCut)
			}
			if _, err := ReadFile(path); tt.wantCut > 0 && err == nil {
				t.Error("ReadFile accepts a cut line")
			}
		})
	}
}
