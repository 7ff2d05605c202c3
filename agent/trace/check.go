package trace

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// The properties of docs/design.md §3 that a Violation names.
const (
	// PropertyOrder: commits and apply finishes go in index order, and
	// nothing is applied before it is committed.
	PropertyOrder = "Order"
	// PropertySequential: at most one apply, of a change or of a rollback,
	// is in progress at a time.
	PropertySequential = "Sequential"
	// PropertyRollbackOrder: rollbacks go newest first, each step after the
	// one before it, and a rollback is never rolled back.
	PropertyRollbackOrder = "RollbackOrder"
	// PropertyTerm: terms and connection ids only grow, and nothing is
	// applied under a term before the configuration is re-pushed for it.
	PropertyTerm = "Term"
	// PropertyConsistency: the journal's applied values are the ones the
	// trace wrote, and the device holds them.
	PropertyConsistency = "Consistency"
	// PropertyLiveness: at quiescence every proposal and every rollback is
	// finished.
	PropertyLiveness = "Liveness"
)

// Violation is one breach of a property.
type Violation struct {
	// Pos is the position of the offending line in the trace, from 1 (the
	// line number of a trace file), or 0 if the violation is not about a
	// line. Seq alone does not identify a line: it restarts at every Open.
	Pos      int
	Seq      uint64
	Property string
	Message  string
}

// String renders the violation for a test log.
func (v Violation) String() string {
	if v.Pos == 0 {
		return v.Property + ": " + v.Message
	}
	return fmt.Sprintf("line %d (seq %d): %s: %s", v.Pos, v.Seq, v.Property, v.Message)
}

// Counts summarises a trace for test logs.
type Counts struct {
	Lines    int
	Opens    int // sidecar starts
	Connects int
	Repushes int // CompleteReconcile
	Changes  int // ProposeChange
	Applies  int // CompleteApply
	Failures int // FailApply
	// Rollbacks counts ProposeRollback lines, RolledBack
	// CompleteApplyRollback lines, RollbacksRefused FailApplyRollback lines.
	Rollbacks        int
	RolledBack       int
	RollbacksRefused int
	// Recovered counts the lines Recover put back.
	Recovered int
}

// String renders the counts on one line.
func (c Counts) String() string {
	s := fmt.Sprintf("%d lines, %d opens, %d connects, %d re-pushes, %d changes proposed, "+
		"%d applied, %d failed to apply, %d rollbacks proposed, %d rolled back",
		c.Lines, c.Opens, c.Connects, c.Repushes, c.Changes, c.Applies, c.Failures, c.Rollbacks, c.RolledBack)
	if c.RollbacksRefused > 0 {
		s += fmt.Sprintf(", %d rollbacks refused by the device", c.RollbacksRefused)
	}
	if c.Recovered > 0 {
		s += fmt.Sprintf(", %d lines recovered from the journal", c.Recovered)
	}
	return s
}

// ProposalStatus is a proposal's phase and statuses (journal enum names)
// as the last line about it left them.
type ProposalStatus struct {
	Phase          string
	Commit         string
	Apply          string
	RollbackCommit string
	RollbackApply  string
	// Pos and Seq identify that line (see Violation).
	Pos int
	Seq uint64
}

// Report is what Check found in a trace.
type Report struct {
	Violations []Violation
	Counts     Counts
	// Applied is the applied configuration the trace implies: path (as
	// gnmipath.String renders it) → the last value CompleteApply or
	// CompleteApplyRollback wrote there.
	Applied map[string]Value
	// Proposals holds the last known status of every proposal the trace
	// mentions, by index.
	Proposals map[uint64]ProposalStatus
}

// Check replays a trace and reports the violations of Order, Sequential,
// RollbackOrder and Term it finds, with the applied values and proposal
// statuses the trace implies. The trace must start when the journal was
// created; it may span sidecar restarts (several Open lines). A line lost
// to a crash (the process killed after a transition became durable, before
// the Tracer wrote it) shows up as a violation. Liveness holds only at
// quiescence: see Report.CheckQuiescent.
func Check(lines []Line) *Report {
	c := &checker{
		r: &Report{
			Applied:   make(map[string]Value),
			Proposals: make(map[uint64]ProposalStatus),
		},
		seen:    make(map[step]bool),
		rebased: make(map[uint64]bool),
	}
	for n := range lines {
		c.check(n+1, &lines[n])
	}
	return c.r
}

