package trace

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// ActionClose is the trace line a Tracer writes when the sidecar stops
// cleanly (End), after its journal closed: every transition of the run is
// in the trace. An Open line not preceded by a Close line follows an
// unclean stop (a crash, SIGKILL, power loss).
const ActionClose = "Close"

// PropertyTrace: the trace holds every transition the journal made, except
// the last ones of a run that did not stop cleanly (see Recover).
const PropertyTrace = "Trace"

// stage is one step of a proposal's life, in the order they happen.
type stage int

const (
	stagePropose stage = iota
	stageCommit        // CommitChange or FailCommit
	stageStartApply
	stageFinishApply // CompleteApply, FailApply, AbortApply, or aborted by a FailApply
	stageProposeRollback
	stageCommitRollback
	stageStartApplyRollback
	stageCompleteApplyRollback
)

// stageOf maps a trace action to the stage it records.
var stageOf = map[journal.Action]stage{
	journal.ActionProposeChange:         stagePropose,
	journal.ActionCommitChange:          stageCommit,
	journal.ActionFailCommit:            stageCommit,
	journal.ActionStartApply:            stageStartApply,
	journal.ActionCompleteApply:         stageFinishApply,
	journal.ActionFailApply:             stageFinishApply,
	journal.ActionAbortApply:            stageFinishApply,
	journal.ActionProposeRollback:       stageProposeRollback,
	journal.ActionCommitRollback:        stageCommitRollback,
	journal.ActionStartApplyRollback:    stageStartApplyRollback,
	journal.ActionCompleteApplyRollback: stageCompleteApplyRollback,
	journal.ActionFailApplyRollback:     stageCompleteApplyRollback,
}

// lifeStep is a step the journal's record of a proposal says happened.
type lifeStep struct {
	stage  stage
	action journal.Action
}

// lifeSteps returns the steps proposal p went through, as its record
// (read after the sidecar stopped) tells, in order. Statuses that do not
// name their transition (an aborted commit) are left out.
func lifeSteps(p *journal.Proposal) []lifeStep {
	ch, rb := p.GetChange(), p.GetRollback()
	steps := []lifeStep{{stagePropose, journal.ActionProposeChange}}
	switch ch.GetCommit() {
	case journal.StatusComplete:
		steps = append(steps, lifeStep{stageCommit, journal.ActionCommitChange})
	case journal.StatusFailed:
		steps = append(steps, lifeStep{stageCommit, journal.ActionFailCommit})
	}
	switch ch.GetApply() {
	case journal.StatusInProgress:
		steps = append(steps, lifeStep{stageStartApply, journal.ActionStartApply})
	case journal.StatusComplete:
		steps = append(steps, lifeStep{stageStartApply, journal.ActionStartApply}, lifeStep{stageFinishApply, journal.ActionCompleteApply})
	case journal.StatusFailed:
		steps = append(steps, lifeStep{stageStartApply, journal.ActionStartApply}, lifeStep{stageFinishApply, journal.ActionFailApply})
	case journal.StatusAborted:
		steps = append(steps, lifeStep{stageFinishApply, journal.ActionAbortApply})
	}
	if p.GetPhase() != journal.PhaseRollback {
		return steps
	}
	steps = append(steps, lifeStep{stageProposeRollback, journal.ActionProposeRollback})
	if rb.GetCommit() == journal.StatusComplete {
		steps = append(steps, lifeStep{stageCommitRollback, journal.ActionCommitRollback})
	}
	switch rb.GetApply() {
	case journal.StatusInProgress:
		steps = append(steps, lifeStep{stageStartApplyRollback, journal.ActionStartApplyRollback})
	case journal.StatusComplete:
		steps = append(steps, lifeStep{stageStartApplyRollback, journal.ActionStartApplyRollback},
			lifeStep{stageCompleteApplyRollback, journal.ActionCompleteApplyRollback})
	case journal.StatusFailed:
		steps = append(steps, lifeStep{stageStartApplyRollback, journal.ActionStartApplyRollback},
			lifeStep{stageCompleteApplyRollback, journal.ActionFailApplyRollback})
	}
	return steps
}

