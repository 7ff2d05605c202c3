package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed/relay"
)

var (
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaos: the seed of its faults and clients (0: a random one, printed)")
	chaosDuration = flag.Duration("chaos.duration", 45*time.Second, "TestChaos: how long faults are injected (make chaos: 10m)")
	chaosClients  = flag.Int("chaos.clients", 6, "TestChaos: concurrent clients")
	chaosReport   = flag.Bool("chaos.report", false, "TestChaos: also print the counts on stdout (make chaos)")
	chaosOnly     = flag.String("chaos.faults", "", "TestChaos: inject only the faults whose names contain one of these comma-separated words (empty: all), e.g. 'retryable,cancel storm'")
)

// The faults TestChaos injects.
const (
	faultKillSidecar   = "SIGKILL sidecar"
	faultRestartDevice = "restart device (empty)"
	faultDrop          = "device drops connections"
	faultReject        = "device rejects Sets"
	faultHang          = "device hangs a Set"
	faultCut           = "network cut"
	faultPartition     = "network partition"
	faultBlackHole     = "network black hole"
	faultLatency       = "network latency"
	faultRefusePath    = "device refuses a path (rollbacks, re-pushes)"
	faultSecondSidecar = "a second sidecar on the device"
)

// chaosFaults are the faults with their weights.
var chaosFaults = []struct {
	name   string
	weight int
}{
	{faultKillSidecar, 3}, {faultRestartDevice, 2}, {faultDrop, 2}, {faultReject, 3}, {faultHang, 1},
	{faultCut, 2}, {faultPartition, 2}, {faultBlackHole, 2}, {faultLatency, 1},
	{faultRefusePath, 2}, {faultSecondSidecar, 1},
	{faultRetryable, 3}, {faultHangPath, 1}, {faultCancelStorm, 1},
}

// aroundFaults are the faults of the system around the sidecar: a Set
// answered while one lasts, or within recoveryGrace after, may fail (see
// checkAnswers). The device's faults of one Set are not among them: only
// the Sets they meet may fail.
var aroundFaults = map[string]bool{
	faultKillSidecar: true, faultRestartDevice: true, faultDrop: true, faultCut: true, faultPartition: true,
	faultBlackHole: true, faultLatency: true, faultRefusePath: true, faultSecondSidecar: true,
}

