package journal

import (
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// The journal's records are protobuf messages, stored compressed (S2) when
// that makes them smaller: a proposal names each path it writes up to four
// times (its operation, the operation's leaves, its effective values and
// its rollback's before-images) and a history delta twice, so compression
// halves both. Every byte kept out of Badger is a byte its compactions and
// value-log GC do not copy again ("Records" in docs/bench.md).
//
// A compressed record is compressedRecord followed by the S2 block. A
// protobuf message never starts with a zero byte (it would be a field
// numbered 0), so records written plain (format 5 and before, and those
// compression would not shrink) read as they were.
const compressedRecord = 0x00

// compressFrom is the smallest encoded record worth compressing: below it
// a record has no repeated path to gain on and stays plain.
const compressFrom = 96

// encodeRecord encodes m as the journal stores it.
func encodeRecord(m proto.Message) ([]byte, error) {
	plain, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return compressRecord(plain), nil
}

// compressRecord returns the record to store for a message encoded plain:
// plain itself, or compressed if that makes it smaller.
func compressRecord(plain []byte) []byte {
	if len(plain) < compressFrom {
		return plain
	}
	c := make([]byte, 1+s2.MaxEncodedLen(len(plain)))
	c[0] = compressedRecord
	n := len(s2.Encode(c[1:], plain))
	if 1+n >= len(plain) {
		return plain
	}
	return c[:1+n]
}

// decodeRecord decodes into m a record encodeRecord wrote, or one written
// plain.
func decodeRecord(v []byte, m proto.Message) error {
	return decodeRecordWith(proto.UnmarshalOptions{}, v, m)
}

// decodeRecordWith is decodeRecord with opts.
func decodeRecordWith(opts proto.UnmarshalOptions, v []byte, m proto.Message) error {
	if len(v) > 0 && v[0] == compressedRecord {
		plain, err := s2.Decode(nil, v[1:])
		if err != nil {
			return fmt.Errorf("decompress record: %v: %w", err, ErrCorrupt)
		}
		v = plain
	}
	return opts.Unmarshal(v, m)
}

// Field numbers of journal.proto that the writer writes by hand: an
// apply step appended to a proposal's record (applyStepSuffix), and the
// records encoded in parts, embedding the encodings of the PathValues they
// hold that it has already made (plainValues). TestPartFieldNumbers
// checks them against journal.proto.
const (
	fieldProposalChange      protowire.Number = 3
	fieldProposalRollback    protowire.Number = 4
	fieldChangeValues        protowire.Number = 2
	fieldChangeApply         protowire.Number = 4
	fieldChangeStarted       protowire.Number = 7
	fieldChangeApplied       protowire.Number = 8
	fieldRollbackValues      protowire.Number = 2
	fieldTimestampSeconds    protowire.Number = 1
	fieldTimestampNanos      protowire.Number = 2
	fieldHistoryDeltaEntries protowire.Number = 4
	fieldHistoryEntryBefore  protowire.Number = 1
	fieldHistoryEntryAfter   protowire.Number = 2
)

// plainValues are the plain encodings (proto.Marshal) of the PathValues a
// writer's transaction holds encoded already, by identity: those it wrote
// as committed or applied values, and those it read from the records it
// keeps (recentValues). A commit writes each path's new value once as its
// committed value, once in its history delta and once in its proposal's
// values, and the value it replaces once in the delta and once in the
// rollback's values: the delta and the proposal embed the encodings made
// for the value records rather than encoding the values again (a gNMI
// path's list keys are a map, which protobuf encodes through reflection).
// A PathValue is never changed once built, so its encoding stays valid.
type plainValues map[*PathValue][]byte

// appendValue appends pv as field n of a message: its known encoding, or
// one made now.
func (pl plainValues) appendValue(b []byte, n protowire.Number, pv *PathValue) ([]byte, error) {
	enc, ok := pl[pv]
	if !ok {
		var err error
		if enc, err = proto.Marshal(pv); err != nil {
			return nil, err
		}
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, enc), nil
}

// appendValues appends to b, the encoding of a message, its field parent
// (a message) holding only vs as its repeated field n: a second occurrence
// of parent, which protobuf merges into the first (vs appended to its
// field n).
func (pl plainValues) appendValues(b []byte, parent, n protowire.Number, vs []*PathValue) ([]byte, error) {
	var inner []byte
	var err error
	for _, pv := range vs {
		if inner, err = pl.appendValue(inner, n, pv); err != nil {
			return nil, err
		}
	}
	b = protowire.AppendTag(b, parent, protowire.BytesType)
	return protowire.AppendBytes(b, inner), nil
}

// holdsAny reports whether pl holds the encoding of one of vs.
func (pl plainValues) holdsAny(vs []*PathValue) bool {
	for _, pv := range vs {
		if _, ok := pl[pv]; ok {
			return true
		}
	}
	return false
}

// marshalHistoryDelta is proto.Marshal(d), embedding the encodings pl
// holds of its entries' values.
func (pl plainValues) marshalHistoryDelta(d *journalpb.HistoryDelta) ([]byte, error) {
	if len(d.ProtoReflect().GetUnknown()) > 0 || slices.ContainsFunc(d.GetEntries(), func(e *journalpb.HistoryEntry) bool {
		return len(e.ProtoReflect().GetUnknown()) > 0
	}) {
		return proto.Marshal(d)
	}
	b, err := proto.Marshal(&journalpb.HistoryDelta{Time: d.GetTime(), Proposal: d.GetProposal(), Kind: d.GetKind()})
	if err != nil {
		return nil, err
	}
	var entry []byte
	for _, e := range d.GetEntries() {
		entry = entry[:0]
		if e.GetBefore() != nil {
			if entry, err = pl.appendValue(entry, fieldHistoryEntryBefore, e.GetBefore()); err != nil {
				return nil, err
			}
		}
		if e.GetAfter() != nil {
			if entry, err = pl.appendValue(entry, fieldHistoryEntryAfter, e.GetAfter()); err != nil {
				return nil, err
			}
		}
		b = protowire.AppendTag(b, fieldHistoryDeltaEntries, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b, nil
}

// marshalProposal is proto.Marshal(p), embedding the encodings pl holds
// of its change's and rollback's values.
func (pl plainValues) marshalProposal(p *Proposal) ([]byte, error) {
	ch, rb := p.GetChange(), p.GetRollback()
	ownChange, ownRollback := pl.holdsAny(ch.GetValues()), pl.holdsAny(rb.GetValues())
	if !ownChange && !ownRollback {
		return proto.Marshal(p)
	}
	out := &Proposal{Index: p.GetIndex(), Phase: p.GetPhase(), Change: ch, Rollback: rb}
	out.CopyUnknownOf(p)
	if ownChange {
		out.Change = shallowChange(ch)
		out.Change.Values = nil
	}
	if ownRollback {
		out.Rollback = shallowRollback(rb)
		out.Rollback.Values = nil
	}
	b, err := proto.Marshal(out)
	if err != nil {
		return nil, err
	}
	if ownChange {
		if b, err = pl.appendValues(b, fieldProposalChange, fieldChangeValues, ch.GetValues()); err != nil {
			return nil, err
		}
	}
	if ownRollback {
		if b, err = pl.appendValues(b, fieldProposalRollback, fieldRollbackValues, rb.GetValues()); err != nil {
			return nil, err
		}
	}
	return b, nil
}
