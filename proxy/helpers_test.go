package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// Paths of the simulated device used throughout.
const (
	descPath = "/interfaces/interface[name=eth0]/config/description"
	mtuPath  = "/interfaces/interface[name=eth0]/config/mtu"
	bootPath = "/system/state/boot-time"
)

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

// direct returns a client talking straight to the device.
func (r *rig) direct() gpb.GNMIClient { return sidecartest.Dial(r.t, r.Target) }

// set sends req through the proxy with a bounded context.
func (r *rig) set(req *gpb.SetRequest) (*gpb.SetResponse, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), waitFor)
	defer cancel()
	return r.Client.Set(ctx, req)
}

// mustSet sends req through the proxy and fails the test on an error.
func (r *rig) mustSet(req *gpb.SetRequest) *gpb.SetResponse {
	r.t.Helper()
	resp, err := r.set(req)
	if err != nil {
		r.t.Fatalf("Set through the proxy: %v", err)
	}
	return resp
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

// proposal returns journaled proposal i.
func (r *rig) proposal(i uint64) *journal.Proposal {
	r.t.Helper()
	r.settle()
	p, err := r.Journal.Proposal(r.t.Context(), i)
	if err != nil {
		r.t.Fatalf("journal.Proposal(%d): %v", i, err)
	}
	return p
}

// waitProposal waits until done(proposal i) holds.
func (r *rig) waitProposal(i uint64, done func(*journal.Proposal) bool) *journal.Proposal {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), waitFor)
	defer cancel()
	p, err := r.Agent.Wait(ctx, i, done)
	if err != nil {
		last, _ := r.Journal.Proposal(r.t.Context(), i)
		r.t.Fatalf("waiting for proposal %d: %v (last seen: %v)", i, err, last)
	}
	return p
}

// configValues is the journal's committed and applied values.
type configValues struct {
	Committed, Applied []*journal.PathValue
}

func (r *rig) values() configValues {
	r.t.Helper()
	r.settle()
	var v configValues
	collect := func(dst *[]*journal.PathValue) func(*journal.PathValue) error {
		return func(pv *journal.PathValue) error {
			*dst = append(*dst, pv)
			return nil
		}
	}
	if err := r.Journal.Committed(r.t.Context(), nil, collect(&v.Committed)); err != nil {
		r.t.Fatal(err)
	}
	if err := r.Journal.Applied(r.t.Context(), nil, collect(&v.Applied)); err != nil {
		r.t.Fatal(err)
	}
	return v
}

// deviceLeaf returns the device's configuration leaf at path.
func (r *rig) deviceLeaf(path string) (*gpb.TypedValue, bool) {
	r.t.Helper()
	v, ok := sidecartest.DeviceLeaves(r.t, r.Dev)[path]
	return v, ok
}

// wantDeviceLeaf checks the device holds want at path (nil: nothing).
func (r *rig) wantDeviceLeaf(path string, want *gpb.TypedValue) {
	r.t.Helper()
	got, ok := r.deviceLeaf(path)
	switch {
	case want == nil && ok:
		r.t.Errorf("device holds %v at %s, want nothing", got, path)
	case want != nil && !ok:
		r.t.Errorf("device holds nothing at %s, want %v", path, want)
	case want != nil && !proto.Equal(got, want):
		r.t.Errorf("device holds %v at %s, want %v", got, path, want)
	}
}

// --- requests and responses ---

func strVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

func uintVal(n uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}}
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

// wantResponse checks a sidecar Response.
func wantResponse(t testing.TB, got, want *sidecarpb.Response) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("sidecar Response mismatch (-want +got):\n%s", diff)
	}
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

// detailResponse returns the sidecar Response carried as a status detail.
func detailResponse(t testing.TB, st *status.Status) *sidecarpb.Response {
	t.Helper()
	var out *sidecarpb.Response
	for _, d := range st.Details() {
		if r, ok := d.(*sidecarpb.Response); ok {
			if out != nil {
				t.Fatalf("status carries more than one sidecar Response: %v", st.Details())
			}
			out = r
		}
	}
	if out == nil {
		t.Fatalf("status %v carries no sidecar Response detail (details: %v)", st.Code(), st.Details())
	}
	return out
}

// fullPath joins a response's prefix and path.
func fullPath(prefix, p *gpb.Path) string {
	elems := append(append([]*gpb.PathElem(nil), prefix.GetElem()...), p.GetElem()...)
	s, err := ygot.PathToString(&gpb.Path{Elem: elems})
	if err != nil {
		return err.Error()
	}
	return s
}

// sidecarPath parses a path of origin gnmi-sidecar.
func sidecarPath(t testing.TB, s string) *gpb.Path {
	t.Helper()
	p := sidecartest.Path(t, s)
	p.Origin = proxy.IntrospectionOrigin
	return p
}

// sidecarPrefix is the prefix {origin: gnmi-sidecar}.
func sidecarPrefix() *gpb.Path { return &gpb.Path{Origin: proxy.IntrospectionOrigin} }
