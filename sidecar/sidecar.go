// Package sidecar assembles the gNMI sidecar in front of one device: the
// journal, the agent that commits and applies its proposals to the device,
// the northbound gNMI proxy (with the introspection origin and client
// authorization), and the metrics, health and reflection services.
//
// New puts the parts together from a Config and binds the listeners; Run
// serves until its context ends, then shuts down gracefully. This is the
// only place where the parts are assembled: the gnmi-sidecar command, the
// test helpers of package sidecartest and the benchmark all go through
// New.
package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/authz"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/introspection"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
)

// Defaults of the Config fields left zero.
const (
	// DefaultMaxRecvMsgSize is gRPC's default, and that of most gNMI
	// targets.
	DefaultMaxRecvMsgSize = 4 << 20
	// DefaultShutdownTimeout is how long in-flight Sets may take to finish
	// once Run's context ends.
	DefaultShutdownTimeout = 10 * time.Second
)

// streamWorkers is how many goroutines the northbound gRPC server keeps to
// run RPCs on (grpc.NumStreamWorkers), rather than starting one per RPC.
// A Set's handler waits for its proposal to be applied, so one worker per
// client with a Set in flight: 64 covers the clients of a busy device (an
// RPC that finds them all busy gets a goroutine of its own, as without
// workers). A worker keeps the stack its handlers grew; a new goroutine
// per Set grew its stack again at every Set, about 7 µs of CPU per Set
// with 64 clients ("Stream workers" in docs/bench.md). Idle workers wait
// on a channel: no wake-ups at rest.
const streamWorkers = 64

// forcedStopWait is how long a graceful stop may still take once the
// waiting Sets were answered, before the connections are closed at once.
const forcedStopWait = time.Second

