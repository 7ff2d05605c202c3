package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gnmi-testbed")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// testbedProcess is a running gnmi-testbed binary.
type testbedProcess struct {
	cmd  *exec.Cmd
	addr string
}

// startBinary runs the binary and waits for the address it prints first.
func startBinary(t *testing.T, bin string, args ...string) *testbedProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testLogWriter{t: t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if first {
				lines <- sc.Text()
				first = false
			}
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		const marker = "gnmi-testbed listening on "
		if !ok || !strings.HasPrefix(line, marker) {
			t.Fatalf("first output line %q; want %q<addr>", line, marker)
		}
		return &testbedProcess{cmd: cmd, addr: strings.TrimPrefix(line, marker)}
	case <-time.After(30 * time.Second):
		t.Fatal("gnmi-testbed did not print its address")
	}
	return nil
}

// kill ends the process with SIGKILL, as a crash or power loss would.
func (p *testbedProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

type testLogWriter struct{ t *testing.T }

func (w *testLogWriter) Write(b []byte) (int, error) {
	w.t.Logf("gnmi-testbed: %s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

const (
	setDescription = `update: <path: <` + descriptionPath + `> val: <string_val: "uplink-e2e">>`
	getDescription = `path: <` + descriptionPath + `> encoding: JSON_IETF`
)

// getDescriptionEventually runs the Get until the restarted binary answers
// (gnmi_cli fails with Unavailable while it is still starting).
func getDescriptionEventually(t *testing.T, gnmiCLI, addr string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := sidecartest.RunCLI(t, gnmiCLI, addr, "-get", "-proto", getDescription)
		if !strings.Contains(out, "Unavailable") || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEndToEndWithGNMICLI(t *testing.T) {
	gnmiCLI := sidecartest.GNMICLI(t)
	bin := buildBinary(t)

	t.Run("non-persistent", func(t *testing.T) {
		dev := startBinary(t, bin, "--listen", "127.0.0.1:0")

		caps := sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-capabilities")
		for _, want := range []string{"openconfig-interfaces", "JSON_IETF", "gNMI_version"} {
			if !strings.Contains(caps, want) {
				t.Errorf("capabilities output lacks %q:\n%s", want, caps)
			}
		}
		if out := sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-set", "-proto", setDescription); !strings.Contains(out, "op: UPDATE") {
			t.Errorf("set output:\n%s", out)
		}
		if out := sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-get", "-proto", getDescription); !strings.Contains(out, `uplink-e2e`) {
			t.Errorf("get output lacks the value:\n%s", out)
		}
		// The subscribe command the banner prints.
		if out := sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-target", "testbed", "-query", "/interfaces/interface[name=eth0]/config/description"); !strings.Contains(out, "uplink-e2e") {
			t.Errorf("subscribe once output lacks the value:\n%s", out)
		}

		dev.kill(t)
		dev = startBinary(t, bin, "--listen", dev.addr)
		out, err := getDescriptionEventually(t, gnmiCLI, dev.addr)
		if err == nil || !strings.Contains(out, "NotFound") {
			t.Fatalf("after restart without --persistent: err %v, output:\n%s\nwant NotFound", err, out)
		}
	})

	t.Run("union_replace, and --no-union-replace", func(t *testing.T) {
		const unionReplace = `union_replace: <path: <` + descriptionPath + `> val: <string_val: "via-union">>`
		dev := startBinary(t, bin, "--listen", "127.0.0.1:0")
		if out := sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-set", "-proto", unionReplace); !strings.Contains(out, "op: UNION_REPLACE") {
			t.Errorf("set output:\n%s", out)
		}
		if out := sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-get", "-proto", getDescription); !strings.Contains(out, "via-union") {
			t.Errorf("get output lacks the value:\n%s", out)
		}
		old := startBinary(t, bin, "--listen", "127.0.0.1:0", "--no-union-replace")
		out, err := sidecartest.RunCLI(t, gnmiCLI, old.addr, "-set", "-proto", unionReplace)
		if err == nil || !strings.Contains(out, "Unimplemented") || !strings.Contains(out, "union_replace is not supported by this device") {
			t.Errorf("--no-union-replace: err %v, output:\n%s\nwant Unimplemented", err, out)
		}
	})

	t.Run("persistent", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state.json")
		dev := startBinary(t, bin, "--listen", "127.0.0.1:0", "--persistent", "--state-file", state)
		sidecartest.MustCLI(t, gnmiCLI, dev.addr, "-set", "-proto", setDescription)

		dev.kill(t)
		dev = startBinary(t, bin, "--listen", dev.addr, "--persistent", "--state-file", state)
		out, err := getDescriptionEventually(t, gnmiCLI, dev.addr)
		if err != nil || !strings.Contains(out, "uplink-e2e") {
			t.Fatalf("after restart with --persistent: err %v, output:\n%s\nwant the value", err, out)
		}
	})
}

// TestEchoExtensionsFlag: with --echo-extensions the device answers with
// the registered extensions of the request; without it, with none.
func TestEchoExtensionsFlag(t *testing.T) {
	bin := buildBinary(t)
	ext := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: 1234, Msg: []byte("x")}}}
	for _, echo := range []bool{true, false} {
		args := []string{"--listen", "127.0.0.1:0"}
		if echo {
			args = append(args, "--echo-extensions")
		}
		dev := startBinary(t, bin, args...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := sidecartest.Dial(t, dev.addr).Capabilities(ctx, &gpb.CapabilityRequest{Extension: []*gnmi_ext.Extension{ext}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(resp.GetExtension()); (got == 1) != echo || got > 1 {
			t.Errorf("--echo-extensions %v: %d extensions in the answer", echo, got)
		}
	}
}

// TestUpdateDelayFlag: with --set-delay and --update-delay a Set of n
// updates takes at least the one plus n times the other.
func TestUpdateDelayFlag(t *testing.T) {
	bin := buildBinary(t)
	dev := startBinary(t, bin, "--listen", "127.0.0.1:0", "--set-delay", "10ms", "--update-delay", "25ms")
	c := sidecartest.Dial(t, dev.addr)
	req := &gpb.SetRequest{}
	for _, name := range []string{"eth0", "eth1", "eth2"} {
		req.Update = append(req.Update, &gpb.Update{
			Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": name}}, {Name: "config"}, {Name: "description"}}},
			Val:  &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "slow"}},
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.Set(ctx, req); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 85*time.Millisecond {
		t.Errorf("a Set of 3 updates took %v, want ≥ 10ms + 3 × 25ms", took)
	}
}

func TestRequireLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9341": true, "[::1]:9341": true, "localhost:9341": true,
		"0.0.0.0:9341": false, ":9341": false, "10.0.0.1:9341": false, "example.com:9341": false,
	} {
		if err := requireLoopback(addr); (err == nil) != ok {
			t.Errorf("requireLoopback(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}
