// Package agent drives the configuration state machine of DESIGN.md §3
// (spec ConfigImpl.tla): it commits journaled proposals, applies them to
// the device strictly in index order and one at a time, applies rollbacks
// newest first, and keeps the device in step with the journal across
// reconnects and device restarts by re-pushing the applied configuration.
//
// The decisions are pure functions over journal state, one per spec action
// (decide.go: CommitChange, ApplyChange, CommitRollback, ApplyRollback,
// ReconcileConfiguration, ReconcileMastership). The Agent is the thin
// driver around them: it loads a View, asks for the next Step, performs
// the Step's device I/O and records the result as one journal transition.
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
// Device answers fall in the failure classes of DESIGN §4: a definitive
// rejection fails the proposal (later committed ones are aborted); a
// transient failure (lost connection, timeout, overload) ends the session
// and leaves the apply in progress, to be sent again after the re-push on
// the next term; with fencing, an arbitration refusal means another
// sidecar incarnation is master: the session ends and nothing fails.
package agent
