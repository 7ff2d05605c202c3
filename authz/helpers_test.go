package authz_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// descPath is a leaf of the simulated device.
const descPath = "/interfaces/interface[name=eth0]/config/description"

// waitFor bounds every wait on a condition; tests finish far sooner.
const waitFor = 20 * time.Second

// rig is a whole sidecar in-process (sidecartest.Start) with helpers
// reporting to t.
type rig struct {
	t *testing.T
	*sidecartest.Sidecar
}

func newRig(t *testing.T, opts sidecartest.Options) *rig {
	t.Helper()
	return &rig{t: t, Sidecar: sidecartest.Start(t, opts)}
}

// with returns r reporting to t, for use in t's subtest of r's test.
func (r *rig) with(t *testing.T) *rig {
	c := *r
	c.t = t
	return &c
}

// wantDeviceLeaf checks the device holds want at path (nil: nothing).
func (r *rig) wantDeviceLeaf(path string, want *gpb.TypedValue) {
	r.t.Helper()
	got, ok := sidecartest.DeviceLeaves(r.t, r.Dev)[path]
	switch {
	case want == nil && ok:
		r.t.Errorf("device holds %v at %s, want nothing", got, path)
	case want != nil && !ok:
		r.t.Errorf("device holds nothing at %s, want %v", path, want)
	case want != nil && !proto.Equal(got, want):
		r.t.Errorf("device holds %v at %s, want %v", got, path, want)
	}
}

func strVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// updateReq is a SetRequest updating one path.
func updateReq(t testing.TB, p string, v *gpb.TypedValue, exts ...*gnmi_ext.Extension) *gpb.SetRequest {
	t.Helper()
	return &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, p), Val: v}}, Extension: exts}
}

// sidecarExt wraps a sidecar Request in its registered extension.
func sidecarExt(t testing.TB, req *sidecarpb.Request) *gnmi_ext.Extension {
	t.Helper()
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return registeredExt(proxy.ExtensionID, msg)
}

func registeredExt(id gnmi_ext.ExtensionID, msg []byte) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: id, Msg: msg}}}
}

var asyncExt = &sidecarpb.Request{Mode: sidecarpb.SetMode_SET_MODE_ASYNC}

// rollbackReq is a rollback Set of proposal i (0: the newest change).
func rollbackReq(t testing.TB, i uint64) *gpb.SetRequest {
	t.Helper()
	return &gpb.SetRequest{Extension: []*gnmi_ext.Extension{
		sidecarExt(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: i}})}}
}

// responseExt decodes the sidecar's Response from a SetResponse, failing
// the test unless there is exactly one.
func responseExt(t testing.TB, resp *gpb.SetResponse) *sidecarpb.Response {
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

// wantStatus checks err has code and a message containing every substring,
// and returns its status.
func wantStatus(t testing.TB, err error, code codes.Code, substrings ...string) *status.Status {
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

func commitExt(id string, action any) *gnmi_ext.Extension {
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

func commitFor(d time.Duration) *gnmi_ext.CommitRequest {
	return &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(d)}
}

func extendTo(d time.Duration) *gnmi_ext.CommitSetRollbackDuration {
	return &gnmi_ext.CommitSetRollbackDuration{RollbackDuration: durationpb.New(d)}
}

// bare is a Set without operations carrying exts.
func bare(exts ...*gnmi_ext.Extension) *gpb.SetRequest {
	return &gpb.SetRequest{Extension: exts}
}

// settle waits until the journal records every Set acknowledged so far
// (agent.Settle): call it before reading the journal directly.
func (r *rig) settle() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), waitFor)
	defer cancel()
	if err := r.Agent.Settle(ctx); err != nil {
		r.t.Fatalf("waiting for the journal to record the acknowledged Sets: %v", err)
	}
}

// lastIndex is the journal's newest proposal index.
func (r *rig) lastIndex() uint64 {
	r.t.Helper()
	r.settle()
	c, err := r.Journal.Configuration(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	return c.GetLastIndex()
}

// outstanding returns the journal's outstanding commit-confirmed (nil if
// none).
func (r *rig) outstanding() *journal.CommitConfirm {
	r.t.Helper()
	r.settle()
	rec, err := r.Journal.CommitConfirm(r.t.Context())
	if errors.Is(err, journal.ErrNotFound) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}
