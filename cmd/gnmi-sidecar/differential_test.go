package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// The differential test: random sequences of what real clients send (scalar,
// JSON and JSON_IETF Updates and Replaces at every level from a leaf to the
// root, Deletes of leaves, entries, lists and subtrees, several operations
// per Set), rollbacks at any depth, commit-confirmed changes that expire,
// tags and rollbacks to them (one change going back to a point), dry runs,
// device restarts and sidecar SIGKILLs, through a real gnmi-sidecar in front
// of a real device; after every step the device's configuration is read
// straight from the device and compared with a reference model that applies
// gNMI semantics itself (merge, replace, delete; list entries by key), and
// keeps a snapshot per change for rollbacks. The model shares no code with
// the sidecar's value handling (package leaves).
//
// Half the seeds run the sidecar with the device's YANG (--yang), half
// without; without it a JSON list whose keys the sidecar has not learned is
// refused with FAILED_PRECONDITION naming --yang, which the test accepts
// only for a Set that holds a JSON list (and never with --yang).
var (
	diffSeeds    = flag.Int("diff.seeds", 12, "TestDifferential: how many seeds (make sim: 2000)")
	diffSeed     = flag.Uint64("diff.seed", 0, "TestDifferential: run this seed only")
	diffSteps    = flag.Int("diff.steps", 40, "TestDifferential: steps per seed")
	diffParallel = flag.Int("diff.parallel", 2, "TestDifferential: seeds run at once, each with its own device and sidecar")
	diffTarget   = flag.String("diff.target", "", "TestDifferential: an external gNMI target (host:port, plaintext) to run against instead of the simulated device; "+
		"it must serve OpenConfig /system and /interfaces, and the test deletes and rewrites them (a lab device or simulator only); no device restarts")
	diffYANG       = flag.String("diff.yang", "", "TestDifferential with -diff.target: the target's YANG (files or directories) for the sidecar's --yang on even seeds")
	diffJSONLeaves = flag.Bool("diff.json-leaves", true, "TestDifferential: also send JSON values at leaf paths (some targets take JSON only at containers)")
	diffReport     = flag.Bool("diff.report", false, "TestDifferential: also print the counts on stdout (make sim)")
	diffUnion      = flag.Bool("diff.union-replace", false, "TestDifferential with -diff.target: also send union_replace (gNMI 0.10; always on against the simulated device)")
)

// TestDifferential runs the differential test (see above) for -diff.seeds
// seeds, or the one -diff.seed names. A failure prints its seed, its steps
// and the command that replays it.
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	seeds := make(chan uint64)
	go func() {
		defer close(seeds)
		if *diffSeed != 0 {
			seeds <- *diffSeed
			return
		}
		base := rand.Uint64()
		for n := range *diffSeeds {
			seeds <- base + uint64(n)
		}
	}()
	var mu sync.Mutex
	counts := map[string]int{}
	passed, off := 0, 0
	workers := max(1, *diffParallel)
	if *diffTarget != "" {
		workers = 1 // one target
	}
	for w := range workers {
		t.Run(fmt.Sprintf("worker%d", w), func(t *testing.T) {
			t.Parallel()
			h := newDiffHarness(t)
			for seed := range seeds {
				c, ok := h.run(t, seed)
				mu.Lock()
				for k, v := range c {
					counts[k] += v
				}
				if ok {
					passed++
					if seedBaselineOff(seed) && h.baselineFlag {
						off++
					}
				}
				mu.Unlock()
				if !ok {
					return
				}
			}
		})
	}
	t.Cleanup(func() {
		seeded, checked, refusing := counts[countSeeded], counts[countPreChecked], counts[countRefusing]
		delete(counts, countSeeded)
		delete(counts, countPreChecked)
		delete(counts, countRefusing)
		summary := fmt.Sprintf("differential: %d seeds passed (half with --yang, %d with --baseline off, %d against a device refusing Get CONFIG); pre-existing leaves: %d seeded on the device, %d checked unchanged or restored; steps by kind: %v",
			passed, off, refusing, seeded, checked, counts)
		t.Log(summary)
		if *diffReport {
			fmt.Println(summary)
		}
	})
}

// diffHarness is one worker's device (or the external target) and the
// binaries; each seed gets a sidecar with a journal of its own.
type diffHarness struct {
	sidecarBin string
	// devs are the devices: the simulated one (or the external target),
	// and, if gnmi-testbed can, one that refuses a Get of type CONFIG as
	// gnxi's gnmi_target does (the sidecar must read it another way).
	devs []*diffDevice
	yang []string // for --yang
	// unionReplace: the device takes union_replace, so the test sends it.
	unionReplace bool
	// baselineFlag: gnmi-sidecar serve has --baseline (issue 33).
	baselineFlag bool
}

// diffDevice is one device a seed runs against.
type diffDevice struct {
	proc   *process // nil with -diff.target
	addr   string
	admin  string
	client gpb.GNMIClient
	// refusesGetConfig: the device answers a Get of type CONFIG with
	// UNIMPLEMENTED; the test reads it with Get ALL (state left out).
	refusesGetConfig bool
}

// seedRefusesGetConfig reports whether a seed runs against the device that
// refuses Get CONFIG (about a quarter of them, when there is one).
func seedRefusesGetConfig(seed uint64) bool { return (seed*0x9E3779B97F4A7C15)>>62 == 1 }

// device returns the device seed runs against.
func (h *diffHarness) device(seed uint64) *diffDevice {
	if len(h.devs) > 1 && seedRefusesGetConfig(seed) {
		return h.devs[1]
	}
	return h.devs[0]
}

