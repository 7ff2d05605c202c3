package main

// Helpers of the end-to-end tests: the gnmi-sidecar and gnmi-testbed
// binaries built once per test binary and run as real processes on
// 127.0.0.1, gNMI clients (Go and gnmi_cli), and polling.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// binDir holds the binaries the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// raceEnv, when set, builds the binaries with -race. Off by default: a
// race-enabled sidecar takes seconds to start (about 3 s on 2 cores), which
// puts the package far over its time budget (80 s instead of 20 s).
const raceEnv = "GNMI_SIDECAR_E2E_RACE"

var (
	buildOnce sync.Once
	buildErr  error
)

// binaries builds gnmi-sidecar and gnmi-testbed once per test binary and
// returns their paths.
func binaries(t *testing.T) (sidecar, testbed string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gnmi-sidecar-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		for _, b := range []struct{ out, pkg string }{
			{"gnmi-sidecar", "."},
			{"gnmi-testbed", "../gnmi-testbed"},
		} {
			args := []string{"build", "-o", filepath.Join(dir, b.out)}
			if os.Getenv(raceEnv) != "" {
				// Data races in the product show up in the processes'
				// stderr, which fails the test (logWriter).
				args = append(args, "-race")
			}
			out, err := exec.Command("go", append(args, b.pkg)...).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "gnmi-sidecar"), filepath.Join(binDir, "gnmi-testbed")
}

// --- processes ---

// process is a running gnmi-sidecar or gnmi-testbed binary.
type process struct {
	name   string
	cmd    *exec.Cmd
	addr   string // the address of its first stdout line
	out    *lineWriter
	errOut *lineWriter // stderr, also in the test log
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// startProcess runs bin and waits for the first stdout line,
// "<name> listening on ADDR". The process is killed at cleanup.
func startProcess(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.out = newLineWriter(t, name+" stdout")
	p.errOut = newLineWriter(t, "")
	p.cmd.Stdout = p.out
	p.cmd.Stderr = io.MultiWriter(&logWriter{t: t, prefix: name}, p.errOut)
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	marker := name + " listening on "
	line, err := p.out.waitLine(func(l string) bool { return true }, 30*time.Second, p.done)
	if err != nil {
		t.Fatalf("%s %v: no first output line: %v", name, args, err)
	}
	if !strings.HasPrefix(line, marker) {
		t.Fatalf("%s: first output line %q; want %q<addr>", name, line, marker)
	}
	p.addr = strings.TrimPrefix(line, marker)
	t.Logf("%s (pid %d) listening on %s", name, p.cmd.Process.Pid, p.addr)
	return p
}

// adminURL returns the gnmi-testbed's admin endpoint (started with --admin).
func (p *process) adminURL(t *testing.T) string {
	t.Helper()
	const marker = "admin endpoint: http://"
	line, err := p.out.waitLine(func(l string) bool { return strings.HasPrefix(l, marker) }, 10*time.Second, p.done)
	if err != nil {
		t.Fatalf("%s: no admin endpoint line: %v", p.name, err)
	}
	addr, _, _ := strings.Cut(strings.TrimPrefix(line, marker), " ")
	return "http://" + addr
}

// kill ends the process with SIGKILL, as a crash or power loss would.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.done
	t.Logf("%s (pid %d) killed with SIGKILL", p.name, p.cmd.Process.Pid)
}

// exited waits up to d for the process to end and returns whether it
// did, and its exit error.
func (p *process) exited(d time.Duration) (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
	}
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// lineWriter collects a process's output by lines, logs them (unless its
// prefix is empty), and lets a test wait for a line.
type lineWriter struct {
	t       *testing.T
	prefix  string
	mu      sync.Mutex
	partial []byte
	lines   []string
	more    chan struct{} // closed and replaced when lines grow
}

func newLineWriter(t *testing.T, prefix string) *lineWriter {
	return &lineWriter{t: t, prefix: prefix, more: make(chan struct{})}
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	grew := false
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		w.lines = append(w.lines, line)
		grew = true
		if line != "" && w.prefix != "" {
			w.t.Logf("%s: %s", w.prefix, line)
		}
	}
	if grew {
		close(w.more)
		w.more = make(chan struct{})
	}
	return len(b), nil
}

