package agent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Link is the southbound connection as the decisions see it.
type Link struct {
	// Up: a connection to the device is established and its liveness
	// stream is open.
	Up bool
	// Term is the mastership term recorded for this connection, 0 until
	// ReconcileMastership has recorded one.
	Term uint64
}

// Policy is what the decisions know of the agent's Options.
type Policy struct {
	// Persistent: the device keeps its configuration across restarts.
	Persistent bool
	// Fencing: Sets carry the election id; an arbitration refusal means
	// another client is master.
	Fencing bool
	// RetryCodes are the device answers an acknowledged change (one no
	// client waits on: ASYNC) is sent again after, at most RetryAttempts
	// times in all and for at most RetryFor (docs/agent.md, "Answers").
	// Every other answer is the change's outcome.
	RetryCodes    []codes.Code
	RetryAttempts int
	RetryFor      time.Duration
}

// View is the state the decisions read: the journal's configuration and
// mastership records, the link and the policy.
type View struct {
	Config     *journal.Configuration
	Mastership *journal.Mastership
	Link       Link
	Policy
}

// master reports whether this connection holds the current term (spec:
// mastership.master = n, mastership.conn = conn[n].id, conn[n].connected).
func (v View) master() bool {
	return v.Link.Up && v.Link.Term != 0 && v.Link.Term == v.Mastership.GetTerm()
}

// synced reports whether this connection is master and the device holds
// the applied configuration of its term.
func (v View) synced() bool {
	return v.master() && journal.Synced(v.Config, v.Mastership)
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
	// StepCompleteAdopted: proposal Index, in progress, adopts values read
	// from the device under Term, which has not restarted since: record it
	// applied without a Set.
	StepCompleteAdopted
)