func newDiffHarness(t *testing.T) *diffHarness {
	sb, tb := binaries(t)
	h := &diffHarness{sidecarBin: sb, baselineFlag: serveHasFlag(t, sb, "baseline")}
	if *diffTarget != "" {
		h.devs = []*diffDevice{{addr: *diffTarget}}
		if *diffYANG != "" {
			h.yang = strings.Split(*diffYANG, ",")
		}
	} else {
		variants := [][]string{nil}
		if testbedHasFlag(t, tb, "refuse-get-config") {
			variants = append(variants, []string{"--refuse-get-config"})
		}
		for n, extra := range variants {
			proc := startProcess(t, "gnmi-testbed", tb, append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "warn"}, extra...)...)
			h.devs = append(h.devs, &diffDevice{proc: proc, addr: proc.addr, admin: proc.adminURL(t), refusesGetConfig: n == 1})
		}
		dir := t.TempDir()
		if out, err := exec.Command(tb, "yang", "--out", dir).CombinedOutput(); err != nil {
			t.Fatalf("gnmi-testbed yang: %v\n%s", err, out)
		}
		h.yang = []string{dir}
		h.unionReplace = true
	}
	if *diffTarget != "" {
		h.unionReplace = *diffUnion
	}
	for _, dev := range h.devs {
		dev.client = dial(t, dev.addr)
	}
	return h
}

// run runs one seed in a subtest and returns its counts and whether it
// passed.
func (h *diffHarness) run(t *testing.T, seed uint64) (map[string]int, bool) {
	var counts map[string]int
	ok := t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
		d := &diffRun{h: h, dev: h.device(seed), seed: seed, rng: rand.New(rand.NewPCG(seed, 0xd1ff)), model: newDiffModel(), counts: map[string]int{}}
		d.withYANG = seed%2 == 0 && len(h.yang) > 0
		d.baselineOff = seedBaselineOff(seed)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("differential seed %d (with --yang: %v, --baseline off: %v, device refusing Get CONFIG: %v) FAILED after these steps:\n\t%s\nreplay: go test -tags devtools ./cmd/gnmi-sidecar -run 'TestDifferential$' -diff.seed=%d -diff.steps=%d%s",
					seed, d.withYANG, d.baselineOff, d.dev.refusesGetConfig, strings.Join(d.log, "\n\t"), seed, *diffSteps, targetFlags())
			}
		})
		d.start(t)
		for range *diffSteps {
			d.step(t)
		}
		d.finish(t)
		counts = d.counts
	})
	return counts, ok
}

func targetFlags() string {
	if *diffTarget == "" {
		return ""
	}
	return fmt.Sprintf(" -diff.target=%s -diff.yang=%s -diff.json-leaves=%v -diff.union-replace=%v", *diffTarget, *diffYANG, *diffJSONLeaves, *diffUnion)
}

// diffRun is one seed.
type diffRun struct {
	h        *diffHarness
	dev      *diffDevice
	seed     uint64
	rng      *rand.Rand
	withYANG bool
	// baselineOff: the sidecar runs with --baseline off (before-images
	// read from the device per Set) instead of the default auto (the
	// device's configuration journaled as proposal 1, tagged baseline).
	baselineOff bool
	model       *diffModel
	// startup is what the device held before the sidecar started (the
	// seed's random configuration, written to the device directly): the
	// baseline, and what a rollback to point 0 must bring back.
	startup *diffModel
	// changes are the model before each change in effect, newest last: a
	// rollback goes back to the last one.
	changes []*diffModel
	// tags are the points tagged so far, with the model then.
	tags    []diffTag
	sidecar *process
	client  gpb.GNMIClient
	journal string
	trace   string
	log     []string
	counts  map[string]int
}

// diffTag is a tagged point and the model at it.
type diffTag struct {
	name  string
	model *diffModel
}

func (d *diffRun) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf("%d: %s", len(d.log)+1, fmt.Sprintf(format, args...)))
}

// start clears the device, writes a random startup configuration to it
// directly, and starts a sidecar with a new journal in front of it.
func (d *diffRun) start(t *testing.T) {
	if d.dev.proc != nil {
		d.restartDevice(t)
	} else {
		// An external target: remove what the test writes.
		req := &gpb.SetRequest{Delete: []*gpb.Path{diffPath(t, "/interfaces"), diffPath(t, "/system/config"), diffPath(t, "/system/dns")}}
		if _, err := d.dev.client.Set(context.Background(), req); err != nil {
			t.Fatalf("clearing the target: %v", err)
		}
	}
	if d.dev.refusesGetConfig {
		d.counts[countRefusing]++
	}
	d.seedDevice(t)
	dir := t.TempDir()
	d.journal, d.trace = filepath.Join(dir, "journal"), filepath.Join(dir, "trace.jsonl")
	d.startSidecar(t)
	d.expect(t, "start", 0)
	if d.h.baselineFlag && !d.baselineOff {
		// The baseline: proposal 1, authored device, tagged baseline. A
		// rollback to it brings back the startup configuration.
		d.checkBaselineProposal(t)
		d.tags = append(d.tags, diffTag{name: "baseline", model: d.startup})
	}
}

// Untouched interfaces: the startup configuration has them, the random
// Sets never name them (only a Set of /interfaces or / changes them).
var diffUntouchedIntfs = []string{"eth8", "eth9"}

