package proxy_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// sameData compares responses taken at different times: timestamps aside,
// and updates in any order (the device walks its tree in map order).
var sameData = cmp.Options{
	protocmp.Transform(),
	protocmp.IgnoreFields(&gpb.Notification{}, "timestamp"),
	protocmp.SortRepeated(func(a, b *gpb.Update) bool {
		return sidecartest.FullPath(nil, a.GetPath()) < sidecartest.FullPath(nil, b.GetPath())
	}),
}

func TestCapabilitiesPassThrough(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	ctx := t.Context()
	want, err := sidecartest.Dial(t, r.Target).Capabilities(ctx, &gpb.CapabilityRequest{})
	if err != nil {
		t.Fatalf("direct Capabilities: %v", err)
	}
	got, err := r.Client.Capabilities(ctx, &gpb.CapabilityRequest{})
	if err != nil {
		t.Fatalf("Capabilities through the proxy: %v", err)
	}
	if len(got.GetSupportedModels()) == 0 || got.GetGNMIVersion() == "" {
		t.Errorf("Capabilities through the proxy lists no models or no gNMI version: %v", got)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Capabilities through the proxy differ from the device's (-device +proxy):\n%s", diff)
	}
}

func TestGetPassThrough(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("uplink to core")))
	for _, tc := range []struct {
		name string
		req  *gpb.GetRequest
		code codes.Code
	}{
		{"leaf PROTO", &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}, Encoding: gpb.Encoding_PROTO}, codes.OK},
		{"list entry JSON_IETF", &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=eth0]")}, Encoding: gpb.Encoding_JSON_IETF}, codes.OK},
		{"prefix and relative path", &gpb.GetRequest{
			Prefix:   sidecartest.Path(t, "/interfaces/interface[name=eth0]"),
			Path:     []*gpb.Path{sidecartest.Path(t, "config/description")},
			Encoding: gpb.Encoding_PROTO,
		}, codes.OK},
		{"state leaf", &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, bootPath)}, Encoding: gpb.Encoding_PROTO, Type: gpb.GetRequest_STATE}, codes.OK},
		{"missing path", &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=eth9]/config/description")}, Encoding: gpb.Encoding_PROTO}, codes.NotFound},
		{"unsupported encoding", &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}, Encoding: gpb.Encoding_ASCII}, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := sidecartest.Dial(t, r.Target).Get(t.Context(), tc.req)
			got, err := r.Client.Get(t.Context(), tc.req)
			if status.Code(wantErr) != tc.code {
				t.Fatalf("the device answers %v, the test expects %v", wantErr, tc.code)
			}
			if tc.code != codes.OK {
				st := sidecartest.WantStatus(t, err, tc.code)
				if st.Message() != status.Convert(wantErr).Message() {
					t.Errorf("message through the proxy %q, the device's is %q", st.Message(), status.Convert(wantErr).Message())
				}
				return
			}
			if err != nil {
				t.Fatalf("Get through the proxy: %v", err)
			}
			if len(got.GetNotification()) == 0 || len(got.GetNotification()[0].GetUpdate()) == 0 {
				t.Fatalf("Get through the proxy returned no data: %v", got)
			}
			if diff := cmp.Diff(want, got, sameData); diff != "" {
				t.Errorf("Get through the proxy differs from the device's (-device +proxy):\n%s", diff)
			}
		})
	}
}

func TestMetadataReachesDevice(t *testing.T) {
	fake := newRecordingDevice(t)
	r := sidecartest.Start(t, sidecartest.Options{Target: fake.addr})
	ctx := metadata.AppendToOutgoingContext(t.Context(),
		"username", "alice", "password", "s3cret", "x-trace-id", "trace-42")
	desc := sidecartest.Path(t, descPath)
	for _, tc := range []struct {
		method string
		call   func(context.Context) error
	}{
		{"Capabilities", func(ctx context.Context) error {
			_, err := r.Client.Capabilities(ctx, &gpb.CapabilityRequest{})
			return err
		}},
		{"Get", func(ctx context.Context) error {
			_, err := r.Client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{desc}})
			return err
		}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			if err := tc.call(ctx); err != nil {
				t.Fatalf("%s through the proxy: %v", tc.method, err)
			}
			c := fake.nextCall(t)
			if c.method != tc.method {
				t.Fatalf("device saw %s, want %s", c.method, tc.method)
			}
			for k, want := range map[string]string{"username": "alice", "password": "s3cret", "x-trace-id": "trace-42"} {
				if got := c.md.Get(k); !cmp.Equal(got, []string{want}) {
					t.Errorf("device saw %q = %q, want [%q]", k, got, want)
				}
			}
		})
	}
}

