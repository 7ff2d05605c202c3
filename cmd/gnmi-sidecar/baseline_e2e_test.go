package main

// End-to-end tests of issue 33, "in front of a configured device, nothing is
// ever lost": real gnmi-testbed and gnmi-sidecar processes, the device
// seeded directly (gNMI Sets to its own address, a persistent device with a
// state file, as a real device with a startup configuration) before the
// sidecar starts; then one change through the sidecar and its undo, and the
// device's whole configuration (read from the device itself) must be what
// it was before the change. With --baseline auto the sidecar journals the
// device's configuration as proposal 1 (author device, tag baseline); with
// --baseline off it reads the device at the paths each Set writes.

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/protobuf/proto"
)

// startupConfig is what the device holds before the sidecar arrives: every
// kind of data a Set may touch (leaves of a container, a leaf-list, list
// entries with several leaves, a nested list entry). The ops are applied in
// order with one gNMI Set sent to the device itself.
var startupConfig = []struct{ path, json string }{
	{"/system/config", `{"hostname":"h0","domain-name":"example.net","login-banner":"authorized use only","motd-banner":"maintenance at 02:00"}`},
	{"/system/dns/config/search", `["example.net","lab.example.net"]`},
	{"/interfaces/interface[name=eth0]", `{"name":"eth0","config":{"name":"eth0","description":"uplink to core","mtu":1500},` +
		`"subinterfaces":{"subinterface":[{"index":0,"config":{"index":0,"description":"untagged"}}]}}`},
	{"/interfaces/interface[name=eth1]", `{"name":"eth1","config":{"name":"eth1","description":"spare","mtu":9000,"enabled":true}}`},
}

// Paths of the startup configuration the rows change.
const (
	hostnamePath    = "/system/config/hostname"
	loginBannerPath = "/system/config/login-banner"
	eth0DescPath    = "/interfaces/interface[name=eth0]/config/description"
)

// baselineModes are the values of serve --baseline.
const (
	baselineAuto = "auto"
	baselineOff  = "off"
)

var (
	serveHelpOnce sync.Once
	serveHelp     string
)

// serveHasFlag reports whether gnmi-sidecar serve has the flag name (the
// issue's options land in the product while these tests exist already).
func serveHasFlag(t *testing.T, bin, name string) bool {
	t.Helper()
	serveHelpOnce.Do(func() {
		out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
		serveHelp = string(out)
	})
	return strings.Contains(serveHelp, "--"+name+" ")
}

// seededStack starts a persistent gnmi-testbed, seeds it with
// startupConfig directly, reads back the device's configuration (returned),
// and starts a gnmi-sidecar in front of it with --baseline mode and extra.
func seededStack(t *testing.T, mode string, devArgs []string, extra ...string) (*stack, map[string]*gpb.TypedValue) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "device-state.json")
	s := newStack(t, append([]string{"--persistent", "--state-file", state}, devArgs...), nil)
	seedDevice(t, s.devClient)
	startup := mustDeviceConfig(t, s.devAdmin)
	if len(startup) < 14 {
		t.Fatalf("the seeded device holds %d leaves, want the whole startup configuration:\n%s", len(startup), showConfig(startup))
	}
	if serveHasFlag(t, s.sidecarBin, "baseline") {
		s.sidecarArgs = append(s.sidecarArgs, "--baseline", mode)
	} else {
		t.Logf("gnmi-sidecar serve has no --baseline yet: started without it (today's behaviour, the journal's before-images only)")
	}
	s.sidecarArgs = append(s.sidecarArgs, extra...)
	s.startSidecar(t, "127.0.0.1:0")
	// The sidecar's start (baseline, re-push) changes nothing on the device.
	s.expectDevice(t, "after the sidecar started", startup, 10*time.Second)
	return s, startup
}

