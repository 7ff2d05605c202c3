package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// benchConfig holds the options of gnmi-sidecar-bench.
type benchConfig struct {
	sets          int           // Sets per latency measurement
	duration      time.Duration // per throughput and subscribe row
	subscribeRate int           // Sets offered per second in the paced subscribe rows
	leaves        int           // the large configuration (size, re-push, RSS, baseline)
	proposals     int           // journal size of the reopen row
	soak          int           // Sets of the soak row
	soakHeap      string        // directory for serve's heap profiles at each soak slice's end ("": none)
	fleet         int           // serve children of the fleet row
	fleetIdle     time.Duration // the fleet row's idle window
	fleetSets     int           // Sets to each sidecar in the fleet row's burst
	forwardProxy  string        // run only the forward-only proxy in front of this device (the fleet row's child)
	scenarios     []string      // subset to run; empty: all
	clients       []int         // the client counts of the throughput and coalesce rows
	short         bool
	json          bool
	sidecarBinary string // the gnmi-sidecar run as a child process ("": gnmi-sidecar next to this executable)
	logLevel      string
	cpuProfile    string // write a CPU profile of the bench process (device and sidecar) here
	memProfile    string // write the bench process's allocation profile here, at the end
	traceFile     string // write an execution trace of the bench process here
}

// benchScenarios are the scenario names --scenarios accepts, in run order.
var benchScenarios = []string{"latency", "throughput", "coalesce", "size", "beforeimage", "repush", "subscribe", "rss", "baseline", "reopen", "soak", "fleet"}

// benchClients are the client counts of the throughput and coalesce rows,
// in run order; --clients takes some of them (the rows' targets are set
// for these counts).
var benchClients = []int{1, 8, 64}

// full and short sizes; flags given explicitly override either.
func (c *benchConfig) applyShort(cmd *cobra.Command) {
	if !c.short {
		return
	}
	set := func(name string, apply func()) {
		if !cmd.Flags().Changed(name) {
			apply()
		}
	}
	set("sets", func() { c.sets = 300 })
	set("duration", func() { c.duration = time.Second })
	set("subscribe-rate", func() { c.subscribeRate = 1000 })
	set("leaves", func() { c.leaves = 3_000 }) // the simulated device absorbs about 1 ms per new leaf: see docs/bench.md
	set("proposals", func() { c.proposals = 50_000 })
	set("soak", func() { c.soak = 100_000 })
	set("fleet", func() { c.fleet = 5 })
	set("fleet-idle", func() { c.fleetIdle = 10 * time.Second })
}

func (c *benchConfig) validate() error {
	for _, s := range c.scenarios {
		if !slices.Contains(benchScenarios, s) {
			return &usageError{err: fmt.Errorf("--scenarios: unknown scenario %q (want %s)", s, strings.Join(benchScenarios, ","))}
		}
	}
	for _, n := range c.clients {
		if !slices.Contains(benchClients, n) {
			return &usageError{err: fmt.Errorf("--clients: %d: the rows are for 1, 8 or 64 clients", n)}
		}
	}
	if c.sets < 1 || c.duration <= 0 || c.leaves < 100 || c.proposals < 1 || c.subscribeRate < 1 || c.soak < 160 ||
		c.fleet < 1 || c.fleetIdle <= 0 || c.fleetSets < 1 {
		return &usageError{err: errors.New("--sets, --proposals, --subscribe-rate, --fleet and --fleet-sets must be ≥ 1, --leaves ≥ 100, --soak ≥ 160, --duration and --fleet-idle > 0")}
	}
	return nil
}

