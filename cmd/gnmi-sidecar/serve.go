package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/introspection"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
)

// defaultMaxRecvMsgSize is --max-recv-msg-size's default: gRPC's, and
// that of most gNMI targets.
const defaultMaxRecvMsgSize = 4 << 20

// passwordEnv holds the device password: never a flag, so it does not
// show in ps.
const passwordEnv = "GNMI_SIDECAR_DEVICE_PASSWORD"

type serveConfig struct {
	listen                string
	target                string
	journalDir            string
	journalMinFree        int64
	persistentDevice      bool
	queueWhenDisconnected bool
	masterArbitration     bool
	deviceTLS             bool
	deviceCA              string
	deviceCert            string
	deviceKey             string
	deviceServerName      string
	deviceSkipVerify      bool
	deviceUsername        string
	tracePath             string
	applyTimeout          time.Duration
	transientCodes        []string
	shutdownTimeout       time.Duration
	maxRecvMsgSize        int
	logLevel              string
	logFormat             string
	configPath            string
	yangPaths             []string
	yangModules           []string

	securityConfig      // northbound TLS, client authorization, device credentials (security.go)
	observabilityConfig // metrics, health, reflection (observe.go)
}

func (c *serveConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.listen, "listen", "127.0.0.1:9339", "northbound gNMI listen address (port 0 picks a free port; the bound address is printed)")
	f.StringVar(&c.journalDir, "journal-dir", "./data", "directory of the journal (created if missing; one sidecar per directory)")
	f.Int64Var(&c.journalMinFree, "journal-min-free", 64<<20, "bytes the journal's filesystem must keep free: below it Sets are refused with RESOURCE_EXHAUSTED, nothing journaled, until there is room (0: no reserve, and a full disk kills the sidecar)")
	f.BoolVar(&c.persistentDevice, "persistent-device", false, "the device keeps its configuration across restarts: no re-push on reconnect")
	f.BoolVar(&c.queueWhenDisconnected, "queue-when-disconnected", false, "journal SYNC Sets while the device is unreachable instead of refusing them with UNAVAILABLE")
	f.BoolVar(&c.masterArbitration, "master-arbitration", false, "send MasterArbitration{election_id: term} with every device Set (fencing)")
	f.BoolVar(&c.deviceTLS, "device-tls", false, "connect to the device with TLS (implied by the other --device-* TLS flags)")
	f.StringVar(&c.deviceCA, "device-ca", "", "PEM file of the CA that signed the device's certificate (default: the system roots)")
	f.StringVar(&c.deviceCert, "device-cert", "", "PEM client certificate for the device (mTLS); needs --device-key")
	f.StringVar(&c.deviceKey, "device-key", "", "PEM private key of --device-cert")
	f.StringVar(&c.deviceServerName, "device-server-name", "", "name to verify the device's certificate against (default: the host of --target)")
	f.BoolVar(&c.deviceSkipVerify, "device-skip-verify", false, "do not verify the device's certificate (lab use only)")
	f.StringVar(&c.deviceUsername, "device-username", "", "username sent to the device, with the password of --device-password-file or $"+passwordEnv+"; replaces the clients' credentials on passthrough RPCs")
	f.StringSliceVar(&c.yangPaths, "yang", nil, "the device's YANG modules: .yang files or directories of them, comma-separated or repeated; with them the journal records JSON lists, leaf-lists, presence containers and choices exactly, leaf by leaf (docs/values.md)")
	f.StringSliceVar(&c.yangModules, "yang-module", nil, "load only these modules (names) from the --yang directories, with what they import (default: every .yang file there)")
	f.StringVar(&c.tracePath, "trace", "", "append every journal transition as a JSON line to this file (also $"+trace.Env+")")
	f.StringSliceVar(&c.transientCodes, "transient-codes", defaultTransientCodes(),
		"gRPC codes of a device answer that leaves a Set's outcome open: the Set is sent again after a backoff; every other code is a definitive refusal (docs/agent.md)")
	f.DurationVar(&c.applyTimeout, "apply-timeout", 30*time.Second, "longest a device Set may take before it counts as a transient failure")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGINT/SIGTERM, how long in-flight Sets may take to finish (they stay journaled either way)")
	f.IntVar(&c.maxRecvMsgSize, "max-recv-msg-size", defaultMaxRecvMsgSize, "largest gNMI request accepted, in bytes; larger ones are refused with RESOURCE_EXHAUSTED (the device has its own limit for what the sidecar forwards)")
	f.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&c.configPath, configFlag, "", "YAML file of options: keys are these flags' names (listen: ..., journal-dir: ...); flags on the command line override it")
	c.securityConfig.addFlags(f)
	c.observabilityConfig.addFlags(f)
}

