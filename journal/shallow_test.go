package journal

import (
	"slices"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// TestShallowProposal: a transition's copy of a proposal the request
// wrote (writeTxn.proposal) holds every field, and changing what a
// transition changes leaves the original as it was.
func TestShallowProposal(t *testing.T) {
	path := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "a"}}}
	orig := &Proposal{Index: 7, Phase: PhaseChange,
		Change: &Change{Ops: []*Op{{Kind: OpUpdate, Path: path}}, Commit: StatusComplete, Apply: StatusPending,
			Author: "cert:CN=x", Proposed: timestamppb.Now(), Prefix: &gnmi.Path{Target: "t"},
			CommitActions: []*CommitAction{{Action: "extend"}}},
		Rollback: &Rollback{Index: 6, Values: []*PathValue{{Path: path, Deleted: true}}}}
	orig.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01}) // field 127, varint 1
	want := proto.Clone(orig)
	cp := shallowProposal(orig)
	if !proto.Equal(cp, orig) {
		t.Fatalf("copy %v, want %v", cp, orig)
	}
	cp.Phase = PhaseRollback
	cp.Change.Apply = StatusComplete
	cp.Change.Values = []*PathValue{{Path: path}}
	cp.Change.Error = &journalpb.Error{Message: "x"}
	cp.Rollback.Commit = StatusPending
	cp.Change.CommitActions = append(cp.Change.CommitActions, &CommitAction{Action: "confirm"})
	if !proto.Equal(orig, want) {
		t.Errorf("the original changed: %v, want %v", orig, want)
	}
	if empty := shallowProposal(&Proposal{Index: 1}); empty.GetChange() == nil || empty.GetRollback() == nil {
		t.Errorf("a proposal without change or rollback: copy %v, want both present", empty)
	}
}

// TestShallowCopiesAreWhole: the copies written out field by field
// (shallowProposal, cloneConfiguration) hold every field of their messages,
// a field added to the format included: each field of each message is set
// by reflection, and the copy must equal the original.
func TestShallowCopiesAreWhole(t *testing.T) {
	change, rollback, config := &Change{}, &Rollback{}, &Configuration{}
	fillEveryField(t, change.ProtoReflect(), 0) // its messages are shared, not copied
	fillEveryField(t, rollback.ProtoReflect(), 0)
	fillEveryField(t, config.ProtoReflect(), 1) // its messages are copied
	p := &Proposal{}
	fillEveryField(t, p.ProtoReflect(), 0)
	p.Change, p.Rollback = change, rollback
	for _, m := range []proto.Message{p, change, rollback, config, config.GetCommitted(), config.GetApplied(), config.GetHistoryTime()} {
		m.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01}) // field 127, varint 1
	}
	if cp := shallowProposal(p); !proto.Equal(cp, p) {
		t.Errorf("shallowProposal:\n got %v\nwant %v", cp, p)
	}
	want := proto.Clone(config)
	cp := cloneConfiguration(config)
	if !proto.Equal(cp, config) {
		t.Errorf("cloneConfiguration:\n got %v\nwant %v", cp, config)
	}
	if cp.HistoryTime != config.HistoryTime || cp.HistoryFloor != config.HistoryFloor {
		t.Error("cloneConfiguration copied the timestamps: they are shared (a transition replaces one, never changes it)")
	}
	cp.Committed.Index++
	cp.Applied.Term++
	if !proto.Equal(config, want) {
		t.Errorf("changing the clone changed the original: %v, want %v", config, want)
	}
	m := &Mastership{}
	fillEveryField(t, m.ProtoReflect(), 0)
	m.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01})
	if cp := cloneMastership(m); !proto.Equal(cp, m) {
		t.Errorf("cloneMastership:\n got %v\nwant %v", cp, m)
	}
}

// fillEveryField sets every field of m to a value other than its default;
// message fields get messages filled depth levels further down.
func fillEveryField(t testing.TB, m protoreflect.Message, depth int) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			t.Fatalf("%s: a map field; fillEveryField needs a case for it", fd.FullName())
		case fd.IsList():
			list := m.Mutable(fd).List()
			list.Append(someValue(t, fd, list.NewElement, depth))
		case fd.Message() != nil:
			m.Set(fd, someValue(t, fd, func() protoreflect.Value { return m.NewField(fd) }, depth))
		default:
			m.Set(fd, someValue(t, fd, nil, depth))
		}
	}
}

func someValue(t testing.TB, fd protoreflect.FieldDescriptor, newMessage func() protoreflect.Value, depth int) protoreflect.Value {
	t.Helper()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(3)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(3)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(3)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(3)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(3)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(3)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fd.Name()))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		v := newMessage()
		if depth > 0 {
			fillEveryField(t, v.Message(), depth-1)
		}
		return v
	}
	t.Fatalf("%s: kind %v; someValue needs a case for it", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// TestImpliedUnits: the units of values kept as their own units
// (units_are_values) are the values, each after a marker for every list
// entry on its path that no earlier value marked.
func TestImpliedUnits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   []string
	}{
		{name: "no list", values: []string{"/system/config/hostname"},
			want: []string{"/system/config/hostname"}},
		{name: "one entry", values: []string{"/interfaces/interface[name=eth0]/config/mtu"},
			want: []string{"/interfaces/interface[name=eth0]={}", "/interfaces/interface[name=eth0]/config/mtu"}},
		{name: "nested entries", values: []string{"/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=1]/config/description"},
			want: []string{"/interfaces/interface[name=eth0]={}", "/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=1]={}",
				"/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=1]/config/description"}},
		{name: "an entry marked once", values: []string{"/interfaces/interface[name=eth0]/config/mtu", "/interfaces/interface[name=eth0]/config/description",
			"/interfaces/interface[name=eth1]/config/mtu"},
			want: []string{"/interfaces/interface[name=eth0]={}", "/interfaces/interface[name=eth0]/config/mtu", "/interfaces/interface[name=eth0]/config/description",
				"/interfaces/interface[name=eth1]={}", "/interfaces/interface[name=eth1]/config/mtu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var values []*Leaf
			for _, p := range tc.values {
				values = append(values, &Leaf{Path: mustPath(t, p), Value: strVal("v")})
			}
			var got []string
			for _, u := range impliedUnits(values) {
				s := gnmipath.String(u.GetPath())
				if leaves.IsMarker(u.GetValue()) {
					s += "={}"
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("impliedUnits(%v):\n got %q\nwant %q", tc.values, got, tc.want)
			}
		})
	}
}