// seedDevice writes a random configuration to the device itself (not
// through the sidecar): leaves of /system/config, the DNS leaf-list, list
// entries with several leaves, some of the interfaces the Sets write and
// the untouched ones, nested subinterfaces. The model starts as it.
func (d *diffRun) seedDevice(t *testing.T) {
	t.Helper()
	sys := map[string]any{"config": d.systemConfig()}
	if d.rng.IntN(3) > 0 {
		sys["dns"] = map[string]any{"config": map[string]any{"search": d.search()}}
	}
	var entries []map[string]any
	for _, intf := range append(slices.Clone(diffIntfs), diffUntouchedIntfs...) {
		if slices.Contains(diffIntfs, intf) && d.rng.IntN(3) == 0 {
			continue
		}
		e := map[string]any{"name": intf, "config": map[string]any{"name": intf, "description": d.word(),
			"mtu": uint64(1280 + d.rng.IntN(8000)), "enabled": d.rng.IntN(2) == 0}}
		if d.rng.IntN(2) == 0 {
			var subs []map[string]any
			for k := range 1 + d.rng.IntN(2) {
				subs = append(subs, map[string]any{"index": uint64(k), "config": map[string]any{"index": uint64(k), "description": d.word()}})
			}
			e["subinterfaces"] = map[string]any{"subinterface": subs}
		}
		entries = append(entries, e)
	}
	ifs := map[string]any{"interface": entries}
	req := &gpb.SetRequest{}
	for _, u := range []struct {
		path string
		val  map[string]any
	}{{"/system", sys}, {"/interfaces", ifs}} {
		b, err := json.Marshal(u.val)
		if err != nil {
			t.Fatal(err)
		}
		req.Update = append(req.Update, &gpb.Update{Path: diffPath(t, u.path), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}})
		d.model.write(u.path, u.val)
	}
	d.logf("device seeded directly: %s", showSet(req))
	// The device has just restarted: the client's connection to it may be
	// the old one, or not up yet. The Set is an Update, so sent again it
	// changes nothing more.
	poll(t, 30*time.Second, "the device to take the seed", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := d.dev.client.Set(ctx, req, grpc.WaitForReady(true))
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("seeding the device: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	d.startup = d.model.clone()
	d.counts[countSeeded] += len(d.startup.leaves)
	// The device holds it before the sidecar starts.
	d.expect(t, "seeded", 0)
}

// checkBaselineProposal checks that the journal's proposal 1 is the
// baseline: authored device.
func (d *diffRun) checkBaselineProposal(t *testing.T) {
	t.Helper()
	p, err := ygot.StringToStructuredPath("/proposals/proposal[index=1]/state/author")
	if err != nil {
		t.Fatal(err)
	}
	p.Origin = "gnmi-sidecar"
	// The baseline is taken once the sidecar is connected, after the
	// re-push: wait for it.
	var author string
	poll(t, 20*time.Second, "the baseline to be journaled as proposal 1", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := d.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{p}})
		if status.Code(err) == codes.NotFound {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("reading proposal 1's author (the baseline): %v", err)
		}
		for _, n := range resp.GetNotification() {
			for _, u := range n.GetUpdate() {
				author = u.GetVal().GetStringVal()
			}
		}
		return true, ""
	})
	if author != "device" {
		t.Fatalf("proposal 1 authored %q, want device (the baseline journaled before any client's Set)", author)
	}
}

// Counts of the report that are not steps.
const (
	countSeeded     = "pre-existing leaves seeded"
	countPreChecked = "pre-existing leaves checked"
	countRefusing   = "seeds against a device refusing Get CONFIG"
)

// seedBaselineOff reports whether a seed runs the sidecar with --baseline
// off: a quarter of them (independent of --yang), without device restarts
// (a device restarted empty loses what the sidecar never journaled).
func seedBaselineOff(seed uint64) bool { return (seed/2)%4 == 3 }

func (d *diffRun) startSidecar(t *testing.T) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--target", d.dev.addr, "--journal-dir", d.journal,
		"--trace", d.trace, "--metrics", "127.0.0.1:0", "--log-level", "warn", "--journal-min-free", "0"}
	if d.withYANG {
		args = append(args, "--yang", strings.Join(d.h.yang, ","))
	}
	if d.h.baselineFlag {
		args = append(args, "--baseline", map[bool]string{false: "auto", true: "off"}[d.baselineOff])
	}
	d.sidecar = startProcess(t, "gnmi-sidecar", d.h.sidecarBin, args...)
	d.client = dial(t, d.sidecar.addr)
	poll(t, 20*time.Second, "the sidecar to connect and re-push", func() (bool, string) {
		lines, _, err := trace.ReadFileAfterCrashes(d.trace)
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
		return synced, "no CompleteReconcile since the last Open"
	})
}

// step takes one random step and checks the device against the model.
func (d *diffRun) step(t *testing.T) {
	t.Helper()
	// With --baseline off the sidecar journals only what it wrote (and what
	// the device held there): a device restarted empty would lose the rest.
	restartable := d.dev.proc != nil && !(d.baselineOff && d.h.baselineFlag)
	switch n := d.rng.IntN(100); {
	case n < 52:
		d.set(t)
	case n < 55:
		d.tag(t)
	case n < 60:
		d.rollbackTo(t)
	case n < 62:
		d.dryRun(t)
	case n < 76:
		d.rollback(t)
	case n < 82:
		d.commitConfirmed(t)
	case n < 87 && restartable:
		d.counts["device restart"]++
		d.logf("device restarts, empty")
		d.restartDevice(t)
		d.expect(t, "device restart and re-push", 20*time.Second)
	case n < 92:
		d.counts["sidecar SIGKILL"]++
		d.logf("sidecar SIGKILLed and started again")
		_ = d.sidecar.cmd.Process.Signal(syscall.SIGKILL)
		<-d.sidecar.done
		d.startSidecar(t)
		d.expect(t, "sidecar restart", 10*time.Second)
	default:
		d.invalidSet(t)
	}
}

// restartDevice restarts the simulated device (empty) through its admin
// endpoint.
func (d *diffRun) restartDevice(t *testing.T) {
	resp, err := http.Post(d.dev.admin+"/restart", "", nil)
	if err != nil {
		t.Fatalf("restarting the device: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("restarting the device: %s", resp.Status)
	}
}

// set sends a Set of one to three random operations.
func (d *diffRun) set(t *testing.T) {
	t.Helper()
	req, next, lists := d.randomSet(t)
	d.logf("set %s", showSet(req))
	err := d.send(req)
	switch {
	case err == nil:
		d.counts["set"]++
		if len(req.GetUnionReplace()) > 0 {
			d.counts["set with union_replace"]++
		}
		d.changes = append(d.changes, d.model)
		d.model = next
		d.expect(t, "set", 0)
	case status.Code(err) == codes.FailedPrecondition && lists && !d.withYANG && strings.Contains(err.Error(), "--yang"):
		d.counts["set refused: JSON list without --yang"]++
		d.logf("  refused: %v", err)
		d.expect(t, "refused set", 0)
	default:
		t.Fatalf("step %d: Set %s: %v", len(d.log), showSet(req), err)
	}
}

// tag names the present point (sidecar extension, tag); the model is what
// a rollback to it must bring back.
func (d *diffRun) tag(t *testing.T) {
	t.Helper()
	name := fmt.Sprintf("step-%d", len(d.log)+1)
	d.logf("tag %s", name)
	if err := d.send(&gpb.SetRequest{Extension: []*gnmi_ext.Extension{sidecarExt(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: name}})}}); err != nil {
		t.Fatalf("step %d: tag %s: %v", len(d.log), name, err)
	}
	d.counts["tag"]++
	d.tags = append(d.tags, diffTag{name: name, model: d.model})
}

