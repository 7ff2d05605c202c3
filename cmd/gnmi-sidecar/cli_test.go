package main

import (
	"bytes"
	"net"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
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
		{args: []string{"help", "exit-codes"}, stdout: []string{"Exit codes:", "3  the sidecar could not be reached", "6  differences found"}},
		{args: []string{"status", "--help"}, stdout: []string{"Exit codes: gnmi-sidecar help exit-codes."}},
		{args: []string{"statuss"}, code: exitUsage, stderr: []string{`unknown command "statuss"`, `did you mean "status"?`}},
		{args: []string{"serve"}, code: exitUsage, stderr: []string{"serve: --target (or --device-address) is required"}},
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

// TestStatusSummary: status's first line says whether all is well, else
// what is not, the worst first.
func TestStatusSummary(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	f := false
	for _, tt := range []struct {
		name string
		v    StatusView
		want string
	}{
		{"in step", StatusView{Configuration: ConfigurationState{FirstIndex: 1, LastIndex: 4, AppliedProposal: 4}, Device: DeviceState{Connected: true}, Drifted: u(0)},
			"in step: the device holds the journal's configuration (applied through proposal 4)"},
		{"empty journal", StatusView{Configuration: ConfigurationState{FirstIndex: 1}, Device: DeviceState{Connected: true}},
			"in step: the device holds the journal's configuration (applied through proposal 0)"},
		{"drift", StatusView{Configuration: ConfigurationState{FirstIndex: 1, LastIndex: 2, AppliedProposal: 2}, Device: DeviceState{Connected: true}, Drifted: u(3)},
			"DRIFT: 3 paths changed on the device (gnmi-sidecar drift)"},
		{"unreachable, queued", StatusView{Configuration: ConfigurationState{FirstIndex: 1, LastIndex: 5, AppliedProposal: 2}},
			"DEVICE UNREACHABLE: not connected; applying: 3 proposals not yet applied"},
		{"fenced and out of sync", StatusView{Configuration: ConfigurationState{OutOfSync: 2}, Device: DeviceState{Connected: true, Fenced: true}},
			"FENCED: another client is master on the device; this sidecar no longer writes to it; OUT OF SYNC: 2 paths (gnmi-sidecar resolve)"},
		{"unreadable, retrying", StatusView{Device: DeviceState{Connected: true, Retrying: u(7), ReadState: ReadState{Readable: &f}}},
			"retrying proposal 7, refused by the device; the device's configuration cannot be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := statusSummary(&tt.v); got != tt.want {
				t.Errorf("statusSummary = %q\nwant %q", got, tt.want)
			}
		})
	}
}

// terminalInput is a person at a terminal typing answer.
type terminalInput struct{ *strings.Reader }

func (terminalInput) IsTerminal() bool { return true }

// TestRollbackToAsksOnATerminal: on a terminal, rollback --to shows the
// change and asks; "n" journals nothing, "y" rolls back, and --yes does
// not ask.
func TestRollbackToAsksOnATerminal(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	mustOps(t, s.Addr, "set", "--update", `/system/config/hostname="before"`)
	mustOps(t, s.Addr, "journal", "tag", "point")
	mustOps(t, s.Addr, "set", "--update", `/system/config/hostname="after"`)
	run := func(answer string, args ...string) opsResult {
		t.Helper()
		var out, errOut bytes.Buffer
		root := newRootCommand(&out, &errOut)
		root.SetArgs(append(args, "--address", s.Addr))
		root.SetIn(terminalInput{strings.NewReader(answer)})
		err := execute(t.Context(), root, &errOut)
		r := opsResult{code: exitCode(err), stdout: out.String(), stderr: errOut.String()}
		t.Logf("gnmi-sidecar %v (answer %q): exit %d\nstdout:\n%sstderr:\n%s", args, answer, r.code, r.stdout, r.stderr)
		return r
	}
	last := func() uint64 {
		var l JournalList
		decodeJSON(t, mustOps(t, s.Addr, "journal", "list", "-o", "json"), &l)
		return l.Proposals[len(l.Proposals)-1].Index
	}
	before := last()
	r := run("n\n", "rollback", "--to", "point")
	if r.code != exitFailed || !strings.Contains(r.stderr, "[y/N] gnmi-sidecar: rollback: not confirmed; nothing was journaled") {
		t.Errorf("declined: exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "after") || !strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("the change was not shown, or nothing was asked")
	}
	if got := last(); got != before {
		t.Fatalf("declined: the journal's last proposal is %d, want %d", got, before)
	}
	run("y\n", "rollback", "--to", "point").wantCode(t, 0)
	if got := last(); got != before+1 {
		t.Fatalf("confirmed: the journal's last proposal is %d, want %d", got, before+1)
	}
	mustOps(t, s.Addr, "set", "--update", `/system/config/hostname="again"`)
	if r := run("", "rollback", "--to", "point", "--yes"); r.code != 0 || strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("--yes: exit %d, asked %v", r.code, strings.Contains(r.stderr, "[y/N]"))
	}
}

