package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/metrics"
)

// healthServices are the names the gRPC health service answers for: the
// server as a whole ("") and the gNMI service.
var healthServices = []string{"", gpb.GNMI_ServiceDesc.ServiceName}

// healthRecheck is how often the health follower re-reads the agent's
// status even without a change: a safety net (the agent reports every
// change), slow so that an idle sidecar does not wake for it.
const healthRecheck = time.Minute

// observability is the sidecar's metrics, health and reflection.
type observability struct {
	metricsAddr string // where to serve /metrics and /healthz; "" for nowhere
	reflection  bool
	pprof       bool // serve /debug/pprof/ next to /metrics
	log         *slog.Logger
	m           *metrics.Sidecar
	health      *health.Server
	// watches ends the health Watch streams (endWatches) at shutdown, so
	// that a graceful stop does not wait for them.
	watches    context.Context
	endWatches context.CancelFunc

	j *journal.Journal
	a *agent.Agent

	boundMetricsAddr string // bound by start; "" when metrics are off
}

func newObservability(metricsAddr string, reflection bool, log *slog.Logger) *observability {
	o := &observability{
		metricsAddr: metricsAddr,
		reflection:  reflection,
		log:         log.With("component", "observability"),
		m:           metrics.New(),
		health:      health.NewServer(),
	}
	o.watches, o.endWatches = context.WithCancel(context.Background())
	for _, svc := range healthServices {
		o.health.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return o
}

// Observe receives every journal transition (a journal.Options.Observer).
func (o *observability) Observe(e journal.Event) { o.m.Journal.Observe(e) }

// attach gives the journal, agent and drift watcher to watch.
func (o *observability) attach(j *journal.Journal, a *agent.Agent, w *drift.Watcher) {
	o.j, o.a = j, a
	o.m.Device.Attach(a.Status)
	o.m.Drift.Attach(w.Status)
}

// serverOptions returns the northbound gRPC server's options (RPC metrics).
func (o *observability) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(o.m.RPC.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(o.m.RPC.StreamServerInterceptor()),
	}
}

// register registers the health and reflection services on g. The RPC
// metrics are not initialized for every method and code (InitializeMetrics:
// some 300 series of zeros per sidecar, one sidecar per device): a series
// appears with its first RPC.
func (o *observability) register(g *grpc.Server) {
	healthpb.RegisterHealthServer(g, healthService{Server: o.health, ended: o.watches})
	if o.reflection {
		reflection.Register(g)
	}
}

// start starts reading the journal's retained proposals for the metrics
// (in the background: on a large journal it takes seconds, and serving must
// not wait for it), starts serving them, and starts following the agent
// for the health status. stop undoes it.
func (o *observability) start() (stop func(), err error) {
	if o.j == nil || o.a == nil {
		return nil, errors.New("observability: start before attach")
	}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		start := time.Now()
		if err := o.m.Journal.Load(loadCtx, o.j); err != nil {
			if loadCtx.Err() == nil {
				o.log.Error("metrics: reading the journal's proposals failed; the proposal counts are not exported", "err", err)
			}
			return
		}
		o.log.Debug("metrics: journal proposals read", "took", time.Since(start))
	}()

	var srv *http.Server
	served := make(chan struct{})
	if o.metricsAddr != "" {
		lis, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			stopLoad()
			<-loaded
			return nil, &FieldError{Field: "MetricsAddr", Err: err}
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", o.m.Handler(o.log))
		mux.HandleFunc("/healthz", o.healthz)
		if o.pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		o.boundMetricsAddr = lis.Addr().String()
		go func() {
			defer close(served)
			if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
				o.log.Error("metrics server", "err", err)
			}
		}()
		o.log.Info("serving metrics", "metrics", "http://"+o.boundMetricsAddr+"/metrics")
	} else {
		close(served)
	}

	followCtx, stopFollow := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		o.follow(followCtx)
	}()

	var once sync.Once
	return func() {
		once.Do(func() {
			stopLoad()
			<-loaded
			stopFollow()
			<-followed
			o.drain()
			if srv != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := srv.Shutdown(ctx); err != nil {
					_ = srv.Close()
				}
				<-served
			}
		})
	}, nil
}