// Config is what New assembles a sidecar from. Every value is already
// parsed and checked by the caller; New refuses what it cannot work with.
type Config struct {
	// Target is the device's gNMI address, host:port (required).
	Target string
	// DeviceTLS secures the connection to the device; nil: plaintext.
	DeviceTLS *tls.Config
	// DeviceUsername and DevicePassword are the sidecar's own credentials
	// on the device. When either is set they also replace the clients'
	// credentials on passthrough RPCs.
	DeviceUsername, DevicePassword string
	// DeviceTarget is the gNMI target the sidecar names in the prefix of
	// the RPCs it makes of its own accord (liveness subscription, drift
	// watching, reads for resolve and adoption), for a device that serves
	// several targets and routes on it ("" names none). Clients' requests,
	// and their changes' Sets, re-pushes and rollbacks, keep the target
	// the client sent.
	DeviceTarget string
	// PersistentDevice: the device keeps its configuration across
	// restarts, so there is no re-push on reconnect.
	PersistentDevice bool
	// QueueWhenDisconnected journals SYNC Sets while the device is
	// unreachable instead of refusing them with UNAVAILABLE.
	QueueWhenDisconnected bool
	// MaxRollbackDuration is the longest rollback_duration a
	// commit-confirmed may ask for (proxy.Options.MaxRollbackDuration; 0:
	// proxy.DefaultMaxRollbackDuration).
	MaxRollbackDuration time.Duration
	// AlwaysReplyExtension adds the sidecar's receipt (its Response
	// extension) to every Set reply, not only to those of Sets that asked
	// for it with the sidecar's extension.
	AlwaysReplyExtension bool
	// MasterArbitration sends MasterArbitration{election_id: term} with
	// every device Set (fencing).
	MasterArbitration bool
	// RetryCodes, RetryAttempts and RetryFor: the device answers after
	// which an acknowledged change is sent again, and the bounds
	// (agent.Options; zero: the agent's defaults).
	RetryCodes    []codes.Code
	RetryAttempts int
	RetryFor      time.Duration
	// ApplyTimeout is the longest a device Set may take (0: the agent's
	// default); a waiting client's deadline shortens it.
	ApplyTimeout time.Duration
	// DriftPolicy is what the sidecar does about configuration changed on
	// the device behind its back ("": drift.PolicyReport; docs/drift.md).
	DriftPolicy drift.Policy
	// Baseline takes the onboarding baseline of a new journal: the
	// device's configuration in ManagedPaths, read and journaled before
	// any change (proxy.Server.Onboard). Off, each change's paths are
	// read before it is journaled.
	Baseline bool
	// ManagedPaths are the subtrees a baseline reads (nil: the whole
	// tree).
	ManagedPaths []*gpb.Path
	// DriftInterval is how often the configuration is compared with the
	// device when it refuses ON_CHANGE subscriptions (0:
	// drift.DefaultInterval).
	DriftInterval time.Duration

	// JournalDir is the journal's directory (required; created if
	// missing; one sidecar per directory).
	JournalDir string
	// JournalMinFreeBytes is journal.Options.MinFreeBytes: the free space
	// the journal's filesystem must keep (0: the journal's default;
	// negative: no reserve).
	JournalMinFreeBytes int64
	// JournalNoSync turns off fsync on commit: for tests and benchmark
	// preparation only (journal.Options.NoSync).
	JournalNoSync bool
	// JournalRetain is journal.Options.Retain (0: the journal's default).
	JournalRetain int
	// JournalMemTableSize is journal.Options.MemTableSize (0: the
	// journal's default).
	JournalMemTableSize int64
	// Schema is the device's YANG schema (journal.Options.Schema); nil:
	// none.
	Schema *leaves.Schema
	// Trace, if set, receives every journal transition; Run begins it with
	// the journal's mastership and ends it once the journal closed
	// cleanly. The caller closes its file after Run.
	Trace *trace.Tracer

	// Listen is the northbound gNMI address (required; port 0 picks a
	// free port: see Addr).
	Listen string
	// ServerTLS is the northbound TLS configuration; nil: plaintext.
	ServerTLS *tls.Config
	// Policy authorizes the clients by role; nil: every client is admin.
	Policy *authz.Policy
	// ServerOptions are added to the northbound gRPC server's own (a codec
	// among them replaces the one that relays Subscribe undecoded,
	// proxy.ServerOption).
	ServerOptions []grpc.ServerOption
	// MaxRecvMsgSize is the largest gNMI request accepted, in bytes (0:
	// DefaultMaxRecvMsgSize).
	MaxRecvMsgSize int
	// MetricsAddr is where Prometheus metrics (/metrics) and the readiness
	// probe (/healthz) are served over HTTP; "": nowhere. Port 0 picks a
	// free port.
	MetricsAddr string
	// Pprof also serves net/http/pprof's profiles under /debug/pprof/ on
	// MetricsAddr: a diagnostic (heap and CPU profiles of a running
	// sidecar), off by default; it needs MetricsAddr.
	Pprof bool
	// Reflection registers the gRPC reflection service.
	Reflection bool
	// ShutdownTimeout is how long in-flight Sets may take to finish once
	// Run's context ends (0: DefaultShutdownTimeout; negative: no time,
	// they are answered at once). They stay journaled either way.
	ShutdownTimeout time.Duration

	// BackoffInitial, BackoffMax and Resync are the agent's reconnect
	// backoff and resync period (zero: the agent's defaults). Tests make
	// them short.
	BackoffInitial, BackoffMax, Resync time.Duration

	// Logger receives the structured logs (nil: slog.Default()).
	Logger *slog.Logger
	// Stdout receives the lines tools read once the sidecar serves:
	// "gnmi-sidecar listening on ADDR", then "gnmi-sidecar metrics on
	// ADDR" when metrics are on. nil: none.
	Stdout io.Writer
}

// FieldError is an error of New about one Config field, which it names:
// for instance Listen when the address cannot be bound.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// StopError is what Run returns when the sidecar stopped as asked (its
// context ended) but something failed while stopping: the agent ended
// with an error, or the journal did not close cleanly. It is logged
// already; every acknowledged Set is in the journal either way.
type StopError struct{ Err error }

func (e *StopError) Error() string { return "stopping the sidecar: " + e.Err.Error() }
func (e *StopError) Unwrap() error { return e.Err }

