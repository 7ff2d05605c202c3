package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar"
)

// passwordEnv holds the device password: never a flag, so it does not
// show in ps.
const passwordEnv = "GNMI_SIDECAR_DEVICE_PASSWORD"

type serveConfig struct {
	listen                string
	target                string
	journalDir            string
	journalMinFree        int64
	memoryLimit           int64
	memoryLimitGiven      bool // --memory-limit given (else $GOMEMLIMIT, if set, wins)
	gcPercent             int
	gcPercentGiven        bool // --gc-percent given (else $GOGC, if set, wins)
	persistentDevice      bool
	queueWhenDisconnected bool
	maxRollbackDuration   time.Duration
	masterArbitration     bool
	deviceTLS             bool
	deviceCA              string
	deviceCert            string
	deviceKey             string
	deviceServerName      string
	deviceSkipVerify      bool
	deviceUsername        string
	deviceTarget          string
	tracePath             string
	applyTimeout          time.Duration
	transientCodes        []string
	retryCodes            []string
	retryAttempts         int
	retryFor              time.Duration
	shutdownTimeout       time.Duration
	maxRecvMsgSize        int
	logLevel              string
	logFormat             string
	configPath            string
	yangPaths             []string
	yangModules           []string
	driftPolicy           string
	driftInterval         time.Duration
	replyExtension        string
	baseline              string
	managedPaths          []string

	securityConfig      // northbound TLS, client authorization, device credentials (security.go)
	observabilityConfig // metrics, health, reflection (observe.go)
}

