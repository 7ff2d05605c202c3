package journal

import "time"

// Action names a journal transition in an Event: the name of the method
// that made it, except for the commit-confirmed record's events: every
// transition that writes the record emits ActionSetCommitConfirm and every
// one that removes it ActionClearCommitConfirm. One method may emit several
// events, in the order of the spec steps it merges: ProposeConfirmedChange
// emits ActionProposeChange then ActionSetCommitConfirm; ExpireCommit
// emits ActionProposeRollback (when it starts a rollback) then
// ActionClearCommitConfirm; FailCommit, FailApply and AbortApply emit
// ActionClearCommitConfirm after their own event when they end the change
// of the outstanding commit-confirmed; FailApply then emits ActionRebase
// for every later proposal it re-bases, in index order.
type Action string

// The transitions an Observer sees.
const (
	ActionProposeChange Action = "ProposeChange"
	ActionCommitChange  Action = "CommitChange"
	ActionFailCommit    Action = "FailCommit"
	ActionStartApply    Action = "StartApply"
	ActionCompleteApply Action = "CompleteApply"
	ActionFailApply     Action = "FailApply"
	ActionAbortApply    Action = "AbortApply"
	// ActionRebase: FailApply of another proposal (the event before it)
	// put this proposal's commit back to Pending, to be committed again
	// over the configuration without the failed one (see
	// Journal.FailApply). Not a spec action: docs/design.md §3 says how it
	// refines the spec's FailApply.
	ActionRebase                Action = "Rebase"
	ActionProposeRollback       Action = "ProposeRollback"
	ActionCommitRollback        Action = "CommitRollback"
	ActionStartApplyRollback    Action = "StartApplyRollback"
	ActionCompleteApplyRollback Action = "CompleteApplyRollback"
	// ActionFailApplyRollback: the device refused a rollback for good;
	// it took effect in the journal with its refused values out of sync.
	ActionFailApplyRollback Action = "FailApplyRollback"
	// ActionSettleOutOfSync: an operator's retry of the out-of-sync paths
	// was recorded.
	ActionSettleOutOfSync   Action = "SettleOutOfSync"
	ActionConnect           Action = "Connect"
	ActionStartReconcile    Action = "StartReconcile"
	ActionCompleteReconcile Action = "CompleteReconcile"
	// ActionSetCommitConfirm: the commit-confirmed record was written
	// (ProposeConfirmedChange, CancelCommit, SetCommitDeadline).
	ActionSetCommitConfirm Action = "SetCommitConfirm"
	// ActionClearCommitConfirm: the commit-confirmed record was removed
	// (ConfirmCommit, ExpireCommit, or a failure of its change).
	ActionClearCommitConfirm Action = "ClearCommitConfirm"
	ActionCompact            Action = "Compact"
)

// Event is one durable transition, as Options.Observer receives it: the
// counterpart of a line of the spec's Log module. Records are the ones the
// transition wrote; they must not be modified.
type Event struct {
	Action Action
	// Time is the transition's timestamp (the journal's clock).
	Time time.Time
	// Index is the proposal the transition is about (0 for Connect and the
	// re-push transitions).
	Index uint64
	// Proposal is proposal Index as the transition left it (nil when
	// Index is 0 and for the commit-confirmed events).
	Proposal *Proposal
	// Configuration is the configuration record as the transition left it
	// (nil for Connect and the commit-confirmed transitions).
	Configuration *Configuration
	// Mastership is set by Connect: the new term and connection id.
	Mastership *Mastership
	// Read, for CommitChange, are the device's values the commit took into
	// the committed and applied configuration where the journal knew
	// nothing (before-images read from the device, index 0).
	Read []*PathValue
	// CommitConfirm is set by the commit-confirmed events: the record
	// written (ActionSetCommitConfirm) or removed (ActionClearCommitConfirm).
	// Index is then the record's proposal.
	CommitConfirm *CommitConfirm
}
