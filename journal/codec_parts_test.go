package journal

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// TestPartFieldNumbers checks the field numbers the writer encodes records
// with by hand (plainValues, applyStepSuffix) against journal.proto (and
// the Timestamp's).
func TestPartFieldNumbers(t *testing.T) {
	field := func(m proto.Message, name protoreflect.Name) protowire.Number {
		fd := m.ProtoReflect().Descriptor().Fields().ByName(name)
		if fd == nil {
			t.Fatalf("%s has no field %s", m.ProtoReflect().Descriptor().FullName(), name)
		}
		return fd.Number()
	}
	for _, tt := range []struct {
		m    proto.Message
		name protoreflect.Name
		want protowire.Number
	}{
		{&Proposal{}, "change", fieldProposalChange},
		{&Proposal{}, "rollback", fieldProposalRollback},
		{&Change{}, "values", fieldChangeValues},
		{&Change{}, "apply", fieldChangeApply},
		{&Change{}, "apply_started", fieldChangeStarted},
		{&Change{}, "applied", fieldChangeApplied},
		{&Rollback{}, "values", fieldRollbackValues},
		{&timestamppb.Timestamp{}, "seconds", fieldTimestampSeconds},
		{&timestamppb.Timestamp{}, "nanos", fieldTimestampNanos},
		{&journalpb.HistoryDelta{}, "entries", fieldHistoryDeltaEntries},
		{&journalpb.HistoryEntry{}, "before", fieldHistoryEntryBefore},
		{&journalpb.HistoryEntry{}, "after", fieldHistoryEntryAfter},
	} {
		if got := field(tt.m, tt.name); got != tt.want {
			t.Errorf("%s.%s is field %d, the writer writes it as %d", tt.m.ProtoReflect().Descriptor().FullName(), tt.name, got, tt.want)
		}
	}
}

// TestPartsEncodeAsWhole checks that the records the writer encodes in
// parts, embedding the encodings it holds of some of their values, decode
// as the messages encoded whole: with every field set, with values known
// and not, with no change or no rollback, with absent before-images.
func TestPartsEncodeAsWhole(t *testing.T) {
	value := func(name string, deleted bool) *PathValue {
		return &PathValue{Path: mustPath(t, "/interfaces/interface[name="+name+"]/config/description"), Index: 7, Deleted: deleted, Value: strVal(name)}
	}
	known := func(vs ...*PathValue) plainValues {
		pl := plainValues{}
		for _, pv := range vs {
			b, err := proto.Marshal(pv)
			if err != nil {
				t.Fatal(err)
			}
			pl[pv] = b
		}
		return pl
	}
	decodes := func(t *testing.T, b []byte, want proto.Message) {
		t.Helper()
		got := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("decodes as\n%v\nwant\n%v", got, want)
		}
	}

	a, b, c, d := value("a", false), value("b", false), value("c", true), value("d", false)
	filled := filledProposal(t)
	filled.Change.Values = []*PathValue{a, b}
	filled.Rollback.Values = []*PathValue{c, d}
	noRollback := &Proposal{Index: 3, Change: &Change{Values: []*PathValue{a}, Commit: StatusComplete}}
	noChange := &Proposal{Index: 4, Rollback: &Rollback{Values: []*PathValue{b}}}
	emptyValues := &Proposal{Index: 5, Change: &Change{Values: []*PathValue{a}}, Rollback: &Rollback{}}
	for _, tt := range []struct {
		name string
		p    *Proposal
		pl   plainValues
	}{
		{"every field, all values known", filled, known(a, b, c, d)},
		{"every field, some values known", filled, known(b, c)},
		{"every field, only the change's known", filled, known(a)},
		{"every field, only the rollback's known", filled, known(d)},
		{"every field, none known", filled, nil},
		{"no rollback", noRollback, known(a)},
		{"no change", noChange, known(b)},
		{"a rollback without values", emptyValues, known(a)},
	} {
		t.Run("proposal/"+tt.name, func(t *testing.T) {
			enc, err := tt.pl.marshalProposal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			decodes(t, enc, tt.p)
			if st, err := decodeProposalStatus(enc); err != nil || st.GetChange().GetCommit() != tt.p.GetChange().GetCommit() {
				t.Errorf("status view: %v, %v", st, err)
			}
		})
	}

	at := filled.Change.Proposed
	withUnknown := &journalpb.HistoryEntry{Before: a, After: b}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	for _, tt := range []struct {
		name string
		d    *journalpb.HistoryDelta
		pl   plainValues
	}{
		{"before and after known", &journalpb.HistoryDelta{Time: at, Proposal: 9, Kind: HistoryKindCommitChange,
			Entries: []*journalpb.HistoryEntry{{Before: a, After: b}, {After: c}, {Before: d}, {}}}, known(a, b, c, d)},
		{"some known", &journalpb.HistoryDelta{Time: at, Proposal: 9, Kind: HistoryKindCommitRollback,
			Entries: []*journalpb.HistoryEntry{{Before: a, After: b}, {Before: c, After: d}}}, known(b, c)},
		{"none known", &journalpb.HistoryDelta{Proposal: 1, Entries: []*journalpb.HistoryEntry{{Before: a, After: b}}}, nil},
		{"an entry of a newer format", &journalpb.HistoryDelta{Proposal: 1, Entries: []*journalpb.HistoryEntry{withUnknown}}, known(a, b)},
	} {
		t.Run("history/"+tt.name, func(t *testing.T) {
			enc, err := tt.pl.marshalHistoryDelta(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			decodes(t, enc, tt.d)
			head := &journalpb.HistoryDeltaHead{}
			if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(enc, head); err != nil || head.GetProposal() != tt.d.GetProposal() {
				t.Errorf("head: %v, %v", head, err)
			}
		})
	}
}
