package main

// End-to-end tests: real gnmi-sidecar and gnmi-testbed processes on
// 127.0.0.1, driven by gnmi_cli and by Go gNMI clients.

import (
	"context"
	"fmt"
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// cliDescription is interface eth0's description path in gnmi_cli's
// text proto form.
const cliDescription = `elem: <name: "interfaces"> elem: <name: "interface" key: <key: "name" value: "eth0">> elem: <name: "config"> elem: <name: "description">`

func cliSet(value string) string {
	return `update: <path: <` + cliDescription + `> val: <string_val: "` + value + `">>`
}

// TestGNMICLIThroughSidecar drives the sidecar with the OpenConfig
// reference client, as a user would: it must look like the device.
func TestGNMICLIThroughSidecar(t *testing.T) {
	cli := sidecartest.GNMICLI(t)
	s := startStack(t, nil, nil)
	addr := s.sidecar.addr
	const query = "/interfaces/interface[name=eth0]/config/description"

	ok := t.Run("capabilities", func(t *testing.T) {
		out := sidecartest.MustCLI(t, cli, addr, "-capabilities")
		for _, want := range []string{"openconfig-interfaces", "openconfig-system", "OpenConfig working group", "JSON_IETF", "gNMI_version"} {
			if !strings.Contains(out, want) {
				t.Errorf("capabilities through the sidecar lack %q:\n%s", want, out)
			}
		}
		direct := sidecartest.MustCLI(t, cli, s.dev.addr, "-capabilities")
		if out != direct {
			t.Errorf("capabilities through the sidecar differ from the device's:\n%s\nwant:\n%s", out, direct)
		}
	})
	ok = ok && t.Run("set-get", func(t *testing.T) {
		out := sidecartest.MustCLI(t, cli, addr, "-set", "-proto", cliSet("uplink-cli"))
		for _, want := range []string{"op: UPDATE", `name: "description"`} {
			if !strings.Contains(out, want) {
				t.Errorf("set output lacks %q:\n%s", want, out)
			}
		}
		// The reply is the device's: no receipt for a client that did not
		// ask for one (--reply-extension asked, the default).
		if strings.Contains(out, "EID_EXPERIMENTAL") {
			t.Errorf("the reply to gnmi_cli carries the sidecar's extension:\n%s", out)
		}
		out = sidecartest.MustCLI(t, cli, addr, "-get", "-proto", `path: <`+cliDescription+`> encoding: JSON_IETF`)
		if !strings.Contains(out, `uplink-cli`) {
			t.Errorf("get through the sidecar lacks the value:\n%s", out)
		}
		if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v != "uplink-cli" {
			t.Errorf("device holds description %q, want %q", v, "uplink-cli")
		}
	})
	ok = ok && t.Run("subscribe-once", func(t *testing.T) {
		out := sidecartest.MustCLI(t, cli, addr, "-target", "e2e", "-query_type", "once", "-query", query)
		if !strings.Contains(out, `"description": "uplink-cli"`) {
			t.Errorf("subscribe once output lacks the value:\n%s", out)
		}
	})
	ok = ok && t.Run("subscribe-stream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, cli, "-address", addr, "-insecure", "-target", "e2e",
			"-query_type", "streaming", "-query", query)
		out := newLineWriter(t, "gnmi_cli stream")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cancel(); <-exited })

		wait := func(value string) {
			t.Helper()
			want := fmt.Sprintf(`"description": %q`, value)
			if _, err := out.waitLine(func(l string) bool { return strings.Contains(l, want) }, 15*time.Second, exited); err != nil {
				t.Fatalf("streaming gnmi_cli never printed %s: %v; output:\n%s", want, err, out.text())
			}
		}
		wait("uplink-cli")
		sidecartest.MustCLI(t, cli, addr, "-set", "-proto", cliSet("uplink-streamed"))
		wait("uplink-streamed")
		// And a Set from a Go client, through the sidecar as well.
		mustSetDesc(t, s.client, "eth0", "uplink-go")
		wait("uplink-go")
	})
	if ok {
		s.verifyTrace(t, trace.VerifyOptions{Quiescent: true})
	}
}