func TestDeadlineReachesDevice(t *testing.T) {
	fake := newRecordingDevice(t)
	r := sidecartest.Start(t, sidecartest.Options{Target: fake.addr})

	t.Run("client deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second)
		defer cancel()
		clientDeadline, _ := ctx.Deadline()
		if _, err := r.Client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}}); err != nil {
			t.Fatalf("Get through the proxy: %v", err)
		}
		c := fake.nextCall(t)
		if !c.hasDeadline {
			t.Fatal("the device saw no deadline; the client set one")
		}
		// gRPC sends the time left, so the device's clock puts it a
		// little after the client's; it must not be a different deadline.
		if d := c.deadline.Sub(clientDeadline).Abs(); d > time.Second {
			t.Errorf("device deadline %v is %v away from the client's %v", c.deadline, d, clientDeadline)
		}
	})
	t.Run("no client deadline", func(t *testing.T) {
		if _, err := r.Client.Get(t.Context(), &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}}); err != nil {
			t.Fatalf("Get through the proxy: %v", err)
		}
		if c := fake.nextCall(t); c.hasDeadline {
			t.Errorf("the device saw deadline %v; the client set none", c.deadline)
		}
	})
}

func TestSubscribeOncePassThrough(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, &gpb.SetRequest{Update: []*gpb.Update{
		{Path: sidecartest.Path(t, descPath), Val: sidecartest.StringVal("uplink")},
		{Path: sidecartest.Path(t, mtuPath), Val: sidecartest.UintVal(9000)},
	}})
	req := &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode:         gpb.SubscriptionList_ONCE,
		Encoding:     gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]")}},
	}}}
	want := sidecartest.SubscribeOnce(t, sidecartest.Dial(t, r.Target), req)
	got := sidecartest.SubscribeOnce(t, r.Client, req)
	if n := len(got); n < 2 || !got[n-1].GetSyncResponse() || got[0].GetUpdate() == nil {
		t.Fatalf("ONCE through the proxy got %v, want updates then sync_response", got)
	}
	if diff := cmp.Diff(want, got, sameData); diff != "" {
		t.Errorf("ONCE through the proxy differs from the device's (-device +proxy):\n%s", diff)
	}
}

// untilSync receives responses up to and including sync_response and
// returns the leaf values they carried, by path.
func untilSync(t *testing.T, stream gpb.GNMI_SubscribeClient) map[string]*gpb.TypedValue {
	t.Helper()
	leaves := map[string]*gpb.TypedValue{}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for sync_response: %v", err)
		}
		if resp.GetSyncResponse() {
			return leaves
		}
		n := resp.GetUpdate()
		for _, u := range n.GetUpdate() {
			leaves[sidecartest.FullPath(n.GetPrefix(), u.GetPath())] = u.GetVal()
		}
	}
}

func streamReq(t *testing.T, mode gpb.SubscriptionList_Mode, p string) *gpb.SubscribeRequest {
	t.Helper()
	return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode:         mode,
		Encoding:     gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: sidecartest.Path(t, p), Mode: gpb.SubscriptionMode_ON_CHANGE}},
	}}}
}

func TestSubscribeStreamRelaysSet(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("before")))
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, streamReq(t, gpb.SubscriptionList_STREAM, descPath))
	if got := untilSync(t, stream); !proto.Equal(got[descPath], sidecartest.StringVal("before")) {
		t.Fatalf("initial updates %v, want %s = before", got, descPath)
	}

	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("after")))
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for the Set's update: %v", err)
		}
		n := resp.GetUpdate()
		for _, u := range n.GetUpdate() {
			if sidecartest.FullPath(n.GetPrefix(), u.GetPath()) == descPath {
				if !proto.Equal(u.GetVal(), sidecartest.StringVal("after")) {
					t.Fatalf("update of %s = %v, want after", descPath, u.GetVal())
				}
				return
			}
		}
	}
}