// healthz answers an HTTP readiness probe (Kubernetes' gRPC probe speaks
// no TLS) with the gRPC health status of the whole server: 200 when
// SERVING, 503 otherwise, the status in the body.
func (o *observability) healthz(w http.ResponseWriter, r *http.Request) {
	resp, err := o.health.Check(r.Context(), &healthpb.HealthCheckRequest{})
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if err == nil {
		st = resp.GetStatus()
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if st != healthpb.HealthCheckResponse_SERVING {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, st.String())
}

// announce prints where the metrics are served, after Run's "listening"
// line (tools read the first line for the gNMI address).
func (o *observability) announce(stdout io.Writer) {
	if o.boundMetricsAddr != "" {
		fmt.Fprintf(stdout, "gnmi-sidecar metrics on %s\n", o.boundMetricsAddr)
	}
}

// drain marks every service NOT_SERVING for good and ends the health Watch
// streams: the sidecar is shutting down.
func (o *observability) drain() {
	o.health.Shutdown()
	o.m.Ready.Set(0)
	o.endWatches()
}

// follow keeps the health status and the re-push histogram up to date with
// the agent until ctx ends: at every change the agent reports, and every
// healthRecheck.
func (o *observability) follow(ctx context.Context) {
	t := time.NewTicker(healthRecheck)
	defer t.Stop()
	current := healthpb.HealthCheckResponse_UNKNOWN
	for {
		changed := o.a.Changes()
		st := o.a.Status()
		o.m.Device.Update(st)
		want, why := o.servingStatus(ctx, st)
		if ctx.Err() != nil {
			return
		}
		if want != current {
			for _, svc := range healthServices {
				o.health.SetServingStatus(svc, want)
			}
			// What the health service answers (NOT_SERVING for good once drained).
			resp, err := o.health.Check(ctx, &healthpb.HealthCheckRequest{})
			o.m.Ready.Set(map[bool]float64{true: 1}[err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING])
			if current != healthpb.HealthCheckResponse_UNKNOWN || want != healthpb.HealthCheckResponse_NOT_SERVING {
				attrs := []any{"status", want.String(), "reason", why}
				if st.Term != 0 {
					attrs = append(attrs, "term", st.Term)
				}
				o.log.Info("health", attrs...)
			}
			current = want
		}
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// servingStatus is SERVING once the device is connected and in step with
// the journal (the re-push for the session's term is complete), and
// NOT_SERVING while it is unreachable or being re-pushed, with why.
func (o *observability) servingStatus(ctx context.Context, st agent.Status) (healthpb.HealthCheckResponse_ServingStatus, string) {
	const notServing = healthpb.HealthCheckResponse_NOT_SERVING
	switch {
	case st.Fenced:
		return notServing, "fenced: another client is master on the device (" + st.FencedBy + "); restart the sidecar to try again"
	case !st.Connected:
		return notServing, "device unreachable"
	case st.Repushing:
		return notServing, "re-pushing the configuration to the device"
	case st.Term == 0:
		return notServing, "recording the mastership term"
	}
	cfg, err := o.j.Configuration(ctx)
	if err != nil {
		return notServing, fmt.Sprintf("journal: %v", err)
	}
	if cfg.GetApplied().GetTerm() != st.Term || cfg.GetStatus() != journal.StatusComplete {
		return notServing, "re-pushing the configuration to the device"
	}
	if n := cfg.GetOutOfSync(); n > 0 {
		// Serving: later Sets are applied; the operator resolves the paths.
		return healthpb.HealthCheckResponse_SERVING, fmt.Sprintf("device connected; %d paths out of sync with the journal (gnmi-sidecar status)", n)
	}
	return healthpb.HealthCheckResponse_SERVING, "device connected and in step with the journal"
}

// healthService is gRPC's health service whose Watch streams end once the
// sidecar shuts down (ended), so that a graceful stop does not wait for a
// client watching the health status.
type healthService struct {
	*health.Server
	ended context.Context
}

func (h healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(h.ended, cancel)()
	err := h.Server.Watch(req, watchStream{stream, ctx})
	if h.ended.Err() != nil {
		return status.Error(codes.Unavailable, "the sidecar is shutting down")
	}
	return err
}

// watchStream is a Watch stream with a context of our own.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s watchStream) Context() context.Context { return s.ctx }
