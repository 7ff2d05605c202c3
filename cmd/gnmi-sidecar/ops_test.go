package main

// Tests of the operator commands, run in-process (newRootCommand with
// arguments): against a whole sidecar (sidecartest.Start), and against a
// fake gNMI server serving the introspection tree as docs/introspection.md
// specifies it, which pins the requests the commands send.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// --- running the commands ---

type opsResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runOps runs gnmi-sidecar args... in-process and returns its exit code
// and output.
func runOps(t *testing.T, args ...string) opsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	start := time.Now()
	err := execute(ctx, root, &errOut)
	r := opsResult{code: exitCode(err), stdout: out.String(), stderr: errOut.String(), took: time.Since(start)}
	t.Logf("gnmi-sidecar %s: exit %d (%v)\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
	return r
}

// runOpsAt runs a command against the sidecar at addr.
func runOpsAt(t *testing.T, addr string, args ...string) opsResult {
	t.Helper()
	return runOps(t, append(args, "--address", addr)...)
}

// mustOps runs a command against addr and requires exit code 0.
func mustOps(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := runOpsAt(t, addr, args...)
	if r.code != 0 {
		t.Fatalf("gnmi-sidecar %v: exit %d, stderr %q", args, r.code, r.stderr)
	}
	return r.stdout
}

// wantCode requires exit code want and, for a failure, one
// "gnmi-sidecar: ..." line on stderr containing every one of msg.
func (r opsResult) wantCode(t *testing.T, want int, msg ...string) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, want, r.stderr)
	}
	if want == 0 {
		return
	}
	if !strings.HasPrefix(r.stderr, "gnmi-sidecar: ") {
		t.Errorf("stderr %q: want a line starting with \"gnmi-sidecar: \"", r.stderr)
	}
	for _, m := range msg {
		if !strings.Contains(r.stderr, m) {
			t.Errorf("stderr %q lacks %q", r.stderr, m)
		}
	}
}

// tableRows parses a text table: the rows after the header line starting
// with header, split into fields.
func tableRows(t *testing.T, out, header string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for n, l := range lines {
		if strings.HasPrefix(l, header) {
			var rows [][]string
			for _, r := range lines[n+1:] {
				if strings.TrimSpace(r) == "" {
					break
				}
				rows = append(rows, strings.Fields(r))
			}
			return rows
		}
	}
	t.Fatalf("no table with header %q in:\n%s", header, out)
	return nil
}

