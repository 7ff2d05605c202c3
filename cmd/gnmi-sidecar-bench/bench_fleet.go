package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// fleetSettle is how long the fleet idles after its start-up work (the
// connection, the baseline's read, one Set each) before the idle window.
const fleetSettle = 3 * time.Second

// benchAsCommandEnv, set in a child's environment, makes a test binary of
// this package run the command instead of its tests, so that the bench
// can start itself as a child (the forward-only proxy of the fleet row)
// in its tests as well.
const benchAsCommandEnv = "GNMI_SIDECAR_BENCH_AS_COMMAND"

// fleetMember is one serve child of the fleet and its own device.
type fleetMember struct {
	dev *testbed.Device
	dir string
	c   *child
}

// usage is a process's CPU time, wake-ups (child.wakeups) and the time
// they were read.
type usage struct {
	cpu     time.Duration
	wakeups uint64
	at      time.Time
}

func readUsage(c *child) (usage, error) {
	cpu, err := c.threadsCPU()
	if err != nil {
		return usage{}, err
	}
	w, err := c.wakeups()
	if err != nil {
		return usage{}, err
	}
	return usage{cpu: cpu, wakeups: w, at: time.Now()}, nil
}

// threadsCPU is the CPU time the child's threads have used so far, to the
// nanosecond: the sum over /proc/PID/task/*/schedstat of its first field
// (time on a CPU). /proc/PID/stat counts in ticks of 10 ms, too coarse
// for 0.05 % of a core over a window of seconds. Threads that exited are
// not counted.
func (c *child) threadsCPU() (time.Duration, error) {
	pid := c.cmd.Process.Pid
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the child's threads: %w", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		var ns int64
		if _, err := fmt.Sscan(string(data), &ns); err != nil {
			return 0, fmt.Errorf("/proc/%d/task/%s/schedstat: %w", pid, t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// rates are a process's CPU, in % of a core, and wake-ups per second
// between two usages.
func rates(from, to usage) (cpuPercent, wakeupsPerSec float64) {
	secs := to.at.Sub(from.at).Seconds()
	return 100 * (to.cpu - from.cpu).Seconds() / secs, float64(to.wakeups-from.wakeups) / secs
}

// fleet: cfg.fleet serve children, each in front of its own device in
// this process, connected (drift watching on, its default) and idle for
// cfg.fleetIdle: CPU, wake-ups and RSS per sidecar; beside them, a
// forward-only proxy (bench_floor.go) as a process of its own, the same
// window. Then cfg.fleetSets Sets to every sidecar at once, one client
// each.
func (b *bencher) fleet(ctx context.Context) ([]row, error) {
	if _, err := b.sidecarBinary(); err != nil {
		return nil, err
	}
	members := make([]*fleetMember, b.cfg.fleet)
	defer func() { stopFleet(members) }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range members {
		g.Go(func() error {
			m, err := b.startFleetMember(gctx, i)
			members[i] = m
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	// The forward-only proxy: this executable, as a child, in front of a
	// device of its own.
	proxyDev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	defer proxyDev.Stop()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable for the forward-only proxy: %w", err)
	}
	proxy, err := startProcess(ctx, []string{benchAsCommandEnv + "=1"}, exe, "--forward-proxy", proxyDev.Addr())
	if err != nil {
		return nil, err
	}
	defer proxy.stop()

	// One Set through each: connected all the way to its device.
	for i, m := range members {
		if _, err := setLeaf(ctx, m.c.client, "fleet", "start"); err != nil {
			return nil, fmt.Errorf("sidecar %d: %w", i, err)
		}
	}
	if _, err := setLeaf(ctx, proxy.client, "fleet", "start"); err != nil {
		return nil, fmt.Errorf("forward-only proxy: %w", err)
	}
	if err := sleepCtx(ctx, fleetSettle); err != nil {
		return nil, err
	}

	procs := append(fleetChildren(members), proxy)
	before := make([]usage, len(procs))
	for i, c := range procs {
		if before[i], err = readUsage(c); err != nil {
			return nil, err
		}
	}
	if err := sleepCtx(ctx, b.cfg.fleetIdle); err != nil {
		return nil, err
	}
	var cpus, wakes, rsses []float64
	var proxyCPU, proxyWakes float64
	for i, c := range procs {
		after, err := readUsage(c)
		if err != nil {
			return nil, err
		}
		cpu, w := rates(before[i], after)
		if c == proxy {
			proxyCPU, proxyWakes = cpu, w
			continue
		}
		r, err := c.rss()
		if err != nil {
			return nil, err
		}
		cpus, wakes, rsses = append(cpus, cpu), append(wakes, w), append(rsses, r.total)
	}

	burst, err := b.fleetBurst(ctx, members)
	if err != nil {
		return nil, err
	}

	label := fmt.Sprintf("fleet of %d", len(members))
	window := fmt.Sprintf("%v idle after connecting (drift watching on), %v after start-up", b.cfg.fleetIdle, fleetSettle)
	cpuRow := sidecarOnly(label+", idle: CPU per sidecar", "% of a core", "lower", mean(cpus)).
		withTarget("idle ≤ 0.05 % of a core", mean(cpus) <= 0.05)
	cpuRow.Note = fmt.Sprintf("mean; max %.4f %%; %s; CPU time of the process's threads (/proc/PID/task/*/schedstat); "+
		"a forward-only proxy (gRPC, no journal; bench_floor.go) as a process of its own in front of its own device, the same window: %.4f %% of a core, %.1f wake-ups/s",
		slices.Max(cpus), window, proxyCPU, proxyWakes)
	wakeRow := sidecarOnly(label+", idle: wake-ups per sidecar", "/s", "lower", mean(wakes))
	wakeRow.Note = fmt.Sprintf("mean; max %.1f/s; the context switches of the process's threads (voluntary and not, /proc/PID/task/*/status) per second", slices.Max(wakes))
	rssRow := sidecarOnly(label+", idle: RSS per sidecar", "MB", "lower", mean(rsses))
	rssRow.Note = fmt.Sprintf("mean; max %.1f MB, at the idle window's end", slices.Max(rsses))
	return []row{cpuRow, wakeRow, rssRow, burst}, nil
}

// startFleetMember starts sidecar i of the fleet: a device, a journal
// directory and a serve child in front of the device, connected.
func (b *bencher) startFleetMember(ctx context.Context, i int) (*fleetMember, error) {
	dev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	m := &fleetMember{dev: dev}
	if m.dir, err = os.MkdirTemp("", "gnmi-sidecar-bench-fleet-"); err != nil {
		return m, err
	}
	if m.c, err = b.startChild(ctx, dev.Addr(), m.dir); err != nil {
		return m, fmt.Errorf("sidecar %d: %w", i, err)
	}
	if err := waitConnected(ctx, m.c.client); err != nil {
		return m, fmt.Errorf("sidecar %d: %w; stderr: %s", i, err, m.c.stderr.String())
	}
	return m, nil
}

func fleetChildren(members []*fleetMember) []*child {
	out := make([]*child, len(members))
	for i, m := range members {
		out[i] = m.c
	}
	return out
}

// stopFleet stops every child at once, then their devices, and removes
// the journals.
func stopFleet(members []*fleetMember) {
	var wg sync.WaitGroup
	for _, m := range members {
		if m != nil && m.c != nil {
			wg.Go(m.c.stop)
		}
	}
	wg.Wait()
	for _, m := range members {
		if m == nil {
			continue
		}
		m.dev.Stop()
		if m.dir != "" {
			_ = os.RemoveAll(m.dir)
		}
	}
}

// fleetBurst sends cfg.fleetSets one-leaf Sets to every sidecar of the
// fleet at once, one client each, one Set after the other, and returns the
// row: Sets per second from the start until the last answer, with the
// Sets' p50 / p99 and the sidecars' CPU per Set in the note.
func (b *bencher) fleetBurst(ctx context.Context, members []*fleetMember) (row, error) {
	before := make([]usage, len(members))
	for i, m := range members {
		var err error
		if before[i], err = readUsage(m.c); err != nil {
			return row{}, err
		}
	}
	lat := make([][]time.Duration, len(members))
	start := make(chan struct{})
	g, gctx := errgroup.WithContext(ctx)
	for i, m := range members {
		g.Go(func() error {
			<-start
			for k := range b.cfg.fleetSets {
				d, err := setLeaf(gctx, m.c.client, "fleet", fmt.Sprint(k))
				if err != nil {
					return fmt.Errorf("sidecar %d: %w", i, err)
				}
				lat[i] = append(lat[i], d)
			}
			return nil
		})
	}
	began := time.Now()
	close(start)
	if err := g.Wait(); err != nil {
		return row{}, err
	}
	took := time.Since(began)
	var cpu time.Duration
	for i, m := range members {
		after, err := readUsage(m.c)
		if err != nil {
			return row{}, err
		}
		cpu += after.cpu - before[i].cpu
	}
	all := slices.Concat(lat...)
	r := sidecarOnly(fmt.Sprintf("fleet of %d, burst of %d Sets to each at once", len(members), b.cfg.fleetSets), "Sets/s", "higher",
		float64(len(all))/took.Seconds())
	r.Note = fmt.Sprintf("one client per sidecar, each Set after the other; Set p50 %.3f ms, p99 %.3f ms; %d Sets in %v; serve's CPU per Set %.0f µs",
		ms(percentile(all, 0.5)), ms(percentile(all, 0.99)), len(all), took.Round(time.Millisecond), float64(cpu.Microseconds())/float64(len(all)))
	return r, nil
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// serveForwardProxy serves the forward-only proxy in front of target until
// ctx ends (--forward-proxy, the fleet row's comparison, run as a child),
// announcing its address as serve does.
func serveForwardProxy(ctx context.Context, target string, stdout io.Writer) error {
	addr, stop, err := startFloorProxy(target, "forward", forwardOnly)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(stdout, "gnmi-sidecar listening on %s\n", addr)
	<-ctx.Done()
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}
