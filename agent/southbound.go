package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// A session is one southbound connection: one gRPC ClientConn over one
// transport, from dial to break. It never reconnects by itself (its dialer
// refuses a second connection), so everything sent through it went to the
// device incarnation this session's term was recorded for; a new
// connection is a new session with a new term.
type session struct {
	id     uint64 // local, for logs
	conn   *grpc.ClientConn
	client gpb.GNMIClient
	// reader reads the device's configuration (an in-doubt Set's read
	// back, the device's values before a re-push).
	reader *devread.Reader
	ctx    context.Context // ends when the session is over
	cancel context.CancelCauseFunc
	// boot is the device's boot time read from the liveness stream (0 if
	// the liveness path is not boot-time or the device does not serve it).
	boot uint64

	// synced is set once the device holds the applied configuration of
	// this session's term (re-pushed or adopted).
	synced atomic.Bool
	// setFailed is set when the session ends because a Set got no
	// answer: the next session waits out a growing backoff.
	setFailed atomic.Bool

	mu   sync.Mutex
	term uint64 // recorded by StepConnect
	// incarnation is the journal's (journal.Mastership), the low half of
	// the election id.
	incarnation uint64
}

func (s *session) up() bool { return s != nil && s.ctx.Err() == nil }

func (s *session) setTerm(t, incarnation uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.term, s.incarnation = t, incarnation
}

func (s *session) electionID() *gnmi_ext.Uint128 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &gnmi_ext.Uint128{High: s.term, Low: s.incarnation}
}

func (s *session) getTerm() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term
}

// end closes the session with a reason (idempotent).
func (s *session) end(cause error) {
	s.cancel(cause)
	_ = s.conn.Close()
}

// errSessionOver is what the session's dialer answers once its one
// connection has been made: gRPC must not silently reconnect under the
// same term.
var errSessionOver = errors.New("session already used its connection; a new connection needs a new term")

// dial creates the ClientConn of a new session (it connects lazily, on the
// first RPC).
func dial(opts *Options) (*grpc.ClientConn, error) {
	var connected atomic.Bool
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		if connected.Load() {
			return nil, errSessionOver
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			connected.Store(true)
		}
		return c, err
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(dialer),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxRecvBytes)),
	}
	if opts.Username != "" || opts.Password != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(passwordCreds{
			username: opts.Username, password: opts.Password,
		}))
	}
	conn, err := grpc.NewClient("passthrough:///"+opts.Target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", opts.Target, err)
	}
	return conn, nil
}

// passwordCreds sends the device's username and password as gNMI's
// conventional "username"/"password" request metadata.
type passwordCreds struct {
	username, password string
}

func (c passwordCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"username": c.username, "password": c.password}, nil
}

// RequireTransportSecurity is false so credentials also work with a
// plaintext lab device; New logs a warning for that combination.
func (c passwordCreds) RequireTransportSecurity() bool { return false }

// watchLiveness opens the session's long-lived stream and returns once the
// device answered it (the session is up), with the boot time if the
// liveness path is boot-time. A goroutine then ends the session as soon as
// the stream breaks. With no liveness path, the connection state is
// watched instead.
func (a *Agent) watchLiveness(ctx context.Context, s *session) error {
	if a.opts.LivenessPath == "" {
		return a.watchState(ctx, s)
	}
	path, err := ygot.StringToStructuredPath(a.opts.LivenessPath)
	if err != nil {
		return fmt.Errorf("liveness path %q: %w", a.opts.LivenessPath, err)
	}
	stream, err := s.client.Subscribe(s.ctx)
	if err != nil {
		return err
	}
	req := &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Prefix:       gnmipath.TargetPrefix(a.opts.DeviceTarget),
		Mode:         gpb.SubscriptionList_STREAM,
		Encoding:     gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: path, Mode: gpb.SubscriptionMode_ON_CHANGE}},
	}}}
	if err := stream.Send(req); err != nil {
		return err
	}
	first := make(chan error, 1)
	go func() {
		synced := false
		for {
			resp, err := stream.Recv()
			if err != nil {
				if !synced {
					first <- err
				}
				s.end(fmt.Errorf("liveness stream broke: %w", err))
				return
			}
			if n := resp.GetUpdate(); n != nil && !synced {
				for _, u := range n.GetUpdate() {
					if v, ok := u.GetVal().GetValue().(*gpb.TypedValue_UintVal); ok {
						s.boot = v.UintVal
					}
				}
			}
			if resp.GetSyncResponse() && !synced {
				synced = true
				first <- nil
			}
		}
	}()
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchState connects and ends the session when the connection leaves
// READY.
func (a *Agent) watchState(ctx context.Context, s *session) error {
	s.conn.Connect()
	for st := s.conn.GetState(); st != connectivity.Ready; st = s.conn.GetState() {
		if st == connectivity.TransientFailure || st == connectivity.Shutdown {
			return status.Errorf(codes.Unavailable, "device %s: connection %v", a.opts.Target, st)
		}
		if !s.conn.WaitForStateChange(ctx, st) {
			return ctx.Err()
		}
	}
	go func() {
		if s.conn.WaitForStateChange(s.ctx, connectivity.Ready) {
			s.end(fmt.Errorf("connection left READY: %v", s.conn.GetState()))
		}
	}()
	return nil
}

// fencing returns the MasterArbitration extension carrying id as the
// election id (default role): a device that arbitrates refuses Sets from a
// sidecar whose id is lower than the highest it saw.
func fencing(id *gnmi_ext.Uint128) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{
		MasterArbitration: &gnmi_ext.MasterArbitration{ElectionId: id},
	}}
}