// keyValue returns the value of a "key: value" line of out.
func keyValue(t *testing.T, out, key string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(key) + `:\s+(.*?)\s*$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q line in:\n%s", key, out)
	}
	return m[1]
}

func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("output holds more than one JSON document:\n%s", out)
	}
}

// compact is JSON b without insignificant space.
func compact(b []byte) string { return string(compactJSON(b)) }

// --- gNMI helpers ---

func opsStr(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// opsSet sets path to the string val through the sidecar.
func opsSet(t *testing.T, c gpb.GNMIClient, path, val string, exts ...*gnmi_ext.Extension) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Set(ctx, &gpb.SetRequest{
		Update:    []*gpb.Update{{Path: sidecartest.Path(t, path), Val: opsStr(val)}},
		Extension: exts,
	}); err != nil {
		t.Fatalf("Set %s = %q: %v", path, val, err)
	}
}

// opsDelete deletes path through the sidecar.
func opsDelete(t *testing.T, c gpb.GNMIClient, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, path)}}); err != nil {
		t.Fatalf("Set delete %s: %v", path, err)
	}
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// Leaves of the simulated device's OpenConfig model.
const (
	descA = "/interfaces/interface[name=eth0]/config/description"
	descB = "/interfaces/interface[name=eth1]/config/description"
	descC = "/interfaces/interface[name=eth2]/config/description"
)

var rfc3339UTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// --- against a whole sidecar ---

func TestOpsJournalList(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "1")
	opsSet(t, s.Client, descB, "2")
	opsSet(t, s.Client, descC, "3")

	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"default limit", nil, []string{"1", "2", "3"}},
		{"limit 2", []string{"--limit", "2"}, []string{"2", "3"}},
		{"limit 1", []string{"-n", "1"}, []string{"3"}},
		{"all", []string{"--limit", "0"}, []string{"1", "2", "3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := mustOps(t, s.Addr, append([]string{"journal", "list"}, tt.args...)...)
			if strings.Contains(out, " \n") {
				t.Errorf("lines end with spaces:\n%q", out)
			}
			rows := tableRows(t, out, "INDEX")
			var got []string
			for _, r := range rows {
				got = append(got, r[0])
				// INDEX PHASE COMMIT APPLY PROPOSED AUTHOR ROLLED-BACK-BY OPS COMMENT (no ERROR)
				if len(r) != 9 || r[1] != "CHANGE" || r[2] != "COMPLETE" || r[3] != "COMPLETE" || !rfc3339UTC.MatchString(r[4]) ||
					r[5] != "127.0.0.1" || r[6] != "-" || r[7] != "1" || r[8] != "-" {
					t.Errorf("row %q: want INDEX CHANGE COMPLETE COMPLETE <UTC time> <client address> 1 -", r)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("listed proposals %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		out := mustOps(t, s.Addr, "journal", "list", "--output", "json")
		var l struct {
			FirstIndex json.Number `json:"first_index"`
			LastIndex  json.Number `json:"last_index"`
			Proposals  []map[string]any
		}
		decodeJSON(t, out, &l)
		if l.FirstIndex != "1" || l.LastIndex != "3" || len(l.Proposals) != 3 {
			t.Fatalf("first_index %s, last_index %s, %d proposals; want 1, 3, 3", l.FirstIndex, l.LastIndex, len(l.Proposals))
		}
		for n, p := range l.Proposals {
			if p["index"] != json.Number(string(rune('1'+n))) || p["phase"] != "CHANGE" || p["commit_status"] != "COMPLETE" ||
				p["apply_status"] != "COMPLETE" || p["operations"] != json.Number("1") {
				t.Errorf("proposal %d: %v", n+1, p)
			}
			for _, k := range []string{"proposed", "committed", "applied"} {
				s, _ := p[k].(string)
				if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
					t.Errorf("proposal %d: %s %q is not an RFC 3339 time", n+1, k, p[k])
				}
			}
		}
	})
}

func TestOpsJournalShow(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "1")
	opsSet(t, s.Client, descA, "2")
	opsDelete(t, s.Client, descA)

	for _, tt := range []struct {
		index         string
		path          string
		oldV, newV    string
		previousIndex string
		entry         bool // the Set created the interface's list entry
	}{
		{"1", descA, "-", "1", "0", true},
		{"2", descA, "1", "2", "1", false},
		{"3", descA, "2", "(deleted)", "2", false},
	} {
		t.Run("show "+tt.index, func(t *testing.T) {
			out := mustOps(t, s.Addr, "journal", "show", tt.index)
			if got := keyValue(t, out, "index"); got != tt.index {
				t.Errorf("index: %s, want %s", got, tt.index)
			}
			if got := keyValue(t, out, "phase"); got != "CHANGE" {
				t.Errorf("phase: %s, want CHANGE", got)
			}
			rows := tableRows(t, out, "PATH")
			want := [][]string{{tt.path, tt.oldV, tt.newV}}
			if tt.entry {
				want = [][]string{{strings.TrimSuffix(tt.path, "/config/description"), "-", "(exists)"}, want[0]}
			}
			if !slices.EqualFunc(rows, want, slices.Equal) {
				t.Errorf("changes %q, want %q", rows, want)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		out := mustOps(t, s.Addr, "journal", "show", "2", "-o", "json")
		var d struct {
			State      map[string]any
			Operations []map[string]any
			Changes    []map[string]any
		}
		decodeJSON(t, out, &d)
		if d.State["index"] != json.Number("2") || d.State["apply_status"] != "COMPLETE" {
			t.Errorf("state %v", d.State)
		}
		if len(d.Operations) != 1 || d.Operations[0]["kind"] != "UPDATE" || d.Operations[0]["path"] != descA || d.Operations[0]["value"] != "2" {
			t.Errorf("operations %v, want one UPDATE of /a to \"2\"", d.Operations)
		}
		if len(d.Changes) != 1 {
			t.Fatalf("changes %v, want one", d.Changes)
		}
		c := d.Changes[0]
		if c["path"] != descA || c["value"] != "2" || c["previous_value"] != "1" || c["previous_index"] != json.Number("1") || c["deleted"] != false {
			t.Errorf("change %v, want /a from \"1\" (proposal 1) to \"2\"", c)
		}
	})

	t.Run("no such proposal", func(t *testing.T) {
		runOpsAt(t, s.Addr, "journal", "show", "99").wantCode(t, exitNotFound, "gnmi-sidecar: show proposal 99: ")
	})
}

func TestOpsRollback(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "1")
	opsSet(t, s.Client, descB, "2")

	runOpsAt(t, s.Addr, "rollback", "1").wantCode(t, exitPrecondition, "gnmi-sidecar: rollback: ", "proposal 2")
	runOpsAt(t, s.Addr, "rollback", "99").wantCode(t, exitNotFound, "gnmi-sidecar: rollback: ", "99")

	out := mustOps(t, s.Addr, "rollback")
	if out != "rolled back proposal 2\n" {
		t.Errorf("rollback printed %q, want %q", out, "rolled back proposal 2\n")
	}
	show := mustOps(t, s.Addr, "journal", "show", "2")
	if got := keyValue(t, show, "phase"); got != "ROLLBACK" {
		t.Errorf("after the rollback, show 2 has phase %s, want ROLLBACK", got)
	}
	if got := keyValue(t, show, "rollback-apply-status"); got != "COMPLETE" {
		t.Errorf("after the rollback, show 2 has rollback-apply-status %s, want COMPLETE", got)
	}
	if got := keyValue(t, show, "rollback-index"); got != "1" {
		t.Errorf("after the rollback, show 2 has rollback-index %s, want 1", got)
	}
	rows := tableRows(t, mustOps(t, s.Addr, "journal", "list"), "INDEX")
	if len(rows) != 2 || rows[1][1] != "ROLLBACK" {
		t.Errorf("journal list rows %q: want proposal 2 in phase ROLLBACK", rows)
	}

	// Proposal 1 is now the newest change in effect.
	out = mustOps(t, s.Addr, "rollback", "1", "--output", "json")
	var r map[string]any
	decodeJSON(t, out, &r)
	if r["index"] != json.Number("1") || r["phase"] != "ROLLBACK" || r["commit_status"] != "COMPLETE" || r["apply_status"] != "COMPLETE" {
		t.Errorf("rollback JSON %v, want index 1, phase ROLLBACK, commit and apply COMPLETE", r)
	}
	runOpsAt(t, s.Addr, "rollback").wantCode(t, exitNotFound, "gnmi-sidecar: rollback: ")
}

func TestOpsRollbackAsync(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "1")
	out := mustOps(t, s.Addr, "rollback", "--async")
	if !strings.HasPrefix(out, "rolled back proposal 1") {
		t.Errorf("rollback --async printed %q", out)
	}
}

func TestOpsStatus(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	opsSet(t, s.Client, descA, "1")
	opsSet(t, s.Client, descA, "2")

	out := mustOps(t, s.Addr, "status")
	for key, want := range map[string]string{
		"connected":     "true",
		"applied-index": "2",
		"last-index":    "2",
		"first-index":   "1",
		"address":       s.Target,
	} {
		if got := keyValue(t, out, key); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
	}
	for _, heading := range []string{"\nConfiguration (", "\nDevice\n", "\nCommit-confirmed\n  none outstanding\n"} {
		if !strings.Contains(out, heading) {
			t.Errorf("status output lacks %q", heading)
		}
	}

	var v struct {
		Configuration map[string]any
		Device        map[string]any
		CommitConfirm *map[string]any `json:"commit_confirm"`
	}
	decodeJSON(t, mustOps(t, s.Addr, "status", "--output", "json"), &v)
	if v.Device["connected"] != true || v.Configuration["applied_index"] != json.Number("2") || v.CommitConfirm != nil {
		t.Errorf("status JSON: device %v, configuration %v, commit_confirm %v", v.Device, v.Configuration, v.CommitConfirm)
	}
}

// TestOpsCommitNothingOutstanding needs the server side of the
// commit-confirmed extension (FAILED_PRECONDITION when none is outstanding).
func TestOpsCommitNothingOutstanding(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	for _, args := range [][]string{
		{"commit", "confirm", "x"},
		{"commit", "cancel", "x"},
		{"commit", "extend", "x", "1m"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			runOpsAt(t, s.Addr, args...).wantCode(t, exitPrecondition, `commit "x": `)
		})
	}
}

// TestOpsCommitConfirmed drives an outstanding commit-confirmed with the
// commands: status shows it, a wrong id is refused, extend, confirm; then
// another is cancelled, which rolls it back.
func TestOpsCommitConfirmed(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	commit := func(id string) *gnmi_ext.Extension {
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{Id: id,
			Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(time.Hour)}}}}}
	}
	opsSet(t, s.Client, descA, "1")
	opsSet(t, s.Client, descA, "2", commit("c1"))

	out := mustOps(t, s.Addr, "status")
	if got := keyValue(t, out, "id"); got != "c1" {
		t.Errorf("status shows commit id %q, want c1", got)
	}
	if got := keyValue(t, out, "proposal"); got != "2" {
		t.Errorf("status shows the commit's proposal %s, want 2", got)
	}
	runOpsAt(t, s.Addr, "commit", "confirm", "wrong").wantCode(t, exitFailed, `confirm commit "wrong": `)
	runOpsAt(t, s.Addr, "commit", "extend", "c1", "2h").wantCode(t, exitFailed, "above the sidecar's limit of 1h0m0s (serve --max-rollback-duration)")
	mustOps(t, s.Addr, "commit", "extend", "c1", "45m")
	mustOps(t, s.Addr, "commit", "confirm", "c1")
	if out := mustOps(t, s.Addr, "status"); !strings.Contains(out, "none outstanding") {
		t.Errorf("after confirm, status still shows a commit-confirmed:\n%s", out)
	}

	opsSet(t, s.Client, descA, "3", commit("c2"))
	mustOps(t, s.Addr, "commit", "cancel", "c2")
	if got := keyValue(t, mustOps(t, s.Addr, "journal", "show", "3"), "phase"); got != "ROLLBACK" {
		t.Errorf("the cancelled commit's proposal has phase %s, want ROLLBACK", got)
	}

	// set starts one with gnmic's flags.
	mustOps(t, s.Addr, "set", "--update", descA+`="4"`, "--commit-request", "--commit-id", "c3", "--rollback-duration", "1h")
	if got := keyValue(t, mustOps(t, s.Addr, "status"), "id"); got != "c3" {
		t.Errorf("status shows commit id %q after set --commit-request, want c3", got)
	}
	// cancel --dry-run shows the rollback and changes nothing.
	if out := mustOps(t, s.Addr, "commit", "cancel", "c3", "--dry-run"); !strings.Contains(out, "would roll back proposal 4") || !strings.Contains(out, `- /interfaces/interface[name=eth0]/config/description: "4"`) {
		t.Errorf("commit cancel --dry-run:\n%s", out)
	}
	if got := keyValue(t, mustOps(t, s.Addr, "status"), "id"); got != "c3" {
		t.Errorf("after cancel --dry-run, status shows commit id %q, want c3 still outstanding", got)
	}
	runOpsAt(t, s.Addr, "commit", "cancel", "nope", "--dry-run").wantCode(t, exitPrecondition, `no commit-confirmed "nope"`)
	mustOps(t, s.Addr, "commit", "confirm", "c3")
	runOpsAt(t, s.Addr, "set", "--update", descA+`="5"`, "--commit-request").wantCode(t, exitUsage, "--commit-request needs --commit-id")
	runOpsAt(t, s.Addr, "set", "--update", descA+`="5"`, "--commit-id", "x").wantCode(t, exitUsage, "go with --commit-request")
}

func TestOpsUnreachable(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"status"},
		{"journal", "list"},
		{"journal", "show", "1"},
		{"rollback"},
		{"commit", "confirm", "x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runOpsAt(t, addr, append(args, "--timeout", "2s")...)
			r.wantCode(t, exitUnreachable, "gnmi-sidecar: ")
			if r.took > 5*time.Second {
				t.Errorf("took %v to fail with --timeout 2s", r.took)
			}
			if strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q: want one line", r.stderr)
			}
		})
	}
}

func TestOpsBadCommandLine(t *testing.T) {
	// Nothing listens there: a command line that passed the checks would
	// exit 3, not 2.
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"journal", "show", "abc"},
		{"journal", "show", "0"},
		{"journal", "show"},
		{"journal", "show", "1", "2"},
		{"journal", "list", "--bogus"},
		{"journal", "list", "--limit", "-1"},
		{"journal", "list", "--limit", "many"},
		{"journal", "list", "extra"},
		{"journal", "list", "--output", "yaml"},
		{"journal", "list", "--tls-cert", "c.pem"},
		{"journal", "list", "--tls-ca", "/nonexistent/ca.pem"},
		{"journal", "list", "--timeout", "-1s"},
		{"journal"},
		{"journal", "bogus"},
		{"rollback", "abc"},
		{"rollback", "1", "2"},
		{"rollback", "--bogus"},
		{"commit"},
		{"commit", "confirm"},
		{"commit", "confirm", ""},
		{"commit", "extend", "x"},
		{"commit", "extend", "x", "soon"},
		{"commit", "extend", "x", "-5m"},
		{"status", "extra"},
		{"status", "--timeout", "soon"},
		{"bogus"},
		{"serve", "--frobnicate"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runOpsAt(t, addr, args...)
			r.wantCode(t, exitUsage)
			if args[0] != "bogus" && args[0] != "serve" && strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q: want one line", r.stderr)
			}
		})
	}
}

// --- against a fake server of the contract ---

// opsFake is a gNMI server serving a fixed introspection tree the way
// docs/introspection.md specifies it, recording the requests it gets.
type opsFake struct {
	gpb.UnimplementedGNMIServer
	tree []leaf
	// setErr, if set, answers each Set.
	setErr func(*gpb.SetRequest) error
	// block makes Get wait for the client to give up.
	block bool

	mu   sync.Mutex
	gets []*gpb.GetRequest
	sets []*gpb.SetRequest
	md   []metadata.MD
}

func (f *opsFake) add(val *gpb.TypedValue, elems ...*gpb.PathElem) {
	f.tree = append(f.tree, leaf{elems: elems, val: val})
}

func (f *opsFake) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.md = append(f.md, md)
}

// matchElems reports whether path is at or under pattern (a key "*"
// matches any value).
func matchElems(pattern, path []*gpb.PathElem) bool {
	if len(path) < len(pattern) {
		return false
	}
	for n, p := range pattern {
		if p.GetName() != path[n].GetName() {
			return false
		}
		for k, v := range p.GetKey() {
			if v != "*" && path[n].GetKey()[k] != v {
				return false
			}
		}
	}
	return true
}

func (f *opsFake) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	f.mu.Lock()
	f.gets = append(f.gets, req)
	f.record(ctx)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if req.GetPrefix().GetOrigin() != introspectionOrigin {
		return nil, status.Error(codes.InvalidArgument, "not the introspection origin")
	}
	resp := &gpb.GetResponse{}
	for _, p := range req.GetPath() {
		pattern := append(slices.Clone(req.GetPrefix().GetElem()), p.GetElem()...)
		for _, l := range f.tree {
			if !matchElems(pattern, l.elems) {
				continue
			}
			// Split the path between the prefix and the update, as a
			// server may.
			cut := min(2, len(l.elems)-1)
			resp.Notification = append(resp.Notification, &gpb.Notification{
				Prefix: &gpb.Path{Origin: introspectionOrigin, Elem: l.elems[:cut]},
				Update: []*gpb.Update{{Path: &gpb.Path{Elem: l.elems[cut:]}, Val: l.val}},
			})
		}
	}
	return resp, nil
}

func (f *opsFake) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	f.mu.Lock()
	f.sets = append(f.sets, req)
	f.record(ctx)
	f.mu.Unlock()
	if f.setErr != nil {
		if err := f.setErr(req); err != nil {
			return nil, err
		}
	}
	return &gpb.SetResponse{}, nil
}

func (f *opsFake) serve(t *testing.T) string {
	return sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, f) })
}

func uv(n uint64) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}} }
func iv(n int64) *gpb.TypedValue  { return &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: n}} }
func bv(b bool) *gpb.TypedValue   { return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: b}} }
func jv(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

var fakeTime = time.Date(2025, 3, 4, 5, 6, 7, 890000000, time.UTC)

// fakeJournal is a fake whose journal keeps proposals first..last, each
// an applied UPDATE of /p<N>; proposal 4 failed with a long message.
func fakeJournal(first, last uint64) *opsFake {
	f := &opsFake{}
	conf := func(name string, v *gpb.TypedValue) {
		f.add(v, elem("configuration"), elem("state"), elem(name))
	}
	conf("first-index", uv(first))
	conf("last-index", uv(last))
	conf("applied-index", uv(last))
	conf("status", opsStr("COMPLETE"))
	for i := first; i <= last; i++ {
		st := func(name string, v *gpb.TypedValue) {
			f.add(v, proposalElems(strconv.FormatUint(i, 10), elem("state"), elem(name))...)
		}
		st("index", uv(i))
		st("phase", opsStr("CHANGE"))
		st("commit-status", opsStr("COMPLETE"))
		st("apply-status", opsStr("COMPLETE"))
		st("proposed", iv(fakeTime.Add(time.Duration(i)*time.Second).UnixNano()))
		st("operations", uv(1))
		if i == 4 {
			f.tree = slices.DeleteFunc(f.tree, func(l leaf) bool {
				return len(l.elems) == 4 && l.elems[1].GetKey()["index"] == "4" && l.elems[3].GetName() == "apply-status"
			})
			st("apply-status", opsStr("FAILED"))
			st("error-code", opsStr("INVALID_ARGUMENT"))
			st("error-message", opsStr(strings.Repeat("the device refused this value, ", 5)))
		}
	}
	return f
}

// pathStrings renders a GetRequest's paths below its prefix.
func pathStrings(req *gpb.GetRequest) []string {
	var out []string
	for _, p := range req.GetPath() {
		var b strings.Builder
		for _, e := range append(slices.Clone(req.GetPrefix().GetElem()), p.GetElem()...) {
			b.WriteString("/" + e.GetName())
			for k, v := range e.GetKey() {
				b.WriteString("[" + k + "=" + v + "]")
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestOpsContractJournalList: a limited list reads configuration/state,
// then the wanted proposals' state in one Get; the whole list uses one
// wildcard path.
func TestOpsContractJournalList(t *testing.T) {
	f := fakeJournal(3, 7)
	addr := f.serve(t)

	out := mustOps(t, addr, "journal", "list", "--limit", "3")
	f.mu.Lock()
	gets := slices.Clone(f.gets)
	f.gets = nil
	f.mu.Unlock()
	if len(gets) != 2 {
		t.Fatalf("%d Get requests, want 2", len(gets))
	}
	if got, want := pathStrings(gets[0]), []string{"/configuration/state"}; !slices.Equal(got, want) {
		t.Errorf("first Get: paths %q, want %q", got, want)
	}
	want := []string{"/proposals/proposal[index=5]/state", "/proposals/proposal[index=6]/state", "/proposals/proposal[index=7]/state"}
	if got := pathStrings(gets[1]); !slices.Equal(got, want) {
		t.Errorf("second Get: paths %q, want %q", got, want)
	}
	rows := tableRows(t, out, "INDEX")
	var indexes []string
	for _, r := range rows {
		indexes = append(indexes, r[0])
	}
	if !slices.Equal(indexes, []string{"5", "6", "7"}) {
		t.Errorf("rows %q, want proposals 5, 6, 7", rows)
	}
	if rows[0][4] != "2025-03-04T05:06:12Z" {
		t.Errorf("PROPOSED %q, want 2025-03-04T05:06:12Z (UTC, seconds)", rows[0][4])
	}

	out = mustOps(t, addr, "journal", "list", "--limit", "0")
	f.mu.Lock()
	gets = slices.Clone(f.gets)
	f.mu.Unlock()
	if len(gets) != 2 {
		t.Fatalf("%d Get requests, want 2", len(gets))
	}
	if got, want := pathStrings(gets[1]), []string{"/proposals/proposal[index=*]/state"}; !slices.Equal(got, want) {
		t.Errorf("second Get of the whole list: paths %q, want %q", got, want)
	}
	rows = tableRows(t, out, "INDEX")
	if len(rows) != 5 || rows[0][0] != "3" || rows[4][0] != "7" {
		t.Errorf("rows %q, want proposals 3 to 7", rows)
	}
	// The failed proposal's error, truncated in the table.
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "4 ") {
			line = l
		}
	}
	if !strings.Contains(line, "FAILED") || !strings.Contains(line, "INVALID_ARGUMENT: the device refused") || !strings.HasSuffix(line, "…") {
		t.Errorf("row of the failed proposal %q: want FAILED and a truncated INVALID_ARGUMENT: message", line)
	}

	var l JournalList
	decodeJSON(t, mustOps(t, addr, "journal", "list", "-o", "json"), &l)
	if len(l.Proposals) != 5 || l.Proposals[1].Error() != "INVALID_ARGUMENT: "+strings.Repeat("the device refused this value, ", 5) {
		t.Errorf("JSON list: %d proposals, proposal 4's error %q (must not be truncated)", len(l.Proposals), l.Proposals[1].Error())
	}
	if !l.Proposals[0].Proposed.Equal(fakeTime.Add(3 * time.Second)) {
		t.Errorf("JSON proposed %v, want %v", l.Proposals[0].Proposed, fakeTime.Add(3*time.Second))
	}

	empty := fakeJournal(0, 0)
	empty.tree = empty.tree[:4] // the configuration only
	if out := mustOps(t, empty.serve(t), "journal", "list"); out != "no proposals in the journal\n" {
		t.Errorf("empty journal: %q", out)
	}
}

func TestOpsContractJournalShow(t *testing.T) {
	f := &opsFake{}
	base := proposalElems("7")
	st := func(name string, v *gpb.TypedValue) {
		f.add(v, append(slices.Clone(base), elem("state"), elem(name))...)
	}
	st("index", uv(7))
	st("phase", opsStr("ROLLBACK"))
	st("commit-status", opsStr("COMPLETE"))
	st("apply-status", opsStr("COMPLETE"))
	st("operations", uv(3))
	st("rollback-index", uv(0))
	st("rollback-commit-status", opsStr("COMPLETE"))
	st("rollback-apply-status", opsStr("IN_PROGRESS"))
	op := func(seq, name string, v *gpb.TypedValue) {
		f.add(v, append(slices.Clone(base), elem("operations"), elem("operation", "seq", seq), elem("state"), elem(name))...)
	}
	op("1", "kind", opsStr("UPDATE"))
	op("1", "path", opsStr("/x"))
	op("1", "value", jv(`{ "a" : [1, 2] }`))
	op("2", "kind", opsStr("DELETE"))
	op("2", "path", opsStr("/y"))
	ch := func(path, name string, v *gpb.TypedValue) {
		f.add(v, append(slices.Clone(base), elem("changes"), elem("change", "path", path), elem("state"), elem(name))...)
	}
	ch("/x", "path", opsStr("/x"))
	ch("/x", "deleted", bv(false))
	ch("/x", "value", jv(`{ "a" : [1, 2] }`))
	ch("/x", "previous-index", uv(3))
	ch("/x", "previous-deleted", bv(false))
	ch("/x", "previous-value", opsStr(strings.Repeat("long ", 20)))
	ch("/y", "path", opsStr("/y"))
	ch("/y", "deleted", bv(true))
	ch("/y", "previous-index", uv(5))
	ch("/y", "previous-deleted", bv(false))
	ch("/y", "previous-value", uv(9000))
	ch("/z", "path", opsStr("/z"))
	ch("/z", "deleted", bv(false))
	ch("/z", "value", bv(true))
	ch("/z", "previous-index", uv(0))
	ch("/z", "previous-deleted", bv(true))
	addr := f.serve(t)

	out := mustOps(t, addr, "journal", "show", "7")
	if got := pathStrings(f.gets[0]); !slices.Equal(got, []string{"/proposals/proposal[index=7]"}) {
		t.Errorf("show Get paths %q, want the proposal's whole subtree", got)
	}
	for key, want := range map[string]string{"phase": "ROLLBACK", "rollback-index": "0", "rollback-apply-status": "IN_PROGRESS", "operations": "3"} {
		if got := keyValue(t, out, key); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	rows := tableRows(t, out, "PATH")
	want := [][]string{
		{"/x", strings.Repeat("long ", 7) + "long…", `{"a":[1,2]}`},
		{"/y", "9000", "(deleted)"},
		{"/z", "-", "true"},
	}
	for n := range want {
		// Fields split the truncated "long long …" value; rejoin it.
		if n == 0 && len(rows[0]) > 3 {
			rows[0] = []string{rows[0][0], strings.Join(rows[0][1:len(rows[0])-1], " "), rows[0][len(rows[0])-1]}
		}
		if n >= len(rows) || strings.Join(rows[n], "|") != strings.Join(want[n], "|") {
			t.Errorf("changes rows %q, want %q", rows, want)
			break
		}
	}

	out = mustOps(t, addr, "journal", "show", "7", "--output", "json")
	decodeJSON(t, out, &map[string]any{})
	var raw struct {
		Operations []struct {
			Value json.RawMessage `json:"value"`
		}
		Changes []struct {
			Path          string
			Value         json.RawMessage `json:"value"`
			PreviousValue json.RawMessage `json:"previous_value"`
		}
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Changes) != 3 || compact(raw.Changes[0].Value) != `{"a":[1,2]}` ||
		compact(raw.Changes[0].PreviousValue) != `"`+strings.Repeat("long ", 20)+`"` ||
		compact(raw.Changes[1].PreviousValue) != "9000" || raw.Changes[1].Value != nil || compact(raw.Changes[2].Value) != "true" {
		t.Errorf("JSON changes %s", out)
	}
	if len(raw.Operations) != 2 || compact(raw.Operations[0].Value) != `{"a":[1,2]}` || raw.Operations[1].Value != nil {
		t.Errorf("JSON operations %s", out)
	}

	runOpsAt(t, addr, "journal", "show", "8").wantCode(t, exitNotFound, "show proposal 8: ")
}

func TestOpsContractStatus(t *testing.T) {
	f := fakeJournal(1, 2)
	dev := func(name string, v *gpb.TypedValue) { f.add(v, elem("device"), elem("state"), elem(name)) }
	dev("address", opsStr("10.0.0.1:9339"))
	dev("connected", bv(false))
	dev("repushing", bv(false))
	dev("last-repush-time", iv(fakeTime.UnixNano()))
	dev("last-repush-values", uv(12))
	dev("last-repush-duration", iv(int64(1500*time.Millisecond)))
	dev("last-repush-device-duration", iv(int64(1200*time.Millisecond)))
	dev("last-error", opsStr("connection refused"))
	cc := func(name string, v *gpb.TypedValue) { f.add(v, elem("commit-confirm"), elem("state"), elem(name)) }
	cc("id", opsStr("c1"))
	cc("proposal", uv(2))
	cc("started", iv(fakeTime.UnixNano()))
	cc("deadline", iv(fakeTime.Add(10*time.Minute).UnixNano()))
	cc("cancelled", bv(false))
	addr := f.serve(t)

	out := mustOps(t, addr, "status")
	for key, want := range map[string]string{
		"connected":                   "false",
		"last-error":                  "connection refused",
		"last-repush-duration":        "1.5s",
		"last-repush-device-duration": "1.2s",
		"last-repush-time":            "2025-03-04T05:06:07Z",
		"id":                          "c1",
		"proposal":                    "2",
		"applied-index":               "2",
	} {
		if got := keyValue(t, out, key); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	if strings.Contains(out, "\n  term:") {
		t.Errorf("status shows a term while disconnected:\n%s", out)
	}
	var v StatusView
	decodeJSON(t, mustOps(t, addr, "status", "-o", "json"), &v)
	if v.CommitConfirm == nil || v.CommitConfirm.ID != "c1" || !v.CommitConfirm.Deadline.Equal(fakeTime.Add(10*time.Minute)) ||
		v.Device.LastRepushDuration == nil || *v.Device.LastRepushDuration != int64(1500*time.Millisecond) {
		t.Errorf("status JSON %+v", v)
	}
}

func TestOpsContractCommit(t *testing.T) {
	f := &opsFake{setErr: func(req *gpb.SetRequest) error {
		switch req.GetExtension()[0].GetCommit().GetId() {
		case "none":
			return status.Error(codes.FailedPrecondition, "no commit-confirmed is outstanding")
		case "wrong":
			return status.Error(codes.InvalidArgument, "the outstanding commit is c1, not wrong")
		}
		return nil
	}}
	addr := f.serve(t)

	for _, tt := range []struct {
		args []string
		code int
		out  string
		want func(*gnmi_ext.Commit) bool
	}{
		{[]string{"confirm", "c1"}, 0, "confirmed commit \"c1\"\n",
			func(c *gnmi_ext.Commit) bool { return c.GetConfirm() != nil }},
		{[]string{"cancel", "c1"}, 0, "cancelled commit \"c1\"\n",
			func(c *gnmi_ext.Commit) bool { return c.GetCancel() != nil }},
		{[]string{"extend", "c1", "90s"}, 0, "extended commit \"c1\": rolled back in 1m30s unless confirmed\n",
			func(c *gnmi_ext.Commit) bool {
				return c.GetSetRollbackDuration().GetRollbackDuration().AsDuration() == 90*time.Second
			}},
		{[]string{"confirm", "none"}, exitPrecondition, "", nil},
		{[]string{"cancel", "wrong"}, exitFailed, "", nil},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f.mu.Lock()
			f.sets = nil
			f.mu.Unlock()
			r := runOpsAt(t, addr, append([]string{"commit"}, tt.args...)...)
			r.wantCode(t, tt.code)
			if r.stdout != tt.out {
				t.Errorf("stdout %q, want %q", r.stdout, tt.out)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.sets) != 1 {
				t.Fatalf("%d Sets, want 1", len(f.sets))
			}
			req := f.sets[0]
			// The commit-confirmed extension, and an empty sidecar
			// extension asking for the receipt.
			if len(req.GetUpdate())+len(req.GetReplace())+len(req.GetDelete())+len(req.GetUnionReplace()) != 0 || len(req.GetExtension()) != 2 ||
				req.GetExtension()[1].GetRegisteredExt().GetId() != gnmi_ext.ExtensionID_EID_EXPERIMENTAL || len(req.GetExtension()[1].GetRegisteredExt().GetMsg()) != 0 {
				t.Fatalf("SetRequest %v: want no operations, the commit extension and an empty sidecar extension", req)
			}
			c := req.GetExtension()[0].GetCommit()
			if c.GetId() != tt.args[1] || (tt.want != nil && !tt.want(c)) {
				t.Errorf("commit extension %v", c)
			}
		})
	}

	r := runOpsAt(t, addr, "commit", "confirm", "c1", "-o", "json")
	var res CommitResult
	decodeJSON(t, r.stdout, &res)
	if res.ID != "c1" || res.Action != "confirm" {
		t.Errorf("JSON %+v", res)
	}
}

func TestOpsContractCredentials(t *testing.T) {
	f := fakeJournal(1, 1)
	addr := f.serve(t)
	t.Setenv(opsPasswordEnv, "s3cret")
	mustOps(t, addr, "status", "--username", "admin")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, md := range f.md {
		if !slices.Equal(md.Get("username"), []string{"admin"}) || !slices.Equal(md.Get("password"), []string{"s3cret"}) {
			t.Errorf("request metadata %v: want username admin, password from $%s", md, opsPasswordEnv)
		}
	}
}

func TestOpsContractTimeout(t *testing.T) {
	f := &opsFake{block: true}
	addr := f.serve(t)
	r := runOpsAt(t, addr, "status", "--timeout", "300ms")
	r.wantCode(t, exitUnreachable, "read the sidecar's status: ")
	if r.took > 3*time.Second {
		t.Errorf("took %v with --timeout 300ms", r.took)
	}
}

func TestOpsExitCodes(t *testing.T) {
	for c, want := range map[codes.Code]int{
		codes.Unavailable:        exitUnreachable,
		codes.DeadlineExceeded:   exitUnreachable,
		codes.NotFound:           exitNotFound,
		codes.FailedPrecondition: exitPrecondition,
		codes.InvalidArgument:    exitFailed,
		codes.Unimplemented:      exitFailed,
		codes.Internal:           exitFailed,
		codes.PermissionDenied:   exitDenied,
		codes.Unauthenticated:    exitDenied,
	} {
		err := failed("do it", wrapErr{status.Error(c, "because")})
		if got := exitCode(err); got != want {
			t.Errorf("%v: exit code %d, want %d", c, got, want)
		}
		if err.Error() != "do it: because" {
			t.Errorf("%v: error %q, want %q", c, err, "do it: because")
		}
	}
	if exitCode(nil) != 0 {
		t.Error("exitCode(nil) != 0")
	}
}

// wrapErr wraps an error, as client.Rollback does.
type wrapErr struct{ err error }

func (w wrapErr) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapErr) Unwrap() error { return w.err }

func TestOpsValues(t *testing.T) {
	for _, tt := range []struct {
		tv         *gpb.TypedValue
		json, text string
	}{
		{opsStr("eth0 \"uplink\""), `"eth0 \"uplink\""`, `eth0 "uplink"`},
		{uv(18446744073709551615), "18446744073709551615", "18446744073709551615"},
		{iv(-3), "-3", "-3"},
		{bv(true), "true", "true"},
		{&gpb.TypedValue{Value: &gpb.TypedValue_DoubleVal{DoubleVal: 1.5}}, "1.5", "1.5"},
		{jv("{\n  \"mtu\": 9000\n}"), `{"mtu":9000}`, `{"mtu":9000}`},
		{jv("not json"), `"not json"`, `"not json"`},
		{&gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`"x"`)}}, `"x"`, `"x"`},
		{&gpb.TypedValue{Value: &gpb.TypedValue_BytesVal{BytesVal: []byte{1, 2, 3}}}, `"AQID"`, "AQID"},
		{&gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: "a"}}, `"a"`, "a"},
		{&gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{Element: []*gpb.TypedValue{opsStr("a"), uv(2)}}}}, `["a",2]`, `["a",2]`},
		{&gpb.TypedValue{Value: &gpb.TypedValue_DecimalVal{DecimalVal: &gpb.Decimal64{Digits: -1234, Precision: 3}}}, "-1.234", "-1.234"}, //lint:ignore SA1019 still decoded
		{&gpb.TypedValue{Value: &gpb.TypedValue_DecimalVal{DecimalVal: &gpb.Decimal64{Digits: 5, Precision: 2}}}, "0.05", "0.05"},         //lint:ignore SA1019 still decoded
		{&gpb.TypedValue{Value: &gpb.TypedValue_DecimalVal{DecimalVal: &gpb.Decimal64{Digits: 5, Precision: 40}}}, "5e-40", "5e-40"},      //lint:ignore SA1019 still decoded
	} {
		v := &Value{TV: tt.tv}
		b, err := json.Marshal(v)
		if err != nil || string(b) != tt.json {
			t.Errorf("JSON of %v: %s, %v; want %s", tt.tv, b, err, tt.json)
		}
		if got := v.Text(); got != tt.text {
			t.Errorf("text of %v: %q, want %q", tt.tv, got, tt.text)
		}
	}
	if got := truncate("abcdef", 4); got != "abc…" {
		t.Errorf("truncate: %q", got)
	}
	if got := truncate("a\nb", 0); got != `a\nb` {
		t.Errorf("truncate keeps one line: %q", got)
	}
}

func TestOpsContractTLS(t *testing.T) {
	pki, dir := sidecartest.NewPKI(t), t.TempDir()
	caFile := pki.WriteCA(t, dir)
	certFile, keyFile := sidecartest.WriteCert(t, dir, "ops", pki.Client(t, "ops"))
	f := fakeJournal(1, 1)
	// The server, named sidecar.test, requires a client certificate from
	// the same CA (mTLS).
	addr := sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, f) },
		grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{pki.Server(t, "sidecar.test")},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pki.Pool(),
			MinVersion:   tls.VersionTLS12,
		})))
	mtls := []string{"--tls-cert", certFile, "--tls-key", keyFile}
	for _, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"verified", append([]string{"--tls-ca", caFile, "--tls-server-name", "sidecar.test"}, mtls...), 0},
		{"skip verify", append([]string{"--tls-skip-verify"}, mtls...), 0},
		{"wrong server name", append([]string{"--tls-ca", caFile, "--tls-server-name", "other.test"}, mtls...), exitUnreachable},
		{"unknown CA", append([]string{"--tls", "--tls-server-name", "sidecar.test"}, mtls...), exitUnreachable},
		{"plaintext", nil, exitUnreachable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"status", "--timeout", "5s"}, tt.args...)
			runOpsAt(t, addr, args...).wantCode(t, tt.code)
		})
	}
}