// rejectCodes are the codes the device rejects Sets with: definitive
// rejections (the Set fails) and transient ones (it is retried).
var rejectCodes = []string{"INVALID_ARGUMENT", "FAILED_PRECONDITION", "ABORTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}

// chaos is the running system of TestChaos: a gnmi-testbed, the network
// between it and the sidecar (a relay), the sidecar (killed and restarted
// on the same journal), and a relay in front of the sidecar so that
// clients keep one address across its restarts.
type chaos struct {
	s        *stack
	rng      *rand.Rand
	south    *relay.Relay // sidecar → device
	north    *relay.Relay // clients → sidecar (no faults)
	started  []*process   // every process started
	faults   map[string]int
	restarts int
	// windows are when the faults around the sidecar may make Sets fail.
	windows []faultWindow
	// storms are the Sets of the cancel storms.
	storms []setOutcome
}

// TestChaos runs real gnmi-sidecar and gnmi-testbed processes while
// clients send Sets and rollbacks and, at random (seeded), the sidecar is
// killed with SIGKILL and restarted on its journal, the device restarts
// empty, drops its connections, rejects and hangs Sets, and the network
// between them is cut, partitioned, black-holed or slowed. After healing
// and quiescence: every acknowledged Set is on the device in the right
// order (rollbacks considered), the device holds the journal's applied
// configuration, the trace checks (lines lost to SIGKILLs recovered from
// the journal), and no process is left behind.
//
// make test runs it for 45 s (-chaos.duration), make chaos for longer.
// A failure prints the command that replays its seed.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	replay := fmt.Sprintf("go test -tags devtools -race ./cmd/gnmi-sidecar -run 'TestChaos$' -chaos.seed=%d -chaos.duration=%v -chaos.clients=%d",
		seed, *chaosDuration, *chaosClients)
	if *chaosOnly != "" {
		replay += fmt.Sprintf(" -chaos.faults=%q", *chaosOnly)
	}
	t.Logf("chaos seed %d; replay: %s", seed, replay)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos FAILED with seed %d; replay with:\n\t%s", seed, replay)
			if *chaosReport {
				fmt.Printf("chaos FAILED with seed %d; replay with:\n\t%s\n", seed, replay)
			}
		}
	})
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)

	c := startChaos(t, rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)))
	mon := startMonitor(t, c.s.devClient, true)
	setLog := startSetLogCollector(t, c.s.devAdmin)
	writers, total, stopWriters := startWriters(t, c.north.Addr(), *chaosClients, 0.05, seed)

	start := time.Now()
	for time.Since(start) < *chaosDuration {
		c.sleep(300*time.Millisecond, 2500*time.Millisecond)
		c.inject(t)
	}
	t.Logf("faults over after %v: %v; %d Sets acknowledged", time.Since(start).Round(time.Second), c.faults, total.Load())
	c.heal(t)
	// The clients carry on for a while on the healed system.
	from := make([]int64, len(writers))
	for k, w := range writers {
		from[k] = w.nacked.Load()
	}
	poll(t, 2*time.Minute, "3 acknowledged Sets per client after healing", func() (bool, string) {
		for k, w := range writers {
			if got := w.nacked.Load() - from[k]; got < 3 {
				return false, fmt.Sprintf("client %d: %d", w.k, got)
			}
		}
		return true, ""
	})
	stopWriters()

	// Quiescence: a SYNC Set acknowledged after every other one means every
	// earlier proposal is finished (applies go in index order).
	fence := dial(t, c.north.Addr())
	poll(t, 2*time.Minute, "a fence Set to be acknowledged", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_, err := setDesc(ctx, fence, "eth99", "fence")
		return err == nil, fmt.Sprint(err)
	})
	mon.waitFor(t, "eth99", "fence", 30*time.Second)
	// Paths the device refused (rollbacks, re-pushes) are out of sync until
	// resolved: with the faults gone, a retry settles every one of them.
	retry := runOpsAt(t, c.s.sidecar.addr, "resolve", "retry")
	if retry.code != 0 {
		t.Errorf("resolve retry after healing: exit %d: %s%s", retry.code, retry.stdout, retry.stderr)
	}
	var st StatusView
	if err := json.Unmarshal([]byte(mustOps(t, c.s.sidecar.addr, "status", "--output", "json")), &struct {
		Configuration *ConfigurationState `json:"configuration"`
		Device        *DeviceState        `json:"device"`
	}{&st.Configuration, &st.Device}); err != nil {
		t.Fatal(err)
	}
	if st.Configuration.OutOfSync != 0 || st.Device.Fenced {
		t.Errorf("after healing and a retry: %d paths out of sync, fenced %v; want none and false", st.Configuration.OutOfSync, st.Device.Fenced)
	}
	events := mon.snapshot()

	// Every acknowledged change is on the device, in order.
	var sets, rollbacks opCounts
	verified := 0
	for _, w := range writers {
		sets.add(w.sets)
		rollbacks.add(w.rollbacks)
		if w.checkFinal(t, "device", c.s.devClient) {
			verified += len(w.acked)
		}
		w.checkFinal(t, "sidecar", fence)
		w.checkEvents(t, events)
	}
	cfg, err := deviceConfig(t, c.s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}

	// Every client was answered in time, and every failure is explained.
	byValue, records := setLog.final(t)
	var outcomes []setOutcome
	for _, w := range writers {
		outcomes = append(outcomes, w.outcomes...)
	}
	answers := checkAnswers(t, append(outcomes, c.storms...), byValue, c.windows)

	// The journal and the trace, once the sidecar stopped cleanly.
	c.s.stop(t)
	proposals, applied := readJournal(t, c.s.journalDir)
	for _, v := range trace.CheckDevice(applied, cfg) {
		t.Errorf("journal's applied values vs the device: %v", v)
	}
	r := trace.Verify(t, c.s.tracePath, trace.VerifyOptions{Quiescent: true, Applied: applied, Device: cfg, Proposals: proposals})

	// No process left behind.
	c.stopAll(t)
	c.checkNoLeaks(t, goroutines, fds)

	counts := []string{
		fmt.Sprintf("chaos seed %d, %v of faults, %d clients, %d sidecar restarts", seed, *chaosDuration, len(writers), c.restarts),
		"Sets: " + sets.String(),
		"rollbacks: " + rollbacks.String(),
		"faults: " + faultCounts(c.faults),
		fmt.Sprintf("verified: %d acknowledged Sets (%d rolled back) of %d clients on the device, %d device events checked, %d device subscriptions",
			verified, rollbacks.acked, len(writers), len(events), mon.streams),
		fmt.Sprintf("journal: %d proposals, %d applied values, the device's configuration; trace: %v", len(proposals), len(applied), r.Counts),
		"out of sync settled by the final retry: " + strings.TrimSpace(retry.stdout),
		fmt.Sprintf("answers: %v (device Set log: %d records; answer margin %v, recovery grace %v)", answers, records, answerMargin, recoveryGrace),
	}
	for _, l := range counts {
		t.Log(l)
		if *chaosReport {
			fmt.Println(l)
		}
	}
	if sets.acked == 0 {
		t.Error("no Set was acknowledged")
	}
}

