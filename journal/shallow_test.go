package journal

import (
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
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
