package proxy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// answerDevice is a device for the tests of the device's answer (issue 34,
// point 5): it takes every Set (with setDelay), answering with its own
// timestamps (stamps, in order) and the request's prefix echoed, paths
// relative to it, and refuses a Set touching refusePath with a status
// carrying a BadRequest detail. Reads find nothing; there is no liveness
// stream.
type answerDevice struct {
	gpb.UnimplementedGNMIServer
	addr       string
	refusePath string
	setDelay   time.Duration

	mu    sync.Mutex
	sets  []*gpb.SetRequest
	stamp int64
}

func newAnswerDevice(t *testing.T) *answerDevice {
	d := &answerDevice{stamp: 1_000_000_000}
	d.addr = sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, d) })
	return d
}

// refusal is the status the device refuses with.
func (d *answerDevice) refusal() *status.Status {
	st, err := status.New(codes.InvalidArgument, "answer device: "+d.refusePath+" is refused").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "update[0].path", Description: "not writable"}}})
	if err != nil {
		panic(err)
	}
	return st
}

func (d *answerDevice) Capabilities(context.Context, *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	return &gpb.CapabilityResponse{GNMIVersion: "0.10.0"}, nil
}

func (d *answerDevice) Get(context.Context, *gpb.GetRequest) (*gpb.GetResponse, error) {
	return &gpb.GetResponse{}, nil
}

func (d *answerDevice) Subscribe(gpb.GNMI_SubscribeServer) error {
	return status.Error(codes.Unimplemented, "answer device: no subscriptions")
}

func (d *answerDevice) Set(_ context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	time.Sleep(d.setDelay)
	resp := &gpb.SetResponse{Prefix: req.GetPrefix()}
	for _, p := range req.GetDelete() {
		resp.Response = append(resp.Response, &gpb.UpdateResult{Path: p, Op: gpb.UpdateResult_DELETE})
	}
	for _, group := range []struct {
		ups []*gpb.Update
		op  gpb.UpdateResult_Operation
	}{{req.GetReplace(), gpb.UpdateResult_REPLACE}, {req.GetUpdate(), gpb.UpdateResult_UPDATE}} {
		for _, u := range group.ups {
			if s, _ := ygot.PathToString(u.GetPath()); s == d.refusePath && s != "" {
				return nil, d.refusal().Err()
			}
			resp.Response = append(resp.Response, &gpb.UpdateResult{Path: u.GetPath(), Op: group.op})
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(req.GetDelete())+len(req.GetReplace())+len(req.GetUpdate()) > 0 {
		d.sets = append(d.sets, proto.CloneOf(req))
	}
	d.stamp++
	resp.Timestamp = d.stamp
	return resp, nil
}

func (d *answerDevice) setCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sets)
}

// TestRefusalDetailsPassedBack: a change the device refuses with status
// details answers a SYNC client with the device's code, message and
// details, exactly; the sidecar's Response follows them only for a client
// that asked for the sidecar's extension. The journal keeps the details.
func TestRefusalDetailsPassedBack(t *testing.T) {
	dev := newAnswerDevice(t)
	dev.refusePath = "/refused"
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr})
	r.WaitConnected(t, true)
	want := dev.refusal().Proto()
	refused := func(exts ...*gnmi_ext.Extension) *gpb.SetRequest {
		return &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/refused"), Val: sidecartest.StringVal("x")}}, Extension: exts}
	}

	_, err := r.Client.Set(t.Context(), refused())
	if diff := cmp.Diff(want, status.Convert(err).Proto(), protocmp.Transform()); diff != "" {
		t.Errorf("a client that did not ask: the refusal (-device's +through the sidecar):\n%s", diff)
	}
	p := r.Proposal(t, r.LastIndex(t))
	if diff := cmp.Diff(want.GetDetails(), p.GetChange().GetError().GetDetails(), protocmp.Transform()); diff != "" {
		t.Errorf("the journal's error details (-device's +journaled):\n%s", diff)
	}

	_, err = r.Client.Set(t.Context(), refused(sidecartest.SidecarExtension(t, &sidecarpb.Request{})))
	got := status.Convert(err).Proto()
	if n := len(got.GetDetails()); n != len(want.GetDetails())+1 {
		t.Fatalf("a client that asked: %d details, want the device's and the sidecar's Response: %v", n, got)
	}
	if diff := cmp.Diff(want.GetDetails(), got.GetDetails()[:len(want.GetDetails())], protocmp.Transform()); diff != "" {
		t.Errorf("a client that asked: the device's details (-device's +through the sidecar):\n%s", diff)
	}
	resp := &sidecarpb.Response{}
	if err := got.GetDetails()[len(want.GetDetails())].UnmarshalTo(resp); err != nil || resp.GetApply() != sidecarpb.Status_STATUS_FAILED {
		t.Errorf("a client that asked: last detail %v (%v), want the sidecar's Response with apply FAILED", resp, err)
	}
	if got.GetCode() != want.GetCode() || got.GetMessage() != want.GetMessage() {
		t.Errorf("a client that asked: %v %q, want the device's %v %q", got.GetCode(), got.GetMessage(), want.GetCode(), want.GetMessage())
	}
}