func startChaos(t *testing.T, rng *rand.Rand) *chaos {
	t.Helper()
	// A short apply timeout: a hung or black-holed Set counts as a
	// transient failure within seconds.
	s := newStack(t, nil, []string{"--apply-timeout", "2s", "--log-level", "warn", "--master-arbitration"})
	c := &chaos{s: s, rng: rng, faults: map[string]int{}}
	c.started = append(c.started, s.dev)
	var err error
	if c.south, err = relay.New(s.dev.addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.south.Close() })
	if c.north, err = relay.New("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.north.Close() })
	s.target = c.south.Addr()
	c.startSidecar(t, true)
	return c
}

// startSidecar starts the sidecar (again) on a free port, in front of the
// southbound relay, and points the northbound relay at it.
func (c *chaos) startSidecar(t *testing.T, wait bool) {
	t.Helper()
	c.s.startSidecarOnly(t, "127.0.0.1:0")
	c.started = append(c.started, c.s.sidecar)
	c.north.SetTarget(c.s.sidecar.addr)
	if wait {
		c.s.waitSynced(t, time.Minute)
	}
}

// sleep sleeps a random time in [lo, hi).
func (c *chaos) sleep(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(c.rng.Int64N(int64(hi-lo))))
}

// inject injects one fault, chosen at random by weight.
func (c *chaos) inject(t *testing.T) {
	t.Helper()
	faults := chosenFaults()
	if len(faults) == 0 {
		t.Fatalf("-chaos.faults %q names no fault", *chaosOnly)
	}
	sum := 0
	for _, f := range faults {
		sum += f.weight
	}
	n := c.rng.IntN(sum)
	var name string
	for _, f := range faults {
		if n < f.weight {
			name = f.name
			break
		}
		n -= f.weight
	}
	c.faults[name]++
	if aroundFaults[name] {
		from := time.Now()
		defer func() {
			c.windows = append(c.windows, faultWindow{name: name, from: from, to: time.Now().Add(recoveryGrace)})
		}()
	}
	switch name {
	case faultKillSidecar:
		c.s.sidecar.kill(t)
		c.sleep(0, 500*time.Millisecond)
		c.startSidecar(t, false)
		c.restarts++
	case faultRestartDevice:
		c.admin(t, "/restart")
	case faultDrop:
		c.admin(t, "/faults/drop")
	case faultReject:
		code := rejectCodes[c.rng.IntN(len(rejectCodes))]
		c.admin(t, fmt.Sprintf("/faults/reject?n=%d&code=%s", 1+c.rng.IntN(3), code))
		c.faults[faultReject+" "+code]++
	case faultHang:
		c.admin(t, "/faults/hang")
	case faultCut:
		c.south.Cut()
	case faultPartition:
		c.south.Partition()
		c.sleep(200*time.Millisecond, 2*time.Second)
		c.south.Heal()
	case faultBlackHole:
		c.south.BlackHole()
		c.sleep(200*time.Millisecond, 3*time.Second)
		c.south.Heal()
	case faultLatency:
		c.south.SetLatency(time.Duration(1+c.rng.IntN(30)) * time.Millisecond)
		c.sleep(500*time.Millisecond, 3*time.Second)
		c.south.SetLatency(0)
	case faultRefusePath:
		// The device refuses one client's leaf for a while: its Sets fail,
		// a rollback of it ends refused (its path out of sync), and so
		// does a re-push, half the time, after a device restart.
		path := fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", 1+c.rng.IntN(*chaosClients))
		code := refuseCodes[c.rng.IntN(len(refuseCodes))]
		c.admin(t, "/faults/refuse?code="+code+"&path="+url.QueryEscape(path))
		if c.rng.IntN(2) == 0 {
			c.sleep(100*time.Millisecond, time.Second)
			c.admin(t, "/restart")
			c.faults[faultRefusePath+", device restarted"]++
		}
		c.sleep(500*time.Millisecond, 3*time.Second)
		c.admin(t, "/faults/clear")
	case faultSecondSidecar:
		if !c.secondSidecar(t) {
			c.faults[faultSecondSidecar+" (skipped: the sidecar was not synced under a term > 1)"]++
		}
	case faultRetryable:
		// One Set of one client's leaf is answered with a code that looks
		// transient: that client's Set may fail, no other.
		code := retryableCodes[c.rng.IntN(len(retryableCodes))]
		c.admin(t, "/faults/refuse?n=1&code="+code+"&path="+url.QueryEscape(c.clientLeaf()))
		c.faults[faultRetryable+" "+code]++
	case faultHangPath:
		// One Set of one client's leaf hangs until its context ends: past
		// the client's deadline, unless the sidecar gives up first.
		c.admin(t, "/faults/hang?path="+url.QueryEscape(c.clientLeaf()))
	case faultCancelStorm:
		c.storms = append(c.storms, c.cancelStorm(t, c.north.Addr(), 20, time.Duration(100+c.rng.IntN(200))*time.Millisecond, c.faults[name])...)
	}
}

