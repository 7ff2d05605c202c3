package main

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// runServe runs `gnmi-sidecar serve args...` in-process and returns its
// error; it must end by itself (a start-up error) within a few seconds.
func runServe(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetArgs(append([]string{"serve"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("serve %v did not stop by itself; output:\n%s%s", args, out.String(), errOut.String())
	}
	return err
}

func TestServeRefusesBadStartUp(t *testing.T) {
	locked := t.TempDir()
	j, err := journal.Open(locked, journal.Options{NoSync: true, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no target", []string{"--journal-dir", t.TempDir()}, "--target (or --device-address) is required"},
		{"journal in use", []string{"--target", "127.0.0.1:1", "--journal-dir", locked, "--listen", "127.0.0.1:0"}, "is in use by another gnmi-sidecar"},
		{"bad log level", []string{"--target", "127.0.0.1:1", "--log-level", "loud"}, "--log-level"},
		{"bad log format", []string{"--target", "127.0.0.1:1", "--log-format", "xml"}, "--log-format"},
		{"cert without key", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--device-cert", "c.pem"}, "--device-cert and --device-key go together"},
		{"missing CA file", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--device-ca", "/nonexistent/ca.pem"}, "--device-ca"},
		{"malformed listen address", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--listen", "not-an-address"}, "--listen"},
		{"unknown flag", []string{"--target", "127.0.0.1:1", "--frobnicate"}, "unknown flag"},
		{"negative journal reserve", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--journal-min-free", "-1"}, "--journal-min-free -1"},
		{"negative memory limit", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--memory-limit", "-1"}, "--memory-limit -1"},
		{"profiles without metrics", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--metrics", "", "--pprof"}, "--pprof serves on the --metrics address"},
		{"no request size", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--max-recv-msg-size", "0"}, "--max-recv-msg-size 0: want a positive number of bytes"},
		{"unknown drift policy", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--drift-policy", "fix"},
			`--drift-policy: unknown drift policy "fix": want report, revert, adopt or off`},
		{"no drift interval", []string{"--target", "127.0.0.1:1", "--journal-dir", t.TempDir(), "--drift-interval", "0s"}, "--drift-interval 0s: want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runServe(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("serve %v: %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseCodes(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []codes.Code
		wantErr string
	}{
		{in: []string{"aborted", " UNAVAILABLE", "4"}, want: []codes.Code{codes.Aborted, codes.Unavailable, codes.DeadlineExceeded}},
		{in: []string{}, want: []codes.Code{}},
		{in: []string{"OK"}, wantErr: `"OK" is not a gRPC error code`},
		{in: []string{"unavailabel"}, wantErr: `"unavailabel" is not a gRPC error code`},
		{in: []string{"99"}, wantErr: `"99" is not a gRPC error code`},
	} {
		got, err := parseCodes(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseCodes(%q) = %v, %v; want error %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseCodes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestHeapSamplingOnlyWithPprof: serve samples heap allocations only when
// --pprof serves the profiles, and gives the process its rate back.
func TestHeapSamplingOnlyWithPprof(t *testing.T) {
	const rate = 4096
	prev := runtime.MemProfileRate
	runtime.MemProfileRate = rate
	t.Cleanup(func() { runtime.MemProfileRate = prev })
	for _, tt := range []struct {
		pprof bool
		want  int
	}{{pprof: false, want: 0}, {pprof: true, want: rate}} {
		restore := setMemProfileRate(tt.pprof)
		if got := runtime.MemProfileRate; got != tt.want {
			t.Errorf("--pprof=%v: MemProfileRate %d while serving, want %d", tt.pprof, got, tt.want)
		}
		restore()
		if got := runtime.MemProfileRate; got != rate {
			t.Errorf("--pprof=%v: MemProfileRate %d after serve, want %d back", tt.pprof, got, rate)
		}
	}
}
