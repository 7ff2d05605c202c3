// Package agent drives the configuration state machine of the formal
// model (docs/spec/ConfigImpl.tla.txt; docs/design.md maps its actions to
// the code): it commits journaled proposals, applies them to
// the device strictly in index order and one at a time, applies rollbacks
// newest first, and keeps the device in step with the journal across
// reconnects and device restarts by re-pushing the applied configuration.
//
// # Core and driver
//
// The decisions are a pure core (core.go), in the style of etcd raft's
// Step/Ready: Decide takes a View (the journal's configuration and
// mastership, the link, the Policy drawn from Options) and an Event (a tick
// of a loop, with the proposals concerned, or a device's answer) and
// returns a Ready: the next Step, the journal transition that records an
// answer, and what becomes of the session. The guards are the journal's
// (journal.CommitChangeGuard, ...): the core decides with them and the
// journal re-checks them in the transaction recording the decision, so a
// decision made on a stale View is refused, never half-applied.
//
// Each spec action has one function in the core:
//
//	spec action             core function                        journal transition(s)
//	ProposeChange           (a client's: Agent.ProposeChange)    ProposeChange
//	ProposeRollback         DecideExpiry (EventExpiryTick)       ExpireCommit (a client's: ProposeRollback)
//	CommitChange            CommitChange                         CommitChange, FailCommit
//	ApplyChange             ApplyChange, ApplyChangeAnswer       AbortApply, StartApply, CompleteApply, FailApply
//	                        PushOutcome(PushRestore)             MarkOutOfSync
//	CommitRollback          CommitRollback                       CommitRollback
//	ApplyRollback           ApplyRollback, PushOutcome           StartApplyRollback, CompleteApplyRollback, FailApplyRollback
//	ReconcileConfiguration  ReconcileConfiguration, PushOutcome  StartReconcile, CompleteReconcile
//	ReconcileMastership     ReconcileMastership                  Connect
//	Connect/DisconnectNode  the link in the View; Classify       (none: the session ends, SessionRetry/SessionFence)
//
// NextCommit and NextApply order them for the committer and the applier.
//
// The Agent is the thin driver: it reads the journal, asks the core,
// performs the Ready's I/O and feeds the device's answer back as an Event.
// It runs three goroutines:
//
//   - the connector keeps one southbound session at a time: a gRPC
//     connection with a long-lived Subscribe (the liveness stream) whose
//     break ends the session at once; it reconnects with exponential
//     backoff and jitter. A session never reconnects underneath (its
//     dialer refuses), so a new connection always gets a new term;
//   - the committer commits proposals and rollbacks (journal only);
//   - the applier records terms, re-pushes, and applies, one Set at a time.
//
// Device answers fall in the failure classes of docs/design.md §4 (Answer): a
// definitive refusal fails the proposal and only it (the later committed
// ones are re-based by journal.FailApply and committed again); a transient failure (lost connection, timeout, overload) ends
// the session and leaves the apply in progress, to be sent again after the
// re-push on the next term; with fencing, an arbitration refusal means
// another sidecar incarnation is master: the session ends and nothing
// fails.
package agent
