package journal

import (
	"context"
	"testing"

	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// filledProposal is a proposal with every field of it, its change and its
// rollback set (their messages empty), as a proposal record read back.
func filledProposal(t testing.TB) *Proposal {
	t.Helper()
	change, rollback := &Change{}, &Rollback{}
	fillEveryField(t, change.ProtoReflect(), 0)
	fillEveryField(t, rollback.ProtoReflect(), 0)
	p := &Proposal{}
	fillEveryField(t, p.ProtoReflect(), 0)
	p.Change, p.Rollback = change, rollback
	return p
}

// otherValue is a value of field fd other than the one fillEveryField
// gives it: for a message or a list, a new one.
func otherValue(t *testing.T, m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Value {
	t.Helper()
	switch {
	case fd.IsList():
		list := m.NewField(fd).List()
		list.Append(someValue(t, fd, list.NewElement, 0))
		return protoreflect.ValueOfList(list)
	case fd.Message() != nil:
		return m.NewField(fd)
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(2)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()) + "-other")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(string(fd.Name()) + "-other"))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(4)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(4)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(4)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(4)
	}
	t.Fatalf("%s: kind %v; otherValue needs a case for it", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// withSuffix decodes the encoding of was followed by suffix.
func withSuffix(t *testing.T, was *Proposal, suffix []byte) *Proposal {
	t.Helper()
	b, err := proto.Marshal(was)
	if err != nil {
		t.Fatal(err)
	}
	got := &Proposal{}
	if err := proto.Unmarshal(append(b, suffix...), got); err != nil {
		t.Fatalf("decode the record with its apply step appended: %v", err)
	}
	return got
}

// TestApplyStepSuffixSeesEveryField: applyStepSuffix writes a suffix only
// when a transition changed nothing of a proposal but its change's apply
// step, a field added to the format included (each field of the proposal,
// its change and its rollback is changed in turn by reflection), and the
// record with the suffix decodes as the proposal the transition left.
func TestApplyStepSuffixSeesEveryField(t *testing.T) {
	applyStep := map[protoreflect.Name]bool{"apply": true, "apply_started": true, "applied": true}
	parts := []struct {
		name string
		of   func(*Proposal) protoreflect.Message
		// suffixed: the fields of this message a suffix may carry.
		suffixed map[protoreflect.Name]bool
	}{
		{"proposal", func(p *Proposal) protoreflect.Message { return p.ProtoReflect() }, nil},
		{"change", func(p *Proposal) protoreflect.Message { return p.Change.ProtoReflect() }, applyStep},
		{"rollback", func(p *Proposal) protoreflect.Message { return p.Rollback.ProtoReflect() }, nil},
	}
	for _, part := range parts {
		fields := part.of(&Proposal{Change: &Change{}, Rollback: &Rollback{}}).Descriptor().Fields()
		for k := range fields.Len() {
			fd := fields.Get(k)
			t.Run(part.name+"."+string(fd.Name()), func(t *testing.T) {
				was := filledProposal(t)
				p := shallowProposal(was)
				m := part.of(p)
				m.Set(fd, otherValue(t, m, fd))
				suffix, ok := applyStepSuffix(was, p)
				if want := part.suffixed[fd.Name()]; ok != want {
					t.Fatalf("a change of %s only: suffix written %v, want %v", fd.FullName(), ok, want)
				}
				if ok {
					if got := withSuffix(t, was, suffix); !proto.Equal(got, p) {
						t.Errorf("record with the apply step appended decodes as\n%v\nwant\n%v", got, p)
					}
				}
			})
		}
	}

	t.Run("unchanged", func(t *testing.T) {
		was := filledProposal(t)
		suffix, ok := applyStepSuffix(was, shallowProposal(was))
		if !ok || len(suffix) != 0 {
			t.Errorf("nothing changed: suffix %x, %v; want an empty one", suffix, ok)
		}
	})
	t.Run("unknown fields", func(t *testing.T) {
		for _, of := range parts {
			was := filledProposal(t)
			p := shallowProposal(was)
			of.of(p).SetUnknown([]byte{0xf8, 0x07, 0x01}) // field 127, varint 1
			if _, ok := applyStepSuffix(was, p); ok {
				t.Errorf("%s's unknown fields changed: a suffix was written", of.name)
			}
		}
	})
	t.Run("a timestamp cleared", func(t *testing.T) {
		was := filledProposal(t)
		p := shallowProposal(was)
		p.Change.Applied = nil
		if _, ok := applyStepSuffix(was, p); ok {
			t.Error("applied cleared: a suffix was written (it cannot clear a field)")
		}
	})
	t.Run("zero fields replace set ones", func(t *testing.T) {
		was := filledProposal(t)
		was.Change.Applied = &timestamppb.Timestamp{Seconds: 5, Nanos: 7}
		p := shallowProposal(was)
		p.Change.Applied = &timestamppb.Timestamp{}
		p.Change.Apply = StatusComplete
		suffix, ok := applyStepSuffix(was, p)
		if !ok {
			t.Fatal("no suffix")
		}
		if got := withSuffix(t, was, suffix); !proto.Equal(got, p) {
			t.Errorf("decodes as %v, want %v", got.GetChange().GetApplied(), p.GetChange().GetApplied())
		}
	})
	t.Run("no rollback before", func(t *testing.T) {
		was := filledProposal(t)
		was.Rollback = nil
		p := shallowProposal(was) // an empty rollback
		p.Change.Apply = StatusInProgress
		p.Change.ApplyStarted = timestamppb.Now()
		suffix, ok := applyStepSuffix(was, p)
		if !ok {
			t.Fatal("no suffix")
		}
		if got := withSuffix(t, was, suffix); !proto.Equal(got, p) {
			t.Errorf("decodes as %v, want %v", got, p)
		}
	})
}

// TestApplyStepRecordsReadAsWritten: proposals whose apply started and
// completed each in a transaction of its own (so written as their
// previous record plus the apply step) read back the same from the
// writer's records, from Badger and after a reopen, and the records are
// the shorter way of writing them (the test exercises the suffix).
func TestApplyStepRecordsReadAsWritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j := openTest(t, dir, Options{})
	term := synced(t, j)
	var indexes []uint64
	for k := range 20 {
		indexes = append(indexes, applyChange(t, j, term,
			update(t, "/interfaces/interface[name=eth"+string(rune('0'+k%10))+"]/config/description", "d"+string(rune('a'+k)))))
	}
	checkInvariants(t, j)
	want := map[uint64]*Proposal{}
	for _, i := range indexes {
		p, err := j.Proposal(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if p.GetChange().GetApply() != StatusComplete || p.GetChange().GetApplied() == nil || p.GetChange().GetApplyStarted() == nil {
			t.Fatalf("proposal %d: apply %v, started %v, applied %v; want complete with both times",
				i, p.GetChange().GetApply(), p.GetChange().GetApplyStarted(), p.GetChange().GetApplied())
		}
		want[i] = p
	}
	records, err := j.Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	suffixed := 0
	for _, i := range indexes {
		v := records[string(proposalKey(i))]
		if len(v) > 0 && v[0] == compressedRecord {
			if v, err = s2.Decode(nil, v[1:]); err != nil {
				t.Fatal(err)
			}
		}
		whole, err := proto.Marshal(want[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(v) > len(whole) {
			suffixed++
		}
	}
	if suffixed != len(indexes) {
		t.Errorf("%d of %d records written as their previous record plus the apply step, want all", suffixed, len(indexes))
	}

	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openTest(t, dir, Options{})
	for _, i := range indexes {
		got, err := j.Proposal(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(shallowProposal(got), shallowProposal(want[i])) {
			t.Errorf("proposal %d after a reopen:\n%v\nwant\n%v", i, got, want[i])
		}
		status, err := j.ProposalStatus(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if status.GetChange().GetApply() != StatusComplete {
			t.Errorf("proposal %d's status after a reopen: apply %v, want complete", i, status.GetChange().GetApply())
		}
	}
	checkInvariants(t, j)
}

// FuzzApplyStepSuffix: for any proposal record that decodes, and any
// apply step a transition may set on its shallow copy (the apply status,
// apply_started and applied set, replaced or left), the record with the
// suffix appended decodes as the proposal the transition left, and the
// suffix is written whenever nothing else changed.
func FuzzApplyStepSuffix(f *testing.F) {
	seed := filledProposal(f)
	seed.Change.ApplyStarted = &timestamppb.Timestamp{Seconds: 5, Nanos: 9}
	f.Add(mustMarshal(f, seed), int32(StatusComplete), uint8(3), int64(1_700_000_000), int32(123), int64(-1), int32(-1))
	f.Add(mustMarshal(f, &Proposal{Index: 4, Change: &Change{Apply: StatusPending}}), int32(StatusInProgress), uint8(1),
		int64(0), int32(0), int64(0), int32(0))
	f.Add([]byte{}, int32(0), uint8(0), int64(0), int32(0), int64(0), int32(0))
	f.Fuzz(func(t *testing.T, record []byte, apply int32, set uint8, startedSec int64, startedNanos int32, appliedSec int64, appliedNanos int32) {
		was := &Proposal{}
		if err := proto.Unmarshal(record, was); err != nil {
			t.Skip()
		}
		if was.Change == nil {
			was.Change = &Change{}
		}
		p := shallowProposal(was)
		if set&1 != 0 {
			p.Change.Apply = Status(apply)
		}
		if set&2 != 0 {
			p.Change.ApplyStarted = &timestamppb.Timestamp{Seconds: startedSec, Nanos: startedNanos}
		}
		if set&4 != 0 {
			p.Change.Applied = &timestamppb.Timestamp{Seconds: appliedSec, Nanos: appliedNanos}
		}
		suffix, ok := applyStepSuffix(was, p)
		if !ok {
			// Only a replaced timestamp's unknown fields, which a merge
			// would keep, stop a suffix here.
			if (set&2 == 0 || len(was.Change.GetApplyStarted().ProtoReflect().GetUnknown()) == 0) &&
				(set&4 == 0 || len(was.Change.GetApplied().ProtoReflect().GetUnknown()) == 0) {
				t.Fatalf("only the apply step changed, no suffix: was %v, now %v", was, p)
			}
			return
		}
		got := &Proposal{}
		if err := proto.Unmarshal(append(mustMarshal(t, was), suffix...), got); err != nil {
			t.Fatalf("record with the suffix: %v", err)
		}
		if !proto.Equal(got, p) {
			t.Errorf("record with the suffix decodes as\n%v\nwant\n%v", got, p)
		}
	})
}