// seedDevice writes startupConfig to the device itself (not through the
// sidecar), one Set.
func seedDevice(t *testing.T, c gpb.GNMIClient) {
	t.Helper()
	req := &gpb.SetRequest{}
	for _, op := range startupConfig {
		req.Update = append(req.Update, &gpb.Update{Path: diffPath(t, op.path),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(op.json)}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Set(ctx, req); err != nil {
		t.Fatalf("seeding the device directly: %v", err)
	}
}

func mustDeviceConfig(t *testing.T, admin string) map[string]*gpb.TypedValue {
	t.Helper()
	cfg, err := deviceConfig(t, admin)
	if err != nil {
		t.Fatalf("reading the device's configuration: %v", err)
	}
	return cfg
}

// configDiff describes how got differs from want, leaf by leaf, or "".
func configDiff(got, want map[string]*gpb.TypedValue) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[p]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("  %s: missing (deleted), want %s", p, showTV(want[p])))
		case !proto.Equal(g, want[p]):
			out = append(out, fmt.Sprintf("  %s: %s, want %s", p, showTV(g), showTV(want[p])))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("  %s: %s, want nothing", p, showTV(got[p])))
		}
	}
	return strings.Join(out, "\n")
}

func showTV(v *gpb.TypedValue) string {
	if s, err := scalar(v); err == nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.Join(strings.Fields(v.String()), " ")
}

func showConfig(cfg map[string]*gpb.TypedValue) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(cfg)) {
		fmt.Fprintf(&b, "  %s = %s\n", p, showTV(cfg[p]))
	}
	return b.String()
}

