// Command gnmi-sidecar-bench measures the sidecar against the simulated
// device of package testbed and prints one table: each row with the
// sidecar's figure, the direct device's, their ratio and the docs/design.md §5
// target (docs/bench.md).
//
//	gnmi-sidecar-bench [--short] [--scenarios latency,throughput,...] [--json]
//
// The in-process rows build the sidecar with package sidecar, as
// gnmi-sidecar serve does; the memory and restart rows run the product
// gnmi-sidecar binary as a child process (by default the one next to this
// executable, where make puts both).
//
// Exit codes: 0 success, 1 a step failed, 2 bad command line.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// usageError is a bad command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitCode is the process's exit code after err.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(*usageError)):
		return 2
	}
	return 1
}

func main() {
	if err := newRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(exitCode(err))
	}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// withUsageErrors makes cmd's flag errors usage errors.
func withUsageErrors(cmd *cobra.Command) *cobra.Command {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	cmd.SilenceUsage = true
	return cmd
}