func newServeCommand(stdout, stderr io.Writer) *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use:   "serve --target HOST:PORT",
		Short: "Serve gNMI in front of one device",
		Long: `serve listens for gNMI clients and stands in for the device at --target.

Capabilities, Get and Subscribe go straight to the device. Every Set is
journaled in --journal-dir, committed, and applied to the device in order;
by default the reply comes after the device answered. While the device is
unreachable a Set is refused with UNAVAILABLE (nothing journaled) unless
--queue-when-disconnected. When the device restarts empty, the sidecar
re-pushes the applied configuration before anything else.

SIGINT/SIGTERM stop accepting requests, let in-flight Sets finish for up to
--shutdown-timeout, and close the journal; unfinished Sets stay journaled
and are applied by the next run.`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return applyConfigFile(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.target == "" {
				return errors.New("--target is required: the device's gNMI address, host:port")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log, err := newLogger(stderr, cfg.logLevel, cfg.logFormat)
			if err != nil {
				return err
			}
			return serve(ctx, cfg, stdout, log, nil)
		},
	}
	cfg.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&cfg.target, "target", "", "the device's gNMI address, host:port (required)")
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// deviceTLSConfig builds the device-side TLS configuration, nil for
// plaintext.
func (c *serveConfig) deviceTLSConfig() (*tls.Config, error) {
	return clientTLS{prefix: "device-", on: c.deviceTLS, ca: c.deviceCA, cert: c.deviceCert, key: c.deviceKey,
		serverName: c.deviceServerName, skipVerify: c.deviceSkipVerify}.config()
}