// rollbackTo goes back to a random tag, or to point 0: every change since
// is undone by one new change (itself rolled back like any other).
func (d *diffRun) rollbackTo(t *testing.T) {
	t.Helper()
	if len(d.tags) == 0 || d.rng.IntN(4) == 0 {
		d.rollbackToZero(t)
		return
	}
	tag := d.tags[d.rng.IntN(len(d.tags))]
	d.logf("rollback to tag %s", tag.name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, _, err := client.RollbackTo(ctx, d.client, tag.name, 0, sidecarpb.SetMode_SET_MODE_SYNC, "differential")
	if status.Code(err) == codes.Unavailable {
		d.logf("  refused while the device reconnects: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("step %d: rollback to tag %s: %v", len(d.log), tag.name, err)
	}
	if r.GetRestored().GetUnchanged() {
		d.counts["rollback to a tag: nothing to change"]++
	} else {
		d.counts["rollback to a tag"]++
		d.changes = append(d.changes, d.model)
	}
	d.model = tag.model
	d.expect(t, "rollback to tag "+tag.name, 0)
}

// rollbackToZero goes back to point 0, before the journal's first change:
// with a baseline (proposal 1) that is refused with FAILED_PRECONDITION
// naming the tag baseline, and nothing changes; without one the device
// gets its startup configuration back (the before-images read from it).
func (d *diffRun) rollbackToZero(t *testing.T) {
	t.Helper()
	d.logf("rollback to point 0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, _, err := client.RollbackTo(ctx, d.client, "", 0, sidecarpb.SetMode_SET_MODE_SYNC, "differential")
	if status.Code(err) == codes.Unavailable {
		d.logf("  refused while the device reconnects: %v", err)
		return
	}
	if d.h.baselineFlag && !d.baselineOff {
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "baseline") {
			t.Fatalf("step %d: rollback to point 0 with a baseline: %v; want FAILED_PRECONDITION naming the tag baseline", len(d.log), err)
		}
		d.counts["rollback to point 0 refused (baseline)"]++
		d.expect(t, "refused rollback to point 0", 0)
		return
	}
	if err != nil {
		t.Fatalf("step %d: rollback to point 0: %v", len(d.log), err)
	}
	if r.GetRestored().GetUnchanged() {
		d.counts["rollback to point 0: nothing to change"]++
	} else {
		d.counts["rollback to point 0"]++
		d.changes = append(d.changes, d.model)
	}
	d.model = d.startup
	d.expect(t, "rollback to point 0", 0)
}

// dryRun sends a random Set as a dry run: nothing may change.
func (d *diffRun) dryRun(t *testing.T) {
	t.Helper()
	req, _, lists := d.randomSet(t)
	d.logf("dry run %s", showSet(req))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.DryRun(ctx, d.client, req)
	switch {
	case err == nil:
		d.counts["dry run"]++
	case status.Code(err) == codes.FailedPrecondition && lists && !d.withYANG && strings.Contains(err.Error(), "--yang"):
		d.counts["set refused: JSON list without --yang"]++
	default:
		t.Fatalf("step %d: dry run %s: %v", len(d.log), showSet(req), err)
	}
	d.expect(t, "dry run", 0)
}

// invalidSet sends a Set the device rejects: the client gets the device's
// error and nothing changes.
func (d *diffRun) invalidSet(t *testing.T) {
	t.Helper()
	intf := d.intf()
	req := &gpb.SetRequest{Update: []*gpb.Update{
		{Path: diffPath(t, "/system/config/hostname"), Val: strTV("never")},
		{Path: diffPath(t, "/interfaces/interface[name="+intf+"]/config/mtu"), Val: strTV("not a number")},
	}}
	d.logf("invalid set %s", showSet(req))
	err := d.send(req)
	if code := status.Code(err); code != codes.InvalidArgument && code != codes.NotFound {
		t.Fatalf("step %d: a Set the device must reject: %v, want the device's INVALID_ARGUMENT", len(d.log), err)
	}
	d.counts["set rejected by the device"]++
	d.expect(t, "rejected set", 0)
}

// send sends a Set through the sidecar as a client would: refused with
// UNAVAILABLE while the sidecar reconnects to the device (nothing
// journaled), it is sent again, for up to 20 s.
func (d *diffRun) send(req *gpb.SetRequest) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := d.client.Set(ctx, req)
		cancel()
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "nothing was journaled") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rollback rolls back the newest change in effect.
func (d *diffRun) rollback(t *testing.T) {
	t.Helper()
	d.logf("rollback of the newest change (%d in effect)", len(d.changes))
	err := d.send(&gpb.SetRequest{Extension: []*gnmi_ext.Extension{rollbackExt(0)}})
	if len(d.changes) == 0 {
		// Nothing in effect but (with a baseline) the baseline, which
		// changed nothing on the device and cannot be rolled back.
		if c := status.Code(err); c != codes.NotFound && c != codes.FailedPrecondition {
			t.Fatalf("step %d: rollback with nothing in effect: %v, want NOT_FOUND (or FAILED_PRECONDITION: the baseline)", len(d.log), err)
		}
		d.expect(t, "refused rollback", 0)
		return
	}
	if err != nil {
		t.Fatalf("step %d: rollback: %v", len(d.log), err)
	}
	d.counts["rollback"]++
	d.model = d.changes[len(d.changes)-1]
	d.changes = d.changes[:len(d.changes)-1]
	d.expect(t, "rollback", 0)
}

// commitConfirmed sends a Set as a commit-confirmed and lets it expire (it
// is rolled back) or confirms it.
func (d *diffRun) commitConfirmed(t *testing.T) {
	t.Helper()
	req, next, lists := d.randomSet(t)
	id := fmt.Sprintf("c%d", len(d.log))
	req.Extension = []*gnmi_ext.Extension{commitFor(id, 300*time.Millisecond)}
	expire := d.rng.IntN(2) == 0
	d.logf("commit-confirmed %s (%s)", showSet(req), map[bool]string{true: "left to expire", false: "confirmed"}[expire])
	err := d.send(req)
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition && lists && !d.withYANG && strings.Contains(err.Error(), "--yang") {
			d.counts["set refused: JSON list without --yang"]++
			return
		}
		t.Fatalf("step %d: commit-confirmed Set: %v", len(d.log), err)
	}
	before := d.model
	d.model = next
	d.expect(t, "commit-confirmed set", 0)
	if expire {
		d.counts["commit-confirmed expired"]++
		d.model = before
		d.expect(t, "commit-confirmed expiry", 10*time.Second)
		// The journal's commit record is gone once the rollback is
		// applied; the next Set waits until then.
		// A confirm with another id: while a commit is outstanding it is
		// refused as INVALID_ARGUMENT, once none is as FAILED_PRECONDITION.
		poll(t, 10*time.Second, "the expired commit to be rolled back", func() (bool, string) {
			_, err := d.client.Set(context.Background(), &gpb.SetRequest{Extension: []*gnmi_ext.Extension{commitAction("not-"+id, confirmAction)}})
			return status.Code(err) == codes.FailedPrecondition, fmt.Sprint(err)
		})
		return
	}
	_, err = d.client.Set(context.Background(), &gpb.SetRequest{Extension: []*gnmi_ext.Extension{commitAction(id, confirmAction)}})
	if err != nil {
		t.Fatalf("step %d: confirm: %v", len(d.log), err)
	}
	d.counts["commit-confirmed confirmed"]++
	d.changes = append(d.changes, before)
	d.expect(t, "confirmed", 0)
}

