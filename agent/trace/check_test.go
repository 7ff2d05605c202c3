package trace

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Status and phase names as the Tracer writes them.
const (
	pending    = "STATUS_PENDING"
	inProgress = "STATUS_IN_PROGRESS"
	complete   = "STATUS_COMPLETE"
	aborted    = "STATUS_ABORTED"
	failed     = "STATUS_FAILED"

	phaseChange   = "PHASE_CHANGE"
	phaseRollback = "PHASE_ROLLBACK"
)

// script builds a synthetic trace the way a Tracer writes one, keeping the
// mastership, the re-push status and every proposal's statuses the way the
// journal would. It does not check guards: that is the checker's job.
type script struct {
	lines       []Line
	seq         uint64
	term, conn  uint64
	appliedTerm uint64
	repush      string
	proposals   map[uint64]ProposalStatus
}

func newScript() *script {
	return &script{repush: "STATUS_UNSET", proposals: make(map[uint64]ProposalStatus)}
}

// synced starts a sidecar, connects and re-pushes for term 1.
func synced() *script { return newScript().open().connect().reconcile() }

// emit appends a line for action on proposal i (0: none) with the current
// mastership, configuration and statuses.
func (s *script) emit(action string, i uint64, edit func(*Line)) *script {
	s.seq++
	l := Line{
		Seq: s.seq, Action: action, Index: i, Term: s.term, Conn: s.conn,
		Applied: &Applied{Term: s.appliedTerm}, Status: s.repush,
	}
	if action == ActionOpen || action == string(journal.ActionConnect) {
		l.Applied, l.Status = nil, ""
	}
	if p, ok := s.proposals[i]; ok {
		l.Phase, l.Commit, l.Apply = p.Phase, p.Commit, p.Apply
		l.RollbackCommit, l.RollbackApply = p.RollbackCommit, p.RollbackApply
	}
	if edit != nil {
		edit(&l)
	}
	s.lines = append(s.lines, l)
	return s
}

// set changes proposal i's statuses and emits action.
func (s *script) set(action journal.Action, i uint64, change func(*ProposalStatus), values ...Value) *script {
	p := s.proposals[i]
	change(&p)
	s.proposals[i] = p
	return s.emit(string(action), i, func(l *Line) { l.Values = values })
}

func (s *script) open() *script {
	s.seq = 0
	return s.emit(ActionOpen, 0, nil)
}

// openAt starts a sidecar whose journal has the given mastership.
func (s *script) openAt(term, conn uint64) *script {
	s.term, s.conn = term, conn
	return s.open()
}

func (s *script) connect() *script { return s.connectTo(s.term+1, s.conn+1) }

func (s *script) connectTo(term, conn uint64) *script {
	s.term, s.conn = term, conn
	return s.emit(string(journal.ActionConnect), 0, nil)
}

func (s *script) reconcile() *script {
	s.repush = inProgress
	s.emit(string(journal.ActionStartReconcile), 0, nil)
	s.appliedTerm, s.repush = s.term, complete
	return s.emit(string(journal.ActionCompleteReconcile), 0, nil)
}

func (s *script) propose(i uint64) *script {
	return s.set(journal.ActionProposeChange, i, func(p *ProposalStatus) {
		*p = ProposalStatus{Phase: phaseChange, Commit: pending, Apply: pending}
	})
}

func (s *script) commit(i uint64, values ...Value) *script {
	return s.set(journal.ActionCommitChange, i, func(p *ProposalStatus) { p.Commit = complete }, values...)
}

func (s *script) failCommit(i uint64) *script {
	return s.set(journal.ActionFailCommit, i, func(p *ProposalStatus) { p.Commit = failed })
}

func (s *script) startApply(i uint64) *script {
	return s.set(journal.ActionStartApply, i, func(p *ProposalStatus) { p.Apply = inProgress })
}

func (s *script) completeApply(i uint64, values ...Value) *script {
	return s.set(journal.ActionCompleteApply, i, func(p *ProposalStatus) { p.Apply = complete }, values...)
}

// apply proposes, commits and applies proposal i, writing values.
func (s *script) apply(i uint64, values ...Value) *script {
	return s.propose(i).commit(i, values...).startApply(i).completeApply(i, values...)
}

// failApply records FailApply(i); abort are, in the trace of a sidecar
// before re-basing, the proposals it aborted, whose AbortApply lines come
// later, in their turn.
func (s *script) failApply(i uint64, abort ...uint64) *script {
	s.set(journal.ActionFailApply, i, func(p *ProposalStatus) { p.Apply = failed })
	s.lines[len(s.lines)-1].Aborted = abort
	return s
}