// serve runs the sidecar until ctx ends. banner, if set, is called with the
// bound address once clients can connect.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer, log *slog.Logger, banner func(addr string)) error {
	devTLS, err := cfg.deviceTLSConfig()
	if err != nil {
		return err
	}
	tracer, traceFile, err := openTrace(cfg.tracePath)
	if err != nil {
		return err
	}
	if traceFile != nil {
		defer traceFile.Close()
	}
	if err := cfg.checkListen(cfg.listen); err != nil {
		return err
	}
	if cfg.maxRecvMsgSize <= 0 {
		return fmt.Errorf("--max-recv-msg-size %d: want a positive number of bytes", cfg.maxRecvMsgSize)
	}
	if cfg.journalMinFree < 0 {
		return fmt.Errorf("--journal-min-free %d: want a number of bytes, or 0", cfg.journalMinFree)
	}
	obs, err := newObservability(cfg.observabilityConfig, log)
	if err != nil {
		return err
	}
	jopts := journal.Options{Logger: log, Observer: obs.Observe, MinFreeBytes: cfg.journalMinFree}
	if len(cfg.yangPaths) > 0 {
		start := time.Now()
		if jopts.Schema, err = leaves.LoadYANG(cfg.yangPaths, cfg.yangModules); err != nil {
			return fmt.Errorf("--yang: %w", err)
		}
		log.Info("loaded the device's YANG schema", "paths", cfg.yangPaths, "modules", cfg.yangModules, "took", time.Since(start).Round(time.Millisecond))
	} else if len(cfg.yangModules) > 0 {
		return errors.New("--yang-module names modules to load from the --yang directories: give --yang too")
	}
	if jopts.MinFreeBytes == 0 {
		jopts.MinFreeBytes = -1 // none
	}
	if tracer != nil {
		jopts.Observer = func(e journal.Event) {
			tracer.Observe(e)
			obs.Observe(e)
		}
	}
	if err := os.MkdirAll(cfg.journalDir, 0o750); err != nil {
		return fmt.Errorf("--journal-dir: %w", err)
	}
	j, err := journal.Open(cfg.journalDir, jopts)
	if errors.Is(err, journal.ErrLocked) {
		return fmt.Errorf("journal %s is in use by another gnmi-sidecar process", cfg.journalDir)
	}
	if err != nil {
		return fmt.Errorf("journal %s: %w", cfg.journalDir, err)
	}
	defer func() {
		if err := j.Close(); err != nil {
			log.Error("closing the journal", "err", err)
			return
		}
		if tracer != nil {
			tracer.End() // every transition is traced: a clean stop
		}
	}()
	if tracer != nil {
		m, err := j.Mastership(ctx)
		if err != nil {
			return err
		}
		tracer.Begin(m)
	}

	devicePassword, err := cfg.devicePassword()
	if err != nil {
		return err
	}
	transient, err := parseCodes(cfg.transientCodes)
	if err != nil {
		return fmt.Errorf("--transient-codes: %w", err)
	}
	a, err := agent.New(j, agent.Options{
		Target:         cfg.target,
		TLS:            devTLS,
		Username:       cfg.deviceUsername,
		Password:       devicePassword,
		Persistent:     cfg.persistentDevice,
		Fencing:        cfg.masterArbitration,
		ApplyTimeout:   cfg.applyTimeout,
		TransientCodes: transient,
		Logger:         log,
	})
	if err != nil {
		return err
	}
	tree, err := introspection.New(introspection.Options{Journal: j, Agent: a, Address: cfg.target, Logger: log})
	if err != nil {
		return err
	}
	p, err := proxy.New(proxy.Options{
		Target:                cfg.target,
		TLS:                   devTLS,
		Journal:               j,
		Agent:                 a,
		QueueWhenDisconnected: cfg.queueWhenDisconnected,
		DeviceUsername:        cfg.deviceUsername,
		DevicePassword:        devicePassword,
		Introspection:         tree,
		Logger:                log,
	})
	if err != nil {
		return err
	}
	defer p.Close()

	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	secOpts, err := cfg.serverOptions(log)
	if err != nil {
		return err
	}
	obs.attach(j, a)
	g := grpc.NewServer(append(append(obs.serverOptions(), secOpts...), grpc.MaxRecvMsgSize(cfg.maxRecvMsgSize))...)
	p.Register(g)
	obs.register(g)
	stopObs, err := obs.start()
	if err != nil {
		return err
	}
	defer stopObs()

	agentCtx, stopAgent := context.WithCancel(context.Background())
	defer stopAgent()
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(agentCtx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- g.Serve(lis) }()

	addr := lis.Addr().String()
	fmt.Fprintf(stdout, "gnmi-sidecar listening on %s\n", addr)
	obs.announce(stdout)
	log.Info("serving", "listen", addr, "device", cfg.target, "journal", cfg.journalDir)
	if banner != nil {
		banner(addr)
	}

	select {
	case <-ctx.Done():
	case err := <-serveDone:
		stopAgent()
		<-agentDone
		return fmt.Errorf("gRPC server: %w", err)
	case err := <-agentDone:
		// Answer the Sets waiting for the agent (they stay journaled)
		// before the connections close.
		p.Drain()
		obs.drain()
		p.StopWaiting()
		stopWithin(g, gracefulStop(g), time.Second)
		switch {
		case errors.Is(err, journal.ErrFailed):
			return fmt.Errorf("%w; gnmi-sidecar stops: start it again once the cause is fixed, it recovers every Set it acknowledged", err)
		case errors.Is(err, journal.ErrCorrupt):
			return fmt.Errorf("%w; gnmi-sidecar stops: restore the journal (docs/faults.md)", err)
		}
		return fmt.Errorf("agent: %w", err)
	}
	log.Info("shutting down: finishing in-flight Sets", "timeout", cfg.shutdownTimeout)
	p.Drain()
	obs.drain()
	stopped := gracefulStop(g)
	select {
	case <-stopped:
	case <-time.After(cfg.shutdownTimeout):
		log.Warn("shutdown timeout: answering the Sets still in flight; they stay journaled")
		p.StopWaiting()
		stopWithin(g, stopped, time.Second)
	}
	stopAgent()
	if err := <-agentDone; err != nil {
		log.Error("agent", "err", err)
	}
	log.Info("stopped")
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

// openTrace opens the trace file of --trace, or of $GNMI_SIDECAR_TRACE.
func openTrace(path string) (*trace.Tracer, io.Closer, error) {
	if path == "" {
		t, c, err := trace.FromEnv()
		if err != nil {
			return nil, nil, fmt.Errorf("$%s: %w", trace.Env, err)
		}
		return t, c, nil
	}
	t, c, err := trace.OpenFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--trace: %w", err)
	}
	return t, c, nil
}

// defaultTransientCodes names agent.DefaultTransientCodes as the flag
// takes them (TestParseCodes checks they agree).
func defaultTransientCodes() []string {
	return []string{"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED"}
}

// parseCodes parses gRPC code names (UNAVAILABLE, unavailable) or numbers.
func parseCodes(names []string) ([]codes.Code, error) {
	out := []codes.Code{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		var c codes.Code
		arg := n
		if _, err := strconv.Atoi(n); err != nil {
			arg = strconv.Quote(strings.ToUpper(n))
		}
		if err := c.UnmarshalJSON([]byte(arg)); err != nil || c == codes.OK {
			return nil, fmt.Errorf("%q is not a gRPC error code (e.g. UNAVAILABLE, DEADLINE_EXCEEDED)", n)
		}
		out = append(out, c)
	}
	return out, nil
}