const confirmAction = "confirm"

func commitAction(id, action string) *gnmi_ext.Extension {
	c := &gnmi_ext.Commit{Id: id}
	switch action {
	case confirmAction:
		c.Action = &gnmi_ext.Commit_Confirm{Confirm: &gnmi_ext.CommitConfirm{}}
	}
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
}

// expect checks that the device holds what the model says, within wait
// (0: now, with a few quick retries for what the device shows a moment
// late).
func (d *diffRun) expect(t *testing.T, what string, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(max(wait, 200*time.Millisecond))
	for {
		got, err := readDevice(d.dev.client)
		if d.dev.refusesGetConfig {
			got, err = readDeviceAs(d.dev.client, gpb.GetRequest_ALL)
		}
		diff := ""
		if err == nil {
			diff = d.model.diff(got)
			if diff == "" {
				d.countPreExisting()
				return
			}
		} else {
			diff = err.Error()
		}
		if time.Now().After(deadline) {
			t.Errorf("step %d (%s): the device differs from the model:\n%s", len(d.log), what, diff)
			d.dumpJournal(t)
			t.FailNow()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countPreExisting counts the leaves of the startup configuration the
// model (and so the device, just checked) holds with their startup value:
// never changed through the sidecar, or restored.
func (d *diffRun) countPreExisting() {
	if d.startup == nil {
		return
	}
	for p, v := range d.startup.leaves {
		if d.model.leaves[p] == v {
			d.counts[countPreChecked]++
		}
	}
}

// atRest reports whether a sidecar's journal is at rest, from its
// introspection tree: the newest proposal finished (change, and rollback if
// one was proposed; proposals finish in index order) and no rollback under
// way.
func atRest(c gpb.GNMIClient) (bool, string) {
	get := func(path string) (map[string]*gpb.TypedValue, error) {
		p, err := ygot.StringToStructuredPath(path)
		if err != nil {
			return nil, err
		}
		p.Origin = "gnmi-sidecar"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{p}})
		if err != nil {
			return nil, err
		}
		out := map[string]*gpb.TypedValue{}
		for _, n := range resp.GetNotification() {
			for _, u := range n.GetUpdate() {
				elems := u.GetPath().GetElem()
				out[elems[len(elems)-1].GetName()] = u.GetVal()
			}
		}
		return out, nil
	}
	cfg, err := get("/configuration/state")
	if err != nil {
		return false, err.Error()
	}
	if rb, ok := cfg["rolling-back"]; ok {
		return false, fmt.Sprintf("rollback of proposal %d under way", rb.GetUintVal())
	}
	last := cfg["last-index"].GetUintVal()
	if last == 0 {
		return true, ""
	}
	st, err := get(fmt.Sprintf("/proposals/proposal[index=%d]/state", last))
	if err != nil {
		return false, err.Error()
	}
	finished := func(leaf string) bool {
		switch st[leaf].GetStringVal() {
		case "COMPLETE", "ABORTED", "FAILED":
			return true
		}
		return false
	}
	done := finished("commit-status") && finished("apply-status") &&
		(st["phase"].GetStringVal() != "ROLLBACK" || finished("rollback-commit-status") && finished("rollback-apply-status"))
	return done, fmt.Sprintf("proposal %d: %v", last, st)
}

// dumpJournal logs what the journal holds, to explain a failure: the
// sidecar is killed first (the journal takes one process).
func (d *diffRun) dumpJournal(t *testing.T) {
	if d.sidecar == nil {
		return // not started yet
	}
	_ = d.sidecar.cmd.Process.Signal(syscall.SIGKILL)
	<-d.sidecar.done
	proposals, applied := readJournal(t, d.journal)
	var b strings.Builder
	fmt.Fprintf(&b, "applied values:\n")
	for _, pv := range applied {
		fmt.Fprintf(&b, "\t%s\n", showPV(pv))
	}
	for _, p := range proposals[max(0, len(proposals)-4):] {
		fmt.Fprintf(&b, "proposal %d: %v, commit %v apply %v; rollback %v/%v %v\n", p.GetIndex(), p.GetPhase(),
			p.GetChange().GetCommit(), p.GetChange().GetApply(), p.GetRollback().GetCommit(), p.GetRollback().GetApply(), p.GetChange().GetError())
		for _, pv := range p.GetChange().GetValues() {
			fmt.Fprintf(&b, "\tchange   %s\n", showPV(pv))
		}
		for _, pv := range p.GetRollback().GetValues() {
			fmt.Fprintf(&b, "\trollback %s\n", showPV(pv))
		}
	}
	t.Log(b.String())
}

func showPV(pv *journal.PathValue) string {
	s := gnmipath.String(pv.GetPath())
	if pv.GetDeleted() {
		return fmt.Sprintf("%s deleted @%d", s, pv.GetIndex())
	}
	return fmt.Sprintf("%s = %s @%d", s, strings.Join(strings.Fields(pv.GetValue().String()), " "), pv.GetIndex())
}

// finish stops the sidecar cleanly and checks its trace and journal: the
// docs/design.md §3 properties, and the applied values against the device.
func (d *diffRun) finish(t *testing.T) {
	t.Helper()
	// After a SIGKILL the sidecar sends again what it may not have
	// recorded; the device may hold it already, so the model's check
	// passed: wait until the journal is at rest.
	poll(t, 30*time.Second, "the journal to be at rest", func() (bool, string) { return atRest(d.client) })
	if err := d.sidecar.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if exited, err := d.sidecar.exited(20 * time.Second); !exited || err != nil {
		t.Fatalf("the sidecar did not stop cleanly: exited %v, %v", exited, err)
	}
	proposals, applied := readJournal(t, d.journal)
	opts := trace.VerifyOptions{Quiescent: true, Applied: applied, Proposals: proposals}
	// With --baseline off the journal holds only what the Sets touched: the
	// startup leaves no Set named are the device's own (the model, checked
	// after every step, holds them).
	opts.DeviceOwnsUnjournaled = d.baselineOff && d.h.baselineFlag
	if d.dev.admin != "" {
		cfg, err := deviceConfig(t, d.dev.admin)
		if err != nil {
			t.Fatal(err)
		}
		opts.Device = cfg
	}
	trace.Verify(t, d.trace, opts)
}

// --- the model ---

// diffModel is what the device must hold, in the test's own terms: leaf
// path → value (scalars as text, a leaf-list as its elements in brackets),
// and the list entries that exist. Key leaves are the entries'.
type diffModel struct {
	leaves  map[string]string
	entries map[string]bool
}

func newDiffModel() *diffModel {
	return &diffModel{leaves: map[string]string{}, entries: map[string]bool{}}
}

func (m *diffModel) clone() *diffModel {
	return &diffModel{leaves: maps.Clone(m.leaves), entries: maps.Clone(m.entries)}
}

// diffLists are the lists of the model's part of the schema and their key.
var diffLists = map[string]string{"interface": "name", "subinterface": "index"}

// under reports whether path p is at or under q (a list path without keys
// covers its entries).
func under(p, q string) bool {
	return q == "/" || p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(p, q+"[")
}

// delete removes everything at or under p.
func (m *diffModel) delete(p string) {
	for k := range m.leaves {
		if under(k, p) {
			delete(m.leaves, k)
		}
	}
	for k := range m.entries {
		if under(k, p) {
			delete(m.entries, k)
		}
	}
}

// write merges value v at path p: a map's members below p, a list's
// entries by key, anything else a leaf (or a whole leaf-list). Every list
// entry on the way comes to exist.
func (m *diffModel) write(p string, v any) {
	for n := 0; n < len(p); n++ {
		if p[n] == ']' && (n+1 == len(p) || p[n+1] == '/') {
			m.entries[p[:n+1]] = true
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for name, member := range x {
			if key, isList := diffLists[name]; isList {
				for _, e := range member.([]map[string]any) {
					m.write(fmt.Sprintf("%s/%s[%s=%s]", strings.TrimSuffix(p, "/"), name, key, canonical(e[key])), e)
				}
				continue
			}
			if strings.HasSuffix(p, "]") && keyOf(p) == name {
				continue // the entry's key
			}
			m.write(strings.TrimSuffix(p, "/")+"/"+name, member)
		}
	default:
		if isKeyMirror(p) {
			return
		}
		m.leaves[p] = canonical(v)
	}
}

// keyOf returns the key name of the list entry at the end of p.
func keyOf(p string) string {
	i := strings.LastIndexByte(p, '[')
	return p[i+1 : strings.IndexByte(p[i:], '=')+i]
}

// isKeyMirror reports whether p is an entry's config copy of its key
// (OpenConfig's …/config/name), which the device keeps with the entry.
func isKeyMirror(p string) bool {
	for list, key := range diffLists {
		if strings.HasSuffix(p, "/config/"+key) && strings.Contains(p, "/"+list+"[") &&
			strings.HasSuffix(strings.TrimSuffix(p, "/config/"+key), "]") {
			return true
		}
	}
	return false
}

func canonical(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case uint64:
		return strconv.FormatUint(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	case []string:
		return "[" + strings.Join(x, ",") + "]"
	case []any:
		parts := make([]string, len(x))
		for n, e := range x {
			parts[n] = canonical(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%v", v)
}

// diff describes how got (read from the device) differs from m, or "".
func (m *diffModel) diff(got *diffModel) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m.leaves)) {
		if g, ok := got.leaves[k]; !ok {
			out = append(out, fmt.Sprintf("  %s: missing, want %q", k, m.leaves[k]))
		} else if g != m.leaves[k] {
			out = append(out, fmt.Sprintf("  %s: %q, want %q", k, g, m.leaves[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got.leaves)) {
		if _, ok := m.leaves[k]; !ok {
			out = append(out, fmt.Sprintf("  %s: %q, want none", k, got.leaves[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.entries)) {
		if !got.entries[k] {
			out = append(out, fmt.Sprintf("  %s: no such entry, want it", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got.entries)) {
		if !m.entries[k] {
			out = append(out, fmt.Sprintf("  %s: an entry, want none", k))
		}
	}
	return strings.Join(out, "\n")
}

// readDevice reads /system and /interfaces from the device (JSON_IETF,
// configuration only) into the model's terms.
func readDevice(c gpb.GNMIClient) (*diffModel, error) {
	return readDeviceAs(c, gpb.GetRequest_CONFIG)
}

// readDeviceAs is readDevice with Gets of data type dt.
func readDeviceAs(c gpb.GNMIClient, dt gpb.GetRequest_DataType) (*diffModel, error) {
	out := newDiffModel()
	for _, top := range []string{"system", "interfaces"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: top}}}},
			Encoding: gpb.Encoding_JSON_IETF, Type: dt})
		cancel()
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("Get /%s from the device: %v", top, err)
		}
		for _, n := range resp.GetNotification() {
			for _, u := range n.GetUpdate() {
				dec := json.NewDecoder(bytes.NewReader(u.GetVal().GetJsonIetfVal()))
				dec.UseNumber()
				var v any
				if err := dec.Decode(&v); err != nil {
					return nil, fmt.Errorf("Get /%s: %v", top, err)
				}
				if err := out.read("/"+top, v); err != nil {
					return nil, err
				}
			}
		}
	}
	// What the test does not write (the device's own config) is not its
	// business.
	for k := range out.leaves {
		if !inUniverse(k) {
			delete(out.leaves, k)
		}
	}
	return out, nil
}

// read flattens JSON read from the device at path p into m.
func (m *diffModel) read(p string, v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, member := range x {
			name := k[strings.LastIndexByte(k, ':')+1:]
			child := strings.TrimSuffix(p, "/") + "/" + name
			if key, isList := diffLists[name]; isList {
				entries, ok := member.([]any)
				if !ok {
					return fmt.Errorf("%s: a list, not %T", child, member)
				}
				for _, e := range entries {
					obj, _ := e.(map[string]any)
					kv, ok := obj[key]
					if !ok {
						return fmt.Errorf("%s: an entry without its key %s", child, key)
					}
					entry := fmt.Sprintf("%s[%s=%s]", child, key, canonical(kv))
					m.entries[entry] = true
					if err := m.read(entry, obj); err != nil {
						return err
					}
				}
				continue
			}
			if strings.HasSuffix(p, "]") && keyOf(p) == name {
				continue
			}
			if err := m.read(child, member); err != nil {
				return err
			}
		}
	default:
		if !isKeyMirror(p) {
			m.leaves[p] = canonical(v)
		}
	}
	return nil
}

// inUniverse reports whether a leaf path is one the test writes.
func inUniverse(p string) bool {
	switch {
	case strings.HasPrefix(p, "/system/config/"), p == "/system/dns/config/search":
		return true
	case strings.HasPrefix(p, "/interfaces/interface["):
		return strings.Contains(p, "/config/")
	}
	return false
}

// --- random Sets ---

var (
	diffHostLeaves = []string{"hostname", "domain-name", "login-banner", "motd-banner"}
	diffIntfs      = []string{"eth0", "eth1", "eth2"}
)

func (d *diffRun) intf() string { return diffIntfs[d.rng.IntN(len(diffIntfs))] }

// randomSet returns a Set of one to three operations, the model after it,
// and whether it holds a JSON list (which a sidecar without --yang may
// refuse).
func (d *diffRun) randomSet(t *testing.T) (*gpb.SetRequest, *diffModel, bool) {
	req := &gpb.SetRequest{}
	next := d.model.clone()
	lists := false
	type op struct {
		kind string // delete, replace, update
		path string
		val  any
	}
	var ops []op
	for range 1 + d.rng.IntN(3) {
		path, val := d.randomTarget()
		switch n := d.rng.IntN(12); {
		case n < 2 && deletable(path):
			ops = append(ops, op{"delete", path, nil})
		case n < 4:
			ops = append(ops, op{"replace", path, val})
		case n < 5 && path != "/" && d.h.unionReplace:
			ops = append(ops, op{"union_replace", path, val})
		default:
			ops = append(ops, op{"update", path, val})
		}
	}
	// gNMI order: deletes, replaces, union_replaces (their union replaces
	// the data at each of their paths: every path cleared, then every
	// value written), updates; the model applies them so.
	for _, kind := range []string{"delete", "replace", "union_replace", "update"} {
		if kind == "union_replace" {
			for _, o := range ops {
				if o.kind == kind {
					next.delete(o.path)
				}
			}
		}
		for _, o := range ops {
			if o.kind != kind {
				continue
			}
			if kind == "delete" || kind == "replace" {
				next.delete(o.path)
			}
			if kind == "delete" {
				req.Delete = append(req.Delete, diffPath(t, o.path))
				continue
			}
			next.write(o.path, o.val)
			tv, hasList := d.encode(o.path, o.val)
			lists = lists || hasList
			u := &gpb.Update{Path: diffPath(t, o.path), Val: tv}
			switch kind {
			case "replace":
				req.Replace = append(req.Replace, u)
			case "union_replace":
				req.UnionReplace = append(req.UnionReplace, u)
			default:
				req.Update = append(req.Update, u)
			}
		}
	}
	return req, next, lists
}

// deletable reports whether a Delete of p is one the test makes: not an
// entry's config container alone (OpenConfig keeps the key there).
func deletable(p string) bool {
	return !strings.HasSuffix(p, "]/config")
}

// randomTarget returns a random path at any level of the model's part of
// the schema and a random value for it.
func (d *diffRun) randomTarget() (string, any) {
	intf := d.intf()
	entry := "/interfaces/interface[name=" + intf + "]"
	sub := d.rng.IntN(2)
	subEntry := fmt.Sprintf("%s/subinterfaces/subinterface[index=%d]", entry, sub)
	switch d.rng.IntN(16) {
	case 0:
		return "/", map[string]any{"system": d.system(), "interfaces": d.interfaces()}
	case 1:
		return "/system", d.system()
	case 2, 3:
		return "/system/config", d.systemConfig()
	case 4:
		leaf := diffHostLeaves[d.rng.IntN(len(diffHostLeaves))]
		return "/system/config/" + leaf, d.word()
	case 5:
		return "/system/dns/config/search", d.search()
	case 6:
		return "/interfaces", d.interfaces()
	case 7, 8:
		return entry, d.interfaceEntry(intf)
	case 9:
		return entry + "/config", d.interfaceConfig(intf)
	case 10:
		return entry + "/config/description", d.word()
	case 11:
		return entry + "/config/mtu", uint64(1280 + d.rng.IntN(8000))
	case 12:
		return entry + "/config/enabled", d.rng.IntN(2) == 0
	case 13:
		return entry + "/subinterfaces", map[string]any{"subinterface": []map[string]any{d.subinterface(sub)}}
	case 14:
		return subEntry, d.subinterface(sub)
	default:
		return subEntry + "/config/description", d.word()
	}
}

func (d *diffRun) word() string {
	return fmt.Sprintf("%s-%d", []string{"core", "edge", "lab", "spine", "leaf"}[d.rng.IntN(5)], d.rng.IntN(100))
}

func (d *diffRun) search() []string {
	out := make([]string, 1+d.rng.IntN(3))
	for n := range out {
		out[n] = fmt.Sprintf("d%d.example.net", d.rng.IntN(10))
	}
	return out
}

// some returns a random non-empty subset of m's members.
func (d *diffRun) some(m map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if d.rng.IntN(2) == 0 {
			out[k] = m[k]
		}
	}
	if len(out) == 0 {
		k := slices.Sorted(maps.Keys(m))[d.rng.IntN(len(m))]
		out[k] = m[k]
	}
	return out
}

func (d *diffRun) systemConfig() map[string]any {
	all := map[string]any{}
	for _, l := range diffHostLeaves {
		all[l] = d.word()
	}
	return d.some(all)
}

func (d *diffRun) system() map[string]any {
	return d.some(map[string]any{
		"config": d.systemConfig(),
		"dns":    map[string]any{"config": map[string]any{"search": d.search()}},
	})
}

func (d *diffRun) interfaceConfig(intf string) map[string]any {
	cfg := d.some(map[string]any{"description": d.word(), "mtu": uint64(1280 + d.rng.IntN(8000)), "enabled": d.rng.IntN(2) == 0})
	cfg["name"] = intf
	return cfg
}

func (d *diffRun) subinterface(k int) map[string]any {
	e := map[string]any{"index": uint64(k), "config": map[string]any{"index": uint64(k)}}
	if d.rng.IntN(3) > 0 {
		e["config"].(map[string]any)["description"] = d.word()
	}
	return e
}

func (d *diffRun) interfaceEntry(intf string) map[string]any {
	e := map[string]any{"name": intf}
	if d.rng.IntN(4) > 0 {
		e["config"] = d.interfaceConfig(intf)
	}
	if d.rng.IntN(3) == 0 {
		var subs []map[string]any
		for k := range 1 + d.rng.IntN(2) {
			subs = append(subs, d.subinterface(k))
		}
		e["subinterfaces"] = map[string]any{"subinterface": subs}
	}
	return e
}

func (d *diffRun) interfaces() map[string]any {
	var entries []map[string]any
	for _, intf := range diffIntfs {
		if d.rng.IntN(2) == 0 {
			entries = append(entries, d.interfaceEntry(intf))
		}
	}
	if len(entries) == 0 {
		entries = append(entries, d.interfaceEntry(d.intf()))
	}
	return map[string]any{"interface": entries}
}

// encode renders a value as a client would send it: a scalar leaf as a
// TypedValue or (if allowed) JSON, anything else as JSON or JSON_IETF, the
// latter sometimes with module-prefixed member names. It reports whether
// the value holds a JSON list.
func (d *diffRun) encode(path string, v any) (*gpb.TypedValue, bool) {
	switch x := v.(type) {
	case string, uint64, bool, []string:
		if !*diffJSONLeaves || d.rng.IntN(2) == 0 {
			return scalarTV(x), false
		}
	}
	ietf := d.rng.IntN(3) > 0
	rendered := v
	if ietf && d.rng.IntN(2) == 0 {
		rendered = prefixed(path, v)
	}
	b, err := json.Marshal(rendered)
	if err != nil {
		panic(err) // maps, slices and scalars always marshal
	}
	hasList := bytes.Contains(b, []byte(`"interface"`)) || bytes.Contains(b, []byte(`"subinterface"`)) ||
		bytes.Contains(b, []byte(`:interface"`)) || bytes.Contains(b, []byte(`:subinterface"`))
	if ietf {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}, hasList
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}, hasList
}

