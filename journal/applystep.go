package journal

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A proposal's record is written whole at least twice: when it is proposed
// and committed, and when its apply completes (and once more when its apply
// starts in a request of its own). The apply's transitions change nothing
// of it but its change's apply step (apply, apply_started, applied), so
// the writer writes such a record as the record it last wrote followed by
// a few bytes that set those fields: protobuf decodes a field met twice as
// the last value of a scalar and the merge of a message, so the record
// decodes as the proposal encoded whole, for every reader and every
// version of the journal, and the writer does not encode the proposal's
// operations and values again (protobuf encodes a path's list keys
// through reflection). The record is a few bytes longer (about 17 for a
// completed apply); maxApplyStepRewrites bounds how often one is extended
// before it is encoded whole again.
const maxApplyStepRewrites = 2

// applyStepSuffix returns the bytes which, appended to the encoding of
// was, make a record that decodes as p, if p differs from was only in its
// change's apply step; ok is false otherwise (the caller then encodes p
// whole). p is a transition's shallow copy of was (shallowProposal): what
// the transition did not change is shared with was, so shared pointers
// and slices are the same ones, and anything else counts as a difference.
// TestApplyStepSuffixSeesEveryField fails when a field is added to these
// messages and not here.
func applyStepSuffix(was, p *Proposal) (suffix []byte, ok bool) {
	rollbackPresent, ok := onlyApplyStepDiffers(was, p)
	if !ok {
		return nil, false
	}
	wc, pc := was.GetChange(), p.GetChange()
	var change []byte
	if pc.Apply != wc.Apply {
		change = protowire.AppendTag(change, fieldChangeApply, protowire.VarintType)
		change = protowire.AppendVarint(change, uint64(pc.Apply))
	}
	var timestampOK bool
	if change, timestampOK = appendTimestampField(change, fieldChangeStarted, wc.ApplyStarted, pc.ApplyStarted); !timestampOK {
		return nil, false
	}
	if change, timestampOK = appendTimestampField(change, fieldChangeApplied, wc.Applied, pc.Applied); !timestampOK {
		return nil, false
	}
	if len(change) > 0 {
		suffix = protowire.AppendTag(suffix, fieldProposalChange, protowire.BytesType)
		suffix = protowire.AppendBytes(suffix, change)
	}
	if rollbackPresent {
		suffix = protowire.AppendTag(suffix, fieldProposalRollback, protowire.BytesType)
		suffix = protowire.AppendBytes(suffix, nil)
	}
	return suffix, true
}

// onlyApplyStepDiffers reports whether p differs from was only in its
// change's apply step (see applyStepSuffix), and whether p has an empty
// rollback where was has none (shallowProposal gives a proposal without a
// rollback an empty one, which p encoded whole would carry).
func onlyApplyStepDiffers(was, p *Proposal) (rollbackPresent, ok bool) {
	if was.GetIndex() != p.GetIndex() || was.GetPhase() != p.GetPhase() ||
		!bytes.Equal(was.ProtoReflect().GetUnknown(), p.ProtoReflect().GetUnknown()) {
		return false, false
	}
	wc, pc := was.GetChange(), p.GetChange()
	if wc == nil || pc == nil || !sameOutsideApplyStep(wc, pc) {
		return false, false
	}
	switch wr, pr := was.GetRollback(), p.GetRollback(); {
	case wr == nil && pr != nil:
		return true, emptyRollback(pr)
	case pr == nil && wr != nil:
		return false, false
	default:
		return false, sameRollback(wr, pr)
	}
}

// appendTimestampField appends field num set to now if it differs from
// was (a different pointer). Both of its fields are written, zero or not,
// so that they replace was's when merged. What a merge cannot undo makes
// ok false: a timestamp cleared (now nil, was not), and unknown fields
// (was's would stay, now's would need encoding).
func appendTimestampField(b []byte, num protowire.Number, was, now *timestamppb.Timestamp) (_ []byte, ok bool) {
	if now == was {
		return b, true
	}
	if now == nil || len(now.ProtoReflect().GetUnknown()) > 0 || len(was.ProtoReflect().GetUnknown()) > 0 {
		return b, false
	}
	var ts []byte
	ts = protowire.AppendTag(ts, fieldTimestampSeconds, protowire.VarintType)
	ts = protowire.AppendVarint(ts, uint64(now.Seconds))
	ts = protowire.AppendTag(ts, fieldTimestampNanos, protowire.VarintType)
	ts = protowire.AppendVarint(ts, uint64(int64(now.Nanos)))
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, ts), true
}

// sameOutsideApplyStep reports whether a and b hold the same fields, the
// apply step aside: the same scalars, and the same (shared) messages and
// slices.
func sameOutsideApplyStep(a, b *Change) bool {
	return sameSlice(a.Ops, b.Ops) && sameSlice(a.Values, b.Values) && a.Commit == b.Commit &&
		a.Proposed == b.Proposed && a.Committed == b.Committed && a.Error == b.Error &&
		a.Adopted == b.Adopted && a.Author == b.Author && a.AbortedBy == b.AbortedBy &&
		a.AdoptedTerm == b.AdoptedTerm && a.Comment == b.Comment && a.Restores == b.Restores &&
		sameSlice(a.Extensions, b.Extensions) && a.Prefix == b.Prefix && a.Baseline == b.Baseline &&
		sameSlice(a.DeviceReads, b.DeviceReads) && sameSlice(a.ReadScopes, b.ReadScopes) &&
		sameSlice(a.Unread, b.Unread) && a.FinalChunk == b.FinalChunk &&
		a.BaselineFirst == b.BaselineFirst && sameSlice(a.CommitActions, b.CommitActions) &&
		bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown())
}

// sameRollback is sameOutsideApplyStep for a rollback, all of it.
func sameRollback(a, b *Rollback) bool {
	return a.Index == b.Index && sameSlice(a.Values, b.Values) && a.Commit == b.Commit &&
		a.Apply == b.Apply && a.Proposed == b.Proposed && a.Committed == b.Committed &&
		a.ApplyStarted == b.ApplyStarted && a.Applied == b.Applied && a.Error == b.Error &&
		a.Author == b.Author && a.Comment == b.Comment &&
		bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown())
}

// emptyRollback reports whether r has no field set.
func emptyRollback(r *Rollback) bool {
	return sameRollback(r, &Rollback{})
}

// sameSlice reports whether a and b are the same slice: the same length
// and, if not empty, the same first element.
func sameSlice[E any](a, b []E) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
