package testbed

import (
	"context"
	"crypto/subtle"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Request is what the device received in one RPC, as LastRequest returns
// it: when, the request metadata (credentials and custom headers; not the
// transport's: ":authority", "content-type", "user-agent", "grpc-*"), and
// the request message (Subscribe: the first SubscribeRequest). It is
// recorded before any check, so a refused request is recorded too.
type Request struct {
	RPC      string // Capabilities, Get, Set or Subscribe
	Time     time.Time
	Metadata metadata.MD
	Message  proto.Message
}

// LastRequest returns the last request the device received of rpc
// (Capabilities, Get, Set or Subscribe), and whether there was one since
// New.
func (d *Device) LastRequest(rpc string) (Request, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.last[rpc]
	if !ok {
		return Request{}, false
	}
	r.Metadata = r.Metadata.Copy()
	r.Message = proto.Clone(r.Message)
	return r, true
}

// Requests returns how many requests of rpc (Capabilities, Get, Set or
// Subscribe) the device received since New, refused ones included.
func (d *Device) Requests(rpc string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests[rpc]
}

// rpcName is the method name of a full gRPC method ("/gnmi.gNMI/Set").
func rpcName(fullMethod string) string {
	return fullMethod[strings.LastIndex(fullMethod, "/")+1:]
}

// received records req as the last of its RPC and checks it against
// Options.Users and Options.RequireTarget.
func (d *Device) received(ctx context.Context, rpc string, req proto.Message) error {
	md, _ := metadata.FromIncomingContext(ctx)
	kept := keptMetadata(ctx)
	// The device never modifies a request, so the message is kept as it
	// is (copying a large Set would cost more than applying it);
	// LastRequest hands out copies.
	d.mu.Lock()
	d.last[rpc] = Request{RPC: rpc, Time: time.Now(), Metadata: kept, Message: req}
	d.requests[rpc]++
	d.mu.Unlock()
	if err := d.authenticate(md); err != nil {
		return err
	}
	return d.checkTarget(rpc, req)
}

// keptMetadata is the incoming metadata of ctx that the device records:
// all but the transport's (":authority", "content-type", "user-agent",
// "grpc-*").
func keptMetadata(ctx context.Context) metadata.MD {
	md, _ := metadata.FromIncomingContext(ctx)
	kept := metadata.MD{}
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" {
			continue
		}
		kept[k] = append([]string(nil), v...)
	}
	return kept
}

// authenticate checks the username/password metadata against
// Options.Users (none: anyone may call).
func (d *Device) authenticate(md metadata.MD) error {
	if len(d.opts.Users) == 0 {
		return nil
	}
	users, passwords := md.Get("username"), md.Get("password")
	if len(users) != 1 || len(passwords) != 1 {
		return status.Error(codes.Unauthenticated, "this device requires username and password metadata")
	}
	want, ok := d.opts.Users[users[0]]
	if !ok || subtle.ConstantTimeCompare([]byte(want), []byte(passwords[0])) != 1 {
		return status.Errorf(codes.Unauthenticated, "wrong username or password for %q", users[0])
	}
	return nil
}

// checkTarget refuses a Get, Set or Subscribe whose prefix does not name
// Options.RequireTarget, with NotFound, as a server of several targets
// does for one it does not serve. Capabilities has no prefix.
func (d *Device) checkTarget(rpc string, req proto.Message) error {
	want := d.opts.RequireTarget
	if want == "" {
		return nil
	}
	var prefix *gpb.Path
	switch r := req.(type) {
	case *gpb.GetRequest:
		prefix = r.GetPrefix()
	case *gpb.SetRequest:
		prefix = r.GetPrefix()
	case *gpb.SubscribeRequest:
		if r.GetSubscribe() == nil {
			return nil // a Poll; the subscription was checked
		}
		prefix = r.GetSubscribe().GetPrefix()
	default:
		return nil
	}
	switch got := prefix.GetTarget(); {
	case got == want:
		return nil
	case got == "":
		return status.Errorf(codes.NotFound, "%s: the request's prefix names no target; this device serves target %q", rpc, want)
	default:
		return status.Errorf(codes.NotFound, "%s: unknown target %q; this device serves target %q", rpc, got, want)
	}
}

// unaryGate records and checks every unary request; a Set also goes into
// the Set log.
func (d *Device) unaryGate(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if set, ok := req.(*gpb.SetRequest); ok {
		var answered func(error)
		ctx, answered = d.logSet(ctx, set)
		defer func() { answered(err) }()
	}
	if m, ok := req.(proto.Message); ok {
		if err := d.received(ctx, rpcName(info.FullMethod), m); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

// streamGate records and checks the first request of every stream.
func (d *Device) streamGate(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &gatedStream{ServerStream: ss, d: d, rpc: rpcName(info.FullMethod)})
}

type gatedStream struct {
	grpc.ServerStream
	d       *Device
	rpc     string
	checked bool
}

func (s *gatedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.checked {
		return nil
	}
	s.checked = true
	msg, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	return s.d.received(s.Context(), s.rpc, msg)
}
