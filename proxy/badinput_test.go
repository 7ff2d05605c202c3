package proxy_test

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed/sidecartest"
)

func TestSetBadInput(t *testing.T) {
	r := newRig(t, sidecartest.Options{})
	r.mustSet(updateReq(t, descPath, strVal("kept")))
	desc := func() *gpb.Path { return sidecartest.Path(t, descPath) }
	val := strVal("x")
	ext := func(req *sidecarpb.Request) []*gnmi_ext.Extension {
		return []*gnmi_ext.Extension{sidecarExt(t, req)}
	}
	for _, tc := range []struct {
		name string
		req  *gpb.SetRequest
		code codes.Code
		msg  []string
	}{{
		name: "empty SetRequest",
		req:  &gpb.SetRequest{},
		code: codes.InvalidArgument, msg: []string{"no operations"},
	}, {
		name: "unknown registered extension id",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(), Val: val}},
			Extension: []*gnmi_ext.Extension{registeredExt(42, nil)}},
		code: codes.InvalidArgument, msg: []string{"unknown registered extension id 42", "999"},
	}, {
		name: "garbage in the sidecar extension",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(), Val: val}},
			Extension: []*gnmi_ext.Extension{registeredExt(999, []byte{0xff, 0xff, 0xff})}},
		code: codes.InvalidArgument, msg: []string{"id 999", "gnmisidecar.extension.v1.Request"},
	}, {
		name: "two sidecar extensions",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(), Val: val}},
			Extension: append(ext(&sidecarpb.Request{}), ext(asyncExt)...)},
		code: codes.InvalidArgument, msg: []string{"more than one sidecar extension"},
	}, {
		name: "unknown set mode",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(), Val: val}},
			Extension: ext(&sidecarpb.Request{Mode: 7})},
		code: codes.InvalidArgument, msg: []string{"unknown set mode 7"},
	}, {
		name: "commit-confirmed without an id",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(), Val: val}},
			Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{
				Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{}}}}}}},
		code: codes.InvalidArgument, msg: []string{"commit-confirmed", "id is required"},
	}, {
		name: "a Set on the introspection origin",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Origin: "gnmi-sidecar",
			Elem: []*gpb.PathElem{{Name: "configuration"}, {Name: "state"}, {Name: "last-index"}}}, Val: val}}},
		code: codes.InvalidArgument, msg: []string{"gnmi-sidecar", "read-only"},
	}, {
		name: "history extension",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(), Val: val}},
			Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}}},
		code: codes.InvalidArgument, msg: []string{"History", "not valid on Set"},
	}, {
		name: "element without a name",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{
			{Name: "interfaces"}, {Name: ""}, {Name: "description"}}}, Val: val}}},
		code: codes.InvalidArgument, msg: []string{"element without a name"},
	}, {
		name: "wildcard element",
		req:  &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/*/config/description"), Val: val}}},
		code: codes.InvalidArgument, msg: []string{"wildcard", "concrete"},
	}, {
		name: "wildcard key",
		req:  &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=*]/config/description")}},
		code: codes.InvalidArgument, msg: []string{"wildcard"},
	}, {
		name: "wildcard in the prefix",
		req: &gpb.SetRequest{Prefix: sidecartest.Path(t, "/interfaces/interface[name=*]"),
			Update: []*gpb.Update{{Path: sidecartest.Path(t, "config/description"), Val: val}}},
		code: codes.InvalidArgument, msg: []string{"wildcard"},
	}, {
		name: "deprecated path element field",
		req: &gpb.SetRequest{Delete: []*gpb.Path{{
			Element: []string{"interfaces", "interface", "eth0"}}}},
		code: codes.InvalidArgument, msg: []string{"deprecated element field", "elem"},
	}, {
		name: "deprecated Update.value",
		req: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(),
			//lint:ignore SA1019 the deprecated field is what is under test
			Value: &gpb.Value{Value: []byte(`"x"`), Type: gpb.Encoding_JSON}}}},
		code: codes.InvalidArgument, msg: []string{"deprecated value field", "val"},
	}, {
		name: "update without val",
		req:  &gpb.SetRequest{Update: []*gpb.Update{{Path: desc()}}},
		code: codes.InvalidArgument, msg: []string{"update of " + descPath, "no value"},
	}, {
		name: "replace with an empty TypedValue",
		req:  &gpb.SetRequest{Replace: []*gpb.Update{{Path: desc(), Val: &gpb.TypedValue{}}}},
		code: codes.InvalidArgument, msg: []string{"replace of " + descPath, "no value"},
	}, {
		name: "update without a path",
		req:  &gpb.SetRequest{Update: []*gpb.Update{{Val: val}}},
		code: codes.InvalidArgument, msg: []string{"without a path"},
	}, {
		name: "union_replace",
		req:  &gpb.SetRequest{UnionReplace: []*gpb.Update{{Path: desc(), Val: val}}},
		code: codes.Unimplemented, msg: []string{"union_replace"},
	}, {
		name: "path origin contradicts prefix origin",
		req: &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig"},
			Update: []*gpb.Update{{Path: &gpb.Path{Origin: "cli", Elem: desc().GetElem()}, Val: val}}},
		code: codes.InvalidArgument, msg: []string{`"cli"`, `"openconfig"`, "contradicts"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := r.with(t)
			lastIndex, setCount := r.lastIndex(), r.Dev.SetCount()
			_, err := r.set(tc.req)
			wantStatus(t, err, tc.code, tc.msg...)
			if got := r.lastIndex(); got != lastIndex {
				t.Errorf("journal's last index moved from %d to %d", lastIndex, got)
			}
			if got := r.Dev.SetCount(); got != setCount {
				t.Errorf("%d Sets reached the device", got-setCount)
			}
		})
	}
	r.wantDeviceLeaf(descPath, strVal("kept"))
}
