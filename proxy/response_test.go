//lint:file-ignore SA1019 every field of a response is set, the deprecated ones too

package proxy

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestClientResponseIsWholeAndApart checks that clientResponse copies
// every field of the device's response and of its results (a field gNMI
// adds fails it until clientResponse copies it), leaves out the sidecar's
// own extension, and that rewriting the copy into the client's terms
// leaves the device's response, which the batch's other proposals share,
// as it was.
func TestClientResponseIsWholeAndApart(t *testing.T) {
	unknown := []byte{0xf8, 0x07, 0x01} // field 127, varint 1
	result := &gpb.UpdateResult{
		Timestamp: 7,
		Path:      &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth0"}}}},
		Message:   &gpb.Error{Code: 3, Message: "m"},
		Op:        gpb.UpdateResult_UPDATE,
	}
	result.ProtoReflect().SetUnknown(unknown)
	deviceExt := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: 9999, Msg: []byte("device")}}}
	dev := &gpb.SetResponse{
		Prefix:    &gpb.Path{Target: "dev1"},
		Response:  []*gpb.UpdateResult{result},
		Message:   &gpb.Error{Code: 2, Message: "overall"},
		Timestamp: 42,
		Extension: []*gnmi_ext.Extension{
			{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: ExtensionID, Msg: []byte("sidecar")}}},
			deviceExt,
		},
	}
	dev.ProtoReflect().SetUnknown(unknown)
	for _, m := range []protoreflect.Message{dev.ProtoReflect(), result.ProtoReflect()} {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); !m.Has(fd) {
				t.Fatalf("%s is not set here: a field this test (and clientResponse) does not know", fd.FullName())
			}
		}
	}
	got := clientResponse(dev)
	want := proto.Clone(dev).(*gpb.SetResponse)
	want.Extension = []*gnmi_ext.Extension{deviceExt}
	if !proto.Equal(got, want) {
		t.Fatalf("clientResponse:\n got %v\nwant %v", got, want)
	}

	// A device that answers without a prefix has its results' paths
	// rewritten into the client's.
	dev.Prefix = nil
	original := proto.Clone(dev)
	got = clientResponse(dev)
	req := &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "x"}}}}}}
	inClientTerms(got, req)
	if got.GetResponse()[0].GetPath() != req.GetUpdate()[0].GetPath() {
		t.Fatalf("inClientTerms did not rewrite the copy: %v", got)
	}
	if !proto.Equal(dev, original) {
		t.Errorf("rewriting the client's copy changed the device's response:\n got %v\nwant %v", dev, original)
	}
}