// waitLine returns the first line match accepts, waiting up to d for it;
// it gives up early once exited is closed.
func (w *lineWriter) waitLine(match func(string) bool, d time.Duration, exited <-chan struct{}) (string, error) {
	deadline := time.After(d)
	gone := false
	for {
		w.mu.Lock()
		for _, l := range w.lines {
			if match(l) {
				w.mu.Unlock()
				return l, nil
			}
		}
		more := w.more
		w.mu.Unlock()
		if gone {
			// cmd.Wait returned: everything the process printed is in.
			return "", errors.New("the process exited")
		}
		select {
		case <-more:
		case <-exited:
			gone = true
		case <-deadline:
			return "", fmt.Errorf("not within %v", d)
		}
	}
}

// text returns everything written so far.
func (w *lineWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n") + "\n" + string(w.partial)
}

// logWriter sends a process's stderr to the test log and fails the test
// on a data race report (binaries built with -race).
type logWriter struct {
	t      *testing.T
	prefix string
}

func (w *logWriter) Write(b []byte) (int, error) {
	s := strings.TrimRight(string(b), "\n")
	w.t.Logf("%s: %s", w.prefix, s)
	if strings.Contains(s, "WARNING: DATA RACE") {
		w.t.Errorf("%s reported a data race", w.prefix)
	}
	return len(b), nil
}

// --- the stack: a device and a sidecar in front of it ---

type stack struct {
	sidecarBin, testbedBin string
	dev                    *process
	devAdmin               string
	sidecar                *process
	journalDir, tracePath  string
	sidecarArgs            []string
	target                 string // the sidecar's --target, if not the device's address
	devClient, client      gpb.GNMIClient
	clientAddr             string // where client connects
}

// startStack starts a gnmi-testbed (with devArgs) and a gnmi-sidecar in
// front of it (with sidecarArgs), journal and trace in a temporary
// directory, and waits until the sidecar has connected to the device.
func startStack(t *testing.T, devArgs, sidecarArgs []string) *stack {
	t.Helper()
	s := newStack(t, devArgs, sidecarArgs)
	s.startSidecar(t, "127.0.0.1:0")
	return s
}

// newStack is startStack without the sidecar, for a test to set up its
// journal directory before s.startSidecar.
func newStack(t *testing.T, devArgs, sidecarArgs []string) *stack {
	t.Helper()
	sb, tb := binaries(t)
	dir := t.TempDir()
	s := &stack{sidecarBin: sb, testbedBin: tb, journalDir: filepath.Join(dir, "journal"),
		tracePath: filepath.Join(dir, "trace.jsonl"), sidecarArgs: sidecarArgs}
	t.Cleanup(func() { keepTrace(t, s.tracePath) })
	s.dev = startProcess(t, "gnmi-testbed", tb, append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, devArgs...)...)
	s.devAdmin = s.dev.adminURL(t)
	s.devClient = dial(t, s.dev.addr)
	return s
}

// keepTrace copies the trace of a failed test into $E2E_KEEP, if set.
func keepTrace(t *testing.T, path string) {
	dir := os.Getenv("E2E_KEEP")
	if dir == "" || !t.Failed() {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("keeping the trace: %v", err)
		return
	}
	dst := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+".trace.jsonl")
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Logf("keeping the trace: %v", err)
		return
	}
	t.Logf("trace kept in %s", dst)
}

// startSidecar starts (or restarts) the sidecar on listen with the
// stack's journal and trace, and waits until it is connected to the
// device and has re-pushed its configuration.
func (s *stack) startSidecar(t *testing.T, listen string) {
	t.Helper()
	s.startSidecarOnly(t, listen)
	if s.clientAddr != s.sidecar.addr {
		s.client, s.clientAddr = dial(t, s.sidecar.addr), s.sidecar.addr
	}
	s.waitSynced(t, 10*time.Second)
}

// startSidecarOnly is startSidecar without a client and without waiting
// for the device: it returns once the sidecar listens.
func (s *stack) startSidecarOnly(t *testing.T, listen string) {
	t.Helper()
	target := s.target
	if target == "" {
		target = s.dev.addr
	}
	// --metrics on a free port: parallel sidecars must not share the
	// default one; s.sidecarArgs may override it.
	args := append([]string{"serve", "--listen", listen, "--target", target,
		"--journal-dir", s.journalDir, "--trace", s.tracePath, "--metrics", "127.0.0.1:0"}, s.sidecarArgs...)
	s.sidecar = startProcess(t, "gnmi-sidecar", s.sidecarBin, args...)
}

