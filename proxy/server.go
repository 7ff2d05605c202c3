package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Options configures a Server.
type Options struct {
	// Target is the device's gNMI address, host:port.
	Target string
	// DeviceTarget is the gNMI target named in the prefix of the device
	// reads the sidecar makes of its own accord (resolve skip/adopt of
	// paths whose values name none); "" names none. Clients' requests keep
	// their own prefix.
	DeviceTarget string
	// TLS secures the passthrough connection to the device; nil means
	// plaintext.
	TLS *tls.Config
	// Journal and Agent are the sidecar's journal and the agent driving it.
	Journal *journal.Journal
	Agent   *agent.Agent
	// QueueWhenDisconnected journals SYNC Sets while the device is
	// disconnected instead of refusing them with Unavailable.
	QueueWhenDisconnected bool
	// AlwaysReplyExtension adds the sidecar's Response extension (the
	// receipt: proposal index and statuses) to every Set reply; by default
	// only to the replies of Sets that carried the sidecar's extension.
	AlwaysReplyExtension bool
	// MaxRecvBytes caps a device response (default 64 MiB).
	MaxRecvBytes int
	// DeviceUsername and DevicePassword are the sidecar's own device
	// credentials. When either is set, they replace the client's
	// "username" and "password" metadata on passthrough Capabilities, Get
	// and Subscribe; otherwise the client's are forwarded as they are.
	DeviceUsername, DevicePassword string
	// Introspection answers the requests of origin gnmi-sidecar
	// (IntrospectionOrigin); nil refuses them with Unimplemented.
	Introspection Introspection
	// ManagedPaths are the subtrees a baseline reads (sync-from); none:
	// the whole configuration tree.
	ManagedPaths []*gpb.Path
	// Onboard makes Sets wait for Server.Onboard (which the caller runs)
	// to take a new journal's baseline; off, they never wait.
	Onboard bool
	// MaxRollbackDuration is the longest rollback_duration a
	// commit-confirmed may ask for, commit or set_rollback_duration
	// (default DefaultMaxRollbackDuration); longer is refused with
	// InvalidArgument naming the limit.
	MaxRollbackDuration time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Introspection is the sidecar's own read-only tree under origin
// gnmi-sidecar (docs/introspection.md), to which the Server routes the
// requests of that origin once it has checked that they are not mixed with
// the device's and that their paths name no target.
type Introspection interface {
	// Get answers a Get of the tree.
	Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error)
	// Subscribe answers a Subscribe of the tree whose first request, first,
	// has been received from stream. It returns when the stream's context
	// or ctx ends (ctx ends when the Server drains).
	Subscribe(ctx context.Context, stream gpb.GNMI_SubscribeServer, first *gpb.SubscribeRequest) error
}

// Server is the northbound gNMI service. Register it on a grpc.Server.
type Server struct {
	gpb.UnimplementedGNMIServer
	opts   Options
	log    *slog.Logger
	device gpb.GNMIClient
	conn   *grpc.ClientConn

	// streams ends every Subscribe relay when cancelled (Drain); waits
	// ends every Set's wait for the agent (StopWaiting).
	streams   context.Context
	drain     context.CancelFunc
	waits     context.Context
	stopWaits context.CancelFunc

	// electionMu serializes master arbitration (arbitration.go); elections
	// caches the journaled highest election id per role.
	electionMu sync.Mutex
	elections  map[string]*gnmi_ext.Uint128
	// reader reads the device's configuration over the passthrough
	// connection: before-images, baselines, resolve.
	reader *devread.Reader
	// baselineDecided is closed once a new journal's baseline is taken or
	// given up (Onboard), or at once without Options.Onboard.
	baselineDecided chan struct{}
	baselineDone    func()
	// syncMu is held for writing by SyncFrom from its wait for the
	// pipeline at rest to its last proposal, and for reading by every
	// other write Set: no change is journaled between the device's read
	// and the baseline made of it.
	syncMu sync.RWMutex
}

// New returns a Server passing reads through to opts.Target. The device
// connection is made lazily and re-made by gRPC as needed.
func New(opts Options) (*Server, error) {
	if opts.Target == "" || opts.Journal == nil || opts.Agent == nil {
		return nil, errors.New("proxy: Target, Journal and Agent are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxRecvBytes <= 0 {
		opts.MaxRecvBytes = 64 << 20
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	conn, err := grpc.NewClient("passthrough:///"+opts.Target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxRecvBytes)))
	if err != nil {
		return nil, fmt.Errorf("proxy: device %s: %w", opts.Target, err)
	}
	streams, drain := context.WithCancel(context.Background())
	waits, stopWaits := context.WithCancel(context.Background())
	device := gpb.NewGNMIClient(conn)
	// No logger: the drift watcher's reader reports the device's
	// readability; the proxy logs what it could not read, and why.
	reader := devread.NewWithOptions(devread.Options{Client: device, Schema: opts.Journal.Schema()})
	decided := make(chan struct{})
	done := sync.OnceFunc(func() { close(decided) })
	if !opts.Onboard {
		done()
	}
	return &Server{
		reader:          reader,
		baselineDecided: decided,
		baselineDone:    done,
		opts:            opts,
		log:             opts.Logger.With("component", "proxy"),
		device:          device,
		conn:            conn,
		streams:         streams,
		drain:           drain,
		waits:           waits,
		stopWaits:       stopWaits,
		elections:       map[string]*gnmi_ext.Uint128{},
	}, nil
}