// expectDevice waits up to d for the device's configuration, read from the
// device, to be want exactly.
func (s *stack) expectDevice(t *testing.T, what string, want map[string]*gpb.TypedValue, d time.Duration) {
	t.Helper()
	var last string
	deadline := time.Now().Add(d)
	for {
		got, err := deviceConfig(t, s.devAdmin)
		if err == nil {
			last = configDiff(got, want)
			if last == "" {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the device's configuration differs (-/+ leaf: device, want):\n%s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectLeaf checks one leaf on the device (the change took effect).
func (s *stack) expectLeaf(t *testing.T, path, want string) {
	t.Helper()
	got, ok := mustGetLeaf(t, s.devClient, diffPath(t, path))
	if !ok || got != want {
		t.Fatalf("the device holds %s = %q (present %v), want %q: the change did not take effect", path, got, ok, want)
	}
}

// runCLI runs an operator command of the gnmi-sidecar binary against the
// stack's sidecar: its exit code, stdout and stderr.
func (s *stack) runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	code, out, errOut := runCLI(t, s.sidecarBin, s.sidecar.addr, append(args, "--timeout", "60s")...)
	t.Logf("gnmi-sidecar %q: exit %d\n%s%s", args, code, out, errOut)
	return code, out, errOut
}

// mustCLI is runCLI requiring exit code 0; it returns stdout.
func (s *stack) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := s.runCLI(t, args...)
	if code != 0 {
		t.Fatalf("gnmi-sidecar %q: exit code %d, want 0\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// fourChanges makes four changes of every kind through the sidecar: a
// leaf updated, a leaf deleted, an entry's config replaced, a new entry.
func fourChanges(t *testing.T, s *stack) {
	t.Helper()
	s.mustCLI(t, "set", "--update", hostnamePath+`="core-1"`, "--comment", "change 1")
	s.mustCLI(t, "set", "--delete", loginBannerPath, "--comment", "change 2")
	s.mustCLI(t, "set", "--replace", `/interfaces/interface[name=eth0]/config={"name":"eth0","mtu":9000}`, "--comment", "change 3")
	s.mustCLI(t, "set", "--update", `/interfaces/interface[name=eth2]/config={"name":"eth2","description":"new"}`, "--comment", "change 4")
	s.expectLeaf(t, hostnamePath, "core-1")
	s.expectLeaf(t, "/interfaces/interface[name=eth0]/config/mtu", "9000")
	s.expectLeaf(t, "/interfaces/interface[name=eth2]/config/description", "new")
}

// baselineRow is one row of the table: a change through the
// sidecar and its undo, on a freshly seeded device. run makes both (every
// CLI call must exit 0); the device must then hold its startup
// configuration exactly.
type baselineRow struct {
	name string
	// off: the row also runs with --baseline off (before-images read from
	// the device per Set).
	off bool
	run func(t *testing.T, s *stack, mode string, startup map[string]*gpb.TypedValue)
}

var baselineRows = []baselineRow{
	{name: "set hostname then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		s.mustCLI(t, "set", "--update", hostnamePath+`="h1"`)
		s.expectLeaf(t, hostnamePath, "h1")
		s.mustCLI(t, "rollback")
	}},
	{name: "set description of existing eth0 then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		s.mustCLI(t, "set", "--update", eth0DescPath+`="changed"`)
		s.expectLeaf(t, eth0DescPath, "changed")
		s.mustCLI(t, "rollback")
	}},
	{name: "replace /system/config then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		s.mustCLI(t, "set", "--replace", `/system/config={"hostname":"r"}`)
		s.expectLeaf(t, hostnamePath, "r")
		if _, ok := mustGetLeaf(t, s.devClient, diffPath(t, loginBannerPath)); ok {
			t.Fatalf("the Replace of /system/config left %s on the device", loginBannerPath)
		}
		s.mustCLI(t, "rollback")
	}},
	{name: "delete login-banner then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		// A dry run of the delete is a change (the banner is on the device),
		// not "no changes". Only its path is asserted while dry runs are
		// being reworked.
		out := s.mustCLI(t, "set", "--dry-run", "--delete", loginBannerPath)
		if !strings.Contains(out, loginBannerPath) {
			t.Errorf("set --dry-run --delete %s does not mention the banner's path:\n%s", loginBannerPath, out)
		}
		s.mustCLI(t, "set", "--delete", loginBannerPath)
		if _, ok := mustGetLeaf(t, s.devClient, diffPath(t, loginBannerPath)); ok {
			t.Fatalf("the delete left %s on the device", loginBannerPath)
		}
		s.mustCLI(t, "rollback")
	}},
	{name: "commit-confirmed on hostname left to expire", off: true, run: func(t *testing.T, s *stack, _ string, startup map[string]*gpb.TypedValue) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Long enough for the change to be seen on the device before it
		// expires on a loaded machine.
		if _, err := s.client.Set(ctx, &gpb.SetRequest{
			Update:    []*gpb.Update{{Path: diffPath(t, hostnamePath), Val: strVal("cc")}},
			Extension: []*gnmi_ext.Extension{commitFor("issue-33", 8*time.Second)},
		}); err != nil {
			t.Fatalf("commit-confirmed Set of the hostname: %v", err)
		}
		s.expectLeaf(t, hostnamePath, "cc")
		// The expiry is the undo: wait for it.
		s.expectDevice(t, "after the commit-confirmed expired", startup, 60*time.Second)
	}},
	{name: "replace eth0 then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		s.mustCLI(t, "set", "--replace", `/interfaces/interface[name=eth0]={"name":"eth0","config":{"name":"eth0","mtu":9100}}`)
		s.expectLeaf(t, "/interfaces/interface[name=eth0]/config/mtu", "9100")
		s.mustCLI(t, "rollback")
	}},
	{name: "delete eth1 then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		s.mustCLI(t, "set", "--delete", "/interfaces/interface[name=eth1]")
		if _, ok := mustGetLeaf(t, s.devClient, diffPath(t, "/interfaces/interface[name=eth1]/config/description")); ok {
			t.Fatal("the delete left eth1 on the device")
		}
		s.mustCLI(t, "rollback")
	}},
	{name: "add a leaf and an entry the device lacked then rollback", off: true, run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		// What the device did not hold goes again: before-images must not
		// keep what the change created.
		s.mustCLI(t, "set", "--update", `/interfaces/interface[name=eth0]/config/enabled=false`,
			"--update", `/interfaces/interface[name=eth3]/config={"name":"eth3","description":"temporary"}`)
		s.expectLeaf(t, "/interfaces/interface[name=eth3]/config/description", "temporary")
		s.mustCLI(t, "rollback")
	}},
	{name: "entry created inside, then /interfaces replaced, then rollback to the start", off: true, run: func(t *testing.T, s *stack, mode string, _ map[string]*gpb.TypedValue) {
		// eth4 comes to exist with a change inside it (the device adds its
		// key leaves); the Replace then reads it from the device as it is.
		// At the start it did not exist: going back there deletes it.
		s.mustCLI(t, "set", "--update", `/interfaces/interface[name=eth4]/subinterfaces/subinterface[index=0]/config/description="x"`)
		s.mustCLI(t, "set", "--replace", `/interfaces={"interface":[{"name":"eth1","config":{"name":"eth1","mtu":7403}}]}`)
		s.expectLeaf(t, "/interfaces/interface[name=eth1]/config/mtu", "7403")
		point := "baseline"
		if mode == baselineOff {
			point = "0"
		}
		s.mustCLI(t, "rollback", "--to", point)
	}},
	{name: "four changes then rollback --to baseline", run: func(t *testing.T, s *stack, _ string, _ map[string]*gpb.TypedValue) {
		fourChanges(t, s)
		s.mustCLI(t, "rollback", "--to", "baseline")
	}},
	{name: "four changes then rollback --to 0", off: true, run: func(t *testing.T, s *stack, mode string, _ map[string]*gpb.TypedValue) {
		fourChanges(t, s)
		if mode == baselineOff {
			s.mustCLI(t, "rollback", "--to", "0")
			return
		}
		// With a baseline, point 0 is before the device's own configuration:
		// refused (FAILED_PRECONDITION, exit code 5), naming the tag to use.
		changed := mustDeviceConfig(t, s.devAdmin)
		code, out, errOut := s.runCLI(t, "rollback", "--to", "0")
		if code != exitPrecondition || !strings.Contains(out+errOut, "baseline") {
			t.Fatalf("rollback --to 0 with a baseline: exit code %d, output %q %q; want %d (FAILED_PRECONDITION) naming the tag baseline",
				code, out, errOut, exitPrecondition)
		}
		s.expectDevice(t, "after the refused rollback --to 0", changed, 5*time.Second)
		s.mustCLI(t, "rollback", "--to", "baseline")
	}},
}