// Sidecar is an assembled sidecar. Run it once.
type Sidecar struct {
	cfg     Config
	log     *slog.Logger
	journal *journal.Journal
	agent   *agent.Agent
	drift   *drift.Watcher
	proxy   *proxy.Server
	obs     *observability
	stopObs func()
	lis     net.Listener
	grpc    *grpc.Server
	ready   chan struct{}
	ran     atomic.Bool
}

// New opens the journal, creates the agent and the proxy, binds the
// northbound listener and the metrics listener, and registers the gNMI,
// health and reflection services. Nothing is served until Run, which
// releases everything New acquired: call it.
func New(cfg Config) (*Sidecar, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRecvMsgSize == 0 {
		cfg.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	s := &Sidecar{cfg: cfg, log: cfg.Logger, ready: make(chan struct{})}
	s.obs = newObservability(cfg.MetricsAddr, cfg.Reflection, s.log)
	s.obs.pprof = cfg.Pprof
	observe := s.obs.Observe
	if cfg.Trace != nil {
		observe = func(e journal.Event) {
			cfg.Trace.Observe(e)
			s.obs.Observe(e)
		}
	}
	j, err := journal.Open(cfg.JournalDir, journal.Options{
		NoSync:       cfg.JournalNoSync,
		Retain:       cfg.JournalRetain,
		MemTableSize: cfg.JournalMemTableSize,
		MinFreeBytes: cfg.JournalMinFreeBytes,
		Schema:       cfg.Schema,
		Logger:       s.log,
		Observer:     observe,
	})
	if errors.Is(err, journal.ErrLocked) {
		return nil, fmt.Errorf("journal %s is in use by another gnmi-sidecar process", cfg.JournalDir)
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", cfg.JournalDir, err)
	}
	s.journal = j
	if err := s.assemble(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// check refuses a Config New cannot work with.
func (c *Config) check() error {
	switch {
	case c.Target == "":
		return &FieldError{Field: "Target", Err: errors.New("the device's gNMI address is required")}
	case c.JournalDir == "":
		return &FieldError{Field: "JournalDir", Err: errors.New("the journal's directory is required")}
	case c.Listen == "":
		return &FieldError{Field: "Listen", Err: errors.New("the northbound listen address is required")}
	case c.MaxRecvMsgSize < 0:
		return &FieldError{Field: "MaxRecvMsgSize", Err: fmt.Errorf("%d: want a positive number of bytes", c.MaxRecvMsgSize)}
	case c.DriftInterval < 0:
		return &FieldError{Field: "DriftInterval", Err: fmt.Errorf("%v: must not be negative", c.DriftInterval)}
	}
	if _, err := drift.ParsePolicy(string(c.DriftPolicy)); err != nil {
		return &FieldError{Field: "DriftPolicy", Err: err}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return &FieldError{Field: "MetricsAddr", Err: err}
		}
	} else if c.Pprof {
		return &FieldError{Field: "Pprof", Err: errors.New("profiles are served on the metrics address: give one")}
	}
	return nil
}

// assemble creates the agent, the proxy and the gRPC server around the
// open journal, and binds the listeners. On an error, release undoes what
// it did.
func (s *Sidecar) assemble() error {
	cfg := s.cfg
	a, err := agent.New(s.journal, agent.Options{
		Target:         cfg.Target,
		TLS:            cfg.DeviceTLS,
		Username:       cfg.DeviceUsername,
		Password:       cfg.DevicePassword,
		DeviceTarget:   cfg.DeviceTarget,
		Persistent:     cfg.PersistentDevice,
		Fencing:        cfg.MasterArbitration,
		ApplyTimeout:   cfg.ApplyTimeout,
		BackoffInitial: cfg.BackoffInitial,
		BackoffMax:     cfg.BackoffMax,
		Resync:         cfg.Resync,
		RetryCodes:     cfg.RetryCodes,
		RetryAttempts:  cfg.RetryAttempts,
		RetryFor:       cfg.RetryFor,
		Logger:         s.log,
	})
	if err != nil {
		return err
	}
	s.agent = a
	s.drift, err = drift.New(drift.Options{
		Policy:       cfg.DriftPolicy,
		Interval:     cfg.DriftInterval,
		Target:       cfg.Target,
		TLS:          cfg.DeviceTLS,
		Username:     cfg.DeviceUsername,
		Password:     cfg.DevicePassword,
		DeviceTarget: cfg.DeviceTarget,
		BackoffMax:   cfg.BackoffMax,
		Journal:      s.journal,
		Agent:        a,
		Schema:       cfg.Schema,
		Logger:       s.log,
	})
	if err != nil {
		return err
	}
	tree, err := introspection.New(introspection.Options{Journal: s.journal, Agent: a, Address: cfg.Target, Drift: s.drift, Logger: s.log})
	if err != nil {
		return err
	}
	p, err := proxy.New(proxy.Options{
		Target:                cfg.Target,
		DeviceTarget:          cfg.DeviceTarget,
		Introspection:         tree,
		TLS:                   cfg.DeviceTLS,
		Journal:               s.journal,
		Agent:                 a,
		QueueWhenDisconnected: cfg.QueueWhenDisconnected,
		MaxRollbackDuration:   cfg.MaxRollbackDuration,
		AlwaysReplyExtension:  cfg.AlwaysReplyExtension,
		DeviceUsername:        cfg.DeviceUsername,
		DevicePassword:        cfg.DevicePassword,
		ManagedPaths:          cfg.ManagedPaths,
		Onboard:               cfg.Baseline,
		Logger:                s.log,
	})
	if err != nil {
		return err
	}
	s.proxy = p

	if s.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return &FieldError{Field: "Listen", Err: err}
	}
	s.obs.attach(s.journal, a, s.drift)
	opts := s.obs.serverOptions()
	opts = append(opts, securityOptions(cfg.ServerTLS, cfg.Policy, s.log)...)
	opts = append(opts, grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize), proxy.ServerOption(), grpc.NumStreamWorkers(streamWorkers))
	s.grpc = grpc.NewServer(append(opts, cfg.ServerOptions...)...)
	p.Register(s.grpc)
	s.obs.register(s.grpc)
	if s.stopObs, err = s.obs.start(); err != nil {
		return err
	}
	return nil
}