// TestDeviceRestartedEmptyIsRepushed kills the device and starts an empty
// one on the same port: the sidecar restores its configuration by itself.
func TestDeviceRestartedEmptyIsRepushed(t *testing.T) {
	s := startStack(t, nil, nil)
	mustSetDesc(t, s.client, "eth0", "uplink to spine1")
	mustSetDesc(t, s.client, "eth1", "uplink to spine2")
	mustSetDesc(t, s.client, "eth2", "to be deleted")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.client.Set(ctx, &gpb.SetRequest{
		Delete: []*gpb.Path{descPath("eth2")},
		Update: []*gpb.Update{{Path: leafPath("eth0", "mtu"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 9000}}}},
	}); err != nil {
		t.Fatalf("Set mtu, delete eth2's description: %v", err)
	}

	before, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	// The device created interface eth2 (its key leaves) as a side effect
	// of the description Set and keeps it after the delete; the journal
	// holds leaves, not that side effect, so a re-push does not recreate
	// it. Compare what was set: every leaf but the list keys.
	before = withoutKeyLeaves(before)
	wantLeaves := map[string]string{
		"/interfaces/interface[name=eth0]/config/description": "uplink to spine1",
		"/interfaces/interface[name=eth1]/config/description": "uplink to spine2",
		"/interfaces/interface[name=eth0]/config/mtu":         "9000",
	}
	for p, want := range wantLeaves {
		got, err := scalar(before[p])
		if err != nil || got != want {
			t.Fatalf("before the restart the device holds %s = %v, want %q (config %v)", p, before[p], want, before)
		}
	}
	if v, ok := before["/interfaces/interface[name=eth2]/config/description"]; ok {
		t.Fatalf("eth2's description was deleted but the device holds %v", v)
	}

	killed := time.Now()
	s.dev.kill(t)
	s.dev = startProcess(t, "gnmi-testbed", s.testbedBin, "--listen", s.dev.addr, "--admin", "127.0.0.1:0")
	admin := s.dev.adminURL(t)
	var last map[string]*gpb.TypedValue
	took := poll(t, 5*time.Second, "the device's configuration to be re-pushed", func() (bool, string) {
		all, err := deviceConfig(t, admin)
		if err != nil {
			return false, err.Error()
		}
		last = all
		cfg := withoutKeyLeaves(all)
		if len(cfg) != len(before) {
			return false, fmt.Sprintf("device has %d leaves, want %d: %v", len(cfg), len(before), cfg)
		}
		for p, v := range before {
			if !proto.Equal(cfg[p], v) {
				return false, fmt.Sprintf("device %s = %v, want %v", p, cfg[p], v)
			}
		}
		return true, ""
	})
	t.Logf("configuration restored %v after the new device started listening (%v after the kill)",
		took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	// Through the sidecar, too.
	if v, _ := mustGetLeaf(t, s.client, descPath("eth1")); v != "uplink to spine2" {
		t.Errorf("Get through the sidecar: eth1 description %q, want %q", v, "uplink to spine2")
	}
	lines := s.traceLines(t)
	if n := countAction(lines, "Connect"); n < 2 {
		t.Errorf("trace has %d Connect lines; want a new term after the device restart", n)
	}
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true, Device: last})
}

// keyLeaf matches the key leaves of an interface list entry.
var keyLeaf = regexp.MustCompile(`^/interfaces/interface\[name=[^\]]*\](/config)?/name$`)

// withoutKeyLeaves drops the list keys of interfaces from a device
// configuration.
func withoutKeyLeaves(cfg map[string]*gpb.TypedValue) map[string]*gpb.TypedValue {
	out := make(map[string]*gpb.TypedValue, len(cfg))
	for p, v := range cfg {
		if !keyLeaf.MatchString(p) {
			out[p] = v
		}
	}
	return out
}

// rollbackReq is a Set with no operations and the sidecar extension's
// rollback of proposal i (0: the newest change in effect).
func rollbackReq(t *testing.T, i uint64) *gpb.SetRequest {
	return &gpb.SetRequest{Extension: []*gnmi_ext.Extension{
		sidecarExt(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: i}})}}
}