// CheckQuiescent appends the Liveness violations of a trace that ends at
// rest (the device up and reachable, no request or retry outstanding):
// every proposal's commit and apply must be Finished and every proposed
// rollback's commit and apply Complete.
func (r *Report) CheckQuiescent() {
	complete := journal.StatusComplete.String()
	for _, i := range slices.Sorted(maps.Keys(r.Proposals)) {
		s := r.Proposals[i]
		if !finished(s.Commit) || !finished(s.Apply) {
			r.liveness(s, "proposal %d is not finished at quiescence: commit %s, apply %s", i, s.Commit, s.Apply)
		}
		if s.Phase == journal.PhaseRollback.String() && (s.RollbackCommit != complete || !finished(s.RollbackApply)) {
			r.liveness(s, "the rollback of proposal %d is not complete at quiescence: commit %s, apply %s",
				i, s.RollbackCommit, s.RollbackApply)
		}
	}
}

func (r *Report) liveness(s ProposalStatus, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{
		Pos: s.Pos, Seq: s.Seq, Property: PropertyLiveness, Message: fmt.Sprintf(format, args...),
	})
}

// finished reports whether a status name is Complete, Aborted or Failed.
func finished(status string) bool {
	return journal.Finished(journal.Status(journalpb.Status_value[status]))
}

// checker is the state Check replays a trace into.
type checker struct {
	r    *Report
	pos  int   // position of the current line
	l    *Line // the current line
	seen map[step]bool

	lastCommit uint64    // newest proposal whose commit finished
	lastApply  uint64    // newest proposal whose apply finished
	term, conn uint64    // newest mastership seen
	applying   applyStep // the apply in progress (index 0: none)
	inEffect   []uint64  // applied changes not rolled back, ascending
	// failed is the proposal of the newest FailApply; rebased, the
	// proposals a FailApply re-based (Rebase lines) whose commit has not
	// been redone yet.
	failed  uint64
	rebased map[uint64]bool
	// prevAction is the action of the line before.
	prevAction journal.Action
}

// step is one transition of one proposal.
type step struct {
	action journal.Action
	index  uint64
}

// applyStep names the apply of a change or of a rollback.
type applyStep struct {
	index    uint64
	rollback bool
}

func (a applyStep) String() string {
	if a.rollback {
		return fmt.Sprintf("the rollback apply of proposal %d", a.index)
	}
	return fmt.Sprintf("the apply of proposal %d", a.index)
}

// check replays one line, the pos-th of the trace.
func (c *checker) check(pos int, l *Line) {
	c.pos, c.l = pos, l
	c.r.Counts.Lines++
	if l.Recovered {
		c.r.Counts.Recovered++
	}
	c.recordStatus()
	switch journal.Action(l.Action) {
	case ActionOpen:
		c.r.Counts.Opens++
		c.open()
	case journal.ActionConnect:
		c.r.Counts.Connects++
		c.connect()
	case journal.ActionCompleteReconcile:
		c.r.Counts.Repushes++
		c.completeReconcile()
	case journal.ActionProposeChange:
		c.r.Counts.Changes++
	case journal.ActionCommitChange, journal.ActionFailCommit:
		c.commit()
	case journal.ActionStartApply:
		c.startApply()
	case journal.ActionCompleteApply:
		c.r.Counts.Applies++
		c.completeApply()
	case journal.ActionFailApply:
		c.r.Counts.Failures++
		c.failApply()
	case journal.ActionRebase:
		c.rebase()
	case journal.ActionAbortApply:
		c.applyFinished(l.Index)
	case journal.ActionProposeRollback:
		c.r.Counts.Rollbacks++
		c.proposeRollback()
	case journal.ActionCommitRollback:
		c.requireEarlier(PropertyRollbackOrder, journal.ActionProposeRollback)
	case journal.ActionStartApplyRollback:
		c.startApplyRollback()
	case journal.ActionCompleteApplyRollback:
		c.r.Counts.RolledBack++
		c.completeApplyRollback()
	case journal.ActionFailApplyRollback:
		// The rollback took effect in the journal; the device refused
		// (some of) its values, which the journal marks out of sync.
		c.r.Counts.RollbacksRefused++
		c.completeApplyRollback()
	}
	c.seen[step{journal.Action(l.Action), l.Index}] = true
	c.prevAction = journal.Action(l.Action)
}

func (c *checker) violate(property, format string, args ...any) {
	c.r.Violations = append(c.r.Violations, Violation{
		Pos: c.pos, Seq: c.l.Seq, Property: property, Message: fmt.Sprintf(format, args...),
	})
}

// recordStatus keeps the statuses of the proposal the line carries.
func (c *checker) recordStatus() {
	l := c.l
	if l.Index == 0 || l.Phase == "" {
		return
	}
	c.r.Proposals[l.Index] = ProposalStatus{
		Phase: l.Phase, Commit: l.Commit, Apply: l.Apply,
		RollbackCommit: l.RollbackCommit, RollbackApply: l.RollbackApply,
		Pos: c.pos, Seq: l.Seq,
	}
}

