package proxy

import (
	"context"
	"io"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// The Subscribe relay passes the device's messages to the client, and the
// client's to the device, as the bytes that arrived (docs/bench.md, "The
// Subscribe relay"): a relayed SubscribeResponse is neither decoded nor
// encoded again, so what the client receives is byte for byte what the
// device sent, fields the sidecar's gNMI version does not know included,
// and the sidecar spends no CPU or garbage on the Notifications. Only the
// client's first SubscribeRequest is decoded, to route it (introspection,
// History or the device); the device still receives its bytes as sent.
//
// gRPC calls a codec to turn messages into bytes and back; the relay's
// codec, relayCodec, passes a *frame's bytes through and hands every other
// message to gRPC's protobuf codec. It serves the device's Subscribe
// stream (selected per call, grpc.ForceCodecV2) and the northbound server
// (ServerOption): gRPC selects a server's codec per server, not per
// method, so every other RPC and service of that server (Get, Set,
// health, reflection) is served by the protobuf codec through it, as
// without it.

// ServerOption is the northbound gRPC server's option that lets the
// Server relay Subscribe undecoded: the server's codec. Build the gRPC
// server the Server is registered on with it; without it, the relay
// decodes every message and encodes it again.
func ServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(relayCodec{}) }

// frame is one gRPC message as its bytes (uncompressed), held without
// decoding: what relayCodec reads into a *frame and writes from one. The
// frame holds a reference to gRPC's buffers from the read until the write
// hands them back to gRPC, or release drops them.
type frame struct {
	data mem.BufferSlice
	// raw is set once relayCodec read the frame: false after a read by
	// another codec.
	raw bool
}

// release drops the frame's bytes if they were not written.
func (f *frame) release() {
	f.data.Free()
	f.data = nil
}

// String is what gRPC's traces (grpc.EnableTracing) show of a frame,
// which they format later: it reads nothing the relay writes.
func (*frame) String() string { return "a gNMI message relayed undecoded" }

// firstRequest is the client's first SubscribeRequest: decoded, to route
// it, and as the bytes the client sent, for the device. It is a
// proto.Message (the embedded request's), so that gRPC's protobuf codec
// reads it too; then frame.raw stays false, which is how relay sees that
// the client's stream does not pass frames.
type firstRequest struct {
	*gpb.SubscribeRequest
	frame frame
}

// relayCodec is the codec of the relay's streams: a *frame's bytes are
// passed as they are, a *firstRequest is decoded and its bytes kept,
// anything else is gRPC's protobuf codec's.
type relayCodec struct{}

// protoCodec is gRPC's protobuf codec, the one gRPC uses by default.
func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2("proto") }

// Marshal hands a frame's bytes, and the frame's reference to them, to
// gRPC, which frees them once written.
func (relayCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		data := f.data
		f.data = nil
		return data, nil
	}
	return protoCodec().Marshal(v)
}

// Unmarshal keeps a reference to the bytes for a *frame (gRPC frees its
// own when Unmarshal returns), and also decodes them for a *firstRequest.
func (relayCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *frame:
		data.Ref()
		m.data, m.raw = data, true
		return nil
	case *firstRequest:
		if err := protoCodec().Unmarshal(data, m.SubscribeRequest); err != nil {
			return err
		}
		data.Ref()
		m.frame.data, m.frame.raw = data, true
		return nil
	}
	return protoCodec().Unmarshal(data, v)
}

// Name is empty so that a call with this codec (grpc.ForceCodecV2) keeps
// the content-type "application/grpc" of a call with the default codec:
// gRPC appends a codec's name as the content-subtype ("application/grpc+
// name"). A server does not use its codec's name.
func (relayCodec) Name() string { return "" }

// subscribeDesc describes gNMI's Subscribe to a gRPC client stream.
var subscribeDesc = grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true, ClientStreams: true}

// relay relays one client stream to one device stream, both ways, starting
// with the client's first request; when either side ends, so does the
// other. The messages pass as undecoded frames, unless the client's stream
// does not read them (first was not read raw: a server without
// ServerOption, a test's stream), when each is decoded and encoded again.
func (s *Server) relay(stream grpc.ServerStream, first *firstRequest) error {
	raw := first.frame.raw
	ctx, cancel := context.WithCancel(s.outgoing(stream.Context()))
	defer cancel()
	stopRelay := context.AfterFunc(s.streams, cancel)
	defer stopRelay()
	up, err := s.conn.NewStream(ctx, &subscribeDesc, gpb.GNMI_Subscribe_FullMethodName, grpc.ForceCodecV2(relayCodec{}))
	if err != nil {
		return s.deviceError(err)
	}
	var msg any = first.SubscribeRequest
	if raw {
		msg = &first.frame
	}
	if err := up.SendMsg(msg); err != nil && err != io.EOF {
		return s.deviceError(err)
	}
	go func() {
		req := newMessage[gpb.SubscribeRequest](raw)
		for {
			err := stream.RecvMsg(req)
			if err == io.EOF {
				_ = up.CloseSend() // the client is done asking; answers keep coming
				return
			}
			if err != nil {
				cancel() // the client went away: end the device stream
				return
			}
			err = up.SendMsg(req)
			release(req)
			if err != nil {
				return // the device ended the stream; up.RecvMsg reports why
			}
		}
	}()
	resp := newMessage[gpb.SubscribeResponse](raw)
	for {
		if err := up.RecvMsg(resp); err != nil {
			if err == io.EOF {
				return nil
			}
			switch {
			case stream.Context().Err() != nil:
				return status.FromContextError(stream.Context().Err()).Err()
			case s.streams.Err() != nil:
				return status.Error(codes.Unavailable, "the sidecar is shutting down")
			}
			return s.deviceError(err)
		}
		err := stream.SendMsg(resp)
		release(resp)
		if err != nil {
			return err
		}
	}
}

// newMessage returns a new frame if raw, else a new M to decode into. The
// relay reads every message of a direction into the same one: sending a
// frame hands its bytes over, and decoding into an M resets it.
func newMessage[M any](raw bool) any {
	if raw {
		return new(frame)
	}
	return new(M)
}

// release releases m if it is a frame.
func release(m any) {
	if f, ok := m.(*frame); ok {
		f.release()
	}
}
