package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// The scenarios a client sending structured (JSON) configuration meets on
// its first day (docs/values.md), each run twice on a fresh device: once
// straight to the device, recording what it holds after every Set, and
// once through the sidecar, where after every step the device must hold
// exactly what the direct run says: after a Set, what the device held after
// it; after a rollback, what it held before the Set rolled back; after a
// device restart, what it held before the restart (the re-push). So each
// is exact by the device's own semantics, on the simulated device (with
// and without --yang) and on a third-party target (gnxi's gnmi_target).

// scenarioStep is one step: a Set, a rollback of the newest change, or a
// device restart.
type scenarioStep struct {
	set      func(t *testing.T) *gpb.SetRequest
	rollback bool
	restart  bool
}

func setStep(f func(t *testing.T) *gpb.SetRequest) scenarioStep { return scenarioStep{set: f} }

var (
	rollbackStep = scenarioStep{rollback: true}
	restartStep  = scenarioStep{restart: true}
)

func jsonUpdate(path, value string) func(t *testing.T) *gpb.SetRequest {
	return func(t *testing.T) *gpb.SetRequest {
		return &gpb.SetRequest{Update: []*gpb.Update{{Path: diffPath(t, path), Val: ietfTV(value)}}}
	}
}

func ietfTV(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

// teachKeys sets an interface by its keyed path: without the device's YANG
// the sidecar learns the key of the interface list from it, and takes
// JSON lists of interfaces from then on (docs/values.md).
var teachKeys = setStep(func(t *testing.T) *gpb.SetRequest {
	return &gpb.SetRequest{Update: []*gpb.Update{{Path: diffPath(t, "/interfaces/interface[name=eth0]/config/name"), Val: strTV("eth0")}}}
})

var scenarios = []struct {
	name  string
	steps []scenarioStep
	// mergesLists says the scenario needs a device that merges a JSON list
	// by key (gNMI §3.4.4) on an Update at the list's parent.
	mergesLists bool
	// jsonLists says the scenario sends JSON lists: without --yang, it
	// starts with teachKeys.
	jsonLists bool
}{
	{name: "two JSON Updates of one container, rollback of the second", steps: []scenarioStep{
		setStep(jsonUpdate("/system/config", `{"hostname":"h1","domain-name":"d1"}`)),
		setStep(jsonUpdate("/system/config", `{"login-banner":"b2"}`)),
		rollbackStep,
	}},
	{name: "JSON Updates of one container, device restart and re-push", steps: []scenarioStep{
		setStep(jsonUpdate("/system/config", `{"hostname":"h1","domain-name":"d1"}`)),
		setStep(jsonUpdate("/system/config", `{"login-banner":"b2"}`)),
		setStep(jsonUpdate("/system/config", `{"login-banner":"b3","motd-banner":"m3"}`)),
		restartStep,
		rollbackStep,
	}},
	{name: "Replace of a container, rollback", steps: []scenarioStep{
		setStep(jsonUpdate("/system/config", `{"hostname":"h1","domain-name":"d1","login-banner":"b1"}`)),
		setStep(func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Replace: []*gpb.Update{{Path: diffPath(t, "/system/config"), Val: ietfTV(`{"hostname":"x"}`)}}}
		}),
		rollbackStep,
	}},
	{name: "Delete of a leaf, rollback", steps: []scenarioStep{
		setStep(jsonUpdate("/system/config", `{"hostname":"h1","domain-name":"d1"}`)),
		setStep(func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{diffPath(t, "/system/config/domain-name")}}
		}),
		rollbackStep,
	}},
	{name: "list entries added by JSON Updates at the list's parent, rollback of the second", mergesLists: true, jsonLists: true, steps: []scenarioStep{
		setStep(jsonUpdate("/interfaces", `{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}}]}`)),
		setStep(jsonUpdate("/interfaces", `{"interface":[{"name":"eth1","config":{"name":"eth1","description":"second"}}]}`)),
		rollbackStep,
		restartStep,
	}},
	{name: "list entries added by JSON Updates at their entry paths, rollback of the second", steps: []scenarioStep{
		setStep(jsonUpdate("/interfaces/interface[name=eth0]", `{"name":"eth0","config":{"name":"eth0","mtu":1500}}`)),
		setStep(jsonUpdate("/interfaces/interface[name=eth1]", `{"name":"eth1","config":{"name":"eth1","description":"second"}}`)),
		rollbackStep,
		restartStep,
	}},
	{name: "scalar leaf Set under a JSON-set container, rollback", steps: []scenarioStep{
		setStep(jsonUpdate("/system/config", `{"hostname":"h1","domain-name":"d1"}`)),
		setStep(func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{{Path: diffPath(t, "/system/config/hostname"), Val: strTV("h2")}}}
		}),
		rollbackStep,
	}},
}

