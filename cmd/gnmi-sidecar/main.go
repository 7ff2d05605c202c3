// Command gnmi-sidecar runs the gNMI sidecar in front of one device.
//
//	gnmi-sidecar serve --target 10.0.0.1:9339 [--listen 127.0.0.1:9339] [--journal-dir ./data]
//
// and the operator commands, which talk to a running sidecar over gNMI
// (docs/cli.md):
//
//	gnmi-sidecar journal list [--limit N] | journal show INDEX
//	gnmi-sidecar rollback [INDEX] [--async]
//	gnmi-sidecar commit confirm|cancel ID | commit extend ID DURATION
//	gnmi-sidecar status
//	gnmi-sidecar resolve retry|skip|adopt [PATH...]
//	gnmi-sidecar drift | diff [PATH...]
//
// Exit codes: 0 success, 1 the sidecar refused or failed the operation,
// 2 bad command line, 3 sidecar unreachable or timed out, 4 not found,
// 5 precondition failed, 6 differences found (drift, diff).
//
// Built with the devtools tag (make run), it also has the developer
// command demo, which links the simulated device of package testbed (and
// its OpenConfig schema, about 16 MB of heap):
//
//	gnmi-sidecar demo   (the sidecar in front of an in-process simulated device)
//
// The product binary leaves it out, so that serve carries no simulator.
// The benchmark is a command of its own, cmd/gnmi-sidecar-bench
// (docs/bench.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gnmi-sidecar/gnmi-sidecar/buildinfo"
)

func main() {
	os.Exit(exitCode(execute(context.Background(), newRootCommand(os.Stdout, os.Stderr), os.Stderr)))
}

// execute runs root and prints its error, one line in the style every
// command shares ("gnmi-sidecar: <what failed>: <why>"), unless the
// failing command printed it already (the operator commands print their
// own).
func execute(ctx context.Context, root *cobra.Command, stderr io.Writer) error {
	root.SilenceErrors = true
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil || cmd != root && cmd.SilenceErrors {
		return err
	}
	msg := err.Error()
	if exitCode(err) == exitUsage {
		msg += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
	}
	fmt.Fprintf(stderr, "gnmi-sidecar: %s\n", msg)
	return err
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gnmi-sidecar",
		Short: "A gNMI sidecar: journals every Set, applies it to one device in order, re-pushes and rolls back",
		Long: `gnmi-sidecar sits in front of one gNMI target and is, to every gNMI client,
that target: Capabilities, Get and Subscribe are passed through; every Set is
journaled in an embedded database, committed and applied to the device
strictly in order, re-pushed when the device restarts empty, and can be
rolled back through the sidecar's gNMI extension (docs/extension.md).

Operator commands (journal, rollback, commit, status, resolve, drift, diff) talk to a running
sidecar over gNMI; see docs/cli.md.

Exit codes: gnmi-sidecar help exit-codes.`,
		SilenceUsage:               true,
		Version:                    buildinfo.Read().String(),
		SuggestionsMinimumDistance: 2,
	}
	root.SetVersionTemplate("gnmi-sidecar {{.Version}}\n")
	root.AddCommand(newVersionCommand(stdout))
	root.AddCommand(&cobra.Command{Use: "exit-codes", Short: "The exit codes every command follows", Long: exitCodesHelp})
	root.AddCommand(newServeCommand(stdout, stderr))
	root.AddCommand(newOpsCommands(stdout, stderr)...)
	root.AddCommand(devCommands(stdout, stderr)...)
	// Exit codes scripts rely on: a bad command line exits 2, flag errors
	// and unknown commands included (cobra reports the latter untyped, so
	// the root checks its arguments itself). The operator commands print
	// their own errors.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if cmd != cmd.Root() {
			err = fmt.Errorf("%s: %w", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), err)
		}
		return &exitError{code: exitUsage, err: err}
	})
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return &exitError{code: exitUsage, err: errors.New(msg)}
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	forEachCommand(root, func(c *cobra.Command) {
		if c.LocalFlags().Lookup("output") != nil || c.PersistentFlags().Lookup("output") != nil {
			completeOutput(c)
		}
	})
	return root
}

// newVersionCommand prints the build: version, source revision and Go
// version (also gnmi_sidecar_build_info, and --version on one line).
func newVersionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, source revision and Go version of this build",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			i := buildinfo.Read()
			rev := i.Revision
			if rev == "" {
				rev = "(not recorded)"
			}
			if i.Modified {
				rev += " (with local changes)"
			}
			_, err := fmt.Fprintf(stdout, "gnmi-sidecar %s\n  commit: %s\n  built:  %s\n  go:     %s\n", i.Version, rev, orNone(i.Time), i.GoVersion)
			return err
		},
	}
}

func orNone(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}

// forEachCommand calls fn on cmd and every command under it.
func forEachCommand(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		forEachCommand(c, fn)
	}
}