var stepNames = [...]string{
	StepWait: "Wait", StepConnect: "Connect", StepDisconnect: "Disconnect",
	StepAdoptTerm: "AdoptTerm", StepStartRepush: "StartRepush", StepRepush: "Repush",
	StepCommitChange: "CommitChange", StepAbortApply: "AbortApply",
	StepStartApply: "StartApply", StepSendChange: "SendChange",
	StepCommitRollback: "CommitRollback", StepStartApplyRollback: "StartApplyRollback",
	StepSendRollback: "SendRollback", StepCompleteAdopted: "CompleteAdopted",
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

// ReconcileMastership implements spec ReconcileMastership (and
// Connect/DisconnectNode, which the link reflects): a connection without a
// term becomes master under a new term (journal.Connect); a connection
// whose term is no longer the journal's is superseded and must go.
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
	switch {
	case !v.master() || journal.ReconcileGuard(v.Config, v.Mastership, term) != nil:
		return wait
	case v.Persistent:
		return Step{Kind: StepAdoptTerm, Term: term}
	case journal.CompleteReconcileGuard(v.Config, v.Mastership, term) != nil:
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
	if p == nil || journal.CommitChangeGuard(v.Config, p, prev) != nil {
		return wait
	}
	return Step{Kind: StepCommitChange, Index: p.GetIndex()}
}

// ApplyChange implements spec ApplyChange for proposal p (predecessor
// prev): once prev's apply is Finished, a proposal whose commit failed is
// aborted without I/O, as is one an older journal's FailApply aborted
// (Change.aborted_by; FailApply now re-bases the later proposals, which
// CommitChange commits again); a committed one is started and sent to the
// device, but only while this connection is master and the device synced
// for the current term; an adoption read from the device under this term
// is recorded applied without a Set. The device's answer is
// ApplyChangeAnswer's.
func ApplyChange(v View, p, prev *journal.Proposal) Step {
	if p == nil || p.GetPhase() != journal.PhaseChange || v.Config.GetRollingBack() != 0 {
		return wait
	}
	i, term := p.GetIndex(), v.Mastership.GetTerm()
	switch {
	case journal.AbortApplyGuard(p, prev) == nil:
		return Step{Kind: StepAbortApply, Index: i}
	case !v.master():
		return wait
	case p.GetChange().GetApply() == journal.StatusPending && journal.StartApplyGuard(v.Config, v.Mastership, p, prev) == nil:
		return Step{Kind: StepStartApply, Index: i, Term: term}
	case journal.CompleteApplyGuard(v.Config, v.Mastership, p, term) != nil:
		return wait
	case p.GetChange().GetAdopted() && p.GetChange().GetAdoptedTerm() == term:
		return Step{Kind: StepCompleteAdopted, Index: i, Term: term}
	}
	return Step{Kind: StepSendChange, Index: i, Term: term}
}

// CommitRollback implements spec CommitRollback for proposal p: the
// rollback under way is committed once p is the newest committed change.
// Rollbacks go newest first because the journal only accepts a rollback of
// the newest change in effect, one at a time.
func CommitRollback(v View, p *journal.Proposal) Step {
	if p == nil || journal.CommitRollbackGuard(v.Config, p) != nil {
		return wait
	}
	return Step{Kind: StepCommitRollback, Index: p.GetIndex()}
}

// ApplyRollback implements spec ApplyRollback for proposal p: a committed
// rollback is started and its values sent to the device while this
// connection is master and the device synced for the current term. The
// push's outcome is PushOutcome's.
func ApplyRollback(v View, p *journal.Proposal) Step {
	if p == nil || !v.master() {
		return wait
	}
	i, term := p.GetIndex(), v.Mastership.GetTerm()
	switch {
	case p.GetRollback().GetApply() == journal.StatusPending && journal.StartApplyRollbackGuard(v.Config, v.Mastership, p) == nil:
		return Step{Kind: StepStartApplyRollback, Index: i, Term: term}
	case journal.FinishApplyRollbackGuard(v.Config, v.Mastership, p, term) == nil:
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

// --- the device's answers ---

// Answer is the kind of a device's answer to a Set (docs/design.md §4,
// "An answer is an answer").
type Answer int

const (
	// Accepted: the device applied the Set.
	Accepted Answer = iota
	// Refused: the device answered with an error; a Set is atomic: it
	// changed nothing.
	Refused
	// InDoubt: the Set may or may not have been applied: it timed out or
	// was cancelled (the sidecar's deadline, its client's deadline or
	// cancel), the connection broke, or the answer, Unavailable, cannot be
	// told from a broken connection. The device is read back at the Set's
	// paths to settle it (ReadBack); a device that cannot be read is
	// treated as a lost connection.
	InDoubt
	// Superseded: a device enforcing MasterArbitration answered that
	// another client is master: the agent is fenced.
	Superseded
)

func (a Answer) String() string {
	return [...]string{"accepted", "rejected", "in doubt", "superseded"}[a]
}

// inDoubtCodes are the codes a Set gets when its outcome is unknown: the
// Set's own deadline or cancel, and gRPC's code for a connection that
// broke (which a device may also answer with).
var inDoubtCodes = []codes.Code{codes.DeadlineExceeded, codes.Canceled, codes.Unavailable}

// Classify maps a Set's error to its Answer: no error is accepted; an
// error that is not a gRPC status (the connection broke) or a code of
// inDoubtCodes is in doubt; with fencing on, a PermissionDenied that
// talks about the election id or the master is arbitration's answer, not a
// verdict on the change; every other code is the device's refusal, never
// sent again as if no answer had come.
func (p Policy) Classify(err error) Answer {
	if err == nil {
		return Accepted
	}
	st, ok := status.FromError(err)
	switch {
	case !ok || slices.Contains(inDoubtCodes, st.Code()):
		return InDoubt
	case st.Code() == codes.PermissionDenied && p.Fencing && mentionsArbitration(st.Message()):
		return Superseded
	}
	return Refused
}

func mentionsArbitration(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "election") || strings.Contains(msg, "master") || strings.Contains(msg, "arbitration")
}

// ReadBack is what reading the device back at an in-doubt Set's paths
// found.
type ReadBack int

const (
	// NotRead: the device has not been read back.
	NotRead ReadBack = iota
	// ReadApplied: the device holds every value the Set writes.
	ReadApplied
	// ReadNotApplied: it does not: the Set, atomic, was not applied.
	ReadNotApplied
	// ReadFailed: the device could not be read either: the connection is
	// treated as lost.
	ReadFailed
)

// EventKind is what happened.
type EventKind int

const (
	// EventCommitTick: the committer looks for work (the journal changed,
	// or the resync period passed).
	EventCommitTick EventKind = iota
	// EventApplyTick: the applier looks for work (the journal or the link
	// changed: a connection came up or broke, a term was recorded; or the
	// resync period passed).
	EventApplyTick
	// EventChangeAnswer: the device answered the Set carrying Batch (a
	// StepSendChange).
	EventChangeAnswer
	// EventExpiryTick: the commit-confirmed timer looks at the outstanding
	// record Confirm (nil if none) and its proposal Next at time Now.
	EventExpiryTick
	// EventSetAnswer: the device answered a Set that carries no proposal:
	// the empty Set announcing the election id, or one Set of a push of
	// values (a re-push, a rollback, a restore, an operator's retry).
	EventSetAnswer
	// EventPushDone: a push of values (Push) reached its end; Refused are
	// the values the device refused for good.
	EventPushDone
)

// PushKind is what a push of values is for.
type PushKind int

const (
	// PushRepush: the applied configuration, for a new term.
	PushRepush PushKind = iota
	// PushRollback: a rollback's values.
	PushRollback
	// PushRestore: the applied values of the paths a refused proposal's
	// earlier attempts may have written.
	PushRestore
)

// Batch is what a change Set carried: proposals First..Last.
type Batch struct {
	First, Last uint64
	// MayHaveReached: an earlier Set, answered or not, may have carried
	// First to the device.
	MayHaveReached bool
}

// Event is the input of Decide. Ticks read the proposals concerned
// (RollingBack, or Next and its predecessor Prev); answers read Err, the
// device's answer (nil: accepted).
type Event struct {
	Kind                    EventKind
	RollingBack, Next, Prev *journal.Proposal
	Confirm                 *journal.CommitConfirm
	Now                     time.Time
	Err                     error
	Batch                   Batch
	Push                    PushKind
	Refused                 []*journal.PathValue
	// For a change's answer: ReadBack, what reading the device back found
	// after an answer in doubt; Waiting, a client waits for the answer of
	// the batch's single proposal (SYNC); Attempt, the sends of the batch
	// so far, this one included, and Elapsed the time since the first.
	ReadBack ReadBack
	Waiting  bool
	Attempt  int
	Elapsed  time.Duration
}

// Record is a journal transition recording a device's answer.
type Record int

const (
	// RecordNone: nothing to record.
	RecordNone Record = iota
	// RecordCompleteApply: CompleteApply of the batch's first proposal,
	// StartApply and CompleteApply of each of the others.
	RecordCompleteApply
	// RecordFailApply: FailApply of the step's proposal with the answer.
	RecordFailApply
	// RecordCompleteApplyRollback, RecordFailApplyRollback: the rollback's
	// outcome; a failed one leaves its refused values out of sync.
	RecordCompleteApplyRollback
	RecordFailApplyRollback
	// RecordCompleteReconcile: the re-push's outcome (its refused values
	// out of sync).
	RecordCompleteReconcile
	// RecordMarkOutOfSync: the restore's refused values are out of sync.
	RecordMarkOutOfSync
	// RecordGiveUp: the device kept refusing an acknowledged change
	// (Policy.RetryCodes): CompleteApply, its values out of sync.
	RecordGiveUp
)

// SessionFate is what becomes of the session after an answer.
type SessionFate int

const (
	// SessionKeep: the session goes on.
	SessionKeep SessionFate = iota
	// SessionRetry: the connection is lost (no answer, and the device
	// cannot be read back): the session ends, what was sent stays in
	// progress, and the next session, after a backoff, re-pushes and sends
	// it again.
	SessionRetry
	// SessionFence: the session ends and the agent stops writing.
	SessionFence
)

// Ready is what the driver must do: a tick's Step (or the timer's Expiry);
// for an answer, record Record (for a refused change, after restoring the
// paths if Restore), or end the session as Session says.
type Ready struct {
	Step   Step
	Expiry Expiry
	Answer Answer
	Record Record
	// Restore: earlier Sets may have written the refused proposal's paths:
	// push their applied values back (PushRestore) before FailApply.
	Restore bool
	// Isolate: the proposals through Isolate go one Set each, until the
	// one the device refuses is found.
	Isolate uint64
	// ReadBack: the answer is in doubt: read the device back at the Set's
	// paths and decide again with what it holds (Event.ReadBack).
	ReadBack bool
	// Retry: send the same Set again after a backoff, on the same session
	// (Policy.RetryCodes).
	Retry   bool
	Session SessionFate
}

// Decide is the core: what the driver must do after ev, given v.
func Decide(v View, ev Event) Ready {
	switch ev.Kind {
	case EventCommitTick:
		return Ready{Step: NextCommit(v, ev.RollingBack, ev.Next, ev.Prev)}
	case EventApplyTick:
		return Ready{Step: NextApply(v, ev.RollingBack, ev.Next, ev.Prev)}
	case EventExpiryTick:
		return Ready{Expiry: DecideExpiry(ev.Confirm, ev.Next, ev.Now)}
	case EventChangeAnswer:
		return ApplyChangeAnswer(v.Policy, ev)
	case EventPushDone:
		return PushOutcome(ev)
	}
	// EventSetAnswer: a refusal goes on (a refused claim is logged, the
	// election id is on every Set anyway; a push splits a refused Set).
	return answered(v.Policy, ev.Err)
}

// answered classifies the answer to a Set of values, whose outcome a
// retry cannot harm: a refusal goes on (a push narrows it down), an answer
// in doubt ends the session (the next one re-pushes).
func answered(p Policy, err error) Ready {
	r := Ready{Answer: p.Classify(err)}
	switch r.Answer {
	case InDoubt:
		r.Session = SessionRetry
	case Superseded:
		r.Session = SessionFence
	}
	return r
}

// ApplyChangeAnswer is spec ApplyChange's outcome branches, with "an
// answer is an answer" (docs/design.md §4): an accepted batch completes;
// an answer in doubt is settled by reading the device back (applied: it
// completes; not applied: as refused; unreadable: the connection is lost,
// and the next session re-pushes and sends it again); a refused batch is
// sent again one proposal at a time, until a refused single proposal
// fails (its paths restored first if an earlier Set may have written
// them). A single proposal no client waits for, refused with one of
// Policy.RetryCodes, is sent again within the policy's bounds, and past
// them recorded applied with its paths out of sync (RecordGiveUp).
func ApplyChangeAnswer(p Policy, ev Event) Ready {
	r := Ready{Answer: p.Classify(ev.Err)}
	if r.Answer == InDoubt {
		switch ev.ReadBack {
		case NotRead:
			r.ReadBack = true
			return r
		case ReadFailed:
			r.Session = SessionRetry
			return r
		case ReadApplied:
			r.Answer = Accepted
		case ReadNotApplied:
			r.Answer = Refused
		}
	}
	batched := ev.Batch.Last > ev.Batch.First
	retryable := !ev.Waiting && slices.Contains(p.RetryCodes, status.Code(ev.Err))
	switch {
	case r.Answer == Superseded:
		r.Session = SessionFence
	case r.Answer == Accepted:
		r.Record = RecordCompleteApply
	case batched:
		r.Isolate = ev.Batch.Last
	case retryable && ev.Attempt < p.RetryAttempts && ev.Elapsed < p.RetryFor:
		r.Retry = true
	case retryable:
		r.Record = RecordGiveUp
	default:
		r.Record, r.Restore = RecordFailApply, ev.Batch.MayHaveReached
	}
	return r
}

// PushOutcome records a push of values that reached its end: a re-push
// completes (spec ReconcileConfiguration), a rollback completes or fails
// with its refused values out of sync (spec ApplyRollback), a restore
// marks its refused values out of sync.
func PushOutcome(ev Event) Ready {
	r := Ready{Answer: Accepted}
	if len(ev.Refused) > 0 {
		r.Answer = Refused
	}
	switch {
	case ev.Push == PushRepush:
		r.Record = RecordCompleteReconcile
	case ev.Push == PushRollback && r.Answer == Refused:
		r.Record = RecordFailApplyRollback
	case ev.Push == PushRollback:
		r.Record = RecordCompleteApplyRollback
	case ev.Push == PushRestore && r.Answer == Refused:
		r.Record = RecordMarkOutOfSync
	}
	return r
}

// --- the commit-confirmed timer ---

// ExpiryKind is what the commit-confirmed timer must do.
type ExpiryKind int

const (
	// ExpiryIdle: nothing is outstanding, or the expired commit's change
	// is still being applied; wait for a change in the journal.
	ExpiryIdle ExpiryKind = iota
	// ExpiryWait: the deadline has not passed; wait until Until (or a
	// change in the journal: a confirm, a cancel, a new deadline).
	ExpiryWait
	// ExpiryRollBack: the deadline passed (or the commit was cancelled):
	// roll its change back, or drop the record if the change failed
	// (journal.ExpireCommit decides which, in one transaction).
	ExpiryRollBack
)

// Expiry is the timer's decision.
type Expiry struct {
	Kind  ExpiryKind
	Until time.Time
}

// DecideExpiry decides what the commit-confirmed timer does at time now,
// given the outstanding record (nil if none) and its proposal (nil if
// retention dropped it). The spec has no timer: expiry is a
// ProposeRollback the agent makes on the client's behalf.
func DecideExpiry(rec *journal.CommitConfirm, p *journal.Proposal, now time.Time) Expiry {
	switch {
	case rec == nil:
		return Expiry{Kind: ExpiryIdle}
	case journal.ExpireDueGuard(rec, now) != nil:
		return Expiry{Kind: ExpiryWait, Until: rec.GetDeadline().AsTime()}
	case p != nil && journal.ExpireAppliedGuard(p) != nil:
		return Expiry{Kind: ExpiryIdle} // rolled back once applied
	}
	return Expiry{Kind: ExpiryRollBack}
}