// release closes what New acquired, last acquired first, and returns the
// journal's Close error (already logged). It ends the trace once the
// journal closed cleanly: every transition is traced.
func (s *Sidecar) release() error {
	if s.stopObs != nil {
		s.stopObs()
	}
	if s.lis != nil {
		_ = s.lis.Close() // unless served: then the gRPC server closed it
	}
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
	if s.drift != nil {
		_ = s.drift.Close()
	}
	if err := s.journal.Close(); err != nil {
		s.log.Error("closing the journal", "err", err)
		return err
	}
	if s.cfg.Trace != nil {
		s.cfg.Trace.End()
	}
	return nil
}

// Addr is the bound northbound gNMI address, known once New returned.
func (s *Sidecar) Addr() string { return s.lis.Addr().String() }

// MetricsAddr is the bound metrics address, "" when metrics are off.
func (s *Sidecar) MetricsAddr() string { return s.obs.boundMetricsAddr }

// Ready is closed once Run serves and has printed the listening lines.
func (s *Sidecar) Ready() <-chan struct{} { return s.ready }

// Journal is the sidecar's journal.
func (s *Sidecar) Journal() *journal.Journal { return s.journal }

// Agent is the sidecar's agent (it runs during Run).
func (s *Sidecar) Agent() *agent.Agent { return s.agent }

// Drift is the drift watcher (it runs during Run).
func (s *Sidecar) Drift() *drift.Watcher { return s.drift }

// Proxy is the northbound gNMI service.
func (s *Sidecar) Proxy() *proxy.Server { return s.proxy }