// waitSynced waits until the trace shows that the running sidecar
// connected to the device and completed the re-push for its term.
func (s *stack) waitSynced(t *testing.T, d time.Duration) {
	t.Helper()
	poll(t, d, "the sidecar to connect and re-push", func() (bool, string) {
		// A SIGKILLed sidecar may have left a line cut short.
		lines, _, err := trace.ReadFileAfterCrashes(s.tracePath)
		if err != nil {
			return false, err.Error()
		}
		synced := false
		for _, l := range lines {
			switch l.Action {
			case trace.ActionOpen:
				synced = false
			case "CompleteReconcile":
				synced = true
			}
		}
		return synced, fmt.Sprintf("%d trace lines, no CompleteReconcile since the last Open", len(lines))
	})
}

// stop stops the sidecar with SIGINT and requires a clean exit.
func (s *stack) stop(t *testing.T) {
	t.Helper()
	s.stopWith(t, syscall.SIGINT, 10*time.Second)
}

// stopWith sends the sidecar sig and requires it to exit with status 0
// within d.
func (s *stack) stopWith(t *testing.T, sig syscall.Signal, d time.Duration) {
	t.Helper()
	name := unix.SignalName(sig)
	if err := s.sidecar.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	exited, err := s.sidecar.exited(d)
	if !exited {
		t.Fatalf("gnmi-sidecar still running %v after %s", d, name)
	}
	if err != nil {
		t.Fatalf("gnmi-sidecar exited with %v after %s; want status 0", err, name)
	}
	t.Logf("gnmi-sidecar exited 0, %v after %s", time.Since(signalled).Round(time.Millisecond), name)
}

// settle makes a running sidecar record in its journal, and so in its
// trace, every Set acknowledged so far: the device's answer is recorded
// just after the client's (agent.Settle), and an introspection read waits
// for it. A stopped sidecar has nothing outstanding.
func (s *stack) settle(t *testing.T) {
	t.Helper()
	select {
	case <-s.sidecar.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := dial(t, s.sidecar.addr).Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{{Origin: "gnmi-sidecar",
		Elem: []*gpb.PathElem{{Name: "configuration"}, {Name: "state"}, {Name: "last-index"}}}}}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("introspection read to settle the journal: %v", err)
	}
}

// verifyTrace is trace.Verify of the sidecar's trace, once settled.
func (s *stack) verifyTrace(t *testing.T, opts trace.VerifyOptions) *trace.Report {
	t.Helper()
	s.settle(t)
	return trace.Verify(t, s.tracePath, opts)
}

// traceLines reads the sidecar's trace, once settled.
func (s *stack) traceLines(t *testing.T) []trace.Line {
	t.Helper()
	s.settle(t)
	lines, err := trace.ReadFile(s.tracePath)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func countAction(lines []trace.Line, action string) int {
	n := 0
	for _, l := range lines {
		if l.Action == action {
			n++
		}
	}
	return n
}

// deviceConfig returns the device's configuration from its admin GET
// /config: leaf path → value.
func deviceConfig(t *testing.T, admin string) (map[string]*gpb.TypedValue, error) {
	t.Helper()
	resp, err := http.Get(admin + "/config")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /config: %s", resp.Status)
	}
	var raw map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return nil, fmt.Errorf("GET /config: %v", err)
	}
	out := make(map[string]*gpb.TypedValue, len(raw))
	for p, v := range raw {
		tv := &gpb.TypedValue{}
		if err := prototext.Unmarshal([]byte(v), tv); err != nil {
			return nil, fmt.Errorf("GET /config: %s: value %q: %v", p, v, err)
		}
		out[p] = tv
	}
	return out, nil
}