// chosenFaults are chaosFaults, only those -chaos.faults names if given.
func chosenFaults() []struct {
	name   string
	weight int
} {
	if *chaosOnly == "" {
		return chaosFaults
	}
	var out []struct {
		name   string
		weight int
	}
	for _, f := range chaosFaults {
		for _, w := range strings.Split(*chaosOnly, ",") {
			if w = strings.TrimSpace(w); w != "" && strings.Contains(f.name, w) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// clientLeaf is a random client's leaf.
func (c *chaos) clientLeaf() string {
	return fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", 1+c.rng.IntN(*chaosClients))
}

// refuseCodes are the definitive codes of faultRefusePath.
var refuseCodes = []string{"INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND"}

// secondSidecar starts a second sidecar, with a journal of its own and
// --master-arbitration, on the device, while the chaos sidecar is master:
// it must find itself fenced at once (its election id, of term 1, is lower
// than the master's of a later term), refuse a Set with FAILED_PRECONDITION
// and write nothing (the writers' checks see any flap). It is then killed.
// It reports false, doing nothing, unless the chaos sidecar is synced under
// a term above 1 (at term 1, the random low halves decide).
func (c *chaos) secondSidecar(t *testing.T) bool {
	t.Helper()
	var v struct {
		Configuration struct {
			Status string `json:"status"`
		} `json:"configuration"`
		Device struct {
			Connected bool   `json:"connected"`
			Term      uint64 `json:"term"`
		} `json:"device"`
	}
	r := runOpsAt(t, c.s.sidecar.addr, "status", "--output", "json", "--timeout", "2s")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil ||
		!v.Device.Connected || v.Device.Term < 2 || v.Configuration.Status != "COMPLETE" {
		return false
	}
	dir := t.TempDir()
	second := startProcess(t, "gnmi-sidecar", c.s.sidecarBin, "serve", "--listen", "127.0.0.1:0",
		"--target", c.s.dev.addr, "--journal-dir", filepath.Join(dir, "journal"), "--metrics", "127.0.0.1:0",
		"--master-arbitration", "--log-level", "warn")
	c.started = append(c.started, second)
	defer second.kill(t)
	client := dial(t, second.addr)
	poll(t, 20*time.Second, "the second sidecar to report itself fenced", func() (bool, string) {
		r := runOpsAt(t, second.addr, "status", "--output", "json", "--timeout", "2s")
		return strings.Contains(r.stdout, `"fenced": true`), r.stdout + r.stderr
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := setDesc(ctx, client, "eth1", "from the second sidecar")
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "fenced") {
		t.Errorf("a Set through the fenced second sidecar: %v; want FAILED_PRECONDITION saying it is fenced", err)
	}
	return true
}

// admin posts to the device's admin endpoint.
func (c *chaos) admin(t *testing.T, path string) {
	t.Helper()
	postAdmin(t, c.s.devAdmin, path)
}

// heal ends every fault: the network, the device's armed faults; the
// sidecar is running.
func (c *chaos) heal(t *testing.T) {
	t.Helper()
	from := time.Now()
	defer func() {
		c.windows = append(c.windows, faultWindow{name: "healing", from: from, to: time.Now().Add(recoveryGrace)})
	}()
	c.south.Heal()
	c.south.SetLatency(0)
	c.admin(t, "/faults/clear")
	// A hang armed but not yet met is cleared; one that caught a Set ends
	// with that Set's timeout.
	c.s.waitSynced(t, 2*time.Minute)
}

// stopAll stops the device (the sidecar is stopped) and requires every
// process to have exited.
func (c *chaos) stopAll(t *testing.T) {
	t.Helper()
	if err := c.s.dev.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if exited, err := c.s.dev.exited(30 * time.Second); !exited || err != nil {
		t.Errorf("gnmi-testbed: exited %v, %v after SIGINT; want status 0", exited, err)
	}
	for _, p := range c.started {
		if exited, _ := p.exited(0); !exited {
			t.Errorf("%s (pid %d) still runs", p.name, p.cmd.Process.Pid)
		}
	}
	if err := c.south.Close(); err != nil {
		t.Error(err)
	}
	if err := c.north.Close(); err != nil {
		t.Error(err)
	}
}

// checkNoLeaks requires no child process of the test left (reaped or
// not), and the test process's goroutines and file descriptors back near
// where they were before the test (the clients' connections close at
// cleanup, so some slack).
func (c *chaos) checkNoLeaks(t *testing.T, goroutines, fds int) {
	t.Helper()
	if kids := children(t); len(kids) > 0 {
		t.Errorf("processes left behind: %v", kids)
	}
	// Fixed slack: the clients' gRPC connections (about 5 goroutines and
	// 1 fd each) close only at cleanup.
	slack := 10 * (*chaosClients + 5)
	var g, f int
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, f = runtime.NumGoroutine(), openFDs(t)
		if (g <= goroutines+slack && f <= fds+slack) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if g > goroutines+slack {
		t.Errorf("%d goroutines, %d before the test: a leak", g, goroutines)
	}
	if f > fds+slack {
		t.Errorf("%d open file descriptors, %d before the test: a leak", f, fds)
	}
	t.Logf("after the test: %d goroutines (%d before), %d open file descriptors (%d before), no child process", g, goroutines, f, fds)
}

// children lists the processes whose parent is this one ("pid name").
func children(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) > 1 && fields[1] == self {
			out = append(out, strings.TrimSpace(s[:end+1]))
		}
	}
	return out
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func faultCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
