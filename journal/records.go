package journal

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// The journal's records. They are the protobuf messages of journalpb, so the
// agent and the proxy can trace and marshal them as they are.
type (
	Proposal      = journalpb.Proposal
	Change        = journalpb.Change
	Rollback      = journalpb.Rollback
	Configuration = journalpb.Configuration
	PathValue     = journalpb.PathValue
	Op            = journalpb.Op
	Leaf          = journalpb.Leaf
	Mastership    = journalpb.Mastership
	CommitConfirm = journalpb.CommitConfirm
	HistoryDelta  = journalpb.HistoryDelta
	HistoryEntry  = journalpb.HistoryEntry
	HistoryKind   = journalpb.HistoryKind
	ListKeys      = journalpb.ListKeys
	Status        = journalpb.Status
	Phase         = journalpb.Phase
	OpKind        = journalpb.OpKind
)

const (
	StatusUnset      = journalpb.Status_STATUS_UNSET
	StatusPending    = journalpb.Status_STATUS_PENDING
	StatusInProgress = journalpb.Status_STATUS_IN_PROGRESS
	StatusComplete   = journalpb.Status_STATUS_COMPLETE
	StatusAborted    = journalpb.Status_STATUS_ABORTED
	StatusFailed     = journalpb.Status_STATUS_FAILED

	PhaseChange   = journalpb.Phase_PHASE_CHANGE
	PhaseRollback = journalpb.Phase_PHASE_ROLLBACK

	OpDelete  = journalpb.OpKind_OP_KIND_DELETE
	OpReplace = journalpb.OpKind_OP_KIND_REPLACE
	OpUpdate  = journalpb.OpKind_OP_KIND_UPDATE
	// OpUnionReplace is gNMI 0.10's union_replace: the union of a Set's
	// union_replace values replaces the data at each of their paths.
	OpUnionReplace = journalpb.OpKind_OP_KIND_UNION_REPLACE

	// HistoryDelta.Kind: what changed the committed values.
	HistoryKindCommitChange   = journalpb.HistoryKind_HISTORY_KIND_COMMIT_CHANGE
	HistoryKindCommitRollback = journalpb.HistoryKind_HISTORY_KIND_COMMIT_ROLLBACK
	HistoryKindFailApply      = journalpb.HistoryKind_HISTORY_KIND_FAIL_APPLY
	// Retention dropped tombstones that no longer mean anything (the
	// entries' After is unset).
	HistoryKindDropTombstones = journalpb.HistoryKind_HISTORY_KIND_DROP_TOMBSTONES
)

// Finished reports whether s is Complete, Aborted or Failed (the spec's
// Finished set).
func Finished(s Status) bool {
	return s == StatusComplete || s == StatusAborted || s == StatusFailed
}

// ChangeFailed reports whether proposal p's change did not take effect:
// its commit or its apply failed or was aborted.
func ChangeFailed(p *Proposal) bool {
	ch := p.GetChange()
	return ch.GetCommit() == StatusFailed || ch.GetCommit() == StatusAborted ||
		ch.GetApply() == StatusFailed || ch.GetApply() == StatusAborted
}

// Working reports whether s is Pending or InProgress.
func Working(s Status) bool {
	return s == StatusPending || s == StatusInProgress
}

// Key layout (see doc.go).
var (
	keyMeta          = []byte("m")
	keyConfiguration = []byte("c")
	keyMastership    = []byte("s")
	keyCommitConfirm = []byte("x")
	nsProposal       = []byte("p/")
	nsCommitted      = []byte("lc/")
	nsApplied        = []byte("la/")
	nsAppliedDeleted = []byte("lt/")
	nsHistory        = []byte("h/")
	nsListKeys       = []byte("k/")
)

// The namespaces of format 1's values (per Set path), read only by the
// upgrade to format 2 (upgrade.go), which then deletes them.
var format1Namespaces = [][]byte{[]byte("cv/"), []byte("av/"), []byte("ai/"), []byte("at/")}

// nsRetiredAppliedIndex is formats 2 to 6's write-order index of the
// applied values (li/<index u64be><pathkey>), which format 7 no longer
// keeps.
var nsRetiredAppliedIndex = []byte("li/")

// retiredNamespaces are the namespaces of older formats that opening a
// journal of the current format removes if any is left (a crash may come
// between an upgrade's flip of the format and their removal).
var retiredNamespaces = append(slices.Clone(format1Namespaces), nsRetiredAppliedIndex)

func uint64Key(ns []byte, n uint64) []byte {
	k := make([]byte, len(ns), len(ns)+8)
	copy(k, ns)
	return binary.BigEndian.AppendUint64(k, n)
}

func proposalKey(i uint64) []byte  { return uint64Key(nsProposal, i) }
func historyKey(seq uint64) []byte { return uint64Key(nsHistory, seq) }

func valueKey(ns, pathKey []byte) []byte {
	k := make([]byte, 0, len(ns)+len(pathKey))
	return append(append(k, ns...), pathKey...)
}

func appliedTombstoneKey(index uint64, pathKey []byte) []byte {
	return append(uint64Key(nsAppliedDeleted, index), pathKey...)
}

// splitIndexKey splits an lt/ key into its index and path key.
func splitIndexKey(ns, key []byte) (uint64, []byte, error) {
	rest := key[len(ns):]
	if len(rest) < 8 {
		return 0, nil, fmt.Errorf("malformed key %q: no index after %q", key, ns)
	}
	return binary.BigEndian.Uint64(rest[:8]), rest[8:], nil
}

// Done reports whether every step of proposal p is finished: its change's
// commit and apply and, once it is being rolled back, its rollback's.
func Done(p *Proposal) bool { return proposalDone(p) }

// proposalDone reports whether every step of p is finished, so retention may
// drop it.
func proposalDone(p *Proposal) bool {
	if !Finished(p.GetChange().GetCommit()) || !Finished(p.GetChange().GetApply()) {
		return false
	}
	if p.GetPhase() == PhaseRollback {
		return Finished(p.GetRollback().GetCommit()) && Finished(p.GetRollback().GetApply())
	}
	return true
}

// GuardError is a refused transition: Reason says why in words meant for
// the operator ("roll back proposal 3: roll back proposal 5 first"). It
// wraps ErrGuard.
type GuardError struct {
	Reason string
}

func (e *GuardError) Error() string { return "journal: " + e.Reason + ": " + ErrGuard.Error() }

// Unwrap makes errors.Is(err, ErrGuard) hold.
func (e *GuardError) Unwrap() error { return ErrGuard }

func guardf(format string, args ...any) error {
	return &GuardError{Reason: fmt.Sprintf(format, args...)}
}
