//go:build devtools

package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func newDemoCommand(stdout, stderr io.Writer) *cobra.Command {
	var cfg serveConfig
	var deviceListen, gnmiCLI string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Serve gNMI in front of an in-process simulated device (what make run starts)",
		Long: `demo starts the simulated OpenConfig device of package testbed inside this
process (non-persistent: it is empty at every start) and the sidecar in front
of it, and prints gnmi_cli commands to try. The journal in --journal-dir
survives restarts: stop and start the demo, and the sidecar re-pushes the
configuration to the fresh device. Unless --yang names other modules, the
sidecar reads the simulated device's own schema (written as a YANG module
into a temporary directory), so JSON values of every shape are journaled
leaf by leaf.`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return applyConfigFile(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log, err := newLogger(stderr, cfg.logLevel, cfg.logFormat)
			if err != nil {
				return err
			}
			dev, err := testbed.New(testbed.Options{Logger: log.With("component", "device")})
			if err != nil {
				return err
			}
			if err := dev.Start(ctx, deviceListen); err != nil {
				return err
			}
			defer dev.Stop()
			cfg.target = dev.Addr()
			if len(cfg.yangPaths) == 0 {
				dir, err := os.MkdirTemp("", "gnmi-sidecar-demo-yang-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if cfg.yangPaths, err = dev.WriteYANG(dir); err != nil {
					return err
				}
			}
			return serve(ctx, cfg, stdout, log, func(addr string) { printDemoBanner(stdout, addr, dev.Addr(), cfg.journalDir, gnmiCLI) })
		},
	}
	cfg.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&deviceListen, "device-listen", "127.0.0.1:0", "where the simulated device listens")
	cmd.Flags().StringVar(&gnmiCLI, "gnmi-cli", "gnmi_cli", "how to invoke gnmi_cli in the printed example commands")
	return cmd
}

const descriptionPath = `elem: <name: "interfaces"> elem: <name: "interface" key: <key: "name" value: "eth0">> elem: <name: "config"> elem: <name: "description">`

func printDemoBanner(w io.Writer, addr, device, journalDir, cli string) {
	fmt.Fprintf(w, "simulated device (in-process, empty at every start) on %s; journal in %s\n\n", device, journalDir)
	fmt.Fprintf(w, "Talk to the sidecar with gnmi_cli (make run installs it into ./bin):\n\n")
	fmt.Fprintf(w, "  %s -address %s -insecure -capabilities\n\n", cli, addr)
	fmt.Fprintf(w, "  %s -address %s -insecure -set -proto '%s'\n\n", cli, addr,
		`update: <path: <`+descriptionPath+`> val: <string_val: "uplink to spine1">>`)
	fmt.Fprintf(w, "  %s -address %s -insecure -get -proto '%s'\n\n", cli, addr,
		`path: <`+descriptionPath+`> encoding: JSON_IETF`)
	fmt.Fprintf(w, "  %s -address %s -insecure -set -proto '%s'\n\n", cli, addr,
		`update: <path: <elem: <name: "system"> elem: <name: "config">> val: <json_ietf_val: "{\"hostname\":\"r1\",\"domain-name\":\"example.net\"}">>`)
	fmt.Fprintf(w, "  %s -address %s -insecure -target demo -query_type once -query '/interfaces/interface[name=eth0]/config/description'\n\n", cli, addr)
	fmt.Fprintf(w, "  %s -address %s -insecure -target demo -query_type streaming -query '/interfaces/interface[name=eth0]/config/description'\n\n", cli, addr)
	fmt.Fprintf(w, "The journal, from another terminal (docs/cli.md):\n\n")
	fmt.Fprintf(w, "  ./bin/gnmi-sidecar journal list --address %s\n", addr)
	fmt.Fprintf(w, "  ./bin/gnmi-sidecar journal show 1 --address %s\n", addr)
	fmt.Fprintf(w, "  ./bin/gnmi-sidecar status --address %s\n", addr)
	fmt.Fprintf(w, "  ./bin/gnmi-sidecar rollback --address %s\n\n", addr)
	fmt.Fprintf(w, "Change the device behind the sidecar's back (-address %s) and see the drift (docs/drift.md):\n\n", device)
	fmt.Fprintf(w, "  ./bin/gnmi-sidecar drift --address %s\n", addr)
	fmt.Fprintf(w, "  ./bin/gnmi-sidecar diff --address %s\n\n", addr)
	fmt.Fprintf(w, "Stop with Ctrl-C and run it again: the Set above is still there (re-pushed from the journal).\n")
}