// deviceSetCount returns the number of Sets the device has received.
func deviceSetCount(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get(admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		SetCount int `json:"set_count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	return st.SetCount
}

// --- gNMI ---

// dial returns a gNMI client of addr that reconnects quickly (the tests
// restart servers on the same port).
func dial(t *testing.T, addr string) gpb.GNMIClient {
	t.Helper()
	bo := backoff.DefaultConfig
	bo.BaseDelay, bo.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gpb.NewGNMIClient(conn)
}

func leafPath(intf string, leaf ...string) *gpb.Path {
	p := &gpb.Path{Elem: []*gpb.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": intf}},
		{Name: "config"},
	}}
	for _, l := range leaf {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: l})
	}
	return p
}

func descPath(intf string) *gpb.Path { return leafPath(intf, "description") }

func strVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// sidecarExt builds the sidecar's request extension (id 999).
func sidecarExt(t *testing.T, req *sidecarpb.Request) *gnmi_ext.Extension {
	t.Helper()
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return registeredExt(gnmi_ext.ExtensionID_EID_EXPERIMENTAL, msg)
}

func registeredExt(id gnmi_ext.ExtensionID, msg []byte) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: id, Msg: msg}}}
}

// setDesc sets interface intf's description, asking for the sidecar's
// receipt (sidecartest.AskReceipt).
func setDesc(ctx context.Context, c gpb.GNMIClient, intf, val string, exts ...*gnmi_ext.Extension) (*gpb.SetResponse, error) {
	return c.Set(ctx, sidecartest.AskReceipt(&gpb.SetRequest{
		Update:    []*gpb.Update{{Path: descPath(intf), Val: strVal(val)}},
		Extension: exts,
	}))
}

// responseExt decodes the sidecar's Response extension of a SetResponse.
func responseExt(resp *gpb.SetResponse) (*sidecarpb.Response, error) {
	var found *sidecarpb.Response
	for _, e := range resp.GetExtension() {
		reg := e.GetRegisteredExt()
		if reg == nil || reg.GetId() != gnmi_ext.ExtensionID_EID_EXPERIMENTAL {
			continue
		}
		if found != nil {
			return nil, errors.New("two sidecar extensions in one SetResponse")
		}
		found = &sidecarpb.Response{}
		if err := proto.Unmarshal(reg.GetMsg(), found); err != nil {
			return nil, fmt.Errorf("sidecar extension: %v", err)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("SetResponse without the sidecar extension (id 999): %v", resp)
	}
	return found, nil
}

// mustSetDesc sets intf's description through c and returns the sidecar's
// Response extension.
func mustSetDesc(t *testing.T, c gpb.GNMIClient, intf, val string, exts ...*gnmi_ext.Extension) *sidecarpb.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := setDesc(ctx, c, intf, val, exts...)
	if err != nil {
		t.Fatalf("Set %s description %q: %v", intf, val, err)
	}
	ext, err := responseExt(resp)
	if err != nil {
		t.Fatal(err)
	}
	return ext
}

// getLeaf returns the value of one leaf as a string ("" and false when
// the device has no data there).
func getLeaf(ctx context.Context, c gpb.GNMIClient, p *gpb.Path) (string, bool, error) {
	resp, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: gpb.Encoding_JSON_IETF})
	if status.Code(err) == codes.NotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var vals []*gpb.TypedValue
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			vals = append(vals, u.GetVal())
		}
	}
	if len(vals) != 1 {
		return "", false, fmt.Errorf("Get of a leaf: %d updates: %v", len(vals), resp)
	}
	s, err := scalar(vals[0])
	return s, err == nil, err
}

// scalar renders a leaf value: strings and JSON strings unquoted, numbers
// in decimal.
func scalar(v *gpb.TypedValue) (string, error) {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal, nil
	case *gpb.TypedValue_UintVal:
		return fmt.Sprint(x.UintVal), nil
	case *gpb.TypedValue_IntVal:
		return fmt.Sprint(x.IntVal), nil
	case *gpb.TypedValue_JsonIetfVal, *gpb.TypedValue_JsonVal:
		raw := v.GetJsonIetfVal()
		if raw == nil {
			raw = v.GetJsonVal()
		}
		var decoded interface{}
		if err := json.Unmarshal(raw, &decoded); err != nil {
			return "", fmt.Errorf("JSON value %q: %v", raw, err)
		}
		if s, ok := decoded.(string); ok {
			return s, nil
		}
		return strings.TrimSpace(string(raw)), nil
	}
	return "", fmt.Errorf("unexpected value %v", v)
}

// mustGetLeaf is getLeaf that fails the test on an error.
func mustGetLeaf(t *testing.T, c gpb.GNMIClient, p *gpb.Path) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, ok, err := getLeaf(ctx, c, p)
	if err != nil {
		t.Fatalf("Get %v: %v", p, err)
	}
	return v, ok
}

// --- polling ---

// poll calls cond every 10 ms until it reports true, and fails the test
// with cond's last explanation if that takes longer than d. It returns
// how long it took.
func poll(t *testing.T, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("waited %v for %s: %s", d, what, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