// rebase records the Rebase(i) line of the FailApply before it.
func (s *script) rebase(i uint64) *script {
	return s.set(journal.ActionRebase, i, func(p *ProposalStatus) { p.Commit = pending })
}

func (s *script) abortApply(i uint64) *script {
	return s.set(journal.ActionAbortApply, i, func(p *ProposalStatus) { p.Apply = aborted })
}

func (s *script) proposeRollback(i uint64) *script {
	return s.set(journal.ActionProposeRollback, i, func(p *ProposalStatus) {
		p.Phase, p.RollbackCommit, p.RollbackApply = phaseRollback, pending, pending
	})
}

func (s *script) commitRollback(i uint64, values ...Value) *script {
	return s.set(journal.ActionCommitRollback, i, func(p *ProposalStatus) { p.RollbackCommit = complete }, values...)
}

func (s *script) startApplyRollback(i uint64) *script {
	return s.set(journal.ActionStartApplyRollback, i, func(p *ProposalStatus) { p.RollbackApply = inProgress })
}

func (s *script) completeApplyRollback(i uint64, values ...Value) *script {
	return s.set(journal.ActionCompleteApplyRollback, i, func(p *ProposalStatus) { p.RollbackApply = complete }, values...)
}

// rollback rolls proposal i back, writing values.
func (s *script) rollback(i uint64, values ...Value) *script {
	return s.proposeRollback(i).commitRollback(i, values...).startApplyRollback(i).completeApplyRollback(i, values...)
}

// val is the trace value of a string leaf written by proposal index.
func val(t testing.TB, path string, index uint64, s string) Value {
	t.Helper()
	b, err := protojson.Marshal(strVal(s))
	if err != nil {
		t.Fatal(err)
	}
	return Value{Path: path, Index: index, Value: b}
}

func tomb(path string, index uint64) Value { return Value{Path: path, Index: index, Deleted: true} }

func strVal(s string) *gnmi.TypedValue {
	return &gnmi.TypedValue{Value: &gnmi.TypedValue_StringVal{StringVal: s}}
}

// properties returns the properties the violations name, sorted, once each.
func properties(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Property)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// lifecycle is a trace without violations that goes through every kind of
// transition, with a restart in the middle of an apply.
func lifecycle(t testing.TB) *script {
	s := synced()
	s.apply(1, val(t, "/a", 1, "1"))
	// 2 is rejected by the device and re-bases 3, committed on top of it
	// and writing its path: 3 is committed again and applied.
	s.propose(2).commit(2, val(t, "/b", 2, "2")).propose(3).commit(3, val(t, "/b", 3, "3"))
	s.startApply(2).failApply(2).rebase(3)
	s.commit(3, val(t, "/b", 3, "3")).startApply(3).completeApply(3, val(t, "/b", 3, "3"))
	// 4 does not validate.
	s.propose(4).failCommit(4).abortApply(4)
	// The sidecar restarts while 5 is in progress; the agent completes it
	// after the re-push of the new term.
	s.propose(5).commit(5, val(t, "/b", 5, "5")).startApply(5)
	s.open().connect().reconcile()
	s.completeApply(5, val(t, "/b", 5, "5"))
	s.emit(string(journal.ActionSetCommitConfirm), 5, nil).emit(string(journal.ActionClearCommitConfirm), 5, nil)
	// Rollbacks, newest first.
	s.rollback(5, val(t, "/b", 3, "3"))
	s.rollback(3, tomb("/b", 0))
	s.rollback(1, tomb("/a", 0))
	s.emit(string(journal.ActionCompact), 0, nil)
	return s
}

func TestCheckLifecycle(t *testing.T) {
	r := Check(lifecycle(t).lines)
	r.CheckQuiescent()
	for _, v := range r.Violations {
		t.Errorf("%v", v)
	}
	wantCounts := Counts{
		Lines: 44, Opens: 2, Connects: 2, Repushes: 2, Changes: 5, Applies: 3, Failures: 1, Rollbacks: 3, RolledBack: 3,
	}
	if diff := cmp.Diff(wantCounts, r.Counts); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	wantApplied := map[string]Value{"/a": tomb("/a", 0), "/b": tomb("/b", 0)}
	if diff := cmp.Diff(wantApplied, r.Applied); diff != "" {
		t.Errorf("Applied (-want +got):\n%s", diff)
	}
	wantApply := map[uint64]string{1: complete, 2: failed, 3: complete, 4: aborted, 5: complete}
	for i, want := range wantApply {
		if got := r.Proposals[i].Apply; got != want {
			t.Errorf("proposal %d: apply %s, want %s", i, got, want)
		}
	}
	if got := r.Proposals[5].RollbackApply; got != complete {
		t.Errorf("proposal 5: rollback apply %s, want %s", got, complete)
	}
}

