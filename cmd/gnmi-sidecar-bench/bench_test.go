package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tinyBench are --short with even smaller sizes: a few seconds per run.
var tinyBench = []string{"--short", "--sets", "20", "--duration", "200ms", "--leaves", "200", "--proposals", "300", "--soak", "320",
	"--fleet", "2", "--fleet-idle", "1s", "--fleet-sets", "20"}

// TestMain builds the product gnmi-sidecar for the child-process rows
// into a temporary directory, removed afterwards.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// sidecarBinaryEnv passes the product binary TestMain built to the tests.
const sidecarBinaryEnv = "GNMI_SIDECAR_BENCH_TEST_BINARY"

func runTests(m *testing.M) int {
	if os.Getenv(benchAsCommandEnv) != "" {
		main() // the bench started this test binary as its child (bench_fleet.go)
	}
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "gnmi-sidecar")
	if out, err := exec.Command("go", "build", "-o", bin, "../gnmi-sidecar").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ../gnmi-sidecar: %v\n%s", err, out)
		return 1
	}
	if err := os.Setenv(sidecarBinaryEnv, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// runBenchCommand runs gnmi-sidecar-bench in-process with args added to
// tinyBench and returns its stdout and stderr.
func runBenchCommand(t *testing.T, args ...string) (string, string) {
	t.Helper()
	sidecar := os.Getenv(sidecarBinaryEnv)
	var stdout, stderr bytes.Buffer
	root := newRootCommand(&stdout, &stderr)
	root.SetArgs(append(append(append([]string{}, tinyBench...), "--sidecar-binary", sidecar), args...))
	root.SetOut(&stderr)
	root.SetErr(&stderr)
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// wantBenchRows are the row labels (prefixes) of a run at the tinyBench
// sizes, one per row.
var wantBenchRows = []string{
	"Set latency p50, 1 client", "Set latency p99, 1 client",
	"Set throughput, 1 clients, 0s device", "Set throughput, 8 clients, 0s device",
	"Set throughput, 8 clients, 0s device, vs forward-only proxy", "Set throughput, 64 clients, 0s device",
	"Set throughput, 64 clients, 0s device, vs forward-only proxy", "CPU per Set, 64 clients, 0s device, vs forward-only proxy",
	"Set throughput, 1 clients, 20ms device", "Set throughput, 8 clients, 20ms device", "Set throughput, 64 clients, 20ms device",
	"Set throughput, 1 clients, 2ms + 1ms/update device", "Set throughput, 8 clients, 2ms + 1ms/update device",
	"Set throughput, 64 clients, 2ms + 1ms/update device",
	"Set p50 at 100 leaves", "Set p50 at 200 leaves",
	"Set p50, path not read yet (before-image Get)", "Set p50, path already read",
	"re-push 200 leaves, sidecar-side", "re-push 200 leaves, restart → Set ok",
	"Subscribe STREAM, 1 subscriber(s)", "Subscribe STREAM, 16 subscriber(s)",
	"Subscribe STREAM, 1 subscriber(s), paced", "Subscribe STREAM, 16 subscriber(s), paced",
	"RSS of serve, idle", "RSS of serve, 200 leaves journaled",
	"baseline of 200 leaves, start → journaled", "baseline of 200 leaves, device read", "baseline of 200 leaves, journaling",
	"RSS of serve, after a baseline of 200 leaves",
	"restart with 300 proposals → Capabilities", "restart with 300 proposals → Set ok",
	"soak: worst 10 % slice / first", "soak: peak RSS",
	"fleet of 2, idle: CPU per sidecar", "fleet of 2, idle: wake-ups per sidecar", "fleet of 2, idle: RSS per sidecar",
	"fleet of 2, burst of 20 Sets to each at once",
}

// floorNotes are what the notes of the rows measured beside floor proxies
// say of them; every figure they capture is positive.
var floorNotes = map[string]*regexp.Regexp{
	"Set latency p50, 1 client": regexp.MustCompile(`only fsyncs 4 KiB, then forwards: p50 (\d+\.\d+) ms; ` +
		`that only commits one small record to a journal, then forwards: p50 (\d+\.\d+) ms; the sidecar's own part: -?\d+\.\d+ ms`),
	"Set throughput, 8 clients, 0s device":                         regexp.MustCompile(`only forwards each Set \(no journal\), in turn with the other sides: (\d+) Sets/s, (\d+\.\d+)× direct`),
	"Set throughput, 64 clients, 0s device":                        regexp.MustCompile(`only forwards each Set \(no journal\), in turn with the other sides: (\d+) Sets/s, (\d+\.\d+)× direct`),
	"Set throughput, 8 clients, 0s device, vs forward-only proxy":  floorThroughputNote,
	"Set throughput, 64 clients, 0s device, vs forward-only proxy": floorThroughputNote,
	"CPU per Set, 64 clients, 0s device, vs forward-only proxy": regexp.MustCompile(`sidecar (\d+\.\d+) of 2 cores, forward-only proxy (\d+\.\d+); direct (\d+) µs a Set; ` +
		`heap allocations a Set, counted the same way: sidecar (\d+), forward-only proxy (\d+), direct (\d+); ` +
		`their kilobytes a Set: sidecar (\d+\.\d), forward-only proxy (\d+\.\d), direct (\d+\.\d); ` +
		`goroutines started a Set: sidecar (\d+\.\d), forward-only proxy (\d+\.\d), direct (\d+\.\d); ` +
		`goroutines made to run a Set \(hand-offs and wake-ups; [^)]*\): sidecar (\d+\.\d), forward-only proxy (\d+\.\d), direct (\d+\.\d)`),
}

// floorThroughputNote is what the rows against the forward-only proxy say
// of the journal floor proxy and of what the sidecar's device Sets and
// journal transactions carried.
var floorThroughputNote = regexp.MustCompile(`only commits one small record to a journal \(group commit, one fsync per transaction\), then forwards each Set: ` +
	`(\d+) Sets/s, (\d+\.\d+)× the forward-only proxy; CPU per Set (\d+) µs; (\d+\.\d+) Sets per journal transaction; ` +
	`the sidecar's client Sets per device Set (\d+\.\d+) \((\d+) device Sets/s, one at a time, in order\) and per journal transaction (\d+\.\d+)`)

// checkFloorNote checks the note of row scenario if floorNotes has it.
func checkFloorNote(t *testing.T, scenario, note string) {
	t.Helper()
	if re, ok := floorNotes[scenario]; ok {
		checkNote(t, scenario, note, re)
	}
}

// checkNote checks that note matches re and every figure it captures is
// positive.
func checkNote(t *testing.T, scenario, note string, re *regexp.Regexp) {
	t.Helper()
	m := re.FindStringSubmatch(note)
	if m == nil {
		t.Errorf("row %q: note %q does not match %q", scenario, note, re)
		return
	}
	for _, figure := range m[1:] {
		if v, err := strconv.ParseFloat(figure, 64); err != nil || v <= 0 {
			t.Errorf("row %q: note %q: figure %q is not positive", scenario, note, figure)
		}
	}
}

// hasDirect reports whether the row scenario has a direct figure: all but
// the sidecar-only rows (re-push, RSS, restart, soak, fleet, and the baseline's but its
// device read).
func hasDirect(scenario string) bool {
	if strings.HasPrefix(scenario, "baseline") {
		return strings.HasSuffix(scenario, ", device read")
	}
	return !strings.HasPrefix(scenario, "re-push") && !strings.HasPrefix(scenario, "RSS") && !strings.HasPrefix(scenario, "restart") &&
		!strings.HasPrefix(scenario, "soak") && !strings.HasPrefix(scenario, "fleet")
}

// beforeImageNote is what the note of the before-image row says of the
// Sets to paths already read and of the Get; the figures it captures are
// positive.
var beforeImageNote = regexp.MustCompile(`path read: p50 (\d+\.\d+) ms; the read's cost: -?\d+\.\d+ ms; .*straight to the direct device: p50 (\d+\.\d+) ms`)

// fleetBurstNote is what the note of the fleet's burst says of its Sets;
// the figures it captures are positive.
var fleetBurstNote = regexp.MustCompile(`Set p50 (\d+\.\d+) ms, p99 (\d+\.\d+) ms; (\d+) Sets in`)

// TestBenchJSON runs every scenario at tiny sizes and checks that the JSON
// document has every row with figures (no timing assertions).
func TestBenchJSON(t *testing.T) {
	stdout, stderr := runBenchCommand(t, "--json")
	var rep struct {
		Rows []struct {
			Scenario string   `json:"scenario"`
			Sidecar  *float64 `json:"sidecar"`
			Direct   *float64 `json:"direct"`
			Ratio    *float64 `json:"ratio_sidecar_over_direct"`
			Better   string   `json:"better"`
			Note     string   `json:"note"`
		} `json:"rows"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, stdout)
	}
	if len(rep.Errors) > 0 || len(rep.Rows) != len(wantBenchRows) {
		t.Fatalf("got %d rows (want %d), errors %v:\n%s", len(rep.Rows), len(wantBenchRows), rep.Errors, stdout)
	}
	for i, r := range rep.Rows {
		if r.Scenario != wantBenchRows[i] {
			t.Errorf("row %d is %q, want %q", i, r.Scenario, wantBenchRows[i])
		}
		// An idle sidecar may not wake at all in the tiny run's 1 s window,
		// and so use no CPU in it either.
		mayBeZero := strings.HasSuffix(r.Scenario, "idle: wake-ups per sidecar") || strings.HasSuffix(r.Scenario, "idle: CPU per sidecar")
		if r.Sidecar == nil || *r.Sidecar < 0 || (*r.Sidecar == 0 && !mayBeZero) {
			t.Errorf("row %q: no sidecar figure", r.Scenario)
		}
		if hasDirect(r.Scenario) && (r.Direct == nil || *r.Direct <= 0 || r.Ratio == nil) {
			t.Errorf("row %q: no direct figure or ratio", r.Scenario)
		}
		if r.Better != "lower" && r.Better != "higher" {
			t.Errorf("row %q: better = %q", r.Scenario, r.Better)
		}
		// The floor proxies measured beside the sidecar, with figures.
		checkFloorNote(t, r.Scenario, r.Note)
		if r.Scenario == "Set p50, path not read yet (before-image Get)" {
			checkNote(t, r.Scenario, r.Note, beforeImageNote)
		}
		if r.Scenario == "fleet of 2, burst of 20 Sets to each at once" {
			checkNote(t, r.Scenario, r.Note, fleetBurstNote)
		}
	}
	if !strings.Contains(stderr, "[1/22] Set latency") || !strings.Contains(stderr, "[22/22] fleet") {
		t.Errorf("no progress lines on stderr:\n%s", stderr)
	}
}

// TestBenchTable checks the table of a subset of scenarios.
func TestBenchTable(t *testing.T) {
	stdout, _ := runBenchCommand(t, "--scenarios", "latency,subscribe")
	lines := strings.Split(stdout, "\n")
	if !strings.Contains(lines[0], "sidecar/direct") || !strings.Contains(lines[0], "better") || !strings.Contains(lines[0], "design §5 target") {
		t.Fatalf("no header: %q", lines[0])
	}
	for _, want := range []string{"Set latency p50, 1 client", "Set latency p99, 1 client",
		"Subscribe STREAM, 1 subscriber(s)", "Subscribe STREAM, 16 subscriber(s)",
		"Subscribe STREAM, 1 subscriber(s), paced", "Subscribe STREAM, 16 subscriber(s), paced"} {
		found := false
		for _, l := range lines[1:] {
			// The padding after the name: a row is not matched by another's prefix.
			if rest, ok := strings.CutPrefix(l, want+"  "); ok {
				found = true
				if f := strings.Fields(rest); len(f) < 5 || f[1] == "-" || f[2] == "-" || !strings.HasSuffix(f[3], "×") {
					t.Errorf("row %q has no figures: %q", want, l)
				}
			}
		}
		if !found {
			t.Errorf("no row %q in:\n%s", want, stdout)
		}
	}
}

// TestBenchBadFlags: an unknown scenario or a client count the rows are
// not for is a usage error, before anything runs.
func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenarios", "nope"},
		{"--clients", "5"},
		{"--clients", "8,x"},
	} {
		var out bytes.Buffer
		root := newRootCommand(&out, &out)
		root.SetArgs(args)
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		if exitCode(err) != 2 {
			t.Errorf("%v: exit code %d (%v), want 2 (bad command line)", args, exitCode(err), err)
		}
	}
}