// Drain ends every Subscribe relay (with Unavailable), so that a graceful
// stop of the gRPC server does not wait for streams that never end. Sets
// in flight are not affected.
func (s *Server) Drain() { s.drain() }

// StopWaiting makes every Set still waiting for the agent answer now, with
// Aborted and a message saying the Set stays journaled and will be applied
// when the sidecar runs again: for a shutdown that cannot wait any longer.
func (s *Server) StopWaiting() { s.stopWaits() }

// Register registers the gNMI service on g, a gRPC server built with
// ServerOption.
func (s *Server) Register(g *grpc.Server) { gpb.RegisterGNMIServer(g, s) }

// Close closes the passthrough connection to the device.
func (s *Server) Close() error { return s.conn.Close() }

// Capabilities is passed through.
func (s *Server) Capabilities(ctx context.Context, req *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	resp, err := s.device.Capabilities(s.outgoing(ctx), req)
	return resp, s.deviceError(err)
}

// Get answers paths of origin gnmi-sidecar from the journal
// (introspection), a History snapshot from the journal, and passes the
// rest through to the device.
func (s *Server) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	hist, err := historyExtension(req.GetExtension())
	if err != nil {
		return nil, err
	}
	own, err := isIntrospection(req.GetPrefix(), req.GetPath())
	if err != nil {
		return nil, err
	}
	if own || hist != nil {
		if err := noPathTargets(req.GetPath()...); err != nil {
			return nil, err
		}
	}
	switch {
	case own && hist != nil:
		return nil, status.Errorf(codes.InvalidArgument, "the History extension applies to the device's configuration, not to origin %q", IntrospectionOrigin)
	case own && s.opts.Introspection == nil:
		return nil, noIntrospection()
	case own:
		return s.opts.Introspection.Get(ctx, req)
	case hist != nil:
		return s.historyGet(ctx, req, hist)
	}
	resp, err := s.device.Get(s.outgoing(ctx), req)
	if err == nil {
		s.learnKeys(resp)
	}
	return resp, s.deviceError(err)
}

// learnKeys teaches the journal the list keys of the paths in a device's
// answer (leaves.Keys): a JSON list a client sends later decomposes with
// them even without the device's YANG.
func (s *Server) learnKeys(resp *gpb.GetResponse) {
	keys := s.opts.Journal.Keys()
	for _, n := range resp.GetNotification() {
		prefix := n.GetPrefix().GetElem()
		for _, u := range n.GetUpdate() {
			elems := u.GetPath().GetElem()
			if !anyKeys(prefix) && !anyKeys(elems) {
				continue
			}
			full := &gpb.Path{Origin: n.GetPrefix().GetOrigin(), Elem: append(slices.Clip(prefix), elems...)}
			if o := u.GetPath().GetOrigin(); o != "" {
				full.Origin = o
			}
			keys.Learn(full)
		}
	}
}

func anyKeys(elems []*gpb.PathElem) bool {
	for _, e := range elems {
		if len(e.GetKey()) > 0 {
			return true
		}
	}
	return false
}

// Subscribe answers subscriptions to origin gnmi-sidecar from the journal
// (introspection), History ranges from the journal, and relays the rest to
// the device.
func (s *Server) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	in := &firstRequest{SubscribeRequest: new(gpb.SubscribeRequest)}
	err := stream.RecvMsg(in)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.frame.release() // its bytes, unless relayed to the device
	first := in.SubscribeRequest
	if list := first.GetSubscribe(); list != nil {
		hist, err := historyExtension(first.GetExtension())
		if err != nil {
			return err
		}
		paths := make([]*gpb.Path, 0, len(list.GetSubscription()))
		for _, sub := range list.GetSubscription() {
			paths = append(paths, sub.GetPath())
		}
		own, err := isIntrospection(list.GetPrefix(), paths)
		if err != nil {
			return err
		}
		if own || hist != nil {
			if err := noPathTargets(paths...); err != nil {
				return err
			}
		}
		switch {
		case own && hist != nil:
			return status.Errorf(codes.InvalidArgument, "the History extension applies to the device's configuration, not to origin %q", IntrospectionOrigin)
		case own:
			return s.introspectSubscribe(stream, first)
		case hist != nil:
			return s.historySubscribe(stream, first, hist)
		}
	}
	return s.relay(stream, in)
}