// A trace of a sidecar before re-basing, whose FailApply aborted the
// proposals committed on top of it (the line's aborted list), still
// checks clean.
func TestCheckAbortedTrace(t *testing.T) {
	s := synced()
	s.apply(1, val(t, "/a", 1, "1"))
	s.propose(2).commit(2, val(t, "/b", 2, "2")).propose(3).commit(3, val(t, "/b", 3, "3"))
	s.startApply(2).failApply(2, 3).abortApply(3)
	r := Check(s.lines)
	r.CheckQuiescent()
	for _, v := range r.Violations {
		t.Errorf("%v", v)
	}
	if got := r.Proposals[3].Apply; got != aborted {
		t.Errorf("proposal 3: apply %s, want %s", got, aborted)
	}
}

func TestCheckViolations(t *testing.T) {
	tests := []struct {
		name      string
		build     func(t testing.TB) *script
		quiescent bool
		want      string // the one property violated
		wantMsg   string // in the first violation's message
	}{
		{
			name:    "commits out of index order",
			build:   func(testing.TB) *script { return synced().propose(1).propose(2).commit(2).commit(1) },
			want:    PropertyOrder,
			wantMsg: "CommitChange(1) after the commit of proposal 2",
		},
		{
			name:    "commit of a proposal never proposed",
			build:   func(testing.TB) *script { return synced().commit(1) },
			want:    PropertyOrder,
			wantMsg: "CommitChange(1) with no ProposeChange(1) before it",
		},
		{
			name:    "apply before commit",
			build:   func(testing.TB) *script { return synced().propose(1).startApply(1) },
			want:    PropertyOrder,
			wantMsg: "StartApply(1) with no CommitChange(1) before it",
		},
		{
			name:    "apply completed without being started",
			build:   func(testing.TB) *script { return synced().propose(1).commit(1).completeApply(1) },
			want:    PropertyOrder,
			wantMsg: "CompleteApply(1) with no StartApply(1) before it",
		},
		{
			name: "applies finish out of index order",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).
					startApply(2).completeApply(2).startApply(1).completeApply(1)
			},
			want:    PropertyOrder,
			wantMsg: "apply of proposal 1 finished after the apply of proposal 2",
		},
		{
			name: "an earlier proposal aborted after a later one failed",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).startApply(2).failApply(2).abortApply(1)
			},
			want:    PropertyOrder,
			wantMsg: "apply of proposal 1 finished after the apply of proposal 2",
		},
		{
			name: "a re-based proposal applied before it is committed again",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).startApply(1).failApply(1).rebase(2).startApply(2)
			},
			want:    PropertyOrder,
			wantMsg: "StartApply(2) after a FailApply re-based it and before it was committed again",
		},
		{
			name: "re-based proposals committed again out of index order",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).propose(3).commit(1).commit(2).commit(3).
					startApply(1).failApply(1).rebase(2).rebase(3).commit(3).commit(2)
			},
			want:    PropertyOrder,
			wantMsg: "CommitChange(2) after the commit of proposal 3",
		},
		{
			name: "a proposal committed twice without a re-base",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).startApply(1).failApply(1).commit(2)
			},
			want:    PropertyOrder,
			wantMsg: "CommitChange(2) a second time, and no FailApply re-based it",
		},
		{
			name: "a re-base with no failed apply before it",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).rebase(2)
			},
			want:    PropertyOrder,
			wantMsg: "Rebase(2) not after a FailApply of an earlier proposal",
		},
		{
			name: "a re-based proposal left uncommitted at quiescence",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).startApply(1).failApply(1).rebase(2)
			},
			quiescent: true,
			want:      PropertyLiveness,
			wantMsg:   "proposal 2 is not finished at quiescence",
		},
		{
			name: "two applies at once",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).startApply(1).startApply(2)
			},
			want:    PropertySequential,
			wantMsg: "StartApply(2) while the apply of proposal 1 is in progress",
		},
		{
			name: "an apply stays in progress across a restart",
			build: func(testing.TB) *script {
				return synced().propose(1).propose(2).commit(1).commit(2).startApply(1).
					open().connect().reconcile().startApply(2)
			},
			want:    PropertySequential,
			wantMsg: "StartApply(2) while the apply of proposal 1 is in progress",
		},
		{
			name: "apply during a rollback apply",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).
					proposeRollback(1).commitRollback(1).startApplyRollback(1).
					propose(2).commit(2).startApply(2)
			},
			want:    PropertySequential,
			wantMsg: "StartApply(2) while the rollback apply of proposal 1 is in progress",
		},
		{
			name:    "apply before the re-push of a new term",
			build:   func(testing.TB) *script { return synced().connect().propose(1).commit(1).startApply(1) },
			want:    PropertyTerm,
			wantMsg: "StartApply(1) under term 2, but the configuration was last re-pushed for term 1",
		},
		{
			name: "apply completed after the term moved on",
			build: func(testing.TB) *script {
				return synced().propose(1).commit(1).startApply(1).connect().completeApply(1)
			},
			want:    PropertyTerm,
			wantMsg: "CompleteApply(1) under term 2",
		},
		{
			name: "apply during a re-push",
			build: func(testing.TB) *script {
				s := synced().propose(1).commit(1)
				s.repush = inProgress
				return s.startApply(1)
			},
			want:    PropertyTerm,
			wantMsg: "StartApply(1) while the re-push for term 1 is STATUS_IN_PROGRESS",
		},
		{
			name: "rollback applied before the re-push of a new term",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).proposeRollback(1).commitRollback(1).
					connect().startApplyRollback(1)
			},
			want:    PropertyTerm,
			wantMsg: "StartApplyRollback(1) under term 2",
		},
		{
			name:    "connect reuses a term",
			build:   func(testing.TB) *script { return synced().connectTo(1, 2) },
			want:    PropertyTerm,
			wantMsg: "Connect to term 1, connection 2 after term 1, connection 1",
		},
		{
			name:    "restart loses the mastership",
			build:   func(testing.TB) *script { return synced().connect().openAt(1, 1) },
			want:    PropertyTerm,
			wantMsg: "Open with term 1, connection 1 after term 2, connection 2",
		},
		{
			name: "re-push recorded for another term",
			build: func(testing.TB) *script {
				return synced().connect().emit(string(journal.ActionCompleteReconcile), 0, nil)
			},
			want:    PropertyTerm,
			wantMsg: "CompleteReconcile under term 2 recorded a re-push for term 1",
		},
		{
			name: "rollback of a rollback",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).rollback(1, tomb("/a", 0)).proposeRollback(1)
			},
			want:    PropertyRollbackOrder,
			wantMsg: "ProposeRollback(1) a second time",
		},
		{
			name: "rollback of an older change first",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).apply(2, val(t, "/a", 2, "y")).proposeRollback(1)
			},
			want:    PropertyRollbackOrder,
			wantMsg: "ProposeRollback(1), but proposal 2 is the newest change in effect",
		},
		{
			name:    "rollback of a change never applied",
			build:   func(testing.TB) *script { return synced().propose(1).commit(1).proposeRollback(1) },
			want:    PropertyRollbackOrder,
			wantMsg: "ProposeRollback(1) while no change is in effect",
		},
		{
			name: "rollback committed before it is proposed",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).commitRollback(1)
			},
			want:    PropertyRollbackOrder,
			wantMsg: "CommitRollback(1) with no ProposeRollback(1) before it",
		},
		{
			name: "rollback applied before it is committed",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).proposeRollback(1).startApplyRollback(1)
			},
			want:    PropertyRollbackOrder,
			wantMsg: "StartApplyRollback(1) with no CommitRollback(1) before it",
		},
		{
			name: "rollback apply completed without being started",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).proposeRollback(1).commitRollback(1).completeApplyRollback(1)
			},
			want:    PropertyRollbackOrder,
			wantMsg: "CompleteApplyRollback(1) with no StartApplyRollback(1) before it",
		},
		{
			name: "rollback applied twice",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).rollback(1).completeApplyRollback(1)
			},
			want:    PropertyRollbackOrder,
			wantMsg: "CompleteApplyRollback(1) while no change is in effect",
		},
		{
			name:      "change never applied",
			build:     func(testing.TB) *script { return synced().propose(1).commit(1) },
			quiescent: true,
			want:      PropertyLiveness,
			wantMsg:   "proposal 1 is not finished at quiescence: commit STATUS_COMPLETE, apply STATUS_PENDING",
		},
		{
			name:      "apply left in progress",
			build:     func(testing.TB) *script { return synced().propose(1).commit(1).startApply(1) },
			quiescent: true,
			want:      PropertyLiveness,
			wantMsg:   "apply STATUS_IN_PROGRESS",
		},
		{
			name: "rollback never applied",
			build: func(t testing.TB) *script {
				return synced().apply(1, val(t, "/a", 1, "x")).proposeRollback(1).commitRollback(1)
			},
			quiescent: true,
			want:      PropertyLiveness,
			wantMsg:   "the rollback of proposal 1 is not complete at quiescence: commit STATUS_COMPLETE, apply STATUS_PENDING",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(tt.build(t).lines)
			if tt.quiescent {
				r.CheckQuiescent()
			}
			if got := properties(r.Violations); !slices.Equal(got, []string{tt.want}) {
				t.Fatalf("violated %q, want only %q; violations:\n%s", got, tt.want, render(r.Violations))
			}
			if msg := r.Violations[0].Message; !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", msg, tt.wantMsg)
			}
		})
	}
}