// TestRollbackExtension rolls changes back through the sidecar's gNMI
// extension: newest first, out of order refused.
func TestRollbackExtension(t *testing.T) {
	s := startStack(t, nil, nil)
	first := mustSetDesc(t, s.client, "eth0", "first")
	second := mustSetDesc(t, s.client, "eth0", "second")
	for _, r := range []*sidecarpb.Response{first, second} {
		if r.GetPhase() != sidecarpb.Phase_PHASE_CHANGE || r.GetCommit() != sidecarpb.Status_STATUS_COMPLETE || r.GetApply() != sidecarpb.Status_STATUS_COMPLETE {
			t.Fatalf("SYNC Set answered with %v; want a complete change", r)
		}
	}
	if second.GetIndex() != first.GetIndex()+1 {
		t.Fatalf("proposal indexes %d then %d; want consecutive", first.GetIndex(), second.GetIndex())
	}
	deviceHas := func(want string) {
		t.Helper()
		got, ok := mustGetLeaf(t, s.devClient, descPath("eth0"))
		if want == "" && ok {
			t.Fatalf("device holds description %q; want none", got)
		}
		if got != want {
			t.Fatalf("device holds description %q; want %q", got, want)
		}
	}
	rollback := func(i uint64) (*sidecarpb.Response, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := s.client.Set(ctx, rollbackReq(t, i))
		if err != nil {
			return nil, err
		}
		return responseExt(resp)
	}
	wantRefused := func(i uint64, code codes.Code, msg string) {
		t.Helper()
		_, err := rollback(i)
		if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Fatalf("rollback of %d: %v; want %v containing %q", i, err, code, msg)
		}
		t.Logf("rollback of %d refused: %v", i, err)
	}
	deviceHas("second")

	// Out of order: the first change while the second is in effect.
	wantRefused(first.GetIndex(), codes.FailedPrecondition, fmt.Sprintf("roll back proposal %d first", second.GetIndex()))
	deviceHas("second")
	if n := countAction(s.traceLines(t), "ProposeRollback"); n != 0 {
		t.Fatalf("a refused rollback left %d ProposeRollback lines in the trace", n)
	}

	// Newest first: index 0 is the second change.
	r, err := rollback(0)
	if err != nil {
		t.Fatalf("rollback of the newest change: %v", err)
	}
	if r.GetIndex() != second.GetIndex() || r.GetPhase() != sidecarpb.Phase_PHASE_ROLLBACK || r.GetApply() != sidecarpb.Status_STATUS_COMPLETE {
		t.Fatalf("rollback answered %v; want proposal %d's rollback applied", r, second.GetIndex())
	}
	deviceHas("first")

	// A rollback is never rolled back, and a rollback carries no operations.
	wantRefused(second.GetIndex(), codes.FailedPrecondition, "already rolled back")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := rollbackReq(t, 0)
	req.Update = []*gpb.Update{{Path: descPath("eth0"), Val: strVal("sneaky")}}
	if _, err := s.client.Set(ctx, req); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("rollback with operations: %v; want InvalidArgument", err)
	}
	deviceHas("first")

	// Then the first change: the leaf did not exist before it.
	if r, err = rollback(0); err != nil || r.GetIndex() != first.GetIndex() {
		t.Fatalf("second rollback of the newest change: %v, %v; want proposal %d", r, err, first.GetIndex())
	}
	deviceHas("")
	wantRefused(0, codes.NotFound, "nothing to roll back")

	cfg, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true, Device: cfg})
}

