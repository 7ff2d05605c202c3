// Package journal is the sidecar's memory: the only state that survives a
// crash. It stores, in one Badger database per sidecar directory, the state
// of the configuration state machine of docs/design.md §3 (the formal
// model's docs/spec/ConfigImpl.tla.txt): the proposals, the configuration (committed and applied),
// the mastership term and connection counter, and the outstanding
// commit-confirmed.
//
// # Data model
//
// A proposal is a journaled Set: its operations (deletes, replaces,
// updates over gNMI paths and TypedValues, kept exactly as sent), its phase
// (Change, then possibly Rollback), the commit and apply status of the
// change and of the rollback, the effective per-path values the change
// wrote, the rollback values (what each touched path held before, a
// tombstone with index 0 if it was absent) and rollback index, a timestamp
// per transition and the error of a failure.
//
// The configuration is a map from path to PathValue (the index of the
// proposal that wrote it and a value, or a tombstone for a delete), twice:
// committed and applied. The configuration record holds committed.{proposal,
// index}, applied.{proposal, index, term, target}, the re-push status, the
// range of kept proposals and the rollback under way.
//
// Every change of the committed values is also kept as a history delta
// (time, proposal, kind, and each path's value before and after), for
// point-in-time reads (CommittedAt) and time ranges (History) of the gNMI
// History extension. Delta times never go back, even when the clock does.
//
// # Commit-confirmed
//
// At most one commit-confirmed (gnmi_ext.Commit; docs/design.md §4, OpenConfig
// gnmi-commit-confirmed.md v0.1.0) is outstanding. Its record holds the
// client's commit id, the proposal it journaled, the rollback deadline,
// when it started and whether it was cancelled. ProposeConfirmedChange
// writes it with its proposal; ConfirmCommit removes it (the change stays);
// CancelCommit marks it cancelled and due now; SetCommitDeadline moves the
// deadline; ExpireCommit, called by the agent once the deadline passed (or
// the cancel is due) and the change is applied, removes it and proposes the
// change's rollback in the same transaction. A failure of its change
// (FailCommit, FailApply, AbortApply) removes it too, so the client may
// commit again at once. While it is outstanding ProposeChange,
// ProposeConfirmedChange and ProposeRollback are refused: its proposal
// stays the newest, so its rollback is always allowed once it is applied.
// Like everything else, it survives a restart with its deadline.
//
// # Key layout
//
//	m                        Meta{format}; checked on Open
//	c                        Configuration
//	s                        Mastership{term, conn}
//	x                        CommitConfirm{id, proposal, deadline, cancelled, started, author, cancelled_by, extended_by, extended} (absent when none is outstanding)
//	p/<index u64be>          Proposal
//	lc/<pathkey>             committed PathValue
//	la/<pathkey>             applied PathValue (a re-push reads them in path order: ReplayApplied, replay.go)
//	lt/<index u64be><pathkey> (empty) applied tombstones by writer index, for retention (an entry whose tombstone a later value replaced stays until retention passes it)
//	k/<pathkey>              ListKeys: the key names of a list, learned from journaled paths (listkeys.go)
//	h/<seq u64be>            HistoryDelta{time, proposal, kind, entries}: one change of the committed values
//	os/<pathkey>, rs/...     OutOfSync records and resolutions (outofsync.go)
//	e/<role>                 the highest election id per role (election.go)
//	tg/<name>                Tag{name, index, history_seq, time, created, author, comment}: a named point (checkpoints.go)
//	td/<tag_changes u64be>   TagDeletion{tag, deleted, author, comment}: a deleted tag, the newest 256 tag changes' (actors.go)
//	sc/<pathkey>             gnmi.Path: a read scope, a subtree read from the device (beforeimages.go)
//
// Records are protobuf messages (journalpb/journal.proto), stored
// compressed when that makes them smaller (codec.go); a proposal whose
// apply starts or completes is stored as its previous record followed by
// the fields that step sets, which decodes as the whole record
// (applystep.go); of the proposals one device Set completes, only the
// newest's record is written, and readers read the others complete
// through Configuration.applies_completed_through (derived.go). Those of
// valueThreshold bytes or more (proposals, history deltas) live in
// Badger's value log, the tree holding their keys. Path keys are
// PathKey's order-preserving encoding, so a subtree is a key range and a
// transition costs O(paths it touches), never O(configuration size).
//
// # Transactions and durability
//
// Every transition (ProposeChange, CommitChange, StartApply, CompleteApply,
// FailApply, ConfirmCommit, ...) is a method that checks the spec's guards and writes its
// whole effect in one Badger transaction; a refused transition returns an
// error wrapping ErrGuard (or ErrNotFound, ErrCompacted, ErrInvalid) and
// writes nothing. Spec sub-steps that exist only because the reference
// implementation used separate stores are merged into one transaction: a
// merged step is a sequence of spec steps, so every durable state is one the
// spec allows; such a transition emits one Observer event per step (see
// Action). Applying is split in two (StartApply, then CompleteApply or
// FailApply) because device I/O happens in between; CompleteApply names the
// mastership term the device I/O ran under and is refused if the term has
// moved on (the device may have restarted: re-push, then apply again).
// A transient device failure is not a transition: the apply stays
// InProgress and StartApply may be called again for it after the re-push.
//
// One goroutine owns all writes. Concurrent callers' transitions are
// batched into one transaction and one fsync (group commit), in arrival
// order, each seeing the effects of those before it. A method returns only
// after the transaction holding its transition is durable (fsync'd; unless
// Options.NoSync, for tests). If the caller's context ends before the writer
// took the transition, nothing is written; after that, the transition is
// carried out and its result returned.
//
// A second process opening the same directory fails with ErrLocked.
// Retention (Compact, also run in the background) keeps the newest
// Options.Retain finished proposals and the history deltas of kept
// proposals. It also drops the tombstones that dropped proposals left in
// the configuration, unless a value stored earlier at an ancestor path (a
// JSON value holding the deleted path) still needs them on a re-push.
// Badger's value-log GC runs after each compaction of its tables, and
// every GCInterval, in the writer between transactions (collectValueLog,
// flushForValueLog).
//
// # Retention's bound on the writer
//
// Retention runs in slices, each a request to the writer like a client's
// transition, so client transitions queued meanwhile run between two
// slices. A slice drops at most 64 proposals (one point read each) and 64
// history deltas, and steps on at most 64 history entries; a tombstone
// slice re-checks at most 32 tombstones (a few point reads each), found
// beforehand in a read transaction off the writer. So a transition that
// shares a transaction with a slice, or waits behind one, waits for at
// most that much work: about 2 ms on a loaded 2-core machine, about 30 µs
// per dropped proposal with its history (retentionSlice, tombstoneSlice). Its cost is proportional to what it
// drops: it never steps again on what an earlier slice dropped (Badger
// keeps deleted keys until its own compaction rewrites their tables, and
// a scan from the head of the history would step over every one): the
// proposals go from the configuration's FirstIndex, the history deltas
// from an in-memory cursor (the first seq not dropped, found by one seek
// at Open), the tombstones from the FirstIndex of the last complete
// tombstone scan (from 0 after Open). TestRetentionSlices checks the
// bound, as counts, over many retention cycles.
//
// The value log's GC runs in the writer too, a step between two batches:
// a step rewrites the live records of one value-log file (1 MiB) and
// removes it, and a transition waits for at most one step: 10–40 ms on a
// loaded 2-core machine, about 8 µs per record the file holds (one
// lookup each). That is longer than a retention slice, and Badger's to bound:
// the file is its unit, and 1 MiB its least. It must not overlap a write
// (see collectValueLog).
//
// # Checkpoints
//
// A tag names a point of the history: the committed configuration after
// history delta seq (CreateTag). ProposeRestore proposes, as one change
// recorded with Change.restores, what every path changed by a later delta
// held at the point, so going back to it is one proposal and one device
// Set, itself rolled back like any change. A tag does not hold retention
// back: once the deltas after its point are dropped, going back to it is
// refused (ErrCompacted). DryRun computes a Set's effect on the committed
// values in a read transaction and writes nothing.
package journal