// TestBaselineRestoresStartupConfig is the table: each row on a
// freshly seeded device, with --baseline auto, and the rows marked off also
// with --baseline off; after the undo the device holds exactly its startup
// configuration. Each runs without --yang (as the issue reproduced it: the
// device's JSON lists read back with keys the sidecar learns from the
// answers), and the auto rows also with the device's YANG.
func TestBaselineRestoresStartupConfig(t *testing.T) {
	yang := testbedYANG(t)
	for _, mode := range []string{baselineAuto, baselineOff} {
		for _, withYANG := range []bool{false, true} {
			for _, row := range baselineRows {
				if mode == baselineOff && (!row.off || withYANG) {
					continue
				}
				var extra []string
				name := mode
				if withYANG {
					extra, name = []string{"--yang", yang}, mode+"+yang"
				}
				t.Run(name+"/"+row.name, func(t *testing.T) {
					t.Parallel()
					s, startup := seededStack(t, mode, nil, extra...)
					row.run(t, s, mode, startup)
					expectUndone(t, s, startup)
				})
			}
		}
	}
}

// expectUndone checks the device after a row's undo: its startup
// configuration exactly, and still after the sidecar is killed (SIGKILL)
// and started again on the same journal, re-pushing what it applied.
func expectUndone(t *testing.T, s *stack, startup map[string]*gpb.TypedValue) {
	t.Helper()
	s.expectDevice(t, "after the undo", startup, 10*time.Second)
	s.sidecar.kill(t)
	s.startSidecar(t, "127.0.0.1:0")
	s.expectDevice(t, "after the undo and a sidecar restart (SIGKILL, same journal, re-push)", startup, 10*time.Second)
}