// Recover puts back the lines a crash lost, from the journal's proposals
// as they are once the sidecar stopped, so that Check can replay a trace
// that spans SIGKILLs.
//
// The Tracer writes a transition's line after the transition became
// durable, so a sidecar killed in between leaves the transition in the
// journal and not in the trace: the last transitions of the run (those of
// the journal's last write, which the Observer was reporting). Recover
// finds, for every proposal, the steps its record says it went through
// that no line records, and puts each back, marked Recovered, just before
// the first unclean Open (or at the end of a trace that does not end with
// Close) after the line of the proposal's previous step. A lost step must
// come before the line of the proposal's next step, and a lost
// ProposeChange after every traced ProposeChange of a lower index and
// before those of higher ones: any other missing step is a line lost
// without a crash, reported as a Trace violation. The recovered lines then
// go through every check of Check, except that they cannot show the
// configuration the transition left (Term's re-push rule).
//
// A proposal retention removed from the journal has no record: the
// statuses its last traced line left stand in for one (droppedRecords),
// so that a line a crash lost before that line is put back too, and, as
// retention drops only a proposal whose every step finished, so is the
// end of an apply its last line left in progress.
func Recover(lines []Line, proposals []*journal.Proposal) ([]Line, []Violation) {
	dropped, droppedValues := droppedRecords(lines, proposals)
	proposals = append(slices.Clip(proposals), dropped...)
	// Crash points: positions (in lines, from 0) before which lost lines
	// go back; len(lines) stands for the end of a trace not closed.
	var crashes []int
	for n := 1; n < len(lines); n++ {
		if lines[n].Action == ActionOpen && lines[n-1].Action != ActionClose {
			crashes = append(crashes, n)
		}
	}
	if len(lines) > 0 && lines[len(lines)-1].Action != ActionClose {
		crashes = append(crashes, len(lines))
	}

	// Where each step is traced: proposal → stage → position.
	traced := make(map[uint64]map[stage]int)
	mark := func(i uint64, s stage, pos int) {
		m := traced[i]
		if m == nil {
			m = make(map[stage]int)
			traced[i] = m
		}
		if _, ok := m[s]; !ok {
			m[s] = pos
		}
	}
	var proposed []proposedAt    // traced ProposeChange lines, in trace order
	lost := make(map[int][]Line) // crash point → lines to put back
	// A Rebase line makes a proposal's commit pending again: its commit
	// step is the CommitChange after it (floor: the Rebase's position),
	// and a second CommitChange with no Rebase line before it follows a
	// FailApply whose lines a crash lost (lastCommit: the position of the
	// proposal's last CommitChange, -1 once re-based).
	floor := make(map[uint64]int)
	lastCommit := make(map[uint64]int)
	for n, l := range lines {
		switch journal.Action(l.Action) {
		case journal.ActionRebase:
			delete(traced[l.Index], stageCommit)
			floor[l.Index] = n
			lastCommit[l.Index] = -1
			continue
		case journal.ActionCommitChange:
			if at, ok := lastCommit[l.Index]; ok && at >= 0 {
				if crash, ok := firstAfter(crashes, at); ok && crash <= n {
					lost[crash] = append(lost[crash], rebasedLine(l, lines, crash))
					delete(traced[l.Index], stageCommit)
				}
			}
			lastCommit[l.Index] = n
		}
		s, ok := stageOf[journal.Action(l.Action)]
		if !ok || l.Index == 0 {
			continue
		}
		mark(l.Index, s, n)
		if s == stagePropose {
			proposed = append(proposed, proposedAt{l.Index, n})
		}
		for _, k := range l.Aborted {
			mark(k, stageFinishApply, n)
		}
	}

	var violations []Violation
	for _, p := range proposals {
		i := p.GetIndex()
		prev := -1 // position of the previous step (traced or recovered)
		steps := lifeSteps(p)
		for k, st := range steps {
			if pos, ok := traced[i][st.stage]; ok {
				prev = pos
				continue
			}
			after := prev
			if at, ok := floor[i]; ok && st.stage == stageCommit {
				after = max(after, at)
			}
			if st.stage == stagePropose {
				after = lastProposedBelow(proposed, i)
			}
			next, hasNext := nextTraced(traced[i], steps[k+1:])
			if st.stage == stagePropose {
				if pos, ok := firstProposedAbove(proposed, i); ok && (!hasNext || pos < next) {
					next, hasNext = pos, true
				}
			}
			crash, ok := firstAfter(crashes, after)
			if !ok || (hasNext && next < crash) {
				violations = append(violations, Violation{
					Property: PropertyTrace,
					Message: fmt.Sprintf("%s(%d) is in the journal but not in the trace, and no crash explains it "+
						"(the sidecar did not stop uncleanly between its previous and next steps)", st.action, i),
				})
				continue
			}
			l := recoveredLine(p, st, lines, crash)
			if vs, ok := droppedValues[i][st.action]; ok {
				l.Values = vs
			}
			lost[crash] = append(lost[crash], l)
			prev = crash - 1 // the next lost step may be of the same write
		}
	}

	if len(lost) == 0 {
		return lines, violations
	}
	out := make([]Line, 0, len(lines))
	for n := 0; n <= len(lines); n++ {
		if put := lost[n]; len(put) > 0 {
			slices.SortStableFunc(put, func(a, b Line) int {
				if c := cmp.Compare(a.Index, b.Index); c != 0 {
					return c
				}
				return cmp.Compare(stageOf[journal.Action(a.Action)], stageOf[journal.Action(b.Action)])
			})
			out = append(out, put...)
		}
		if n < len(lines) {
			out = append(out, lines[n])
		}
	}
	return out, violations
}

