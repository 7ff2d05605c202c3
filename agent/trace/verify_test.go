package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// recorder is a testing.TB that records what Verify reports. Any other
// method panics (nil embedded TB), so Verify may use only these.
type recorder struct {
	testing.TB
	helper bool
	errors []string
	logs   []string
	fatal  string
}

func (r *recorder) Helper() { r.helper = true }

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func writeTrace(t *testing.T, lines []Line) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, encode(t, lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerify(t *testing.T) {
	const hostname = "/system/config/hostname"
	path := writeTrace(t, synced().apply(1, val(t, hostname, 1, "r1")).lines)
	device := map[string]*gnmi.TypedValue{hostname: strVal("r1")}
	tests := []struct {
		name       string
		opts       VerifyOptions
		wantErrors []string
	}{
		{
			name: "all checks pass",
			opts: VerifyOptions{
				Quiescent: true,
				Applied:   []*journal.PathValue{pv(t, hostname, 1, strVal("r1"))},
				Device:    device,
			},
		},
		{
			name: "device checked against the trace's applied values",
			opts: VerifyOptions{Device: device},
		},
		{
			name:       "journal disagrees",
			opts:       VerifyOptions{Applied: []*journal.PathValue{pv(t, hostname, 1, strVal("r2"))}},
			wantErrors: []string{"Consistency: applied value at " + hostname},
		},
		{
			name:       "device disagrees",
			opts:       VerifyOptions{Device: map[string]*gnmi.TypedValue{}},
			wantErrors: []string{"Consistency: " + hostname + ": the device has no value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			r := Verify(rec, path, tt.opts)
			if !rec.helper {
				t.Error("Verify did not call t.Helper")
			}
			if rec.fatal != "" || r == nil {
				t.Fatalf("Verify failed the test: %s", rec.fatal)
			}
			if len(rec.errors) != len(tt.wantErrors) {
				t.Fatalf("Verify reported %q, want %d errors", rec.errors, len(tt.wantErrors))
			}
			for n, e := range rec.errors {
				if !strings.Contains(e, tt.wantErrors[n]) {
					t.Errorf("error %q does not contain %q", e, tt.wantErrors[n])
				}
			}
			if logs := strings.Join(rec.logs, "\n"); !strings.Contains(logs, "1 changes proposed, 1 applied") {
				t.Errorf("Verify logged %q, want the trace's counts", logs)
			}
		})
	}
}

func TestVerifyLimitsErrors(t *testing.T) {
	s := synced()
	for i := range uint64(25) {
		s.commit(i + 1) // never proposed: one Order violation each
	}
	rec := &recorder{}
	r := Verify(rec, writeTrace(t, s.lines), VerifyOptions{})
	if len(r.Violations) != 25 {
		t.Fatalf("%d violations, want 25:\n%s", len(r.Violations), render(r.Violations))
	}
	if len(rec.errors) != maxReported+1 {
		t.Fatalf("Verify reported %d errors, want %d", len(rec.errors), maxReported+1)
	}
	if last := rec.errors[maxReported]; !strings.Contains(last, "5 more violations") {
		t.Errorf("last error %q, want the number of violations left out", last)
	}
}

func TestVerifyMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(`{"seq":1,"action":"Open"}`+"\n{\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if r := Verify(rec, path, VerifyOptions{}); r != nil {
		t.Errorf("Verify returned a report for a malformed trace")
	}
	if !strings.Contains(rec.fatal, "line 2") {
		t.Errorf("Verify failed with %q, want the malformed line named", rec.fatal)
	}
}