func (c *serveConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.listen, "listen", "127.0.0.1:9339", "northbound gNMI listen address (port 0 picks a free port; the bound address is printed)")
	f.StringVar(&c.journalDir, "journal-dir", "./data", "directory of the journal (created if missing; one sidecar per directory)")
	f.Int64Var(&c.journalMinFree, "journal-min-free", 64<<20, "bytes the journal's filesystem must keep free: below it Sets are refused with RESOURCE_EXHAUSTED, nothing journaled, until there is room (0: no reserve, and a full disk kills the sidecar)")
	f.Int64Var(&c.memoryLimit, "memory-limit", defaultMemoryLimit, "a soft limit in bytes on the Go runtime's memory (debug.SetMemoryLimit): past it the garbage collector runs more often instead of letting the heap double; not a cap, the sidecar uses what it needs (0, the default: none, or $GOMEMLIMIT if set)")
	f.IntVar(&c.gcPercent, "gc-percent", defaultGCPercent, "how far the Go heap may grow past what was live at the last garbage collection before the next, in percent (debug.SetGCPercent; $GOGC if set, unless this is given); lower keeps the RSS closer to what is in use for a little more CPU")
	f.BoolVar(&c.persistentDevice, "persistent-device", false, "the device keeps its configuration across restarts: no re-push on reconnect")
	f.BoolVar(&c.queueWhenDisconnected, "queue-when-disconnected", false, "journal SYNC Sets while the device is unreachable instead of refusing them with UNAVAILABLE")
	f.DurationVar(&c.maxRollbackDuration, "max-rollback-duration", proxy.DefaultMaxRollbackDuration,
		"longest rollback_duration a commit-confirmed may ask for (commit or extend); longer is refused with INVALID_ARGUMENT. A commit-confirmed blocks every other change until it is confirmed, cancelled or rolled back")
	f.BoolVar(&c.masterArbitration, "master-arbitration", false, "send MasterArbitration{election_id: term} with every device Set (fencing)")
	f.BoolVar(&c.deviceTLS, "device-tls", false, "connect to the device with TLS (implied by the other --device-* TLS flags)")
	f.StringVar(&c.deviceCA, "device-ca", "", "PEM file of the CA that signed the device's certificate (default: the system roots)")
	f.StringVar(&c.deviceCert, "device-cert", "", "PEM client certificate for the device (mTLS); needs --device-key")
	f.StringVar(&c.deviceKey, "device-key", "", "PEM private key of --device-cert")
	f.StringVar(&c.deviceServerName, "device-server-name", "", "name to verify the device's certificate against (default: the host of --target)")
	f.BoolVar(&c.deviceSkipVerify, "device-skip-verify", false, "do not verify the device's certificate (lab use only)")
	f.StringVar(&c.deviceUsername, "device-username", "", "username sent to the device, with the password of --device-password-file or $"+passwordEnv+"; replaces the clients' credentials on passthrough RPCs")
	f.StringVar(&c.deviceTarget, "device-target", "", "gNMI target named in the prefix of the sidecar's own device RPCs (liveness subscription, drift watching, resolve/adopt reads), for a device that serves several targets and routes on it, e.g. OC-YANG; clients' requests and their Sets keep the target the client sent")
	f.StringSliceVar(&c.yangPaths, "yang", nil, "the device's YANG modules: .yang files or directories of them, comma-separated or repeated; with them the journal records JSON lists, leaf-lists, presence containers and choices exactly, leaf by leaf (docs/values.md)")
	f.StringSliceVar(&c.yangModules, "yang-module", nil, "load only these modules (names) from the --yang directories, with what they import (default: every .yang file there)")
	f.StringVar(&c.tracePath, "trace", "", "append every journal transition as a JSON line to this file (also $"+trace.Env+")")
	f.StringSliceVar(&c.retryCodes, "retry-codes", nil,
		"gRPC codes of a device answer after which an acknowledged (ASYNC) change is sent again, within --retry-attempts and --retry-for; past them it is recorded applied with its paths out of sync (resolve settles it). Default none: a device's answer is the change's outcome (docs/agent.md)")
	f.IntVar(&c.retryAttempts, "retry-attempts", 5, "most times an acknowledged change is sent to the device when it answers with one of --retry-codes, the first send included")
	f.DurationVar(&c.retryFor, "retry-for", time.Minute, "longest an acknowledged change is sent again when the device answers with one of --retry-codes")
	f.StringSliceVar(&c.transientCodes, "transient-codes", nil, "")
	_ = f.MarkHidden("transient-codes")
	f.DurationVar(&c.applyTimeout, "apply-timeout", 30*time.Second,
		"longest a device Set may take; a waiting (SYNC) client's own deadline, less 50 ms, when sooner. A Set past it is in doubt: the device is read back")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", sidecar.DefaultShutdownTimeout, "on SIGINT/SIGTERM, how long in-flight Sets may take to finish (they stay journaled either way)")
	f.IntVar(&c.maxRecvMsgSize, "max-recv-msg-size", sidecar.DefaultMaxRecvMsgSize, "largest gNMI request accepted, in bytes; larger ones are refused with RESOURCE_EXHAUSTED (the device has its own limit for what the sidecar forwards)")
	f.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&c.driftPolicy, "drift-policy", string(drift.PolicyReport),
		"what to do when the device's configuration is changed behind the sidecar's back (drift): report (log, metric, gnmi-sidecar drift), revert (put the journal's values back), adopt (journal the device's values as a proposal authored \"device\"), or off (do not watch); docs/drift.md")
	f.DurationVar(&c.driftInterval, "drift-interval", drift.DefaultInterval,
		"how often the configuration is compared with the device when the device refuses ON_CHANGE subscriptions (drift is then seen within this interval)")
	f.StringVar(&c.replyExtension, "reply-extension", "asked",
		"when a Set's reply carries the sidecar's receipt (extension 999: proposal index and statuses): asked (only for a Set that carried the sidecar's extension; the reply is otherwise the device's) or always")
	f.StringVar(&c.baseline, "baseline", "auto",
		"auto: on first start with an empty journal, read the device's configuration (--managed-paths) into the journal as a baseline (proposals authored \"device\", tagged baseline) before any change, so that rollbacks restore what the device held; off: read only the paths each change writes, before it (docs/values.md)")
	f.StringSliceVar(&c.managedPaths, "managed-paths", nil,
		"the subtrees of the device's configuration a baseline (and gnmi-sidecar sync-from) reads, comma-separated or repeated, /a/b[k=v] or origin:/a/b (default: the whole tree, /)")
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
				return &exitError{code: exitUsage, err: errors.New("serve: --target (or --device-address) is required: the device's gNMI address, host:port")}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log, err := newLogger(stderr, cfg.logLevel, cfg.logFormat)
			if err != nil {
				return err
			}
			cfg.memoryLimitGiven = cmd.Flags().Changed("memory-limit")
			cfg.gcPercentGiven = cmd.Flags().Changed("gc-percent")
			return serve(ctx, cfg, stdout, log, nil)
		},
	}
	cfg.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&cfg.target, "target", "", "the device's gNMI address, host:port (required; also --device-address)")
	cmd.Flags().StringVar(&cfg.target, "device-address", "", "the same as --target: the device's gNMI address, host:port (--device-target is the gNMI target name its Subscribe prefix carries)")
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
	sc, closeTrace, err := cfg.sidecarConfig(log)
	if err != nil {
		return err
	}
	defer closeTrace()
	sc.Stdout = stdout
	defer setMemoryLimit(cfg, log)()
	defer setGCPercent(cfg, log)()
	defer setMemProfileRate(cfg.pprof)()
	s, err := sidecar.New(sc)
	if err != nil {
		return flagError(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bannerDone := make(chan struct{})
	go func() { // the banner follows Run's listening lines
		defer close(bannerDone)
		select {
		case <-s.Ready():
			if banner != nil {
				banner(s.Addr())
			}
		case <-ctx.Done():
		}
	}()
	err = s.Run(ctx)
	cancel()
	<-bannerDone
	if _, stopped := errors.AsType[*sidecar.StopError](err); stopped {
		return nil // logged already: serve stopped as asked
	}
	return err
}

// sidecarConfig checks the options, reads the files they name (device and
// northbound TLS, the authorization policy, the device password, the YANG
// modules) and opens the trace, and returns the sidecar's configuration and
// a function closing the trace file. Every error names the flag at fault.
func (cfg *serveConfig) sidecarConfig(log *slog.Logger) (sidecar.Config, func(), error) {
	noTrace := func() {}
	devTLS, err := cfg.deviceTLSConfig()
	if err != nil {
		return sidecar.Config{}, noTrace, err
	}
	tracer, traceFile, err := openTrace(cfg.tracePath)
	if err != nil {
		return sidecar.Config{}, noTrace, err
	}
	closeTrace := noTrace
	if traceFile != nil {
		closeTrace = func() { _ = traceFile.Close() }
	}
	sc, err := cfg.checkedConfig(log)
	if err != nil {
		closeTrace()
		return sidecar.Config{}, noTrace, err
	}
	sc.DeviceTLS, sc.Trace = devTLS, tracer
	return sc, closeTrace, nil
}

// checkedConfig is sidecarConfig without the device TLS and the trace.
func (cfg *serveConfig) checkedConfig(log *slog.Logger) (sidecar.Config, error) {
	if err := cfg.checkListen(cfg.listen); err != nil {
		return sidecar.Config{}, err
	}
	if cfg.maxRecvMsgSize <= 0 {
		return sidecar.Config{}, fmt.Errorf("--max-recv-msg-size %d: want a positive number of bytes", cfg.maxRecvMsgSize)
	}
	if cfg.memoryLimit < 0 {
		return sidecar.Config{}, fmt.Errorf("--memory-limit %d: want a number of bytes, or 0", cfg.memoryLimit)
	}
	if cfg.gcPercent <= 0 {
		return sidecar.Config{}, fmt.Errorf("--gc-percent %d: want a positive percentage (Go's own default is 100)", cfg.gcPercent)
	}
	if cfg.journalMinFree < 0 {
		return sidecar.Config{}, fmt.Errorf("--journal-min-free %d: want a number of bytes, or 0", cfg.journalMinFree)
	}
	if err := cfg.observabilityConfig.check(); err != nil {
		return sidecar.Config{}, err
	}
	var alwaysReply bool
	switch cfg.replyExtension {
	case "asked":
	case "always":
		alwaysReply = true
	default:
		return sidecar.Config{}, fmt.Errorf("--reply-extension %q: want asked or always", cfg.replyExtension)
	}
	policy, err := drift.ParsePolicy(cfg.driftPolicy)
	if err != nil {
		return sidecar.Config{}, fmt.Errorf("--drift-policy: %w", err)
	}
	if cfg.driftInterval <= 0 {
		return sidecar.Config{}, fmt.Errorf("--drift-interval %v: want a positive duration, e.g. 10s", cfg.driftInterval)
	}
	var baseline bool
	switch cfg.baseline {
	case "auto":
		baseline = true
	case "off":
	default:
		return sidecar.Config{}, fmt.Errorf("--baseline %q: want auto or off", cfg.baseline)
	}
	var managed []*gpb.Path
	for _, s := range cfg.managedPaths {
		p, err := parsePathArg(s)
		if err != nil {
			return sidecar.Config{}, fmt.Errorf("--managed-paths: %w", err)
		}
		managed = append(managed, p)
	}
	sc := sidecar.Config{
		Baseline:              baseline,
		ManagedPaths:          managed,
		Target:                cfg.target,
		DeviceUsername:        cfg.deviceUsername,
		DeviceTarget:          cfg.deviceTarget,
		PersistentDevice:      cfg.persistentDevice,
		QueueWhenDisconnected: cfg.queueWhenDisconnected,
		MaxRollbackDuration:   cfg.maxRollbackDuration,
		AlwaysReplyExtension:  alwaysReply,
		MasterArbitration:     cfg.masterArbitration,
		ApplyTimeout:          cfg.applyTimeout,
		JournalDir:            cfg.journalDir,
		JournalMinFreeBytes:   cfg.journalMinFree,
		Listen:                cfg.listen,
		MaxRecvMsgSize:        cfg.maxRecvMsgSize,
		MetricsAddr:           cfg.metricsAddr,
		Pprof:                 cfg.pprof,
		Reflection:            cfg.reflection,
		ShutdownTimeout:       cfg.shutdownTimeout,
		DriftPolicy:           policy,
		DriftInterval:         cfg.driftInterval,
		Logger:                log,
	}
	if sc.JournalMinFreeBytes == 0 {
		sc.JournalMinFreeBytes = -1 // none
	}
	if sc.ShutdownTimeout <= 0 {
		sc.ShutdownTimeout = -1 // none: answer the Sets in flight at once
	}
	if len(cfg.yangPaths) > 0 {
		start := time.Now()
		schema, err := leaves.LoadYANG(cfg.yangPaths, cfg.yangModules)
		if err != nil {
			return sidecar.Config{}, fmt.Errorf("--yang: %w", err)
		}
		sc.Schema = schema
		log.Info("loaded the device's YANG schema", "paths", cfg.yangPaths, "modules", cfg.yangModules, "took", time.Since(start).Round(time.Millisecond))
	} else if len(cfg.yangModules) > 0 {
		return sidecar.Config{}, errors.New("--yang-module names modules to load from the --yang directories: give --yang too")
	}
	if err := os.MkdirAll(cfg.journalDir, 0o750); err != nil {
		return sidecar.Config{}, fmt.Errorf("--journal-dir: %w", err)
	}
	if sc.DevicePassword, err = cfg.devicePassword(); err != nil {
		return sidecar.Config{}, err
	}
	if len(cfg.transientCodes) > 0 {
		return sidecar.Config{}, errors.New("--transient-codes is gone: a device's answer is never sent again as if no answer had come (docs/agent.md, \"Answers\"); " +
			"to send acknowledged changes again after some answers, use --retry-codes (with --retry-attempts and --retry-for)")
	}
	if sc.RetryCodes, err = parseCodes(cfg.retryCodes); err != nil {
		return sidecar.Config{}, fmt.Errorf("--retry-codes: %w", err)
	}
	if cfg.retryAttempts < 1 {
		return sidecar.Config{}, fmt.Errorf("--retry-attempts %d: must be at least 1 (the first send)", cfg.retryAttempts)
	}
	sc.RetryAttempts, sc.RetryFor = cfg.retryAttempts, cfg.retryFor
	sc.ServerTLS, sc.Policy = cfg.serverTLS, cfg.policy
	cfg.logSecurity(log)
	return sc, nil
}

// flagError names the flag of the sidecar.Config field a sidecar.New error
// is about, as the rest of serve's errors do.
func flagError(err error) error {
	fe, ok := errors.AsType[*sidecar.FieldError](err)
	if !ok {
		return err
	}
	switch fe.Field {
	case "Listen":
		return fmt.Errorf("--listen: %w", fe.Err)
	case "MetricsAddr":
		return fmt.Errorf("--metrics: %w", fe.Err)
	case "Pprof":
		return fmt.Errorf("--pprof: %w", fe.Err)
	}
	return err
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

// defaultMemoryLimit is --memory-limit's default: none. The Go memory a
// sidecar needs grows with its configuration (about 30 MB in use with 16
// leaves under sustained Sets, more with 100,000), and a limit below what
// it needs makes the collector run without pause: the operator, who knows
// the configuration, sets it (docs/bench.md, "Soak").
const defaultMemoryLimit = 0

// defaultGCPercent is --gc-percent's default: half Go's. Most of what a
// sidecar holds in use is Badger's buffers (its memtable, the table
// builders of its flushes and compactions), which the collector does not
// scan, so collecting twice as often costs little CPU, and the heap's
// slack, which is most of the RSS under sustained Sets with Go's 100,
// halves (docs/bench.md, "Soak").
const defaultGCPercent = 50

// setGCPercent sets the collector's target from --gc-percent ($GOGC, which
// the runtime read at start, wins unless the flag is given), and returns
// what restores the previous one.
func setGCPercent(cfg serveConfig, log *slog.Logger) (restore func()) {
	if !cfg.gcPercentGiven && os.Getenv("GOGC") != "" {
		log.Debug("GC percent from $GOGC", "percent", os.Getenv("GOGC"))
		return func() {}
	}
	prev := debug.SetGCPercent(cfg.gcPercent)
	log.Debug("GC percent", "percent", cfg.gcPercent)
	return func() { debug.SetGCPercent(prev) }
}

// setMemProfileRate turns the runtime's sampling of heap allocations off
// unless --pprof serves the profiles, and returns what restores the
// previous rate. Go samples one allocation in every 512 KiB by default,
// and keeps a record for every distinct stack it sampled, never freed:
// 1.6 MB after a minute of Sets, growing with every new code path, for
// a profile nobody can fetch.
func setMemProfileRate(pprof bool) (restore func()) {
	if pprof {
		return func() {}
	}
	prev := runtime.MemProfileRate
	runtime.MemProfileRate = 0
	return func() { runtime.MemProfileRate = prev }
}

// setMemoryLimit sets the runtime's soft memory limit from --memory-limit
// ($GOMEMLIMIT, which the runtime read at start, wins unless the flag is
// given), and returns what restores the previous one.
func setMemoryLimit(cfg serveConfig, log *slog.Logger) (restore func()) {
	if !cfg.memoryLimitGiven && os.Getenv("GOMEMLIMIT") != "" {
		log.Debug("memory limit from $GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return func() {}
	}
	limit := cfg.memoryLimit
	if limit == 0 {
		limit = math.MaxInt64 // the runtime's "no limit"
	}
	prev := debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", cfg.memoryLimit)
	return func() { debug.SetMemoryLimit(prev) }
}
