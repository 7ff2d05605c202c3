// Command gnmi-testbed runs the simulated gNMI device of package testbed on
// its own, for demos and for tests that drive real gNMI clients.
//
//	gnmi-testbed --listen 127.0.0.1:9340 [--persistent] [--admin 127.0.0.1:9341]
//	gnmi-testbed yang --out DIR   # the device's schema as a YANG module
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func main() {
	if err := newRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}

type config struct {
	listen      string
	persistent  bool
	noOnChange  bool
	noUnion     bool
	noGetConfig bool
	noGet       bool
	refuseEncs  []string
	echoExts    bool
	target      string
	users       []string
	stateFile   string
	admin       string
	setDelay    time.Duration
	updateDelay time.Duration
	rejectSets  int
	rejectCode  string
	logLevel    string
	gnmiCLI     string
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	var cfg config
	cmd := &cobra.Command{
		Use:   "gnmi-testbed",
		Short: "A simulated gNMI device (OpenConfig) for testing gNMI clients and the sidecar",
		Long: `gnmi-testbed serves a simulated gNMI target with an OpenConfig schema:
Capabilities, Get, Set (atomic, MasterArbitration, union_replace) and Subscribe
(ONCE, POLL, STREAM ON_CHANGE/SAMPLE with heartbeat_interval and
suppress_redundant; sample and heartbeat intervals of at least 100ms).

Extensions: Depth on Get and Subscribe; History, commit-confirmed and
ConfigSubscription are refused with UNIMPLEMENTED; registered extensions
(whatever their id) are ignored, or with --echo-extensions sent back in the
response.

Without --persistent the device starts empty every time. With --persistent it
saves its configuration to --state-file after every Set and loads it on start,
like a real device's startup configuration.

Faults can be armed at start (--set-delay, --update-delay,
--reject-sets/--reject-code) or at runtime through the loopback admin
endpoint (--admin):
  POST /faults/reject?n=3&code=UNAVAILABLE   POST /faults/delay?d=20ms&update=1ms
  POST /faults/hang   POST /faults/drop   POST /faults/clear   POST /restart
  GET  /config        GET  /status   GET  /requests (the last request of each RPC, with its metadata)
and for the Sets that touch one path (an operation at, under or above it):
  POST /faults/refuse?path=P&code=RESOURCE_EXHAUSTED&n=1&details=1
  POST /faults/delay?path=P&d=2s&n=1   POST /faults/hang?path=P
The Set log records every Set RPC: when it arrived, the deadline the device
saw, its metadata and request, the faults that met it, its answer, whether
its context had ended and whether it was applied:
  GET  /setlog?since=SEQ&path=P   POST /setlog/clear

A device can refuse reads as real ones do: --refuse-get-config (a Get of type
CONFIG is UNIMPLEMENTED "unsupported request type: CONFIG", as gnxi's
gnmi_target answers), --refuse-get (every Get is UNIMPLEMENTED: read it with
Subscribe ONCE), --refuse-encoding PROTO (Get and Subscribe in that encoding
are UNIMPLEMENTED "unsupported encoding: PROTO"; PROTO:INVALID_ARGUMENT for
another code; Capabilities no longer lists it).

A device can insist on what real ones do: --require-target NAME (the prefix
target of every Get, Set and Subscribe, else NOT_FOUND) and --user NAME:PASSWORD
(username/password metadata on every RPC, else UNAUTHENTICATED).

"gnmi-testbed yang --out DIR" writes the device's schema as one YANG 1.1
module (gnmi-testbed.yang) for tools that load YANG at run time.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, cfg, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.listen, "listen", "127.0.0.1:9340", "gNMI listen address (port 0 picks a free port; the bound address is printed)")
	f.BoolVar(&cfg.persistent, "persistent", false, "keep the configuration in --state-file across restarts")
	f.BoolVar(&cfg.noOnChange, "refuse-on-change", false, "refuse STREAM subscriptions in mode ON_CHANGE (and TARGET_DEFINED) with UNIMPLEMENTED, like a device that only samples")
	f.BoolVar(&cfg.noUnion, "no-union-replace", false, "refuse every Set with union_replace operations with UNIMPLEMENTED, like a device older than gNMI 0.10")
	f.BoolVar(&cfg.noGetConfig, "refuse-get-config", false, "refuse a Get of type CONFIG with UNIMPLEMENTED (\"unsupported request type: CONFIG\"), as gnxi's gnmi_target does")
	f.BoolVar(&cfg.noGet, "refuse-get", false, "refuse every Get with UNIMPLEMENTED, like a device read only with Subscribe")
	f.StringArrayVar(&cfg.refuseEncs, "refuse-encoding", nil, "ENCODING[:CODE]: refuse Get and Subscribe in this encoding (JSON, JSON_IETF or PROTO) with CODE (default UNIMPLEMENTED; repeatable)")
	f.BoolVar(&cfg.echoExts, "echo-extensions", false, "answer every request with the registered extensions it carried (Subscribe: with each sync_response), to test a proxy's relay of response extensions")
	f.StringVar(&cfg.target, "require-target", "", "serve only this target: a Get, Set or Subscribe whose prefix names another, or none, is refused with NOT_FOUND (a multi-target server such as SONiC's, e.g. OC-YANG)")
	f.StringArrayVar(&cfg.users, "user", nil, "NAME:PASSWORD of an account the device accepts (repeatable); with any, every RPC needs matching username/password metadata, else UNAUTHENTICATED")
	f.StringVar(&cfg.stateFile, "state-file", "./gnmi-testbed-state.json", "where a --persistent device keeps its configuration")
	f.StringVar(&cfg.admin, "admin", "", "loopback address of the HTTP admin endpoint for runtime faults (e.g. 127.0.0.1:9341); off when empty")
	f.DurationVar(&cfg.setDelay, "set-delay", 0, "delay every Set by this long (a slow device)")
	f.DurationVar(&cfg.updateDelay, "update-delay", 0, "delay every Set by this long per operation (delete, replace, union_replace, update), on top of --set-delay: a device whose cost grows with what a Set carries")
	f.IntVar(&cfg.rejectSets, "reject-sets", 0, "reject the first N Sets with --reject-code")
	f.StringVar(&cfg.rejectCode, "reject-code", "UNAVAILABLE", "gRPC code for --reject-sets (name or number)")
	f.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&cfg.gnmiCLI, "gnmi-cli", "gnmi_cli", "how to invoke gnmi_cli in the printed example commands")
	// The only subcommand is yang; no generated completion command.
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(newYANGCommand(stdout))
	return cmd
}

func newYANGCommand(stdout io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "yang --out DIR",
		Short: "Write the device's schema as a YANG module into DIR and print its path",
		Long: `yang writes the simulated device's schema as one self-contained YANG 1.1
module, gnmi-testbed (namespace urn:gnmi-sidecar:testbed), into the file
DIR/gnmi-testbed.yang (creating DIR), and prints the file's path.

The module describes the device's whole (uncompressed OpenConfig) data tree:
containers, lists with their keys, leaf-lists, leaves, presence, choice/case,
and "config false" on read-only subtrees. Leaves have their builtin type, or
string for derived ones (enumeration, identityref, leafref, union, ...).
It needs no other module, e.g. for the sidecar's --yang option:

  gnmi-testbed yang --out ./data/yang`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dev, err := testbed.New(testbed.Options{})
			if err != nil {
				return err
			}
			paths, err := dev.WriteYANG(out)
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintln(stdout, p)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write the module into (created if missing)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var rejectCode codes.Code
	if cfg.rejectSets > 0 {
		c, err := testbed.ParseCode(cfg.rejectCode)
		if err != nil || c == codes.OK {
			return fmt.Errorf("--reject-code %q: not a gRPC error code", cfg.rejectCode)
		}
		rejectCode = c
	}
	if cfg.admin != "" {
		if err := requireLoopback(cfg.admin); err != nil {
			return fmt.Errorf("--admin: %w", err)
		}
	}

	opts := testbed.Options{Persistent: cfg.persistent, RefuseOnChange: cfg.noOnChange, NoUnionReplace: cfg.noUnion, EchoExtensions: cfg.echoExts,
		RequireTarget: cfg.target, Logger: log, RefuseGetConfig: cfg.noGetConfig, RefuseGet: cfg.noGet}
	for _, r := range cfg.refuseEncs {
		enc, code, err := parseRefusedEncoding(r)
		if err != nil {
			return fmt.Errorf("--refuse-encoding %q: %w", r, err)
		}
		if opts.RefuseEncodings == nil {
			opts.RefuseEncodings = map[gpb.Encoding]codes.Code{}
		}
		opts.RefuseEncodings[enc] = code
	}
	for _, u := range cfg.users {
		name, password, ok := strings.Cut(u, ":")
		if !ok || name == "" {
			return fmt.Errorf("--user %q: want NAME:PASSWORD", u)
		}
		if opts.Users == nil {
			opts.Users = map[string]string{}
		}
		opts.Users[name] = password
	}
	if cfg.persistent {
		opts.StateFile = cfg.stateFile
	}
	dev, err := testbed.New(opts)
	if err != nil {
		return err
	}
	if cfg.setDelay > 0 {
		dev.SetDelay(cfg.setDelay)
	}
	if cfg.updateDelay > 0 {
		dev.SetUpdateDelay(cfg.updateDelay)
	}
	if cfg.rejectSets > 0 {
		dev.RejectNextSets(cfg.rejectSets, rejectCode)
	}
	if err := dev.Start(ctx, cfg.listen); err != nil {
		log.Error("cannot start", "err", err)
		return err
	}
	defer dev.Stop()

	var adminSrv *http.Server
	if cfg.admin != "" {
		l, err := net.Listen("tcp", cfg.admin)
		if err != nil {
			return fmt.Errorf("--admin: %w", err)
		}
		adminSrv = &http.Server{Handler: dev.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := adminSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin endpoint stopped", "err", err)
			}
		}()
		cfg.admin = l.Addr().String()
	}
	printBanner(stdout, dev.Addr(), cfg)

	<-ctx.Done()
	log.Info("shutting down")
	if adminSrv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = adminSrv.Shutdown(shutdownCtx)
	}
	return nil
}

// requireLoopback refuses admin addresses that are reachable from other
// machines: the endpoint has no authentication.
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address; the admin endpoint has no authentication", addr)
	}
	return nil
}

const descriptionPath = `elem: <name: "interfaces"> elem: <name: "interface" key: <key: "name" value: "eth0">> elem: <name: "config"> elem: <name: "description">`

// printBanner prints the bound address (first line, stable format, parsed
// by tests) and ready-to-paste gnmi_cli commands.
func printBanner(w io.Writer, addr string, cfg config) {
	fmt.Fprintf(w, "gnmi-testbed listening on %s\n", addr)
	mode := "non-persistent (configuration is lost on restart)"
	if cfg.persistent {
		mode = "persistent, state file " + cfg.stateFile
	}
	fmt.Fprintf(w, "mode: %s\n", mode)
	if cfg.target != "" {
		fmt.Fprintf(w, "serves target %q only: requests need it in their prefix\n", cfg.target)
	}
	if len(cfg.users) > 0 {
		fmt.Fprintf(w, "requires username/password metadata of one of %d accounts (--user)\n", len(cfg.users))
	}
	if cfg.admin != "" {
		fmt.Fprintf(w, "admin endpoint: http://%s (e.g. curl -X POST 'http://%s/faults/reject?n=1&code=UNAVAILABLE')\n", cfg.admin, cfg.admin)
	}
	fmt.Fprintln(w)
	cli := cfg.gnmiCLI
	fmt.Fprintf(w, "Try it with gnmi_cli (make run installs it into ./bin; or go install github.com/openconfig/gnmi/cmd/gnmi_cli@v0.14.1):\n\n")
	fmt.Fprintf(w, "  %s -address %s -insecure -capabilities\n\n", cli, addr)
	fmt.Fprintf(w, "  %s -address %s -insecure -set -proto '%s'\n\n", cli, addr,
		`update: <path: <`+descriptionPath+`> val: <string_val: "uplink to spine1">>`)
	fmt.Fprintf(w, "  %s -address %s -insecure -get -proto '%s'\n\n", cli, addr,
		`path: <`+descriptionPath+`> encoding: JSON_IETF`)
	fmt.Fprintf(w, "  %s -address %s -insecure -target testbed -query_type streaming -query '/interfaces/interface[name=eth0]/config/description'\n\n", cli, addr)
}

// parseRefusedEncoding parses --refuse-encoding's ENCODING[:CODE].
func parseRefusedEncoding(s string) (gpb.Encoding, codes.Code, error) {
	name, codeName, withCode := strings.Cut(s, ":")
	var enc gpb.Encoding
	switch strings.ToUpper(name) {
	case "JSON":
		enc = gpb.Encoding_JSON
	case "JSON_IETF":
		enc = gpb.Encoding_JSON_IETF
	case "PROTO":
		enc = gpb.Encoding_PROTO
	default:
		return 0, 0, errors.New("want JSON, JSON_IETF or PROTO, optionally :CODE")
	}
	code := codes.Unimplemented
	if withCode {
		c, err := testbed.ParseCode(codeName)
		if err != nil || c == codes.OK {
			return 0, 0, fmt.Errorf("%q: not a gRPC error code", codeName)
		}
		code = c
	}
	return enc, code, nil
}