// open checks that the journal kept its mastership across the restart.
func (c *checker) open() {
	l := c.l
	if l.Term < c.term || l.Conn < c.conn {
		c.violate(PropertyTerm, "Open with term %d, connection %d after term %d, connection %d: the journal lost its mastership",
			l.Term, l.Conn, c.term, c.conn)
	}
	c.term, c.conn = max(c.term, l.Term), max(c.conn, l.Conn)
}

func (c *checker) connect() {
	l := c.l
	if l.Term <= c.term || l.Conn <= c.conn {
		c.violate(PropertyTerm, "Connect to term %d, connection %d after term %d, connection %d: both must grow",
			l.Term, l.Conn, c.term, c.conn)
	}
	c.term, c.conn = max(c.term, l.Term), max(c.conn, l.Conn)
}

func (c *checker) completeReconcile() {
	switch a := c.l.Applied; {
	case a == nil:
		c.violate(PropertyTerm, "CompleteReconcile carries no configuration")
	case a.Term != c.l.Term:
		c.violate(PropertyTerm, "CompleteReconcile under term %d recorded a re-push for term %d", c.l.Term, a.Term)
	}
}

// requireSynced reports Term unless the line's configuration was re-pushed
// for the line's term: until then the device may have restarted empty, and
// an apply would build on configuration it no longer holds.
func (c *checker) requireSynced() {
	l := c.l
	switch {
	case l.Recovered: // Recover cannot know the configuration of a lost line

	case l.Applied == nil:
		c.violate(PropertyTerm, "%s(%d) carries no configuration", l.Action, l.Index)
	case l.Applied.Term != l.Term:
		c.violate(PropertyTerm, "%s(%d) under term %d, but the configuration was last re-pushed for term %d",
			l.Action, l.Index, l.Term, l.Applied.Term)
	case l.Status != journal.StatusComplete.String():
		c.violate(PropertyTerm, "%s(%d) while the re-push for term %d is %s", l.Action, l.Index, l.Term, l.Status)
	}
}

// requireEarlier reports property unless the line's proposal went through
// action earlier in the trace.
func (c *checker) requireEarlier(property string, action journal.Action) {
	if i := c.l.Index; !c.seen[step{action, i}] {
		c.violate(property, "%s(%d) with no %s(%d) before it", c.l.Action, i, action, i)
	}
}

func (c *checker) commit() {
	i := c.l.Index
	c.requireEarlier(PropertyOrder, journal.ActionProposeChange)
	if (c.seen[step{journal.ActionCommitChange, i}] || c.seen[step{journal.ActionFailCommit, i}]) && !c.rebased[i] {
		c.violate(PropertyOrder, "%s(%d) a second time, and no FailApply re-based it", c.l.Action, i)
		return
	}
	delete(c.rebased, i)
	if i <= c.lastCommit {
		c.violate(PropertyOrder, "%s(%d) after the commit of proposal %d: commits go in index order", c.l.Action, i, c.lastCommit)
		return
	}
	c.lastCommit = i
	for _, v := range c.l.Read {
		c.r.Applied[v.Path] = v
	}
}

func (c *checker) startApply() {
	c.requireSynced()
	c.requireEarlier(PropertyOrder, journal.ActionCommitChange)
	c.requireCommitted()
	c.start(applyStep{index: c.l.Index})
}

// requireCommitted reports Order if the line's proposal was re-based and
// not committed again since: its commit is pending.
func (c *checker) requireCommitted() {
	if i := c.l.Index; c.rebased[i] {
		c.violate(PropertyOrder, "%s(%d) after a FailApply re-based it and before it was committed again", c.l.Action, i)
	}
}