// TestCompletion: the shell completion completes -o, and asks the sidecar
// for proposal indexes and tag names.
func TestCompletion(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	mustOps(t, s.Addr, "set", "--update", `/system/config/hostname="a"`)
	mustOps(t, s.Addr, "journal", "tag", "known-good")
	mustOps(t, s.Addr, "set", "--update", `/system/config/hostname="b"`)
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-o", ""}, []string{"text", "json"}},
		{[]string{"rollback", "--address", s.Addr, ""}, []string{"2\tCHANGE COMPLETE", "1\tCHANGE COMPLETE"}},
		{[]string{"journal", "show", "--address", s.Addr, ""}, []string{"2\t", "1\t"}},
		{[]string{"rollback", "--address", s.Addr, "--to", ""}, []string{"known-good\tproposal 1"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runOps(t, append([]string{"__complete"}, tt.args...)...)
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("completion %q lacks %q", r.stdout, w)
				}
			}
		})
	}
}

// TestExitCodesDevice: a change the device refuses exits 8, whatever the
// device's code (NOT_FOUND included); a change while the device is not
// connected exits 9: the sidecar answered.
func TestExitCodesDevice(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	s.WaitConnected(t, true)
	for _, code := range []codes.Code{codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition} {
		s.Dev.RejectNextSets(1, code)
		r := runOpsAt(t, s.Addr, "set", "--update", `/system/config/hostname="refused"`)
		r.wantCode(t, exitDeviceRefused, "set: ")
	}
	s.Dev.Stop()
	s.WaitConnected(t, false)
	r := runOpsAt(t, s.Addr, "set", "--update", `/system/config/hostname="nobody home"`)
	r.wantCode(t, exitDeviceUnreachable, "is not connected", "nothing was journaled")
}

// TestServeDeviceAddress: --device-address names the device as --target
// does.
func TestServeDeviceAddress(t *testing.T) {
	cmd := newServeCommand(&bytes.Buffer{}, &bytes.Buffer{})
	if err := cmd.ParseFlags([]string{"--device-address", "10.0.0.1:57400"}); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("target").Value.String(); got != "10.0.0.1:57400" {
		t.Errorf("--device-address 10.0.0.1:57400: target %q", got)
	}
}

// TestPlainErrors: the sidecar's refusals read as sentences, without the
// journal package's wording.
func TestPlainErrors(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	mustOps(t, s.Addr, "set", "--update", `/system/config/hostname="a"`)
	r := runOpsAt(t, s.Addr, "rollback", "--to", "nosuch")
	r.wantCode(t, exitNotFound, `no tag "nosuch"`)
	if strings.Contains(r.stderr, "journal: ") || strings.HasSuffix(strings.TrimSpace(r.stderr), ": not found") {
		t.Errorf("stderr %q: the journal package's wording", r.stderr)
	}
}
