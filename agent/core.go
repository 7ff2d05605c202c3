package agent

import (
	"fmt"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// This file is the agent's state machine: one pure function per action of
// spec ConfigImpl.tla. Each reads a View of the journal (and the
// southbound link) and returns the Step the driver must take next; the
// driver (agent.go) performs the Step's I/O and records its result as one
// journal transition. The journal re-checks every guard inside its
// transaction, so a decision made on a stale View is refused, never
// half-applied.

// Link is the southbound connection as the decisions see it.
type Link struct {
	// Up: a connection to the device is established and its liveness
	// stream is open.
	Up bool
	// Term is the mastership term recorded for this connection, 0 until
	// ReconcileMastership has recorded one.
	Term uint64
}

// View is the state the decisions read: the journal's configuration and
// mastership records, the link, and whether the device keeps its
// configuration across restarts.
type View struct {
	Config     *journal.Configuration
	Mastership *journal.Mastership
	Link       Link
	Persistent bool
}

// master reports whether this connection holds the current term (spec:
// mastership.master = n, mastership.conn = conn[n].id, conn[n].connected).
func (v View) master() bool {
	return v.Link.Up && v.Link.Term != 0 && v.Link.Term == v.Mastership.GetTerm()
}

// synced reports whether the device holds the applied configuration of the
// current term, the precondition of every apply (spec ApplyChange:
// configuration.applied.term = mastership.term).
func (v View) synced() bool {
	c := v.Config
	return v.master() && c.GetApplied().GetTerm() == v.Mastership.GetTerm() && c.GetStatus() == journal.StatusComplete
}

// StepKind is what the driver must do.
type StepKind int

// The steps. Those named Send… and Repush involve device I/O; the others
// are journal transitions only.
const (
	// StepWait: nothing is enabled; wait for a change.
	StepWait StepKind = iota
	// StepConnect: record a new term for the link (journal.Connect).
	StepConnect
	// StepDisconnect: the link's term is no longer current (superseded);
	// drop the connection so a new one gets a new term.
	StepDisconnect
	// StepAdoptTerm: persistent device; take the term without a re-push.
	StepAdoptTerm
	// StepStartRepush: mark the re-push for Term in progress.
	StepStartRepush
	// StepRepush: push the applied configuration, then complete the re-push.
	StepRepush
	// StepCommitChange: commit proposal Index.
	StepCommitChange
	// StepAbortApply: proposal Index's commit failed; abort its apply.
	StepAbortApply
	// StepStartApply: mark proposal Index's apply in progress.
	StepStartApply
	// StepSendChange: send proposal Index to the device under Term.
	StepSendChange
	// StepCommitRollback: commit the rollback of proposal Index.
	StepCommitRollback
	// StepStartApplyRollback: mark the rollback's apply in progress.
	StepStartApplyRollback
	// StepSendRollback: send the rollback values to the device under Term.
	StepSendRollback
)

var stepNames = [...]string{
	StepWait: "Wait", StepConnect: "Connect", StepDisconnect: "Disconnect",
	StepAdoptTerm: "AdoptTerm", StepStartRepush: "StartRepush", StepRepush: "Repush",
	StepCommitChange: "CommitChange", StepAbortApply: "AbortApply",
	StepStartApply: "StartApply", StepSendChange: "SendChange",
	StepCommitRollback: "CommitRollback", StepStartApplyRollback: "StartApplyRollback",
	StepSendRollback: "SendRollback",
}

func (k StepKind) String() string {
	if int(k) < len(stepNames) {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", int(k))
}

// Step is a decision: what to do, for which proposal, under which term.
type Step struct {
	Kind  StepKind
	Index uint64
	Term  uint64
}

func (s Step) String() string {
	return fmt.Sprintf("%v(index=%d, term=%d)", s.Kind, s.Index, s.Term)
}

var wait = Step{Kind: StepWait}

// ReconcileMastership implements spec ReconcileMastership: a connection
// without a term becomes master under a new term; a connection whose term
// is no longer the journal's is superseded and must go.
func ReconcileMastership(v View) Step {
	switch {
	case !v.Link.Up:
		return wait
	case v.Link.Term == 0:
		return Step{Kind: StepConnect}
	case v.Link.Term != v.Mastership.GetTerm():
		return Step{Kind: StepDisconnect, Term: v.Link.Term}
	}
	return wait
}

// ReconcileConfiguration implements spec ReconcileConfiguration (and
// Configuration.tla's persistent targets): once the term has moved past
// applied.term, a non-persistent device gets the whole applied
// configuration re-pushed before anything else is applied; a persistent
// one just adopts the term.
func ReconcileConfiguration(v View) Step {
	term := v.Mastership.GetTerm()
	if !v.master() || v.Config.GetApplied().GetTerm() >= term {
		return wait
	}
	switch {
	case v.Persistent:
		return Step{Kind: StepAdoptTerm, Term: term}
	case v.Config.GetStatus() != journal.StatusInProgress:
		return Step{Kind: StepStartRepush, Term: term}
	}
	return Step{Kind: StepRepush, Term: term}
}

// CommitChange implements spec CommitChange for proposal p, whose
// predecessor is prev (nil if there is none or retention dropped it): p is
// committed once prev's commit is Finished and no rollback is under way.
// Unlike the spec, committing does not wait for mastership: it only
// touches the journal, and the sidecar is the journal's only writer.
func CommitChange(v View, p, prev *journal.Proposal) Step {
	switch {
	case p == nil || p.GetPhase() != journal.PhaseChange || p.GetChange().GetCommit() != journal.StatusPending:
		return wait
	case v.Config.GetRollingBack() != 0:
		return wait
	case prev != nil && !journal.Finished(prev.GetChange().GetCommit()):
		return wait
	}
	return Step{Kind: StepCommitChange, Index: p.GetIndex()}
}

// ApplyChange implements spec ApplyChange for proposal p (predecessor
// prev): once prev's apply is Finished, a proposal whose commit failed is
// aborted without I/O, as is one that depends on a proposal that failed to
// apply (Change.aborted_by); a committed one is started and sent to the
// device, but only while the device is synced for the current term.
func ApplyChange(v View, p, prev *journal.Proposal) Step {
	if p == nil || p.GetPhase() != journal.PhaseChange || v.Config.GetRollingBack() != 0 {
		return wait
	}
	i, ch := p.GetIndex(), p.GetChange()
	switch ch.GetApply() {
	case journal.StatusPending:
		if prev != nil && !journal.Finished(prev.GetChange().GetApply()) {
			return wait
		}
		switch {
		case ch.GetCommit() == journal.StatusFailed, ch.GetCommit() == journal.StatusAborted, ch.GetAbortedBy() != 0:
			return Step{Kind: StepAbortApply, Index: i}
		case ch.GetCommit() == journal.StatusComplete:
			if v.synced() {
				return Step{Kind: StepStartApply, Index: i, Term: v.Mastership.GetTerm()}
			}
		}
	case journal.StatusInProgress:
		if v.synced() && v.Config.GetApplied().GetProposal() == i {
			return Step{Kind: StepSendChange, Index: i, Term: v.Mastership.GetTerm()}
		}
	}
	return wait
}

// CommitRollback implements spec CommitRollback for proposal p: the
// rollback under way is committed once p is the newest committed change.
// Rollbacks go newest first because the journal only accepts a rollback of
// the newest change in effect, one at a time.
func CommitRollback(v View, p *journal.Proposal) Step {
	c := v.Config
	switch {
	case p == nil || p.GetPhase() != journal.PhaseRollback || p.GetRollback().GetCommit() != journal.StatusPending:
		return wait
	case c.GetRollingBack() != p.GetIndex() || c.GetCommitted().GetIndex() != p.GetIndex():
		return wait
	}
	return Step{Kind: StepCommitRollback, Index: p.GetIndex()}
}

// ApplyRollback implements spec ApplyRollback for proposal p: a committed
// rollback is started and its values sent to the device while it is synced
// for the current term.
func ApplyRollback(v View, p *journal.Proposal) Step {
	if p == nil || p.GetPhase() != journal.PhaseRollback || p.GetRollback().GetCommit() != journal.StatusComplete || !v.synced() {
		return wait
	}
	i, term := p.GetIndex(), v.Mastership.GetTerm()
	switch p.GetRollback().GetApply() {
	case journal.StatusPending:
		if v.Config.GetApplied().GetIndex() == i {
			return Step{Kind: StepStartApplyRollback, Index: i, Term: term}
		}
	case journal.StatusInProgress:
		return Step{Kind: StepSendRollback, Index: i, Term: term}
	}
	return wait
}

// NextCommit is the committer's decision: the rollback under way if there
// is one, else the oldest proposal whose commit is pending (next, with its
// predecessor prev).
func NextCommit(v View, rollingBack, next, prev *journal.Proposal) Step {
	if v.Config.GetRollingBack() != 0 {
		return CommitRollback(v, rollingBack)
	}
	return CommitChange(v, next, prev)
}

// NextApply is the applier's decision, in the order the spec's guards
// impose: mastership, then the re-push, then the rollback under way or the
// oldest proposal whose apply is not finished (next, predecessor prev).
func NextApply(v View, rollingBack, next, prev *journal.Proposal) Step {
	if s := ReconcileMastership(v); s.Kind != StepWait {
		return s
	}
	if s := ReconcileConfiguration(v); s.Kind != StepWait {
		return s
	}
	if v.Config.GetRollingBack() != 0 {
		return ApplyRollback(v, rollingBack)
	}
	return ApplyChange(v, next, prev)
}