// prefixed adds module prefixes to the top-level members of v, as RFC 7951
// has them where the namespace changes: at the root, and (optional there,
// as gNMI clients send them) at /system's and /interfaces' own members.
func prefixed(path string, v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	module := map[string]string{"/": "", "/system": "openconfig-system", "/system/config": "openconfig-system",
		"/interfaces": "openconfig-interfaces"}[path]
	out := map[string]any{}
	for k, x := range m {
		switch {
		case path == "/":
			out[map[string]string{"system": "openconfig-system", "interfaces": "openconfig-interfaces"}[k]+":"+k] = x
		case module != "":
			out[module+":"+k] = x
		default:
			out[k] = x
		}
	}
	return out
}

func scalarTV(v any) *gpb.TypedValue {
	switch x := v.(type) {
	case string:
		return strTV(x)
	case uint64:
		return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: x}}
	case bool:
		return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: x}}
	case []string:
		ll := &gpb.ScalarArray{}
		for _, s := range x {
			ll.Element = append(ll.Element, strTV(s))
		}
		return &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: ll}}
	}
	panic(fmt.Sprintf("no scalar for %T", v))
}

func strTV(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

func diffPath(t *testing.T, s string) *gpb.Path {
	if s == "/" {
		return &gpb.Path{}
	}
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	return p
}

// showSet renders a SetRequest on one line for the step log.
func showSet(req *gpb.SetRequest) string {
	var parts []string
	ps := func(p *gpb.Path) string {
		s, err := ygot.PathToString(p)
		if err != nil || s == "" {
			return "/"
		}
		return s
	}
	val := func(v *gpb.TypedValue) string {
		switch x := v.GetValue().(type) {
		case *gpb.TypedValue_JsonVal:
			return "json " + string(x.JsonVal)
		case *gpb.TypedValue_JsonIetfVal:
			return "json_ietf " + string(x.JsonIetfVal)
		}
		return strings.Join(strings.Fields(v.String()), " ")
	}
	for _, p := range req.GetDelete() {
		parts = append(parts, "delete "+ps(p))
	}
	for _, u := range req.GetReplace() {
		parts = append(parts, "replace "+ps(u.GetPath())+" = "+val(u.GetVal()))
	}
	for _, u := range req.GetUnionReplace() {
		parts = append(parts, "union_replace "+ps(u.GetPath())+" = "+val(u.GetVal()))
	}
	for _, u := range req.GetUpdate() {
		parts = append(parts, "update "+ps(u.GetPath())+" = "+val(u.GetVal()))
	}
	return strings.Join(parts, "; ")
}