// droppedRecords stands in for the records of the traced proposals older
// than every proposal the journal holds (retention dropped them): each is
// the record its last traced line of its own shows (a step traced implies
// the steps before it, which the journal's guards order), so the lines of
// earlier steps a crash lost are found as for a kept proposal. Retention
// drops only a proposal whose every step finished, so an apply that line
// leaves committed but not finished did finish: as the common case, it
// stands as completed, with the values its commit line wrote (the
// returned map: proposal → action → the values of its recovered line). What
// else such a proposal did after its last traced line is not known, and
// not checked.
func droppedRecords(lines []Line, kept []*journal.Proposal) ([]*journal.Proposal, map[uint64]map[journal.Action][]Value) {
	first := uint64(math.MaxUint64)
	for _, p := range kept {
		first = min(first, p.GetIndex())
	}
	last := make(map[uint64]int)                          // dropped proposal → its last line
	values := make(map[uint64]map[journal.Action][]Value) // dropped proposal → its committed values
	completedBy := map[journal.Action]journal.Action{     // a commit → the apply that writes its values
		journal.ActionCommitChange:   journal.ActionCompleteApply,
		journal.ActionCommitRollback: journal.ActionCompleteApplyRollback,
	}
	for n, l := range lines {
		if _, ok := stageOf[journal.Action(l.Action)]; ok && l.Index != 0 && l.Index < first {
			last[l.Index] = n
			if completes, ok := completedBy[journal.Action(l.Action)]; ok {
				if values[l.Index] == nil {
					values[l.Index] = make(map[journal.Action][]Value)
				}
				values[l.Index][completes] = l.Values
			}
		}
	}
	out := make([]*journal.Proposal, 0, len(last))
	for _, i := range slices.Sorted(maps.Keys(last)) {
		l := lines[last[i]]
		p := &journal.Proposal{Index: i, Phase: journal.PhaseChange,
			Change:   &journal.Change{Commit: statusNamed(l.Commit), Apply: statusNamed(l.Apply)},
			Rollback: &journal.Rollback{Index: l.RollbackIndex, Commit: statusNamed(l.RollbackCommit), Apply: statusNamed(l.RollbackApply)}}
		if l.Phase == journal.PhaseRollback.String() {
			p.Phase = journal.PhaseRollback
		}
		if p.Change.Commit == journal.StatusComplete && journal.Working(p.Change.Apply) {
			p.Change.Apply = journal.StatusComplete
		}
		if p.Phase == journal.PhaseRollback && p.Rollback.Commit == journal.StatusComplete && journal.Working(p.Rollback.Apply) {
			p.Rollback.Apply = journal.StatusComplete
		}
		out = append(out, p)
	}
	return out, values
}