// TestBadInputRefused sends malformed Sets through the running sidecar
// (with --max-recv-msg-size 64 KiB): the ones it refuses itself leave the
// journal unchanged; the one the device refuses is recorded as failed and
// changes nothing.
func TestBadInputRefused(t *testing.T) {
	const maxRecv = 64 << 10
	s := startStack(t, nil, []string{"--max-recv-msg-size", strconv.Itoa(maxRecv)})
	base := mustSetDesc(t, s.client, "eth0", strings.Repeat("0", maxRecv-1024)) // just under the limit
	good := &gpb.Update{Path: descPath("eth0"), Val: strVal("refused")}
	badPath := descPath("eth0")
	badPath.Elem[2].Name = ""
	tooLarge := &gpb.SetRequest{Update: []*gpb.Update{{Path: descPath("eth0"), Val: strVal(strings.Repeat("1", maxRecv))}}}
	manyKeys := descPath("eth0")
	for k := range 1000 {
		manyKeys.Elem[1].Key[fmt.Sprintf("key%04d", k)] = strings.Repeat("v", 16)
	}

	refused := []struct {
		name string
		req  *gpb.SetRequest
		code codes.Code
		msg  string
	}{
		{"empty element name", &gpb.SetRequest{Update: []*gpb.Update{{Path: badPath, Val: strVal("x")}}},
			codes.InvalidArgument, "has an element without a name"},
		{"wildcard key", &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{
			{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "*"}}}}, Val: strVal("x")}}},
			codes.InvalidArgument, "wildcard"},
		{"no value", &gpb.SetRequest{Update: []*gpb.Update{{Path: descPath("eth0")}}},
			codes.InvalidArgument, "has no value"},
		{"an extension for the device with a tag", &gpb.SetRequest{
			Extension: []*gnmi_ext.Extension{registeredExt(12345, []byte{0x08, 0x01}), sidecarExt(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "x"}})}},
			codes.InvalidArgument, "cannot carry extensions for the device"},
		{"garbage in extension 999", &gpb.SetRequest{Update: []*gpb.Update{good},
			Extension: []*gnmi_ext.Extension{registeredExt(gnmi_ext.ExtensionID_EID_EXPERIMENTAL, []byte{0xff, 0xff, 0xff, 0xff})}},
			codes.InvalidArgument, "msg is not a gnmisidecar.extension.v1.Request"},
		{"unknown set mode", &gpb.SetRequest{Update: []*gpb.Update{good},
			Extension: []*gnmi_ext.Extension{sidecarExt(t, &sidecarpb.Request{Mode: 7})}},
			codes.InvalidArgument, "unknown set mode 7"},
		{"larger than --max-recv-msg-size", tooLarge,
			codes.ResourceExhausted, fmt.Sprintf("larger than max (%d vs. %d)", proto.Size(tooLarge), maxRecv)},
		{"a path the journal cannot key", &gpb.SetRequest{Update: []*gpb.Update{{Path: manyKeys, Val: strVal("x")}}},
			codes.InvalidArgument, "the journal takes paths of at most 16384 bytes"},
	}
	for _, tc := range refused {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.client.Set(ctx, tc.req)
		cancel()
		st := status.Convert(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
			t.Errorf("%s: %v; want %v containing %q", tc.name, err, tc.code, tc.msg)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
	}

	// Nothing was journaled: the next proposal follows the last good one,
	// and the trace holds two ProposeChange lines.
	next := mustSetDesc(t, s.client, "eth0", "good-1")
	if next.GetIndex() != base.GetIndex()+1 {
		t.Errorf("next good Set became proposal %d; want %d (a refused Set was journaled)", next.GetIndex(), base.GetIndex()+1)
	}
	lines := s.traceLines(t)
	if n := countAction(lines, "ProposeChange"); n != 2 {
		t.Errorf("trace has %d ProposeChange lines after 2 good and %d refused Sets; want 2", n, len(refused))
	}
	appliedBefore := trace.Check(lines).Applied
	devBefore, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}

	// A value of the wrong type: the device refuses it; the client gets
	// the device's own code and message.
	badMTU := &gpb.SetRequest{Update: []*gpb.Update{{Path: leafPath("eth0", "mtu"), Val: strVal("jumbo")}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, devErr := s.devClient.Set(ctx, badMTU)
	if status.Code(devErr) != codes.InvalidArgument {
		t.Fatalf("the device itself answers %v to a string mtu; want InvalidArgument", devErr)
	}
	// The sidecar's Response follows the device's details for a client
	// that asked for the sidecar's extension (docs/extension.md, Errors).
	_, err = s.client.Set(ctx, client.WithMode(proto.CloneOf(badMTU), sidecarpb.SetMode_SET_MODE_SYNC))
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || st.Message() != status.Convert(devErr).Message() {
		t.Fatalf("string mtu through the sidecar: %v\nwant the device's %v", err, devErr)
	}
	var detail *sidecarpb.Response
	for _, d := range st.Details() {
		if r, ok := d.(*sidecarpb.Response); ok {
			detail = r
		}
	}
	failed := base.GetIndex() + 2
	if detail.GetIndex() != failed || detail.GetApply() != sidecarpb.Status_STATUS_FAILED {
		t.Errorf("error details %v; want proposal %d with apply FAILED", st.Details(), failed)
	}
	lines = s.traceLines(t)
	failLine := false
	for _, l := range lines {
		if l.Index == failed && (l.Action == "FailApply" || l.Action == "FailCommit") {
			failLine = true
		}
	}
	if !failLine {
		t.Errorf("trace has no FailApply/FailCommit line for proposal %d", failed)
	}
	if after := trace.Check(lines).Applied; !reflect.DeepEqual(after, appliedBefore) {
		t.Errorf("applied values changed by a failed proposal:\n%v\nwant\n%v", after, appliedBefore)
	}
	devAfter, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if len(devAfter) != len(devBefore) {
		t.Errorf("device configuration changed by a failed proposal: %v, was %v", devAfter, devBefore)
	}
	for p, v := range devBefore {
		if !proto.Equal(devAfter[p], v) {
			t.Errorf("device %s = %v after a failed proposal, was %v", p, devAfter[p], v)
		}
	}

	// The failure does not block what comes after.
	if r := mustSetDesc(t, s.client, "eth0", "good-2"); r.GetIndex() != failed+1 {
		t.Errorf("Set after the failed one became proposal %d; want %d", r.GetIndex(), failed+1)
	}
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v != "good-2" {
		t.Errorf("device holds %q, want good-2", v)
	}
	cfg, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true, Device: cfg})
}

