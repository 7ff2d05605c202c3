package sidecartest

import (
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// StringVal is a TypedValue holding s.
func StringVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// UintVal is a TypedValue holding n.
func UintVal(n uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}}
}

// UpdateRequest is a SetRequest updating the path p (in string form) to v,
// carrying exts.
func UpdateRequest(t testing.TB, p string, v *gpb.TypedValue, exts ...*gnmi_ext.Extension) *gpb.SetRequest {
	t.Helper()
	return &gpb.SetRequest{Update: []*gpb.Update{{Path: Path(t, p), Val: v}}, Extension: exts}
}

// BareRequest is a SetRequest without operations carrying exts.
func BareRequest(exts ...*gnmi_ext.Extension) *gpb.SetRequest {
	return &gpb.SetRequest{Extension: exts}
}

// RegisteredExtension is a registered extension id carrying msg.
func RegisteredExtension(id gnmi_ext.ExtensionID, msg []byte) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: id, Msg: msg}}}
}

// SidecarExtension wraps a sidecar Request in its registered extension
// (proxy.ExtensionID).
func SidecarExtension(t testing.TB, req *sidecarpb.Request) *gnmi_ext.Extension {
	t.Helper()
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return RegisteredExtension(proxy.ExtensionID, msg)
}

// AsyncMode is a sidecar Request asking for an ASYNC Set.
func AsyncMode() *sidecarpb.Request {
	return &sidecarpb.Request{Mode: sidecarpb.SetMode_SET_MODE_ASYNC}
}

// RollbackRequest is a rollback Set of proposal i (0: the newest change).
func RollbackRequest(t testing.TB, i uint64) *gpb.SetRequest {
	t.Helper()
	return BareRequest(SidecarExtension(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: i}}))
}

// ResponseExtension decodes the sidecar's Response from a SetResponse,
// failing the test unless there is exactly one.
func ResponseExtension(t testing.TB, resp *gpb.SetResponse) *sidecarpb.Response {
	t.Helper()
	var out *sidecarpb.Response
	for _, e := range resp.GetExtension() {
		reg := e.GetRegisteredExt()
		if reg == nil || reg.GetId() != proxy.ExtensionID {
			continue
		}
		if out != nil {
			t.Fatalf("SetResponse carries more than one sidecar extension: %v", resp.GetExtension())
		}
		out = &sidecarpb.Response{}
		if err := proto.Unmarshal(reg.GetMsg(), out); err != nil {
			t.Fatalf("sidecar extension of the SetResponse: %v", err)
		}
	}
	if out == nil {
		t.Fatalf("SetResponse carries no sidecar extension (id %d): %v", proxy.ExtensionID, resp)
	}
	return out
}

// CommitExtension is a commit-confirmed extension of commit id with
// action: a *gnmi_ext.CommitRequest, CommitConfirm, CommitCancel or
// CommitSetRollbackDuration (anything else: no action).
func CommitExtension(id string, action any) *gnmi_ext.Extension {
	c := &gnmi_ext.Commit{Id: id}
	switch a := action.(type) {
	case *gnmi_ext.CommitRequest:
		c.Action = &gnmi_ext.Commit_Commit{Commit: a}
	case *gnmi_ext.CommitConfirm:
		c.Action = &gnmi_ext.Commit_Confirm{Confirm: a}
	case *gnmi_ext.CommitCancel:
		c.Action = &gnmi_ext.Commit_Cancel{Cancel: a}
	case *gnmi_ext.CommitSetRollbackDuration:
		c.Action = &gnmi_ext.Commit_SetRollbackDuration{SetRollbackDuration: a}
	}
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
}

// CommitFor is a commit-confirmed commit action rolled back after d
// unless confirmed.
func CommitFor(d time.Duration) *gnmi_ext.CommitRequest {
	return &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(d)}
}

// ExtendTo is a commit-confirmed action setting the rollback duration to d.
func ExtendTo(d time.Duration) *gnmi_ext.CommitSetRollbackDuration {
	return &gnmi_ext.CommitSetRollbackDuration{RollbackDuration: durationpb.New(d)}
}

// WantStatus checks that err is a gRPC status with code and a message
// containing every substring, and returns the status. A nil err, or one
// that is no status, fails the test at once; a wrong code or message is
// reported with t.Errorf.
func WantStatus(t testing.TB, err error, code codes.Code, substrings ...string) *status.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", code)
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	if st.Code() != code {
		t.Errorf("code = %v, want %v (message %q)", st.Code(), code, st.Message())
	}
	for _, s := range substrings {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("message %q does not mention %q", st.Message(), s)
		}
	}
	return st
}

// FullPath is the string form of a response's prefix joined with its
// path p (origins and targets left out); an unprintable path yields the
// error's text.
func FullPath(prefix, p *gpb.Path) string {
	elems := append(append([]*gpb.PathElem(nil), prefix.GetElem()...), p.GetElem()...)
	s, err := ygot.PathToString(&gpb.Path{Elem: elems})
	if err != nil {
		return err.Error()
	}
	return s
}

// IntrospectionPath parses a path, in string form, of the sidecar's
// introspection origin (proxy.IntrospectionOrigin).
func IntrospectionPath(t testing.TB, s string) *gpb.Path {
	t.Helper()
	p := Path(t, s)
	p.Origin = proxy.IntrospectionOrigin
	return p
}

// IntrospectionPrefix is the prefix {origin: proxy.IntrospectionOrigin}.
func IntrospectionPrefix() *gpb.Path { return &gpb.Path{Origin: proxy.IntrospectionOrigin} }
