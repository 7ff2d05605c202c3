package main

import (
	"runtime"
	"strings"
	"testing"
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