// waitQuiescent waits until the trace shows every proposal finished, then
// verifies it.
func (s *stack) waitQuiescent(t *testing.T, d time.Duration, device map[string]*gpb.TypedValue) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		lines, err := trace.ReadFile(s.tracePath)
		if err == nil {
			r := trace.Check(lines)
			r.CheckQuiescent()
			if len(r.Violations) == 0 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true, Device: device})
}

// TestShutdownWithSetInFlight stops the sidecar with SIGINT while a SYNC
// Set waits for a slow device.
func TestShutdownWithSetInFlight(t *testing.T) {
	t.Run("in-flight Set finishes", func(t *testing.T) {
		testShutdown(t, nil, true)
	})
	t.Run("shutdown timeout cuts it, it stays journaled", func(t *testing.T) {
		testShutdown(t, []string{"--shutdown-timeout", "100ms"}, false)
	})
}

func testShutdown(t *testing.T, sidecarArgs []string, wantOK bool) {
	s := startStack(t, []string{"--set-delay", "500ms"}, sidecarArgs)
	sets := deviceSetCount(t, s.devAdmin)

	type result struct {
		resp *gpb.SetResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := setDesc(ctx, s.client, "eth0", "in flight at shutdown")
		done <- result{resp, err}
	}()
	poll(t, 10*time.Second, "the Set to reach the device", func() (bool, string) {
		n := deviceSetCount(t, s.devAdmin)
		return n > sets, fmt.Sprintf("device set count %d", n)
	})

	s.stopWith(t, syscall.SIGINT, 5*time.Second)

	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's Set did not return after the sidecar exited")
	}
	if res.err == nil {
		if _, err := responseExt(res.resp); err != nil {
			t.Error(err)
		}
		if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v != "in flight at shutdown" {
			t.Fatalf("the Set was acknowledged but the device holds %q", v)
		}
		t.Logf("the in-flight Set completed before the sidecar exited")
		s.waitQuiescent(t, 5*time.Second, nil)
		return
	}
	if wantOK {
		t.Fatalf("in-flight Set: %v; want it to finish within --shutdown-timeout", res.err)
	}
	t.Logf("the in-flight Set was cut: %v", res.err)
	if st := status.Convert(res.err); st.Code() != codes.Aborted || !strings.Contains(st.Message(), "journaled as proposal") {
		t.Errorf("cut Set answered %v %q; want Aborted saying it stays journaled (Unavailable would invite a duplicate retry)", st.Code(), st.Message())
	}

	// It stays journaled: the next run applies it without the client.
	s.startSidecar(t, "127.0.0.1:0")
	took := poll(t, 10*time.Second, "the journaled Set to reach the device", func() (bool, string) {
		v, _ := mustGetLeaf(t, s.devClient, descPath("eth0"))
		return v == "in flight at shutdown", fmt.Sprintf("device holds %q", v)
	})
	t.Logf("the journaled Set reached the device %v after the sidecar restarted", took.Round(time.Millisecond))
	cfg, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	s.waitQuiescent(t, 5*time.Second, cfg)
}
