package introspection_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// Paths of the simulated device used throughout.
const (
	descPath = "/interfaces/interface[name=eth0]/config/description"
	mtuPath  = "/interfaces/interface[name=eth0]/config/mtu"
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

// subscribe opens a Subscribe stream through the proxy and sends req.
func (r *rig) subscribe(ctx context.Context, req *gpb.SubscribeRequest) gpb.GNMI_SubscribeClient {
	r.t.Helper()
	stream, err := r.Client.Subscribe(ctx)
	if err != nil {
		r.t.Fatalf("Subscribe through the proxy: %v", err)
	}
	// io.EOF: the stream has already ended; Recv returns its status.
	if err := stream.Send(req); err != nil && err != io.EOF {
		r.t.Fatalf("sending the subscription: %v", err)
	}
	return stream
}

// subscribeOnce runs a ONCE subscription to its end and returns the
// responses.
func subscribeOnce(t *testing.T, c gpb.GNMIClient, req *gpb.SubscribeRequest) []*gpb.SubscribeResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	var out []*gpb.SubscribeResponse
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("ONCE subscription ended with %v after %d responses", err, len(out))
		}
		out = append(out, resp)
	}
}

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

func registeredExt(id gnmi_ext.ExtensionID, msg []byte) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: id, Msg: msg}}}
}

// rollbackReq is a rollback Set of proposal i (0: the newest change).
func rollbackReq(t testing.TB, i uint64) *gpb.SetRequest {
	t.Helper()
	msg, err := proto.Marshal(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: i}})
	if err != nil {
		t.Fatal(err)
	}
	return &gpb.SetRequest{Extension: []*gnmi_ext.Extension{registeredExt(proxy.ExtensionID, msg)}}
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

// fullPath joins a response's prefix and path.
func fullPath(prefix, p *gpb.Path) string {
	elems := append(append([]*gpb.PathElem(nil), prefix.GetElem()...), p.GetElem()...)
	s, err := ygot.PathToString(&gpb.Path{Elem: elems})
	if err != nil {
		return err.Error()
	}
	return s
}