var (
	yangOnce sync.Once
	yangDir  string
	yangErr  error
)

// testbedYANG writes the simulated device's YANG (gnmi-testbed yang) once
// per test binary and returns its directory, for the sidecar's --yang.
func testbedYANG(t *testing.T) string {
	t.Helper()
	_, tb := binaries(t)
	yangOnce.Do(func() {
		yangDir = filepath.Join(binDir, "yang")
		if out, err := exec.Command(tb, "yang", "--out", yangDir).CombinedOutput(); err != nil {
			yangErr = fmt.Errorf("gnmi-testbed yang: %v\n%s", err, out)
		}
	})
	if yangErr != nil {
		t.Fatal(yangErr)
	}
	return yangDir
}

// journalListJSON is `journal list -o json` as these tests read it.
type journalListJSON struct {
	Proposals []struct {
		Index  uint64
		Phase  string
		Author string
	}
}

type journalTagsJSON struct {
	Tags []struct {
		Name  string
		Index uint64
	}
}

func (s *stack) journalList(t *testing.T) journalListJSON {
	t.Helper()
	var l journalListJSON
	decodeJSON(t, s.mustCLI(t, "journal", "list", "-n", "0", "-o", "json"), &l)
	return l
}

func (s *stack) tagIndex(t *testing.T, name string) (uint64, bool) {
	t.Helper()
	var tags journalTagsJSON
	decodeJSON(t, s.mustCLI(t, "journal", "tags", "-o", "json"), &tags)
	for _, tag := range tags.Tags {
		if tag.Name == name {
			return tag.Index, true
		}
	}
	return 0, false
}

// TestBaselineJournaled: with --baseline auto the device's configuration is
// proposal 1, authored device and tagged baseline, before any client's Set;
// it cannot be rolled back (it changed nothing on the device), nor can the
// point before it; a restarted sidecar does not journal it again; and
// sync-from journals a new baseline and moves the tag to it.
func TestBaselineJournaled(t *testing.T) { withAndWithoutYANG(t, testBaselineJournaled) }

// withAndWithoutYANG runs test as two parallel subtests: the sidecar
// without --yang, and with the device's YANG (extra sidecar arguments).
func withAndWithoutYANG(t *testing.T, test func(t *testing.T, extra ...string)) {
	yang := testbedYANG(t)
	t.Run("without-yang", func(t *testing.T) { t.Parallel(); test(t) })
	t.Run("with-yang", func(t *testing.T) { t.Parallel(); test(t, "--yang", yang) })
}