func (c *benchConfig) wants(scenario string) bool {
	return len(c.scenarios) == 0 || slices.Contains(c.scenarios, scenario)
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	var cfg benchConfig
	cmd := &cobra.Command{
		Use:   "gnmi-sidecar-bench",
		Short: "Measure the sidecar against the simulated device (docs/design.md §5 targets); see docs/bench.md",
		Long: `gnmi-sidecar-bench starts, in this process, the simulated device and the
sidecar in front of it exactly as serve builds it (package sidecar: durable
journal with fsync in a temporary
directory, default options, real gRPC on 127.0.0.1), and a second device for
the direct side, runs the scenarios and prints one table: each row with the
sidecar's figure, the direct device's, their ratio and the docs/design.md §5 target.
Memory and restart are measured on gnmi-sidecar serve run as a child process.

Progress goes to stderr. --short runs everything small (under a minute on
two cores). docs/bench.md explains every row.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.applyShort(cmd)
			if err := cfg.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cfg.forwardProxy != "" {
				return serveForwardProxy(ctx, cfg.forwardProxy, stdout)
			}
			log, err := newLogger(stderr, cfg.logLevel)
			if err != nil {
				return &usageError{err: err}
			}
			return runBench(ctx, cfg, stdout, stderr, log)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.sets, "sets", 2000, "Sets per latency measurement (1 client, one leaf per Set)")
	f.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each throughput and subscribe row runs (per side)")
	f.IntVar(&cfg.subscribeRate, "subscribe-rate", 2000, "Sets per second offered to the device in the paced subscribe rows")
	f.IntVar(&cfg.leaves, "leaves", 100_000, "the large configuration: Set p50 at this size vs 100 leaves, re-push, RSS, baseline")
	f.IntVar(&cfg.proposals, "proposals", 1_000_000, "proposals in the journal of the reopen row")
	f.IntVar(&cfg.soak, "soak", 1_000_000, "Sets of the soak row (16 clients, 16 leaves, through serve as a child process)")
	f.StringVar(&cfg.soakHeap, "soak-heap", "", "a diagnostic: run the soak row's serve with --pprof and save its heap profile (after a GC) at each slice's end in this directory, as soak-heap-N.pb.gz")
	_ = f.MarkHidden("soak-heap")
	f.IntVar(&cfg.fleet, "fleet", 20, "serve processes of the fleet row, each in front of its own device")
	f.DurationVar(&cfg.fleetIdle, "fleet-idle", time.Minute, "how long the fleet row's sidecars idle while measured")
	f.IntVar(&cfg.fleetSets, "fleet-sets", 100, "Sets to each sidecar in the fleet row's burst")
	f.StringVar(&cfg.forwardProxy, "forward-proxy", "", "serve only the forward-only proxy in front of this device address (the fleet row runs it as a child)")
	_ = f.MarkHidden("forward-proxy")
	f.StringSliceVar(&cfg.scenarios, "scenarios", nil, "run only these scenarios: "+strings.Join(benchScenarios, ","))
	f.IntSliceVar(&cfg.clients, "clients", benchClients, "the throughput and coalesce rows for only these client counts (1, 8, 64), e.g. --clients 64 to profile that row alone with --cpuprofile")
	f.BoolVar(&cfg.short, "short", false, "small sizes (300 Sets, 1 s rows, 1,000 paced Sets/s, 3,000 leaves, 50,000 proposals, 100,000 soak Sets, a fleet of 5 idle for 10 s) unless set explicitly")
	f.BoolVar(&cfg.json, "json", false, "print one JSON document instead of the table")
	f.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the in-process device and sidecar, and the clients) to this file, for go tool pprof")
	f.StringVar(&cfg.memProfile, "memprofile", "", "write this process's allocation profile (every allocation of the run, sampled) to this file at the end, for go tool pprof -sample_index=alloc_space")
	f.StringVar(&cfg.traceFile, "trace", "", "write an execution trace of this process to this file, for go tool trace and hack/setstages (docs/bench.md)")
	f.StringVar(&cfg.sidecarBinary, "sidecar-binary", "", "the product gnmi-sidecar executable run for the child-process rows (default: gnmi-sidecar next to this executable)")
	f.StringVar(&cfg.logLevel, "log-level", "error", "log level of the in-process device and sidecar: debug, info, warn, error")
	return withUsageErrors(cmd)
}

// row is one line of the result table. Figures are NaN when not measured
// (JSON: null).
type row struct {
	Scenario string  `json:"scenario"`
	Unit     string  `json:"unit"`
	Sidecar  float64 `json:"sidecar"`
	Direct   float64 `json:"direct"`
	// Ratio is always sidecar / direct; Better says which way is good.
	Ratio  float64 `json:"ratio_sidecar_over_direct"`
	Better string  `json:"better"` // "lower" or "higher"
	Target string  `json:"target,omitempty"`
	// Met is nil for rows without a docs/design.md §5 target.
	Met  *bool  `json:"met,omitempty"`
	Note string `json:"note,omitempty"`
}

func (r row) MarshalJSON() ([]byte, error) {
	type plain row
	type out struct {
		plain
		Sidecar *float64 `json:"sidecar"`
		Direct  *float64 `json:"direct"`
		Ratio   *float64 `json:"ratio_sidecar_over_direct"`
	}
	num := func(f float64) *float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return &f
	}
	return json.Marshal(out{plain: plain(r), Sidecar: num(r.Sidecar), Direct: num(r.Direct), Ratio: num(r.Ratio)})
}

// newRow fills the ratio from the two figures.
func newRow(scenario, unit, better string, sidecar, direct float64) row {
	return row{Scenario: scenario, Unit: unit, Better: better, Sidecar: sidecar, Direct: direct, Ratio: sidecar / direct}
}

// sidecarOnly is a row without a direct counterpart.
func sidecarOnly(scenario, unit, better string, sidecar float64) row {
	return row{Scenario: scenario, Unit: unit, Better: better, Sidecar: sidecar, Direct: math.NaN(), Ratio: math.NaN()}
}

func (r row) withTarget(target string, met bool) row {
	r.Target, r.Met = target, &met
	return r
}

// benchReport is the --json document.
type benchReport struct {
	Started  time.Time         `json:"started"`
	Elapsed  string            `json:"elapsed"`
	Settings map[string]string `json:"settings"`
	Rows     []row             `json:"rows"`
	Errors   []string          `json:"errors,omitempty"`
}

// step is one progress unit: a label and what it measures.
type step struct {
	scenario string
	label    string
	run      func(ctx context.Context) ([]row, error)
}

// writeAllocProfile writes the allocations of the process so far (the
// heap profile, whose alloc_* samples count every allocation).
func writeAllocProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	runtime.GC() // the profile is as of the last GC: count the latest allocations too
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runBench(ctx context.Context, cfg benchConfig, stdout, stderr io.Writer, log *slog.Logger) error {
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.traceFile != "" {
		f, err := os.Create(cfg.traceFile)
		if err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer trace.Stop()
	}
	if cfg.memProfile != "" {
		defer func() {
			if err := writeAllocProfile(cfg.memProfile); err != nil {
				fmt.Fprintf(stderr, "--memprofile: %v\n", err)
			}
		}()
	}
	b := &bencher{cfg: cfg, log: log}
	steps := b.steps()
	rep := benchReport{Started: time.Now(), Settings: cfg.settings()}
	for i, s := range steps {
		fmt.Fprintf(stderr, "[%d/%d] %s ...\n", i+1, len(steps), s.label)
		began := time.Now()
		rows, err := s.run(ctx)
		fmt.Fprintf(stderr, "[%d/%d] %s: %v\n", i+1, len(steps), s.label, time.Since(began).Round(time.Millisecond))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", s.label, err))
			fmt.Fprintf(stderr, "[%d/%d] %s: FAILED: %v\n", i+1, len(steps), s.label, err)
			continue
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	rep.Elapsed = time.Since(rep.Started).Round(time.Millisecond).String()
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printTable(stdout, rep)
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d bench step(s) failed", len(rep.Errors))
	}
	return nil
}

func (c benchConfig) settings() map[string]string {
	return map[string]string{
		"sets": fmt.Sprint(c.sets), "duration": c.duration.String(), "subscribe-rate": fmt.Sprint(c.subscribeRate), "leaves": fmt.Sprint(c.leaves),
		"proposals": fmt.Sprint(c.proposals), "soak": fmt.Sprint(c.soak), "short": fmt.Sprint(c.short),
		"fleet": fmt.Sprint(c.fleet), "fleet-idle": c.fleetIdle.String(), "fleet-sets": fmt.Sprint(c.fleetSets),
	}
}

func printTable(w io.Writer, rep benchReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tunit\tsidecar\tdirect\tsidecar/direct\tbetter\tdesign §5 target\tmet")
	for _, r := range rep.Rows {
		met := ""
		if r.Met != nil {
			met = map[bool]string{true: "met", false: "NOT MET"}[*r.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Unit, figure(r.Sidecar), figure(r.Direct),
			ratio(r.Ratio), r.Better, r.Target, met)
	}
	_ = tw.Flush()
	for _, r := range rep.Rows {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario, r.Note)
		}
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "FAILED %s\n", e)
	}
	fmt.Fprintf(w, "(%s in all; settings %v)\n", rep.Elapsed, rep.Settings)
}

func figure(f float64) string {
	switch {
	case math.IsNaN(f):
		return "-"
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.3f", f)
}

func ratio(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", f)
}