// Run runs the agent and serves gNMI until ctx ends, then shuts down
// gracefully: no new requests, the Sets in flight have ShutdownTimeout to
// finish (they stay journaled either way), then the agent stops and the
// journal closes. It returns nil after a clean stop, a *StopError when
// stopping met an error, and an error saying why the sidecar cannot go on
// when the gRPC server or the agent failed (journal.ErrFailed,
// journal.ErrCorrupt). Run may be called once.
func (s *Sidecar) Run(ctx context.Context) (err error) {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("sidecar: Run called twice")
	}
	var stopErrs []error
	defer func() {
		if cerr := s.release(); cerr != nil {
			stopErrs = append(stopErrs, fmt.Errorf("closing the journal: %w", cerr))
		}
		if err == nil && len(stopErrs) > 0 {
			err = &StopError{Err: errors.Join(stopErrs...)}
		}
	}()
	if s.cfg.Trace != nil {
		m, err := s.journal.Mastership(ctx)
		if err != nil {
			return err
		}
		s.cfg.Trace.Begin(m)
	}

	agentCtx, stopAgent := context.WithCancel(context.Background())
	defer stopAgent()
	agentDone := make(chan error, 1)
	go func() { agentDone <- s.agent.Run(agentCtx) }()
	driftDone := make(chan struct{})
	go func() {
		defer close(driftDone)
		_ = s.drift.Run(agentCtx) // it logs its own trouble and returns nil
	}()
	onboardDone := make(chan struct{})
	go func() {
		defer close(onboardDone)
		if s.cfg.Baseline {
			s.proxy.Onboard(agentCtx)
		}
	}()
	defer func() {
		stopAgent()
		<-driftDone
		<-onboardDone
	}()
	serveDone := make(chan error, 1)
	go func() { serveDone <- s.grpc.Serve(s.lis) }()

	addr := s.Addr()
	if s.cfg.Stdout != nil {
		fmt.Fprintf(s.cfg.Stdout, "gnmi-sidecar listening on %s\n", addr)
		s.obs.announce(s.cfg.Stdout)
	}
	s.log.Info("serving", "listen", addr, "device", s.cfg.Target, "journal", s.cfg.JournalDir)
	close(s.ready)

	select {
	case <-ctx.Done():
	case err := <-serveDone:
		stopAgent()
		<-agentDone
		return fmt.Errorf("gRPC server: %w", err)
	case err := <-agentDone:
		// Answer the Sets waiting for the agent (they stay journaled)
		// before the connections close.
		s.proxy.Drain()
		s.obs.drain()
		s.proxy.StopWaiting()
		stopWithin(s.grpc, gracefulStop(s.grpc), forcedStopWait)
		switch {
		case errors.Is(err, journal.ErrFailed):
			return fmt.Errorf("%w; gnmi-sidecar stops: start it again once the cause is fixed, it recovers every Set it acknowledged", err)
		case errors.Is(err, journal.ErrCorrupt):
			return fmt.Errorf("%w; gnmi-sidecar stops: restore the journal (docs/faults.md)", err)
		}
		return fmt.Errorf("agent: %w", err)
	}
	timeout := max(s.cfg.ShutdownTimeout, 0)
	s.log.Info("shutting down: finishing in-flight Sets", "timeout", timeout)
	s.proxy.Drain()
	s.obs.drain()
	stopped := gracefulStop(s.grpc)
	select {
	case <-stopped:
	case <-time.After(timeout):
		s.log.Warn("shutdown timeout: answering the Sets still in flight; they stay journaled")
		s.proxy.StopWaiting()
		stopWithin(s.grpc, stopped, forcedStopWait)
	}
	stopAgent()
	if err := <-agentDone; err != nil {
		s.log.Error("agent", "err", err)
		stopErrs = append(stopErrs, fmt.Errorf("agent: %w", err))
	}
	s.log.Info("stopped")
	return nil
}

// gracefulStop starts g's GracefulStop and returns a channel closed once it
// returned.
func gracefulStop(g *grpc.Server) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(stopped)
	}()
	return stopped
}

// stopWithin waits up to d for a graceful stop (stopped) to finish, then
// closes g's connections at once.
func stopWithin(g *grpc.Server, stopped <-chan struct{}, d time.Duration) {
	select {
	case <-stopped:
	case <-time.After(d):
		g.Stop()
	}
}
