package journal

import (
	"errors"
	"strings"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"
)

// Records are stored compressed when that makes them smaller, plain
// otherwise; both, and records written plain by format 5 and before, read
// back as written, and a damaged compressed record is ErrCorrupt.
func TestRecordCodec(t *testing.T) {
	path := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth0"}}, {Name: "config"}, {Name: "description"}}}
	leaf := func(v string) *PathValue { return &PathValue{Path: path, Index: 7, Value: strVal(v)} }
	// A one-leaf proposal names its path four times.
	proposal := &Proposal{Index: 7, Phase: PhaseChange,
		Change:   &Change{Ops: []*Op{{Kind: OpUpdate, Path: path, Values: []*Leaf{{Path: path, Value: strVal("uplink")}}}}, Values: []*PathValue{leaf("uplink")}},
		Rollback: &Rollback{Index: 6, Values: []*PathValue{leaf("old")}}}
	for _, tc := range []struct {
		name       string
		msg        proto.Message
		compressed bool
	}{
		{"a one-leaf proposal", proposal, true},
		{"a small record", &Configuration{FirstIndex: 1, LastIndex: 9}, false},
		{"an incompressible value", &PathValue{Value: strVal(incompressible(4096))}, false},
		{"an empty record", &Mastership{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := encodeRecord(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(b) > 0 && b[0] == compressedRecord; got != tc.compressed {
				t.Fatalf("stored compressed: %v, want %v (%d bytes, %d plain)", got, tc.compressed, len(b), len(plain))
			}
			if tc.compressed && 2*len(b) > len(plain) {
				t.Errorf("compressed to %d bytes from %d: want half or less", len(b), len(plain))
			}
			for _, stored := range [][]byte{b, plain} {
				got := tc.msg.ProtoReflect().New().Interface()
				if err := decodeRecord(stored, got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.msg, got, protocmp.Transform()); diff != "" {
					t.Errorf("read back (-want +got):\n%s", diff)
				}
			}
			if tc.compressed {
				damaged := append([]byte(nil), b[:len(b)/2]...)
				err := decodeRecord(damaged, &Proposal{})
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "decompress") {
					t.Errorf("a truncated compressed record: %v, want ErrCorrupt", err)
				}
			}
		})
	}
}