// scenarioDevice is a device to run the scenarios on.
type scenarioDevice interface {
	addr() string
	client() gpb.GNMIClient
	// restart restarts the device, empty.
	restart(t *testing.T)
	// get is the Get type the device serves configuration with.
	get() gpb.GetRequest_DataType
}

func TestExactScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	sidecarBin, testbedBin := binaries(t)
	yang := t.TempDir()
	if out, err := exec.Command(testbedBin, "yang", "--out", yang).CombinedOutput(); err != nil {
		t.Fatalf("gnmi-testbed yang: %v\n%s", err, out)
	}
	targets := []struct {
		name string
		yang []string
		// listMerge: the device merges JSON lists by key.
		listMerge bool
		start     func(t *testing.T) scenarioDevice
	}{
		{name: "testbed with --yang", yang: []string{yang}, listMerge: true, start: func(t *testing.T) scenarioDevice { return startTestbed(t, testbedBin) }},
		{name: "testbed", listMerge: true, start: func(t *testing.T) scenarioDevice { return startTestbed(t, testbedBin) }},
		// gnxi's gnmi_target replaces a list on an Update at its parent
		// (it merges one level deep): no journal that follows the gNMI
		// specification can be exact there.
		{name: "gnmi_target", start: func(t *testing.T) scenarioDevice { return startGnmiTarget(t, sidecartest.GNMITarget(t)) }},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					if sc.mergesLists && !target.listMerge {
						t.Skipf("%s does not merge a JSON list by key on an Update at the list's parent (gNMI §3.4.4)", target.name)
					}
					steps := sc.steps
					if sc.jsonLists && len(target.yang) == 0 {
						steps = append([]scenarioStep{teachKeys}, steps...)
					}
					dev := target.start(t)
					want := directRun(t, dev, steps)
					throughSidecar(t, dev, sidecarBin, target.yang, steps, want)
				})
			}
		})
	}
}

// directRun runs the Sets of steps straight to a fresh dev and returns
// what it held before the first step and after each Set, then restarts it
// empty.
func directRun(t *testing.T, dev scenarioDevice, steps []scenarioStep) []*diffModel {
	dev.restart(t)
	states := []*diffModel{readScenario(t, dev)}
	for n, step := range steps {
		if step.set == nil {
			continue
		}
		if _, err := dev.client().Set(context.Background(), step.set(t)); err != nil {
			t.Fatalf("step %d, straight to the device: %v", n+1, err)
		}
		states = append(states, readScenario(t, dev))
	}
	dev.restart(t)
	return states
}

