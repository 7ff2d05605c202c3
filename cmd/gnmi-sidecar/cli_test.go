package main

import (
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// TestCommandLine: the version, and one error style with exit code 2 for
// a bad command line, serve's included.
func TestCommandLine(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		code       int
		stdout     []string
		stderr     []string
		noInStderr string
	}{
		{args: []string{"version"}, stdout: []string{"gnmi-sidecar ", "commit:", "go:     " + runtime.Version()}},
		{args: []string{"--version"}, stdout: []string{"gnmi-sidecar ", runtime.Version()}},
		{args: []string{"statuss"}, code: exitUsage, stderr: []string{`unknown command "statuss"`, `did you mean "status"?`}},
		{args: []string{"serve"}, code: exitUsage, stderr: []string{"serve: --target is required"}},
		{args: []string{"serve", "--bogus"}, code: exitUsage, stderr: []string{"serve: unknown flag: --bogus", "gnmi-sidecar serve --help"}},
		{args: []string{"version", "extra"}, code: exitUsage, stderr: []string{"version"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runOps(t, tt.args...)
			r.wantCode(t, tt.code, tt.stderr...)
			if strings.Contains(r.stderr, "Error: ") {
				t.Errorf("stderr %q: cobra's own error style", r.stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout %q lacks %q", r.stdout, s)
				}
			}
		})
	}
}

// TestNoSidecarThere: where no sidecar answers, one sentence says why,
// and the exit code is 3.
func TestNoSidecarThere(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	dev := testbed.StartT(t, testbed.Options{})
	for _, tt := range []struct {
		name, addr string
		want       string
	}{
		{"nothing listens", closed, "nothing listens at " + closed},
		{"the name does not resolve", "no-such-host.invalid:9339", "does not resolve"},
		{"the device itself", dev.Addr(), dev.Addr() + " is not a gnmi-sidecar"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runOps(t, "status", "--address", tt.addr, "--timeout", "20s")
			r.wantCode(t, exitUnreachable, tt.want)
			if n := strings.Count(r.stderr, "\n"); n != 1 {
				t.Errorf("stderr %q: want one line", r.stderr)
			}
			if strings.Contains(r.stderr, "desc =") || strings.Contains(r.stderr, "transport:") {
				t.Errorf("stderr %q: gRPC's own wording", r.stderr)
			}
		})
	}
}
