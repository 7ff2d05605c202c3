package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// Field numbers of the gNMI messages the tests write by hand.
const (
	subscribeRequestSubscribe = 1
	subscribeRequestPoll      = 3
	subscribeRequestExtension = 5
	responseUpdate            = 1
	responseSync              = 3
	responseExtension         = 5
	notificationTimestamp     = 1
	notificationUpdate        = 4
)

// message appends length-delimited field num holding b to out.
func message(out []byte, num protowire.Number, b []byte) []byte {
	out = protowire.AppendTag(out, num, protowire.BytesType)
	return protowire.AppendBytes(out, b)
}

// varint appends varint field num holding v to out.
func varint(out []byte, num protowire.Number, v uint64) []byte {
	out = protowire.AppendTag(out, num, protowire.VarintType)
	return protowire.AppendVarint(out, v)
}

// reencoded reports whether decoding b as an M and encoding it again
// changes its bytes: what a relay that decodes would send instead of b.
func reencoded[M any, P interface {
	*M
	proto.Message
}](t *testing.T, b []byte) []byte {
	t.Helper()
	m := P(new(M))
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatalf("the test's message does not decode: %v", err)
	}
	out, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSubscribeRelayByteIdentical: what a device sends on a Subscribe
// stream reaches the client byte for byte, and what the client sends
// reaches the device so, in messages whose bytes decoding and encoding
// again would change (fields in another order than Go's protobuf writes
// them, fields gNMI does not define, a message field repeated, an
// overlong varint); the device's
// final status reaches the client with its code, message and details.
func TestSubscribeRelayByteIdentical(t *testing.T) {
	ext := func(msg string) []byte {
		return marshal(t, &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: 999, Msg: []byte(msg)}}})
	}
	update := marshal(t, &gpb.Update{Path: sidecartest.Path(t, "/relay-test/leaf"), Val: sidecartest.StringVal("v")})
	list := marshal(t, frameRequest(t, gpb.SubscriptionList_STREAM).GetSubscribe())

	var requests [][]byte
	// The first request: its subscription list before its extension (Go's
	// protobuf writes a oneof's field last), and a field gNMI does not
	// define.
	first := message(nil, subscribeRequestSubscribe, list)
	first = message(first, subscribeRequestExtension, ext("from the client"))
	first = varint(first, 77, 1)
	requests = append(requests, first)
	// An empty request, and a poll after a field gNMI does not define.
	requests = append(requests, nil, message(varint(nil, 76, 2), subscribeRequestPoll, nil))

	var responses [][]byte
	// A notification whose fields are in reverse order, with a field
	// gNMI does not define inside it, then the response's extension and a
	// field the response does not define.
	n := message(nil, notificationUpdate, update)
	n = message(n, 50, []byte("a field of a later gNMI"))
	n = varint(n, notificationTimestamp, 42)
	resp := message(nil, responseUpdate, n)
	resp = message(resp, responseExtension, ext("from the device"))
	responses = append(responses, varint(resp, 99, 7))
	// Two notifications in one response: decoding merges them.
	one := varint(message(nil, notificationUpdate, update), notificationTimestamp, 1)
	two := varint(message(nil, notificationUpdate, update), notificationTimestamp, 2)
	responses = append(responses, message(message(nil, responseUpdate, one), responseUpdate, two))
	// A timestamp as an overlong varint (5 in two bytes).
	overlong := append(protowire.AppendTag(nil, notificationTimestamp, protowire.VarintType), 0x85, 0x00)
	responses = append(responses, message(nil, responseUpdate, append(overlong, message(nil, notificationUpdate, update)...)))
	// sync_response, after a field the response does not define.
	responses = append(responses, varint(message(nil, 98, []byte("x")), responseSync, 1))

	for i, b := range requests {
		if len(b) > 0 && bytes.Equal(reencoded[gpb.SubscribeRequest](t, b), b) {
			t.Fatalf("request %d survives decoding and encoding: it proves nothing", i)
		}
	}
	for i, b := range responses {
		if bytes.Equal(reencoded[gpb.SubscribeResponse](t, b), b) {
			t.Fatalf("response %d survives decoding and encoding: it proves nothing", i)
		}
	}

	end, err := status.New(codes.FailedPrecondition, "frame device: the end").WithDetails(sidecartest.Path(t, "/detail[k=v]"))
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan []byte, len(requests))
	dev := newFrameDevice(t, func(stream grpc.ServerStream, first []byte) error {
		received <- first
		for range len(requests) - 1 {
			var req wireMsg
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			received <- req.b
		}
		for _, b := range responses {
			if err := stream.SendMsg(&wireMsg{b}); err != nil {
				return err
			}
		}
		return end.Err()
	})
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := wireStream(t, ctx, r.Addr)
	for _, b := range requests {
		if err := stream.SendMsg(&wireMsg{b}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range requests {
		select {
		case got := <-received:
			if !bytes.Equal(got, want) {
				t.Errorf("request %d reached the device as\n%x, the client sent\n%x", i, got, want)
			}
		case <-ctx.Done():
			t.Fatalf("request %d never reached the device", i)
		}
	}
	for i, want := range responses {
		var got wireMsg
		if err := stream.RecvMsg(&got); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if !bytes.Equal(got.b, want) {
			t.Errorf("response %d reached the client as\n%x, the device sent\n%x", i, got.b, want)
		}
	}
	err = stream.RecvMsg(&wireMsg{})
	if got := status.Convert(err); got.Code() != end.Code() || got.Message() != end.Message() ||
		!proto.Equal(got.Proto(), end.Proto()) {
		t.Errorf("the stream ended with %v (details %v), the device ended it with %v (details %v)", got.Err(), got.Details(), end.Err(), end.Details())
	}
}

// wireStream opens a Subscribe stream to addr whose messages are
// wireMsg.
func wireStream(t testing.TB, ctx context.Context, addr string) grpc.ClientStream {
	t.Helper()
	stream, err := sidecartest.Conn(t, addr).NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, gpb.GNMI_Subscribe_FullMethodName, wireCall)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// TestSubscribeRelayErrors: the relay ends the client's stream with the
// device's status, Unavailable naming the device, or the limit of what
// the sidecar reads from the device, after the messages before it.
func TestSubscribeRelayErrors(t *testing.T) {
	sync := marshal(t, &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}})
	for _, tc := range []struct {
		name   string
		send   [][]byte // before the error
		err    error
		code   codes.Code
		substr []string // of the client's status message; nil: the device's message
	}{
		{name: "refused at once", err: status.Error(codes.PermissionDenied, "frame device: not you"), code: codes.PermissionDenied},
		{name: "device error after a response", send: [][]byte{sync}, err: status.Error(codes.Internal, "frame device: broken"), code: codes.Internal},
		{name: "device unavailable", send: [][]byte{sync}, err: status.Error(codes.Unavailable, "frame device: going away"), code: codes.Unavailable,
			substr: []string{"device 127.0.0.1:", "frame device: going away"}},
		{name: "response over the sidecar's limit", send: [][]byte{sync, make([]byte, 64<<20+1)}, code: codes.ResourceExhausted,
			substr: []string{"larger than max", fmt.Sprint(64 << 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := newFrameDevice(t, func(stream grpc.ServerStream, _ []byte) error {
				for _, b := range tc.send {
					if err := stream.SendMsg(&wireMsg{b}); err != nil {
						return err
					}
				}
				if tc.err != nil {
					return tc.err
				}
				<-stream.Context().Done()
				return nil
			})
			r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr})
			ctx, cancel := context.WithTimeout(t.Context(), waitFor)
			defer cancel()
			stream := wireStream(t, ctx, r.Addr)
			if err := stream.SendMsg(&wireMsg{marshal(t, frameRequest(t, gpb.SubscriptionList_STREAM))}); err != nil {
				t.Fatal(err)
			}
			var err error
			var got [][]byte
			for err == nil {
				var resp wireMsg
				if err = stream.RecvMsg(&resp); err == nil {
					got = append(got, resp.b)
				}
			}
			if want := tc.send; len(want) > 0 && want[len(want)-1] != nil && len(want[len(want)-1]) > 1<<20 {
				tc.send = want[:len(want)-1] // the message over the limit is not relayed
			}
			if len(got) != len(tc.send) {
				t.Errorf("the client received %d responses, the device sent %d before its error", len(got), len(tc.send))
			}
			substr := tc.substr
			if substr == nil {
				substr = []string{status.Convert(tc.err).Message()}
			}
			st := sidecartest.WantStatus(t, err, tc.code, substr...)
			if tc.substr == nil && st.Message() != status.Convert(tc.err).Message() {
				t.Errorf("message %q, the device's is %q", st.Message(), status.Convert(tc.err).Message())
			}
		})
	}
}