// throughSidecar runs steps through a sidecar in front of dev (empty) and
// checks it after each against the direct run's states.
func throughSidecar(t *testing.T, dev scenarioDevice, bin string, yang []string, steps []scenarioStep, direct []*diffModel) {
	dir := t.TempDir()
	journalDir, tracePath := filepath.Join(dir, "journal"), filepath.Join(dir, "trace.jsonl")
	args := []string{"serve", "--listen", "127.0.0.1:0", "--target", dev.addr(), "--journal-dir", journalDir,
		"--trace", tracePath, "--metrics", "127.0.0.1:0", "--log-level", "warn", "--journal-min-free", "0"}
	if len(yang) > 0 {
		args = append(args, "--yang", strings.Join(yang, ","))
	}
	sidecar := startProcess(t, "gnmi-sidecar", bin, args...)
	client := dial(t, sidecar.addr)
	var inEffect []*diffModel // the state before each change in effect
	current := direct[0]
	next := 1
	for n, step := range steps {
		what := fmt.Sprintf("step %d", n+1)
		switch {
		case step.set != nil:
			req := step.set(t)
			what += " (" + showSet(req) + ")"
			if _, err := sendRetrying(client, req); err != nil {
				t.Fatalf("%s through the sidecar: %v", what, err)
			}
			inEffect = append(inEffect, current)
			current = direct[next]
			next++
		case step.rollback:
			what += " (rollback of the newest change)"
			if _, err := sendRetrying(client, &gpb.SetRequest{Extension: []*gnmi_ext.Extension{rollbackExt(0)}}); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			current = inEffect[len(inEffect)-1]
			inEffect = inEffect[:len(inEffect)-1]
		case step.restart:
			what += " (device restart, re-push)"
			dev.restart(t)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			diff := current.diff(readScenario(t, dev))
			if diff == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the device differs from what it held straight:\n%s", what, diff)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := sidecar.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if exited, err := sidecar.exited(20 * time.Second); !exited || err != nil {
		t.Fatalf("the sidecar did not stop cleanly: %v", err)
	}
	proposals, applied := readJournal(t, journalDir)
	trace.Verify(t, tracePath, trace.VerifyOptions{Quiescent: true, Applied: applied, Proposals: proposals})
}

// sendRetrying sends a Set, again while the sidecar reconnects to the
// device (UNAVAILABLE, nothing journaled).
func sendRetrying(c gpb.GNMIClient, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Set(context.Background(), req)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "nothing was journaled") || time.Now().After(deadline) {
			return resp, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readScenario(t *testing.T, dev scenarioDevice) *diffModel {
	t.Helper()
	var got *diffModel
	var err error
	for range 100 { // a restarted device may take a moment to serve
		if got, err = readDeviceAs(dev.client(), dev.get()); err == nil {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("reading the device: %v", err)
	return nil
}

// --- the simulated device ---

type testbedDevice struct {
	p     *process
	admin string
	c     gpb.GNMIClient
}

func startTestbed(t *testing.T, bin string) *testbedDevice {
	p := startProcess(t, "gnmi-testbed", bin, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "warn")
	return &testbedDevice{p: p, admin: p.adminURL(t), c: dial(t, p.addr)}
}

func (d *testbedDevice) addr() string                 { return d.p.addr }
func (d *testbedDevice) client() gpb.GNMIClient       { return d.c }
func (d *testbedDevice) get() gpb.GetRequest_DataType { return gpb.GetRequest_CONFIG }

func (d *testbedDevice) restart(t *testing.T) {
	resp, err := http.Post(d.admin+"/restart", "", nil)
	if err != nil {
		t.Fatalf("restarting the device: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restarting the device: %s", resp.Status)
	}
}

// --- gnxi's gnmi_target ---

type gnmiTarget struct {
	bin, listen string
	p           *process
	c           gpb.GNMIClient
}

func startGnmiTarget(t *testing.T, bin string) *gnmiTarget {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	g := &gnmiTarget{bin: bin, listen: listen}
	g.start(t)
	g.c = dial(t, listen)
	return g
}

// start runs gnmi_target (plaintext, empty) and waits until it serves.
func (g *gnmiTarget) start(t *testing.T) {
	cmd := exec.Command(g.bin, "-bind_address", g.listen, "-notls", "-logtostderr")
	cmd.Stdout, cmd.Stderr = &logWriter{t: t, prefix: "gnmi_target"}, &logWriter{t: t, prefix: "gnmi_target"}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start gnmi_target: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	g.p = &process{name: "gnmi_target", cmd: cmd, addr: g.listen, done: done}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	poll(t, 10*time.Second, "gnmi_target to listen on "+g.listen, func() (bool, string) {
		c, err := net.DialTimeout("tcp", g.listen, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
}

func (g *gnmiTarget) addr() string           { return g.listen }
func (g *gnmiTarget) client() gpb.GNMIClient { return g.c }

// get: gnmi_target refuses the CONFIG data type; it holds configuration
// only.
func (g *gnmiTarget) get() gpb.GetRequest_DataType { return gpb.GetRequest_ALL }

// restart stops the target and starts it again, empty, on its address.
func (g *gnmiTarget) restart(t *testing.T) {
	_ = g.p.cmd.Process.Signal(syscall.SIGKILL)
	<-g.p.done
	g.start(t)
}
