package journalpb

import "slices"

// The journal copies records field by field rather than by reflection
// (journal.shallowProposal, cloneConfiguration: the writer copies a
// proposal and the configuration at every transition). These methods
// carry a record's unknown fields (those of a newer format) into such a
// copy without protoreflect, whose per-message calls cost the writer about
// 1.5 µs a Set (docs/bench.md). journal.TestShallowCopiesAreWhole checks
// that the copies keep them.

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Proposal) CopyUnknownOf(y *Proposal) { x.unknownFields = cloneUnknown(y.unknownFields) }

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Change) CopyUnknownOf(y *Change) { x.unknownFields = cloneUnknown(y.unknownFields) }

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Rollback) CopyUnknownOf(y *Rollback) { x.unknownFields = cloneUnknown(y.unknownFields) }

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Configuration) CopyUnknownOf(y *Configuration) {
	x.unknownFields = cloneUnknown(y.unknownFields)
}

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Committed) CopyUnknownOf(y *Committed) { x.unknownFields = cloneUnknown(y.unknownFields) }

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Applied) CopyUnknownOf(y *Applied) { x.unknownFields = cloneUnknown(y.unknownFields) }

// CopyUnknownOf gives x, a new message, y's unknown fields (a copy).
func (x *Mastership) CopyUnknownOf(y *Mastership) { x.unknownFields = cloneUnknown(y.unknownFields) }

// cloneUnknown copies unknown-field bytes: a message may append to its
// own (protobuf's merge does), which must not write into another's.
func cloneUnknown(u []byte) []byte {
	if len(u) == 0 {
		return nil
	}
	return slices.Clone(u)
}