// TestSubscribeRelayEnds: a relay ends its device stream when the client
// cancels, when a request of the client's is over the sidecar's limit
// (ResourceExhausted, as from a device with that limit), and when the
// sidecar drains (Unavailable), all while the device is sending.
func TestSubscribeRelayEnds(t *testing.T) {
	update := marshal(t, &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: &gpb.Notification{Timestamp: 1}}})
	streams := make(chan context.Context, 1)
	dev := newFrameDevice(t, func(stream grpc.ServerStream, _ []byte) error {
		streams <- stream.Context()
		for stream.SendMsg(&wireMsg{update}) == nil {
		}
		return status.FromContextError(stream.Context().Err()).Err()
	})
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr})
	first := marshal(t, frameRequest(t, gpb.SubscriptionList_STREAM))

	// start subscribes, reads a few updates and returns the stream and the
	// device's context of it.
	start := func(t *testing.T, ctx context.Context) (grpc.ClientStream, context.Context) {
		t.Helper()
		stream := wireStream(t, ctx, r.Addr)
		if err := stream.SendMsg(&wireMsg{first}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := stream.RecvMsg(&wireMsg{}); err != nil {
				t.Fatalf("before the test: %v", err)
			}
		}
		select {
		case device := <-streams:
			return stream, device
		case <-time.After(waitFor):
			t.Fatal("the subscription never reached the device")
			return nil, nil
		}
	}
	// ended waits until the device's stream has ended, then reads the
	// client's to its end and returns its error.
	ended := func(t *testing.T, device context.Context, stream grpc.ClientStream) error {
		t.Helper()
		select {
		case <-device.Done():
		case <-time.After(waitFor):
			t.Fatal("the device's stream is still open")
		}
		for {
			if err := stream.RecvMsg(&wireMsg{}); err != nil {
				return err
			}
		}
	}

	t.Run("client cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		stream, device := start(t, ctx)
		cancel()
		sidecartest.WantStatus(t, ended(t, device, stream), codes.Canceled)
	})
	t.Run("client request over the limit", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), waitFor)
		defer cancel()
		stream, device := start(t, ctx)
		big := message(nil, 99, make([]byte, 4<<20))
		if err := stream.SendMsg(&wireMsg{big}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		sidecartest.WantStatus(t, ended(t, device, stream), codes.ResourceExhausted, "larger than max")
	})
	t.Run("drain", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), waitFor)
		defer cancel()
		stream, device := start(t, ctx)
		r.Proxy.Drain()
		sidecartest.WantStatus(t, ended(t, device, stream), codes.Unavailable, "the sidecar is shutting down")
	})
}

