package proxy_test

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// wireMsg is a gRPC message as its bytes: what frameDevice and a wireCodec
// client send and receive, so that a test writes and sees the exact bytes
// on the wire.
type wireMsg struct{ b []byte }

// wireCodec passes a *wireMsg's bytes as they are and hands every other
// message to gRPC's protobuf codec. Its name is empty: a call with it
// (grpc.ForceCodecV2) has the default content-type, application/grpc.
type wireCodec struct{}

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*wireMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*wireMsg); ok {
		m.b = data.Materialize()
		return nil
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (wireCodec) Name() string { return "" }

// wireCall makes a call send and receive *wireMsg.
var wireCall = grpc.ForceCodecV2(wireCodec{})

// framePath is the path of the subscriptions frameDevice hands to its
// test.
const framePath = "/relay-test"

// frameDevice is a gNMI target whose Subscribe streams to framePath are
// played by its test, message by message as bytes (wireMsg): play gets the
// stream and the bytes of the first request, and its error ends the
// stream. Every other subscription (the sidecar's liveness stream, drift
// detection) is refused with Unimplemented, as are Capabilities, Get and
// Set.
type frameDevice struct {
	gpb.UnimplementedGNMIServer
	addr string
	play func(stream grpc.ServerStream, first []byte) error
}

func newFrameDevice(t testing.TB, play func(stream grpc.ServerStream, first []byte) error) *frameDevice {
	t.Helper()
	d := &frameDevice{play: play}
	d.addr = sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, d) }, grpc.ForceServerCodecV2(wireCodec{}))
	return d
}

func (d *frameDevice) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	var first wireMsg
	if err := stream.RecvMsg(&first); err != nil {
		return err
	}
	var req gpb.SubscribeRequest
	if err := proto.Unmarshal(first.b, &req); err != nil {
		return status.Errorf(codes.InvalidArgument, "frame device: %v", err)
	}
	subs := req.GetSubscribe().GetSubscription()
	if len(subs) != 1 || len(subs[0].GetPath().GetElem()) != 1 || "/"+subs[0].GetPath().GetElem()[0].GetName() != framePath {
		return status.Error(codes.Unimplemented, "frame device: only "+framePath)
	}
	return d.play(stream, first.b)
}

// frameRequest is a subscription to framePath in mode.
func frameRequest(t testing.TB, mode gpb.SubscriptionList_Mode) *gpb.SubscribeRequest {
	return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode:         mode,
		Encoding:     gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: sidecartest.Path(t, framePath)}},
	}}}
}

// marshal encodes m, failing the test on an error.
func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
