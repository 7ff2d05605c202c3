// Package sidecartest holds helpers shared by the tests of several
// packages: a whole sidecar in-process in front of a simulated device
// (Start) with calls through it and checks of its journal and device
// (Sidecar's methods), the requests, extensions and statuses of the
// sidecar's gNMI dialect, loopback gRPC servers and clients, a logger
// writing to the test log, path parsing, polling, the gnmi_cli reference
// client, and a CA issuing TLS certificates (NewPKI).
//
// It is for tests only: every helper takes a testing.TB (where it can
// fail), fails the test on an error and releases what it started when the
// test ends. The product packages never import it; the external tests of
// proxy, authz, introspection, client, agent (package agent_test) and the
// commands do.
package sidecartest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

// Logger returns a logger writing to t.Log at level Info, so that logs show
// only for failing tests (or with -v). It drops what is logged once t's
// cleanups have run: a goroutine still winding down after the test would
// otherwise make t.Log panic.
func Logger(t testing.TB) *slog.Logger {
	w := &logWriter{t: t}
	t.Cleanup(w.stop) // runs after the cleanups registered later, which may still log
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// logWriter sends each line to t.Log until stop.
type logWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// stop makes later writes no-ops.
func (w *logWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}

// Path parses a gNMI path in string form, such as
// /interfaces/interface[name=eth0]/config/description, failing the test if
// it is malformed.
func Path(t testing.TB, s string) *gpb.Path {
	t.Helper()
	return fixture.Path(t, s)
}

// Eventually polls cond every 5 ms until it holds, and fails the test if it
// still does not after timeout. what completes "timed out waiting for".
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Serve serves the services register installs on a new gRPC server (with
// opts) on a 127.0.0.1 port, and returns its address. When the test ends,
// the server is stopped, waiting for its handlers to return, and an error
// of Serve fails the test.
func Serve(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append([]grpc.ServerOption{grpc.WaitForHandlers(true)}, opts...)...)
	register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	t.Cleanup(func() {
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("grpc Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// Dial returns a gNMI client of addr over plaintext, closed when the test
// ends.
func Dial(t testing.TB, addr string) gpb.GNMIClient {
	t.Helper()
	return gpb.NewGNMIClient(Conn(t, addr))
}

// Conn returns a plaintext gRPC connection to addr, closed when the test
// ends: for calls a generated client cannot make (raw bytes).
func Conn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// GNMICLI returns the path of the OpenConfig reference client gnmi_cli:
// $GNMI_CLI, then gnmi_cli on $PATH, then bin/gnmi_cli at the module root
// (where `make tools` installs it; the root is the nearest directory above
// the working directory holding go.mod). Without one the test is skipped,
// or fails when $CI is set, so that CI never silently skips it.
func GNMICLI(t testing.TB) string {
	t.Helper()
	return tool(t, "gnmi_cli", "GNMI_CLI")
}

// GNMITarget returns the path of the third-party gNMI target the tests
// run the sidecar against (gnxi's gnmi_target, pinned in
// hack/gnmitarget), found as GNMICLI finds gnmi_cli: $GNMI_TARGET, then
// gnmi_target on $PATH, then bin/gnmi_target at the module root.
func GNMITarget(t testing.TB) string {
	t.Helper()
	return tool(t, "gnmi_target", "GNMI_TARGET")
}

// tool finds the binary name: $env, $PATH, bin/ at the module root;
// skips the test without it, or fails it when $CI is set.
func tool(t testing.TB, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found (set %s or run `make tools`)", name, env)
	}
	t.Skipf("%s not found; set %s or run `make tools`", name, env)
	return ""
}

// moduleRoot returns the nearest directory at or above the working
// directory that holds a go.mod file.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// RunCLI runs gnmi_cli (the path GNMICLI returned) against addr over
// plaintext with a 10 s RPC timeout, bounded to 30 s in all, and returns
// its combined output and error.
func RunCLI(t testing.TB, cli, addr string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"-address", addr, "-insecure", "-timeout", "10s"}, args...)
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	return string(out), err
}

// MustCLI is RunCLI failing the test, with the output, on an error.
func MustCLI(t testing.TB, cli, addr string, args ...string) string {
	t.Helper()
	out, err := RunCLI(t, cli, addr, args...)
	if err != nil {
		t.Fatalf("gnmi_cli %v: %v\n%s", args, err, out)
	}
	return out
}