func TestSubscribePoll(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("first")))
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, streamReq(t, gpb.SubscriptionList_POLL, descPath))
	if got := untilSync(t, stream); !proto.Equal(got[descPath], sidecartest.StringVal("first")) {
		t.Fatalf("initial poll %v, want %s = first", got, descPath)
	}

	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("second")))
	if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
		t.Fatalf("sending Poll: %v", err)
	}
	if got := untilSync(t, stream); !proto.Equal(got[descPath], sidecartest.StringVal("second")) {
		t.Fatalf("poll after the Set %v, want %s = second", got, descPath)
	}

	// Closing the client side ends the poll subscription cleanly.
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("after CloseSend, Recv = %v, want EOF", err)
	}
}

func TestSubscribeClientCancelEndsDeviceStream(t *testing.T) {
	fake := newRecordingDevice(t)
	r := sidecartest.Start(t, sidecartest.Options{Target: fake.addr})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := r.Subscribe(t, ctx, streamReq(t, gpb.SubscriptionList_STREAM, descPath))
	untilSync(t, stream)

	var deviceCtx context.Context
	select {
	case deviceCtx = <-fake.streams:
	case <-time.After(waitFor):
		t.Fatal("the subscription never reached the device")
	}
	cancel()
	select {
	case <-deviceCtx.Done():
	case <-time.After(waitFor):
		t.Fatal("the device-side stream is still open after the client canceled")
	}
}

func TestSubscribeEndsWhenDeviceStops(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, streamReq(t, gpb.SubscriptionList_STREAM, descPath))
	untilSync(t, stream)

	r.Dev.Stop()
	for {
		resp, err := stream.Recv()
		if err == nil {
			t.Logf("response after the device stopped: %v", resp)
			continue
		}
		sidecartest.WantStatus(t, err, codes.Unavailable, "device "+r.Target)
		return
	}
}

func TestDeviceUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	r := sidecartest.Start(t, sidecartest.Options{Target: addr})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()

	for _, tc := range []struct {
		name string
		call func(t *testing.T) error
	}{
		{"Capabilities", func(*testing.T) error {
			_, err := r.Client.Capabilities(ctx, &gpb.CapabilityRequest{})
			return err
		}},
		{"Get", func(t *testing.T) error {
			_, err := r.Client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}})
			return err
		}},
		{"Subscribe", func(t *testing.T) error {
			stream := r.Subscribe(t, ctx, streamReq(t, gpb.SubscriptionList_ONCE, descPath))
			_, err := stream.Recv()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sidecartest.WantStatus(t, tc.call(t), codes.Unavailable, "device "+addr)
		})
	}
}

// --- a device that records what reaches it ---

// recordingDevice is a minimal gNMI target recording the metadata and
// deadline of every Capabilities and Get, and holding every subscription
// open until its context ends. It refuses the agent's liveness
// subscription, so the agent watches the connection state instead.
type recordingDevice struct {
	gpb.UnimplementedGNMIServer
	addr    string
	calls   chan recordedCall
	streams chan context.Context
}

type recordedCall struct {
	method      string
	md          metadata.MD
	deadline    time.Time
	hasDeadline bool
}

func newRecordingDevice(t *testing.T) *recordingDevice {
	d := &recordingDevice{calls: make(chan recordedCall, 16), streams: make(chan context.Context, 16)}
	d.addr = sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, d) })
	return d
}

func (d *recordingDevice) record(method string, ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	deadline, ok := ctx.Deadline()
	d.calls <- recordedCall{method: method, md: md, deadline: deadline, hasDeadline: ok}
}

// nextCall returns the oldest call not yet looked at.
func (d *recordingDevice) nextCall(t *testing.T) recordedCall {
	t.Helper()
	select {
	case c := <-d.calls:
		return c
	case <-time.After(waitFor):
		t.Fatal("no call reached the device")
		return recordedCall{}
	}
}

func (d *recordingDevice) Capabilities(ctx context.Context, _ *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	d.record("Capabilities", ctx)
	return &gpb.CapabilityResponse{GNMIVersion: "0.10.0"}, nil
}

func (d *recordingDevice) Get(ctx context.Context, _ *gpb.GetRequest) (*gpb.GetResponse, error) {
	d.record("Get", ctx)
	return &gpb.GetResponse{}, nil
}

func (d *recordingDevice) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	for _, s := range req.GetSubscribe().GetSubscription() {
		if p, err := ygot.PathToString(s.GetPath()); err == nil && p == bootPath {
			return status.Error(codes.Unimplemented, "recording device: no liveness stream")
		}
	}
	if err := stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}}); err != nil {
		return err
	}
	ctx := stream.Context()
	d.streams <- ctx
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}
