// Command gnmi-sidecar runs the gNMI sidecar in front of one device.
//
//	gnmi-sidecar serve --target 10.0.0.1:9339 [--listen 127.0.0.1:9339] [--journal-dir ./data]
//	gnmi-sidecar demo  (the sidecar in front of an in-process simulated device)
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gnmi-sidecar",
		Short: "A gNMI sidecar: journals every Set, applies it to one device in order, re-pushes and rolls back",
		Long: `gnmi-sidecar sits in front of one gNMI target and is, to every gNMI client,
that target: Capabilities, Get and Subscribe are passed through; every Set is
journaled in an embedded database, committed and applied to the device
strictly in order, re-pushed when the device restarts empty, and can be
rolled back through the sidecar's gNMI extension (docs/extension.md).`,
		SilenceUsage: true,
	}
	root.AddCommand(newServeCommand(stdout, stderr), newDemoCommand(stdout, stderr))
	return root
}