// rebase replays a Rebase line: FailApply of proposal c.failed (the line
// before) re-based the line's proposal, a later one committed and not yet
// applied, whose commit is pending again. The spec's FailApply leaves such
// a proposal committed on top of the failed one; the implementation
// commits it again, over the configuration without the failed one, which
// the spec allows as a refinement (docs/design.md §3): commits go on in
// index order from the first re-based proposal, and the proposal's apply
// waits for its new commit.
func (c *checker) rebase() {
	i := c.l.Index
	switch {
	case c.failed == 0 || i <= c.failed:
		c.violate(PropertyOrder, "Rebase(%d) not after a FailApply of an earlier proposal (newest FailApply: %d)", i, c.failed)
	case !c.l.Recovered && c.prevAction != journal.ActionFailApply && c.prevAction != journal.ActionRebase &&
		c.prevAction != journal.ActionClearCommitConfirm:
		c.violate(PropertyOrder, "Rebase(%d) after %s: only a FailApply re-bases, in the same transition", i, c.prevAction)
	case !c.seen[step{journal.ActionCommitChange, i}] || c.rebased[i]:
		c.violate(PropertyOrder, "Rebase(%d) of a proposal that is not committed", i)
	case c.seen[step{journal.ActionStartApply, i}] || i <= c.lastApply:
		c.violate(PropertyOrder, "Rebase(%d) of a proposal whose apply started or finished", i)
	}
	if c.l.Commit != "" && c.l.Commit != journal.StatusPending.String() {
		c.violate(PropertyOrder, "Rebase(%d) left its commit %s, not pending", i, c.l.Commit)
	}
	c.rebased[i] = true
	c.lastCommit = min(c.lastCommit, i-1)
}

func (c *checker) completeApply() {
	i := c.l.Index
	c.requireSynced()
	c.requireEarlier(PropertyOrder, journal.ActionCommitChange)
	c.requireEarlier(PropertyOrder, journal.ActionStartApply)
	c.requireCommitted()
	c.finish(applyStep{index: i})
	c.applyFinished(i)
	c.takeEffect(i)
	c.writeApplied()
}

func (c *checker) failApply() {
	c.requireEarlier(PropertyOrder, journal.ActionStartApply)
	c.finish(applyStep{index: c.l.Index})
	c.applyFinished(c.l.Index)
	c.failed = c.l.Index
	// The later proposals it re-bases each follow with a Rebase line (a
	// trace of an older sidecar lists the ones it aborted in c.l.Aborted:
	// each gets its AbortApply line in its turn).
}

func (c *checker) startApplyRollback() {
	c.requireSynced()
	c.requireEarlier(PropertyRollbackOrder, journal.ActionCommitRollback)
	c.start(applyStep{index: c.l.Index, rollback: true})
}

func (c *checker) completeApplyRollback() {
	i := c.l.Index
	c.requireSynced()
	c.requireEarlier(PropertyRollbackOrder, journal.ActionStartApplyRollback)
	c.requireNewestInEffect()
	c.finish(applyStep{index: i, rollback: true})
	c.leaveEffect(i)
	c.writeApplied()
}

func (c *checker) start(a applyStep) {
	if c.applying.index != 0 && c.applying != a {
		c.violate(PropertySequential, "%s(%d) while %s is in progress", c.l.Action, a.index, c.applying)
	}
	c.applying = a
}

func (c *checker) finish(a applyStep) {
	switch c.applying {
	case a:
		c.applying = applyStep{}
	case applyStep{}:
	default:
		c.violate(PropertySequential, "%s(%d) while %s is in progress", c.l.Action, a.index, c.applying)
	}
}

// applyFinished checks that the apply of proposal i finishes after those of
// all earlier proposals.
func (c *checker) applyFinished(i uint64) {
	if i <= c.lastApply {
		c.violate(PropertyOrder, "the apply of proposal %d finished after the apply of proposal %d: applies finish in index order",
			i, c.lastApply)
		return
	}
	c.lastApply = i
}

func (c *checker) proposeRollback() {
	if i := c.l.Index; c.seen[step{journal.ActionProposeRollback, i}] {
		c.violate(PropertyRollbackOrder, "ProposeRollback(%d) a second time: a rollback is never rolled back", i)
		return
	}
	c.requireNewestInEffect()
}

// requireNewestInEffect reports RollbackOrder unless the line's proposal is
// the newest change applied and not rolled back.
func (c *checker) requireNewestInEffect() {
	i := c.l.Index
	switch n := len(c.inEffect); {
	case n == 0:
		c.violate(PropertyRollbackOrder, "%s(%d) while no change is in effect", c.l.Action, i)
	case c.inEffect[n-1] != i:
		c.violate(PropertyRollbackOrder, "%s(%d), but proposal %d is the newest change in effect: rollbacks go newest first",
			c.l.Action, i, c.inEffect[n-1])
	}
}

func (c *checker) takeEffect(i uint64) {
	if n, found := slices.BinarySearch(c.inEffect, i); !found {
		c.inEffect = slices.Insert(c.inEffect, n, i)
	}
}

func (c *checker) leaveEffect(i uint64) {
	if n, found := slices.BinarySearch(c.inEffect, i); found {
		c.inEffect = slices.Delete(c.inEffect, n, n+1)
	}
}

// writeApplied replays the line's values into the applied model.
func (c *checker) writeApplied() {
	for _, v := range c.l.Values {
		c.r.Applied[v.Path] = v
	}
}
