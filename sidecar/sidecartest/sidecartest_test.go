package sidecartest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

func TestStart(t *testing.T) {
	s := Start(t, Options{})
	if !s.Agent.Status().Connected {
		t.Fatal("Start returned before the agent connected to its device")
	}
	if s.Target != s.Dev.Addr() {
		t.Errorf("Target = %q, want the device's address %q", s.Target, s.Dev.Addr())
	}
	const desc = "/interfaces/interface[name=eth0]/config/description"
	_, err := s.Client.Set(t.Context(), &gpb.SetRequest{Update: []*gpb.Update{{
		Path: Path(t, desc),
		Val:  &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "through the sidecar"}},
	}}})
	if err != nil {
		t.Fatalf("Set through the sidecar: %v", err)
	}
	if got := DeviceLeaves(t, s.Dev)[desc].GetStringVal(); got != "through the sidecar" {
		t.Errorf("the device has %s = %q after a SYNC Set", desc, got)
	}
	c, err := s.Journal.Configuration(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.GetLastIndex() != 1 {
		t.Errorf("the journal's last index is %d, want 1", c.GetLastIndex())
	}

	s.Dev.Stop()
	s.WaitConnected(t, false)
}

// fakeTB records what Logger does with a testing.TB.
type fakeTB struct {
	testing.TB // nil: only Log and Cleanup are used
	logs       []string
	cleanups   []func()
}

func (f *fakeTB) Log(args ...any)   { f.logs = append(f.logs, fmt.Sprint(args...)) }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func TestLoggerStopsAtCleanup(t *testing.T) {
	tb := &fakeTB{}
	log := Logger(tb)
	log.Info("during the test")
	if len(tb.logs) != 1 {
		t.Fatalf("logged %q, want one line", tb.logs)
	}
	for _, fn := range tb.cleanups {
		fn()
	}
	log.Info("after the test") // t.Log would panic now
	if len(tb.logs) != 1 {
		t.Errorf("logged %q after the cleanups ran, want nothing more", tb.logs[1:])
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}

func TestGNMICLIFromEnv(t *testing.T) {
	cli := filepath.Join(t.TempDir(), "gnmi_cli")
	if err := os.WriteFile(cli, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GNMI_CLI", cli)
	if got := GNMICLI(t); got != cli {
		t.Errorf("GNMICLI = %q, want $GNMI_CLI %q", got, cli)
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs("../..") // the tests run in sidecar/sidecartest
	if err != nil {
		t.Fatal(err)
	}
	if root != want {
		t.Errorf("moduleRoot() = %q, want %q", root, want)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("no go.mod at the module root: %v", err)
	}
}