// introspectSubscribe hands a Subscribe of origin gnmi-sidecar to
// Options.Introspection, ending it with Unavailable when the Server drains.
func (s *Server) introspectSubscribe(stream gpb.GNMI_SubscribeServer, first *gpb.SubscribeRequest) error {
	if s.opts.Introspection == nil {
		return noIntrospection()
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stopDrain := context.AfterFunc(s.streams, cancel)
	defer stopDrain()
	err := s.opts.Introspection.Subscribe(ctx, stream, first)
	if err != nil && stream.Context().Err() == nil && s.streams.Err() != nil {
		return status.Error(codes.Unavailable, "the sidecar is shutting down")
	}
	return err
}

func noIntrospection() error {
	return status.Errorf(codes.Unimplemented, "origin %q is not served by this sidecar", IntrospectionOrigin)
}

// IntrospectionOrigin is the gNMI origin of the sidecar's own tree (see
// docs/introspection.md).
const IntrospectionOrigin = "gnmi-sidecar"

// isIntrospection reports whether a request's paths are in the sidecar's
// own tree (origin gnmi-sidecar, on the prefix or on every path). A request
// mixing it with the device's origins is refused: send them separately.
func isIntrospection(prefix *gpb.Path, paths []*gpb.Path) (bool, error) {
	if prefix.GetOrigin() == IntrospectionOrigin {
		for _, p := range paths {
			if o := p.GetOrigin(); o != "" && o != IntrospectionOrigin {
				return false, status.Errorf(codes.InvalidArgument, "path origin %q contradicts prefix origin %q", o, IntrospectionOrigin)
			}
		}
		return true, nil
	}
	own, other := 0, 0
	for _, p := range paths {
		if p.GetOrigin() == IntrospectionOrigin {
			own++
		} else {
			other++
		}
	}
	if own > 0 && other > 0 {
		return false, status.Errorf(codes.InvalidArgument,
			"the request mixes origin %q (the sidecar's journal) with the device's paths: send them in separate requests", IntrospectionOrigin)
	}
	return own > 0, nil
}

// noPathTargets refuses a target on a path of a request the sidecar
// answers itself: gNMI allows one only in the prefix (specification
// 2.2.2.1). The prefix's target is not checked: a sidecar serves one
// device, whatever name the client gives it.
func noPathTargets(paths ...*gpb.Path) error {
	for _, p := range paths {
		if t := p.GetTarget(); t != "" {
			return status.Errorf(codes.InvalidArgument, "path %s has target %q: gNMI allows a target only in the prefix", gnmipath.Short(p), t)
		}
	}
	return nil
}

// outgoing forwards the client's request metadata (credentials and any
// other) to the device; the deadline travels with ctx. With the sidecar's
// own device credentials (Options.DeviceUsername/DevicePassword), those
// replace the client's username and password.
func (s *Server) outgoing(ctx context.Context) context.Context {
	own := s.deviceAccount()
	out := forwarded(ctx)
	if out == nil && !own {
		return ctx
	}
	if out == nil {
		out = metadata.MD{}
	}
	if own {
		// The client's credentials are replaced, its custom headers kept.
		out = agent.WithoutCredentials(out)
		if out == nil {
			out = metadata.MD{}
		}
		out.Set("username", s.opts.DeviceUsername)
		out.Set("password", s.opts.DevicePassword)
	}
	return metadata.NewOutgoingContext(ctx, out)
}

// deviceAccount reports whether the sidecar speaks to the device with its
// own account (Options.DeviceUsername, DevicePassword).
func (s *Server) deviceAccount() bool {
	return s.opts.DeviceUsername != "" || s.opts.DevicePassword != ""
}

// forwarded is the request metadata of ctx's client a device RPC made for
// it carries, as a direct client's would: credentials and custom headers,
// not the transport's headers (the outgoing call sets its own). Nil if
// there is none.
func forwarded(ctx context.Context) metadata.MD {
	in, _ := metadata.FromIncomingContext(ctx)
	var out metadata.MD
	for k, v := range in {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" {
			continue
		}
		if out == nil {
			out = metadata.MD{}
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

// deviceError returns the device's error unchanged, except that an
// unreachable device gets a message naming it.
func (s *Server) deviceError(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	if st.Code() == codes.Unavailable {
		return status.Errorf(codes.Unavailable, "device %s: %s", s.opts.Target, st.Message())
	}
	return st.Err()
}