// TestRefusalDetailsAlwaysReplyExtension: with --reply-extension=always
// every refused client gets the sidecar's Response after the device's
// details.
func TestRefusalDetailsAlwaysReplyExtension(t *testing.T) {
	dev := newAnswerDevice(t)
	dev.refusePath = "/refused"
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr, AlwaysReplyExtension: true})
	r.WaitConnected(t, true)
	_, err := r.Client.Set(t.Context(), &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/refused"), Val: sidecartest.StringVal("x")}}})
	details := status.Convert(err).Proto().GetDetails()
	if len(details) != 2 || !details[1].MessageIs(&sidecarpb.Response{}) || !details[0].MessageIs(&errdetails.BadRequest{}) {
		t.Errorf("details %v, want the device's BadRequest, then the sidecar's Response", details)
	}
}

// TestBatchedRepliesCarryTheDevicesTimestamp: several clients' changes
// sent to the device as one Set each get the device's timestamp, its echoed
// prefix and their own results, in their own terms.
func TestBatchedRepliesCarryTheDevicesTimestamp(t *testing.T) {
	dev := newAnswerDevice(t)
	dev.setDelay = 100 * time.Millisecond
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr})
	r.WaitConnected(t, true)
	prefix := &gpb.Path{Target: "dev1", Elem: sidecartest.Path(t, "/system/config").GetElem()}
	const clients = 8
	resps := make([]*gpb.SetResponse, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for k := range clients {
		wg.Go(func() {
			resps[k], errs[k] = r.Client.Set(t.Context(), &gpb.SetRequest{Prefix: prefix,
				Update: []*gpb.Update{{Path: sidecartest.Path(t, fmt.Sprintf("/leaf%d", k)), Val: sidecartest.StringVal("v")}}})
		})
	}
	wg.Wait()
	if n := dev.setCount(); n >= clients {
		t.Logf("no batch formed (%d device Sets for %d clients): the test shows less", n, clients)
	}
	for k := range clients {
		if errs[k] != nil {
			t.Fatalf("client %d: %v", k, errs[k])
		}
		want := &gpb.SetResponse{Prefix: prefix, Timestamp: resps[k].GetTimestamp(),
			Response: []*gpb.UpdateResult{{Path: sidecartest.Path(t, fmt.Sprintf("/leaf%d", k)), Op: gpb.UpdateResult_UPDATE}}}
		if diff := cmp.Diff(want, resps[k], protocmp.Transform()); diff != "" {
			t.Errorf("client %d (-want +got):\n%s", k, diff)
		}
		if ts := resps[k].GetTimestamp(); ts <= 1_000_000_000 || ts > 1_000_000_000+clients+10 {
			t.Errorf("client %d: timestamp %d is not one of the device's", k, ts)
		}
	}
}

// TestPathOriginKept: a client's Set with the same origin on its prefix and
// on a path reaches the device with the origin on both, as sent; the
// journal keys the value as the same Set with the origin on the prefix
// alone does.
func TestPathOriginKept(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	for _, onPath := range []bool{true, false} {
		p := sidecartest.Path(t, "/config/description")
		if onPath {
			p.Origin = "openconfig"
		}
		req := &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig", Elem: sidecartest.Path(t, "/interfaces/interface[name=eth0]").GetElem()},
			Update: []*gpb.Update{{Path: p, Val: sidecartest.StringVal(fmt.Sprint("origin-on-path-", onPath))}}}
		if _, err := r.Client.Set(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		rec, ok := r.Dev.LastRequest("Set")
		if !ok {
			t.Fatal("no Set reached the device")
		}
		got := rec.Message.(*gpb.SetRequest)
		if diff := cmp.Diff(req, got, protocmp.Transform()); diff != "" {
			t.Errorf("origin on the path %v: the device's Set (-client's +device's):\n%s", onPath, diff)
		}
		want := string(journal.PathKey(sidecartest.Path(t, descPath)))
		found := false
		for _, v := range r.Proposal(t, r.LastIndex(t)).GetChange().GetValues() {
			found = found || string(journal.PathKey(v.GetPath())) == want
		}
		if !found {
			t.Errorf("origin on the path %v: no journaled value keyed as %s", onPath, descPath)
		}
	}
}