func testBaselineJournaled(t *testing.T, extra ...string) {
	s, startup := seededStack(t, baselineAuto, nil, extra...)

	// The baseline is taken once the sidecar is connected: wait for it.
	var l journalListJSON
	poll(t, 20*time.Second, "the baseline to be journaled", func() (bool, string) {
		l = s.journalList(t)
		return len(l.Proposals) > 0, "the journal is empty"
	})
	if len(l.Proposals) != 1 || l.Proposals[0].Index != 1 || l.Proposals[0].Author != "device" {
		t.Fatalf("journal list after start: %+v; want one proposal, 1, authored device (the baseline)", l.Proposals)
	}
	if idx, ok := s.tagIndex(t, "baseline"); !ok || idx != 1 {
		t.Fatalf("journal tags: baseline at %d (present %v); want proposal 1", idx, ok)
	}

	// The baseline changed nothing on the device: no rollback of it.
	code, out, errOut := s.runCLI(t, "rollback", "1")
	if code != exitPrecondition {
		t.Errorf("rollback 1 (the baseline): exit code %d, %q %q; want %d (FAILED_PRECONDITION)", code, out, errOut, exitPrecondition)
	}
	code, out, errOut = s.runCLI(t, "rollback", "--to", "0")
	if code != exitPrecondition || !strings.Contains(out+errOut, "baseline") {
		t.Errorf("rollback --to 0: exit code %d, %q %q; want %d (FAILED_PRECONDITION) naming the tag baseline", code, out, errOut, exitPrecondition)
	}
	s.mustCLI(t, "rollback", "--to", "baseline") // nothing to do
	s.expectDevice(t, "after the refused rollbacks", startup, 5*time.Second)

	// A client's change comes after it.
	s.mustCLI(t, "set", "--update", hostnamePath+`="h1"`)
	l = s.journalList(t)
	if len(l.Proposals) != 2 || l.Proposals[1].Index != 2 || l.Proposals[1].Author == "device" {
		t.Fatalf("journal list after a client's Set: %+v; want the baseline, then the client's change 2", l.Proposals)
	}

	// Started again on the same journal: no second baseline.
	s.stop(t)
	s.startSidecar(t, "127.0.0.1:0")
	l = s.journalList(t)
	if len(l.Proposals) != 2 {
		t.Fatalf("journal list after a restart: %+v; want the same two proposals (a journal that is not empty gets no new baseline)", l.Proposals)
	}
	s.mustCLI(t, "rollback")
	s.expectDevice(t, "after the rollback following a restart", startup, 10*time.Second)

	// The device changed by hand; sync-from makes it the new baseline.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.devClient.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{
		{Path: diffPath(t, hostnamePath), Val: strVal("by-hand")},
		{Path: diffPath(t, "/interfaces/interface[name=eth5]/config"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{
			JsonIetfVal: []byte(`{"name":"eth5","description":"added by hand"}`)}}},
	}}); err != nil {
		t.Fatalf("changing the device by hand: %v", err)
	}
	byHand := mustDeviceConfig(t, s.devAdmin)
	s.mustCLI(t, "sync-from")
	idx, ok := s.tagIndex(t, "baseline")
	l = s.journalList(t)
	last := l.Proposals[len(l.Proposals)-1]
	if !ok || idx != last.Index || last.Author != "device" || idx <= 2 {
		t.Fatalf("after sync-from: tag baseline at %d (present %v), newest proposal %+v; want the tag on a new proposal authored device", idx, ok, last)
	}
	s.expectDevice(t, "after sync-from (it changes nothing on the device)", byHand, 5*time.Second)
	fourChanges(t, s)
	s.mustCLI(t, "rollback", "--to", "baseline")
	s.expectDevice(t, "after rollback --to baseline (the one sync-from journaled)", byHand, 10*time.Second)
}

// TestBaselineSurvivesDeviceRestartEmpty: the baseline is part of the
// applied configuration, so a device that restarts empty (its startup
// configuration lost) gets it back with the re-push, and a later rollback
// still restores it.
func TestBaselineSurvivesDeviceRestartEmpty(t *testing.T) {
	withAndWithoutYANG(t, testBaselineSurvivesDeviceRestartEmpty)
}

func testBaselineSurvivesDeviceRestartEmpty(t *testing.T, extra ...string) {
	s, startup := seededStack(t, baselineAuto, nil, extra...)
	s.mustCLI(t, "set", "--update", eth0DescPath+`="changed"`)
	changed := mustDeviceConfig(t, s.devAdmin)

	// An empty device on the same port.
	s.dev.kill(t)
	s.dev = startProcess(t, "gnmi-testbed", s.testbedBin, "--listen", s.dev.addr, "--admin", "127.0.0.1:0")
	s.devAdmin = s.dev.adminURL(t)
	s.expectDevice(t, "after the empty device was re-pushed", changed, 30*time.Second)
	s.mustCLI(t, "rollback")
	s.expectDevice(t, "after the rollback", startup, 10*time.Second)
}