// statusNamed is the status whose String is name (Pending if none is).
func statusNamed(name string) journal.Status {
	for _, s := range []journal.Status{journal.StatusInProgress, journal.StatusComplete, journal.StatusFailed, journal.StatusAborted} {
		if s.String() == name {
			return s
		}
	}
	return journal.StatusPending
}

type proposedAt struct {
	index uint64
	pos   int
}

// lastProposedBelow is the position of the last traced ProposeChange of a
// proposal before i (-1 if none): proposals are numbered as they are
// journaled.
func lastProposedBelow(proposed []proposedAt, i uint64) int {
	pos := -1
	for _, p := range proposed {
		if p.index < i {
			pos = max(pos, p.pos)
		}
	}
	return pos
}

// firstProposedAbove is the position of the first traced ProposeChange of
// a proposal after i.
func firstProposedAbove(proposed []proposedAt, i uint64) (int, bool) {
	for _, p := range proposed {
		if p.index > i {
			return p.pos, true
		}
	}
	return 0, false
}

// nextTraced is the position of the first of steps that is traced.
func nextTraced(traced map[stage]int, steps []lifeStep) (int, bool) {
	for _, st := range steps {
		if pos, ok := traced[st.stage]; ok {
			return pos, true
		}
	}
	return 0, false
}

// firstAfter is the first crash point after position pos.
func firstAfter(crashes []int, pos int) (int, bool) {
	for _, c := range crashes {
		if c > pos {
			return c, true
		}
	}
	return 0, false
}

// rebasedLine is the Rebase line of the proposal committed again by
// commit, lost with the FailApply lines before the crash at lines[at].
func rebasedLine(commit Line, lines []Line, at int) Line {
	l := Line{Action: string(journal.ActionRebase), Index: commit.Index, Recovered: true,
		Phase: journal.PhaseChange.String(), Commit: journal.StatusPending.String(), Apply: journal.StatusPending.String()}
	if at > 0 {
		prev := lines[at-1]
		l.Seq, l.Time, l.Term, l.Conn = prev.Seq, prev.Time, prev.Term, prev.Conn
	}
	return l
}

// recoveredLine is the line step st of proposal p would have had, placed
// before lines[at] (or at the end).
func recoveredLine(p *journal.Proposal, st lifeStep, lines []Line, at int) Line {
	ch, rb := p.GetChange(), p.GetRollback()
	l := Line{Action: string(st.action), Index: p.GetIndex(), Recovered: true,
		Phase: journal.PhaseChange.String(), RollbackIndex: rb.GetIndex()}
	if at > 0 {
		prev := lines[at-1]
		l.Seq, l.Time, l.Term, l.Conn = prev.Seq, prev.Time, prev.Term, prev.Conn
	}
	// The statuses the step left: the record's for the steps it took,
	// Pending (or InProgress) for those to come.
	pending, inProgress := journal.StatusPending.String(), journal.StatusInProgress.String()
	l.Commit, l.Apply = pending, pending
	if st.stage >= stageCommit {
		l.Commit = ch.GetCommit().String()
	}
	switch {
	case st.stage >= stageFinishApply:
		l.Apply = ch.GetApply().String()
	case st.stage == stageStartApply:
		l.Apply = inProgress
	}
	if st.stage >= stageProposeRollback {
		l.Phase = journal.PhaseRollback.String()
		l.RollbackCommit, l.RollbackApply = pending, pending
		if st.stage >= stageCommitRollback {
			l.RollbackCommit = rb.GetCommit().String()
		}
		switch {
		case st.stage == stageCompleteApplyRollback:
			l.RollbackApply = rb.GetApply().String()
		case st.stage == stageStartApplyRollback:
			l.RollbackApply = inProgress
		}
	}
	switch st.action {
	case journal.ActionCommitChange, journal.ActionCompleteApply:
		l.Values = traceValues(ch.GetValues())
	case journal.ActionCommitRollback, journal.ActionCompleteApplyRollback, journal.ActionFailApplyRollback:
		l.Values = traceValues(rb.GetValues())
	case journal.ActionFailCommit, journal.ActionFailApply:
		if err := ch.GetError(); err != nil {
			l.Error = &Error{Code: err.GetCode(), Message: err.GetMessage()}
		}
	}
	return l
}