// TestSubscribeRelayMetadata: the device sees a relayed Subscribe's
// client metadata and deadline, and the content-type a direct client's
// call has.
func TestSubscribeRelayMetadata(t *testing.T) {
	type seen struct {
		md       metadata.MD
		deadline time.Time
	}
	calls := make(chan seen, 1)
	dev := newFrameDevice(t, func(stream grpc.ServerStream, _ []byte) error {
		md, _ := metadata.FromIncomingContext(stream.Context())
		deadline, _ := stream.Context().Deadline()
		calls <- seen{md, deadline}
		return status.Error(codes.Unimplemented, "frame device: seen")
	})
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr})
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "username", "alice", "x-trace-id", "trace-42"), waitFor)
	defer cancel()
	call := func(addr string) seen {
		t.Helper()
		stream, err := sidecartest.Dial(t, addr).Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(frameRequest(t, gpb.SubscriptionList_STREAM)); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.Unimplemented {
			t.Fatalf("Subscribe to %s: %v, want the device's Unimplemented", addr, err)
		}
		return <-calls
	}
	direct, relayed := call(dev.addr), call(r.Addr)
	for _, k := range []string{"username", "x-trace-id", "content-type"} {
		if got, want := relayed.md.Get(k), direct.md.Get(k); strings.Join(got, ",") != strings.Join(want, ",") || len(want) == 0 {
			t.Errorf("through the sidecar the device saw %s = %q, directly %q", k, got, want)
		}
	}
	if d := relayed.deadline.Sub(direct.deadline).Abs(); relayed.deadline.IsZero() || d > time.Second {
		t.Errorf("through the sidecar the device saw deadline %v, directly %v", relayed.deadline, direct.deadline)
	}
}

// TestSubscribeRelayWithoutServerOption: on a gRPC server built without
// proxy.ServerOption (here: gRPC's protobuf codec forced after it), the
// relay decodes and encodes each message, and still relays.
func TestSubscribeRelayWithoutServerOption(t *testing.T) {
	update := &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: &gpb.Notification{Timestamp: 5,
		Update: []*gpb.Update{{Path: sidecartest.Path(t, "/relay-test/leaf"), Val: sidecartest.StringVal("v")}}}}}
	dev := newFrameDevice(t, func(stream grpc.ServerStream, _ []byte) error {
		var poll gpb.SubscribeRequest
		if err := stream.RecvMsg(&poll); err != nil || poll.GetPoll() == nil {
			return status.Errorf(codes.InvalidArgument, "frame device: want a poll, got %v, %v", &poll, err)
		}
		return stream.SendMsg(update)
	})
	r := sidecartest.Start(t, sidecartest.Options{Target: dev.addr,
		ServerOptions: []grpc.ServerOption{grpc.ForceServerCodecV2(encoding.GetCodecV2("proto"))}})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, frameRequest(t, gpb.SubscriptionList_POLL))
	if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, update) {
		t.Errorf("the client received %v, the device sent %v", got, update)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("after the device's end: %v, want EOF", err)
	}
}