var (
	testbedHelpOnce sync.Once
	testbedHelp     string
)

// testbedHasFlag reports whether gnmi-testbed has the flag name (the
// read-refusal options land in the simulated device while these tests
// exist already).
func testbedHasFlag(t *testing.T, bin, name string) bool {
	t.Helper()
	testbedHelpOnce.Do(func() {
		out, _ := exec.Command(bin, "--help").CombinedOutput()
		testbedHelp = string(out)
	})
	return strings.Contains(testbedHelp, "--"+name+" ")
}

// TestBaselineDeviceRefusingGetConfig is the first rows of the table (and
// the rollback to point 0) against a device that refuses a Get of type
// CONFIG with UNIMPLEMENTED, as gnxi's gnmi_target does: the sidecar reads
// it another way (Get ALL, state pruned), and nothing is lost either.
func TestBaselineDeviceRefusingGetConfig(t *testing.T) {
	_, tb := binaries(t)
	if !testbedHasFlag(t, tb, "refuse-get-config") {
		t.Skip("gnmi-testbed has no --refuse-get-config yet")
	}
	for _, mode := range []string{baselineAuto, baselineOff} {
		for _, row := range baselineRows[:4] {
			t.Run(mode+"/"+row.name, func(t *testing.T) {
				t.Parallel()
				s, startup := seededStack(t, mode, []string{"--refuse-get-config"})
				row.run(t, s, mode, startup)
				expectUndone(t, s, startup)
			})
		}
	}
}

// TestBeforeImageUnreadableRefusesRollback: with --baseline off, in front
// of a device that cannot be read at all (every Get refused, and every
// encoding for Subscribe), the sidecar cannot know what its change
// replaced; a rollback that would delete what it could not see is refused
// with FAILED_PRECONDITION naming the path, and the device keeps what it
// holds (never the startup value deleted).
func TestBeforeImageUnreadableRefusesRollback(t *testing.T) {
	_, tb := binaries(t)
	if !testbedHasFlag(t, tb, "refuse-get") || !testbedHasFlag(t, tb, "refuse-encoding") {
		t.Skip("gnmi-testbed has no --refuse-get and --refuse-encoding yet")
	}
	t.Parallel()
	s, _ := seededStack(t, baselineOff, []string{"--refuse-get",
		"--refuse-encoding", "JSON", "--refuse-encoding", "JSON_IETF", "--refuse-encoding", "PROTO"}, "--drift-policy", "off")
	s.mustCLI(t, "set", "--update", hostnamePath+`="h1"`)
	changed := mustDeviceConfig(t, s.devAdmin)
	if v, err := scalar(changed[hostnamePath]); err != nil || v != "h1" {
		t.Fatalf("the device holds hostname %v, want h1: the change did not take effect", changed[hostnamePath])
	}
	code, out, errOut := s.runCLI(t, "rollback")
	if code != exitPrecondition || !strings.Contains(out+errOut, hostnamePath) {
		t.Fatalf("rollback of a change whose before-image could not be read: exit code %d, %q %q; want %d (FAILED_PRECONDITION) naming %s",
			code, out, errOut, exitPrecondition, hostnamePath)
	}
	s.expectDevice(t, "after the refused rollback", changed, 5*time.Second)
}

// TestBaselineManagedPaths is the table with a baseline of /system only
// (--managed-paths): a change under /interfaces, outside it, has its
// before-images read from the device per Set, and is undone as exactly
// (the rows that change interfaces, and one inside /system).
func TestBaselineManagedPaths(t *testing.T) {
	for _, row := range baselineRows {
		if !strings.Contains(row.name, "eth") && !strings.Contains(row.name, "entry") &&
			!strings.Contains(row.name, "four changes") && row.name != "set hostname then rollback" {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			s, startup := seededStack(t, baselineAuto, nil, "--managed-paths", "/system")
			row.run(t, s, baselineAuto, startup)
			expectUndone(t, s, startup)
		})
	}
}