func TestViolationString(t *testing.T) {
	for _, tt := range []struct {
		v    Violation
		want string
	}{
		{Violation{Pos: 7, Seq: 3, Property: PropertyOrder, Message: "m"}, "line 7 (seq 3): Order: m"},
		{Violation{Property: PropertyConsistency, Message: "m"}, "Consistency: m"},
	} {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func render(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String() + "\n")
	}
	return b.String()
}

// TestCheckJournal checks the trace of a real journal driven through a
// change, its rollback, a rejected change that re-bases the one committed
// on top of it, a change that does not validate, and a restart.
func TestCheckJournal(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tracer := NewTracer(&buf)
	dir := t.TempDir()
	j := openJournal(t, dir, tracer)
	d := &driver{t: t, ctx: ctx, j: j}

	term := d.sync()
	i := d.propose("/interfaces/interface[name=eth0]/config/description", "x")
	d.do(j.CommitChange(ctx, i))
	d.do(j.StartApply(ctx, i))
	d.do(j.CompleteApply(ctx, i, term))
	d.do(j.ProposeRollback(ctx, i))
	d.do(j.CommitRollback(ctx, i))
	d.do(j.StartApplyRollback(ctx, i))
	d.do(j.CompleteApplyRollback(ctx, i, term))

	rejected := d.propose("/system/config/hostname", "r1")
	onTop := d.propose("/system/config/hostname", "r1-again")
	d.do(j.CommitChange(ctx, rejected))
	d.do(j.CommitChange(ctx, onTop))
	d.do(j.StartApply(ctx, rejected))
	d.do(j.FailApply(ctx, rejected, 3, "rejected by the device"))
	d.do(j.CommitChange(ctx, onTop))
	d.do(j.StartApply(ctx, onTop))
	d.do(j.CompleteApply(ctx, onTop, term))

	invalid := d.propose("/system/config/hostname", "bad")
	d.do(j.FailCommit(ctx, invalid, 3, "does not validate"))
	d.do(j.AbortApply(ctx, invalid))

	// A restart with a change in progress; it is completed under the next
	// term, after the re-push.
	last := d.propose("/system/config/hostname", "r2")
	d.do(j.CommitChange(ctx, last))
	d.do(j.StartApply(ctx, last))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJournal(t, dir, tracer)
	d.j = j
	term = d.sync()
	d.do(j.CompleteApply(ctx, last, term))

	if err := tracer.Err(); err != nil {
		t.Fatal(err)
	}
	lines, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r := Check(lines)
	r.CheckQuiescent()
	var applied []*journal.PathValue
	if err := j.Applied(ctx, nil, func(pv *journal.PathValue) error {
		applied = append(applied, pv)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.Violations = append(r.Violations, CheckApplied(r.Applied, applied)...)
	for _, v := range r.Violations {
		t.Errorf("%v", v)
	}
	want := Counts{Lines: 33, Opens: 2, Connects: 2, Repushes: 2, Changes: 5, Applies: 3, Failures: 1, Rollbacks: 1, RolledBack: 1}
	if diff := cmp.Diff(want, r.Counts); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if got := r.Proposals[onTop]; got.Commit != complete || got.Apply != complete {
		t.Errorf("proposal %d (committed on top of a rejected one, re-based): commit %s, apply %s, want both %s", onTop, got.Commit, got.Apply, complete)
	}
	if len(applied) != 3 {
		t.Errorf("journal has %d applied values, want 3 (tombstones of the rolled-back interface entry and description, and the hostname)", len(applied))
	}
}

func openJournal(t *testing.T, dir string, tracer *Tracer) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{NoSync: true, Observer: tracer.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	m, err := j.Mastership(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tracer.Begin(m)
	return j
}

// driver runs journal transitions, failing the test on a refused one.
type driver struct {
	t   *testing.T
	ctx context.Context
	j   *journal.Journal
}

// sync connects and re-pushes, and returns the new term.
func (d *driver) sync() uint64 {
	d.t.Helper()
	m, err := d.j.Connect(d.ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.j.StartReconcile(d.ctx, m.Term); err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.j.CompleteReconcile(d.ctx, m.Term, 0); err != nil {
		d.t.Fatal(err)
	}
	return m.Term
}

// propose journals an update of one string leaf and returns its index.
func (d *driver) propose(path, value string) uint64 {
	d.t.Helper()
	p := mustPath(d.t, path)
	op := &journal.Op{Kind: journal.OpUpdate, Path: p, Values: []*journal.Leaf{{Path: p, Value: strVal(value)}}}
	prop, err := d.j.ProposeChange(d.ctx, []*journal.Op{op})
	if err != nil {
		d.t.Fatal(err)
	}
	return prop.GetIndex()
}

// do fails the test if a proposal transition was refused.
func (d *driver) do(_ *journal.Proposal, _ *journal.Configuration, err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatal(err)
	}
}

// TestTraceNamesWhoAsked: the trace's ProposeChange and ProposeRollback
// lines carry the author and comment the journal records, and a change
// that goes back to a tag names it.
func TestTraceNamesWhoAsked(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tracer := NewTracer(&buf)
	j := openJournal(t, t.TempDir(), tracer)
	d := &driver{t: t, ctx: ctx, j: j}
	term := d.sync()
	path, err := ygot.StringToStructuredPath("/system/config/hostname")
	if err != nil {
		t.Fatal(err)
	}
	op := &journal.Op{Kind: journal.OpUpdate, Path: path, Values: []*journal.Leaf{{Path: path,
		Value: &gnmi.TypedValue{Value: &gnmi.TypedValue_StringVal{StringVal: "a"}}}}}
	p, err := j.ProposeChangeBy(ctx, journal.Sender{Author: "alice", Comment: "NET-1"}, []*journal.Op{op})
	if err != nil {
		t.Fatal(err)
	}
	d.do(j.CommitChange(ctx, p.GetIndex()))
	d.do(j.StartApply(ctx, p.GetIndex()))
	d.do(j.CompleteApply(ctx, p.GetIndex(), term))
	if _, _, err := j.ProposeRollbackBy(ctx, p.GetIndex(), journal.Sender{Author: "bob", Comment: "undo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateTag(ctx, "empty", journal.Point{Index: 0}, journal.Sender{}); err != nil {
		t.Fatal(err)
	}
	d.do(j.CommitRollback(ctx, p.GetIndex()))
	d.do(j.StartApplyRollback(ctx, p.GetIndex()))
	d.do(j.CompleteApplyRollback(ctx, p.GetIndex(), term))
	q, err := j.ProposeChangeBy(ctx, journal.Sender{Author: "carol"}, []*journal.Op{op})
	if err != nil {
		t.Fatal(err)
	}
	d.do(j.CommitChange(ctx, q.GetIndex()))
	d.do(j.StartApply(ctx, q.GetIndex()))
	d.do(j.CompleteApply(ctx, q.GetIndex(), term))
	r, err := j.ProposeRestore(ctx, journal.Sender{Author: "dave", Comment: "clean slate"}, journal.Point{Tag: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		if l.Action == string(journal.ActionProposeChange) || l.Action == string(journal.ActionProposeRollback) {
			got = append(got, fmt.Sprintf("%s %d %s %q %s", l.Action, l.Index, l.Author, l.Comment, l.Restores))
		}
	}
	want := []string{
		fmt.Sprintf(`ProposeChange %d alice "NET-1" `, p.GetIndex()),
		fmt.Sprintf(`ProposeRollback %d bob "undo" `, p.GetIndex()),
		fmt.Sprintf(`ProposeChange %d carol "" `, q.GetIndex()),
		fmt.Sprintf(`ProposeChange %d dave "clean slate" tag empty`, r.GetIndex()),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trace lines (-want +got):\n%s", diff)
	}
}
