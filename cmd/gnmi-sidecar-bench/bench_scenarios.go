package main

import (
	"context"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// steps lists the progress units of the chosen scenarios, in order.
func (b *bencher) steps() []step {
	var out []step
	add := func(scenario, label string, run func(context.Context) ([]row, error)) {
		if b.cfg.wants(scenario) {
			out = append(out, step{scenario: scenario, label: label, run: run})
		}
	}
	add("latency", fmt.Sprintf("Set latency, 1 client, %d Sets", b.cfg.sets), b.latency)
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		for _, clients := range b.cfg.clients {
			add("throughput", fmt.Sprintf("throughput %d clients, %v device", clients, delay),
				func(ctx context.Context) ([]row, error) { return b.throughput(ctx, clients, delay) })
		}
	}
	for _, clients := range b.cfg.clients {
		add("coalesce", fmt.Sprintf("throughput %d clients, %v + %v/update device", clients, coalescePerSet, coalescePerUpdate),
			func(ctx context.Context) ([]row, error) { return b.coalesce(ctx, clients) })
	}
	add("size", fmt.Sprintf("Set p50 at 100 vs %d leaves", b.cfg.leaves), b.configSize)
	add("beforeimage", fmt.Sprintf("Set p50, path not read yet vs read, %d Sets", b.cfg.sets), b.beforeImage)
	add("repush", fmt.Sprintf("re-push of %d leaves after a device restart", b.cfg.leaves), b.repush)
	for _, n := range []int{1, 16} {
		add("subscribe", fmt.Sprintf("Subscribe STREAM, %d subscriber(s)", n),
			func(ctx context.Context) ([]row, error) { return b.subscribe(ctx, n, false) })
	}
	for _, n := range []int{1, 16} {
		add("subscribe", fmt.Sprintf("Subscribe STREAM, %d subscriber(s), paced at %d Sets/s", n, b.cfg.subscribeRate),
			func(ctx context.Context) ([]row, error) { return b.subscribe(ctx, n, true) })
	}
	add("rss", fmt.Sprintf("RSS of serve (child process), idle and with %d leaves", b.cfg.leaves), b.rss)
	add("baseline", fmt.Sprintf("baseline of %d leaves (child process)", b.cfg.leaves), b.baseline)
	add("reopen", fmt.Sprintf("serve restart with %d proposals (child process)", b.cfg.proposals), b.reopen)
	add("soak", fmt.Sprintf("soak: %d Sets, %d clients × own leaf (child process)", b.cfg.soak, soakClients), b.soak)
	add("fleet", fmt.Sprintf("fleet of %d (child processes), idle %v, then %d Sets to each", b.cfg.fleet, b.cfg.fleetIdle, b.cfg.fleetSets), b.fleet)
	return out
}

// latency: scenario 1, one client, one leaf per Set, over 100 leaves.
// Its note gives, measured alongside in blocks of their own, the Sets
// through the two floor proxies (floors): what a proxy that journals a Set
// durably before the device sees it cannot avoid on this machine.
func (b *bencher) latency(ctx context.Context) ([]row, error) {
	r, err := b.startRig(ctx)
	if err != nil {
		return nil, err
	}
	defer r.close()
	fl, err := startFloors(r.direct.dev.Addr(), b.log.With("component", "floor journal"))
	if err != nil {
		return nil, err
	}
	defer fl.close()
	sc, dr, err := latencyBoth(ctx, r, b.cfg.sets, 100, fl)
	if err != nil {
		return nil, err
	}
	fsync, err := fsyncTime()
	if err != nil {
		return nil, err
	}
	p50s, p50d := percentile(sc[0], 0.5), percentile(dr, 0.5)
	limit := p50d + fsync + 300*time.Microsecond
	p50 := newRow("Set latency p50, 1 client", "ms", "lower", ms(p50s), ms(p50d)).
		withTarget(fmt.Sprintf("≤ direct + fsync (%.2f ms) + 0.3 ms = %.2f ms", ms(fsync), ms(limit)), p50s <= limit)
	floorJournal := percentile(sc[2], 0.5)
	p50.Note = fmt.Sprintf("through a proxy that only fsyncs 4 KiB, then forwards: p50 %.3f ms; "+
		"that only commits one small record to a journal, then forwards: p50 %.3f ms; "+
		"the sidecar's own part: %.3f ms",
		ms(percentile(sc[1], 0.5)), ms(floorJournal), ms(p50s-floorJournal))
	p99 := newRow("Set latency p99, 1 client", "ms", "lower", ms(percentile(sc[0], 0.99)), ms(percentile(dr, 0.99)))
	return []row{p50, p99}, nil
}

// latencyBoth preloads spread leaves on both sides and measures n Sets on
// each, alternating in blocks so that both see the same machine: sc[0]
// through the sidecar and, if fl is set, sc[1] and sc[2] through its
// fsync and journal floor proxies (in front of the direct device).
func latencyBoth(ctx context.Context, r *rig, n, spread int, fl *floors) (sc [3][]time.Duration, dr []time.Duration, err error) {
	for _, s := range []*side{r.sidecar, r.direct} {
		if err := preload(ctx, s.client, spread); err != nil {
			return sc, nil, err
		}
	}
	clients := []gpb.GNMIClient{r.sidecar.client}
	if fl != nil {
		clients = append(clients, fl.fsync, fl.journal)
	}
	const block = 50
	for done := 0; done < n; done += block {
		k := min(block, n-done)
		for i, c := range clients {
			lat, err := measureSets(ctx, c, k, spread)
			if err != nil {
				return sc, nil, fmt.Errorf("%s: %w", [3]string{"sidecar", "fsync floor", "journal floor"}[i], err)
			}
			sc[i] = append(sc[i], lat...)
		}
		d, err := measureSets(ctx, r.direct.client, k, spread)
		if err != nil {
			return sc, nil, fmt.Errorf("direct: %w", err)
		}
		dr = append(dr, d...)
	}
	return sc, dr, nil
}

// throughput: scenario 2, clients concurrent clients each setting its own
// leaf as fast as it can for the configured duration, against a device
// that takes delay to commit a Set.
// Against the 0 ms device with 8 and 64 clients, the Sets also go through
// a proxy that only forwards them (forwardOnly), in front of the direct
// device: the note gives what the extra gRPC hop alone leaves of the
// direct rate on this machine, and rows of their own compare the sidecar
// with that proxy: its rate, and (64 clients) the process's CPU time per
// Set on each side. Then through the journal floor proxy (floorJournal:
// one small record committed, then forwarded): the least any proxy that
// journals each Set before the device sees it does, as a measured floor
// for those rows' targets.
func (b *bencher) throughput(ctx context.Context, clients int, delay time.Duration) ([]row, error) {
	withFloor := clients >= 8 && delay == 0
	runs, err := b.setsBoth(ctx, clients, delay, 0, withFloor)
	if err != nil {
		return nil, err
	}
	sc, dr, floor, journalFloor := runs.sidecar, runs.direct, runs.floor, runs.journalFloor
	name := fmt.Sprintf("Set throughput, %d clients, %v device", clients, delay)
	out := newRow(name, "Sets/s", "higher", sc.rate(), dr.rate())
	switch {
	case clients == 64 && delay > 0:
		out = out.withTarget("≥ 10× direct", out.Ratio >= 10)
	case clients == 64:
		out = out.withTarget("≥ 0.95× direct", out.Ratio >= 0.95)
	}
	if !withFloor {
		return []row{out}, nil
	}
	out.Note = fmt.Sprintf("through a proxy that only forwards each Set (no journal), in turn with the other sides: %.0f Sets/s, %.2f× direct", floor.rate(), floor.rate()/dr.rate())
	// The direct column of the rows below is the forwarding proxy's.
	vsFloor := newRow(name+", vs forward-only proxy", "Sets/s", "higher", sc.rate(), floor.rate())
	want := 0.8
	if clients == 64 {
		want = 1.0
	}
	vsFloor = vsFloor.withTarget(fmt.Sprintf("≥ %.1f× the forward-only proxy", want), vsFloor.Ratio >= want)
	turns := turnsNote(len(runs.sidecarRounds), b.cfg.duration)
	if spread := runs.turnByTurn(setsRan.rate); spread != "" {
		turns += "; " + spread
	}
	vsFloor.Note = fmt.Sprintf("%s; "+
		"through a proxy that only commits one small record to a journal (group commit, one fsync per transaction), then forwards each Set: %.0f Sets/s, %.2f× the forward-only proxy; CPU per Set %.0f µs; %.1f Sets per journal transaction; "+
		"the sidecar's client Sets per device Set %.1f (%.0f device Sets/s, one at a time, in order) and per journal transaction %.1f",
		turns,
		journalFloor.rate(), journalFloor.rate()/floor.rate(), journalFloor.cpuPerSet(),
		float64(journalFloor.sets)/float64(max(runs.floorJournalTxns, 1)),
		float64(sc.sets)/float64(max(runs.deviceSets, 1)), float64(runs.deviceSets)/sc.elapsed.Seconds(),
		float64(sc.sets)/float64(max(runs.journalTxns, 1)))
	rows := []row{out, vsFloor}
	if clients == 64 {
		cpu := newRow(fmt.Sprintf("CPU per Set, %d clients, %v device, vs forward-only proxy", clients, delay), "µs", "lower",
			sc.cpuPerSet(), floor.cpuPerSet())
		cpu = cpu.withTarget("≤ 1.5× the forward-only proxy", cpu.Ratio <= 1.5)
		spread := runs.turnByTurn(setsRan.cpuPerSet)
		if spread != "" {
			spread += "; "
		}
		cpu.Note = fmt.Sprintf("%sthe bench process's CPU time (user + system) over each side's turns ÷ its Sets, devices and clients included on both sides: "+
			"sidecar %.2f of 2 cores, forward-only proxy %.2f; direct %.0f µs a Set; heap allocations a Set, counted the same way: sidecar %.0f, forward-only proxy %.0f, direct %.0f; "+
			"their kilobytes a Set: sidecar %.1f, forward-only proxy %.1f, direct %.1f; "+
			"goroutines started a Set: sidecar %.1f, forward-only proxy %.1f, direct %.1f; "+
			"goroutines made to run a Set (hand-offs and wake-ups; the Go runtime samples a fixed share of them for its scheduling latencies, so a relative count): sidecar %.1f, forward-only proxy %.1f, direct %.1f; "+
			"the garbage collector's CPU a Set, as the Go runtime estimates it: sidecar %.0f µs, forward-only proxy %.0f, direct %.0f",
			spread, sc.coresUsed(), floor.coresUsed(), dr.cpuPerSet(), sc.allocsPerSet(), floor.allocsPerSet(), dr.allocsPerSet(),
			sc.allocKBPerSet(), floor.allocKBPerSet(), dr.allocKBPerSet(),
			sc.goroutinesPerSet(), floor.goroutinesPerSet(), dr.goroutinesPerSet(),
			sc.schedulesPerSet(), floor.schedulesPerSet(), dr.schedulesPerSet(),
			sc.gcPerSet(), floor.gcPerSet(), dr.gcPerSet())
		rows = append(rows, cpu)
	}
	return rows, nil
}

// The device of the coalesce rows: a small cost per Set and a larger one
// per update it carries, as many real targets' commits.
const (
	coalescePerSet    = 2 * time.Millisecond
	coalescePerUpdate = 1 * time.Millisecond
)

// coalesce: throughput against a device whose cost grows per update
// (coalescePerUpdate) on top of a small per-Set cost (coalescePerSet).
// Merging queued proposals into one device Set saves only the per-Set
// part there: the note gives that bound and how many client Sets the
// sidecar's device Sets carried on average.
func (b *bencher) coalesce(ctx context.Context, clients int) ([]row, error) {
	runs, err := b.setsBoth(ctx, clients, coalescePerSet, coalescePerUpdate, false)
	if err != nil {
		return nil, err
	}
	sc, dr, deviceSets := runs.sidecar, runs.direct, runs.deviceSets
	out := newRow(fmt.Sprintf("Set throughput, %d clients, %v + %v/update device", clients, coalescePerSet, coalescePerUpdate),
		"Sets/s", "higher", sc.rate(), dr.rate())
	bound := float64(coalescePerSet+coalescePerUpdate) / float64(coalescePerUpdate)
	out.Note = fmt.Sprintf("%.1f client Sets per device Set through the sidecar (direct: 1); merging saves only the per-Set %v: at most (%v + %v)/%v = %.2f× direct",
		float64(sc.sets)/float64(max(deviceSets, 1)), coalescePerSet, coalescePerSet, coalescePerUpdate, coalescePerUpdate, bound)
	return []row{out}, nil
}

// setsBoth is the run of throughput and coalesce: on a new rig whose
// devices take perSet to commit a Set and perUpdate more for each of its
// operations, clients concurrent clients Set as fast as they can for the
// configured duration, through the sidecar, directly, and (if withFloor)
// through a proxy that only forwards them to the direct device (floor),
// and through one that commits a small record to a journal before it
// forwards them (journalFloor).
//
// The sides take turns (interleavedRounds): each round runs every side
// for its share of the duration, so that a stretch of a slower machine
// (a shared VM's neighbours, its clock) weighs on every side alike rather
// than on whichever ran then. Each side's figures are summed over its
// rounds.
func (b *bencher) setsBoth(ctx context.Context, clients int, perSet, perUpdate time.Duration, withFloor bool) (setsRuns, error) {
	var out setsRuns
	r, err := b.startRig(ctx)
	if err != nil {
		return out, err
	}
	defer r.close()
	for _, dev := range []*testbed.Device{r.sidecar.dev, r.direct.dev} {
		dev.SetDelay(perSet)
		if perUpdate != 0 {
			dev.SetUpdateDelay(perUpdate)
		}
	}
	type turn struct {
		name   string
		side   *side
		ran    *setsRan
		rounds *[]setsRan // its turns one by one, if the notes give them
		// txns counts the transactions of the side's journal, if it has
		// one, and txnsRan sums them over its turns.
		txns    func() uint64
		txnsRan *uint64
	}
	turns := []turn{
		{"sidecar", r.sidecar, &out.sidecar, &out.sidecarRounds, r.sidecar.sidecar.Journal().Transactions, &out.journalTxns},
		{"direct", r.direct, &out.direct, nil, nil, nil},
	}
	if withFloor {
		fj, err := openFloorJournal(b.log.With("component", "floor journal"))
		if err != nil {
			return out, err
		}
		defer fj.close()
		for _, p := range []struct {
			kind    string
			durable func(context.Context) error
			turn    turn // but its side, the proxy started here
		}{
			{"forward", forwardOnly, turn{name: "forward floor proxy", ran: &out.floor, rounds: &out.floorRounds}},
			{"journal", fj.commit, turn{name: "journal floor proxy", ran: &out.journalFloor, txns: fj.transactions, txnsRan: &out.floorJournalTxns}},
		} {
			addr, stop, err := startFloorProxy(r.direct.dev.Addr(), p.kind, p.durable)
			if err != nil {
				return out, err
			}
			defer stop()
			p.turn.side = &side{addr: addr}
			turns = append(turns, p.turn)
		}
	}
	rounds := interleavedRounds(b.cfg.duration)
	slice := b.cfg.duration / time.Duration(rounds)
	for range rounds {
		for _, t := range turns {
			before := r.sidecar.dev.SetCount()
			var txns uint64
			if t.txns != nil {
				txns = t.txns()
			}
			ran, err := setsRun(ctx, t.side, clients, slice)
			if err != nil {
				return out, fmt.Errorf("%s: %w", t.name, err)
			}
			if err := ran.settle(ctx); err != nil {
				return out, err
			}
			t.ran.add(ran)
			if t.side == r.sidecar {
				out.deviceSets += r.sidecar.dev.SetCount() - before
			}
			if t.txns != nil {
				*t.txnsRan += t.txns() - txns
			}
			if t.rounds != nil {
				*t.rounds = append(*t.rounds, ran)
			}
		}
	}
	return out, nil
}

// turnsNote says how the sides of a throughput row of d took turns.
func turnsNote(rounds int, d time.Duration) string {
	if rounds <= 1 {
		return fmt.Sprintf("each side ran %v, in turn", d)
	}
	return fmt.Sprintf("the sides took %d turns of %v each, in turn (%v per side)", rounds, d/time.Duration(rounds), d)
}

// interleavedRounds is how many turns each side of a throughput row takes
// in a run of d: one per second of it, at most 4, at least 1. A turn
// shorter than a second would weigh its end, where the clients finish
// the Sets they have in flight and start no more (setsRun), and the
// settling after it, more.
func interleavedRounds(d time.Duration) int {
	return max(1, min(4, int(d/time.Second)))
}

// setsRuns are setsBoth's runs, and how many Sets the sidecar's device
// received during the sidecar's.
type setsRuns struct {
	sidecar, direct, floor, journalFloor setsRan
	deviceSets                           int64
	journalTxns                          uint64 // the sidecar's journal transactions committed
	floorJournalTxns                     uint64 // the journal floor proxy's
	// sidecarRounds and floorRounds are the sidecar's and the forward-only
	// proxy's turns, in order: the spread of their ratio from turn to turn.
	sidecarRounds, floorRounds []setsRan
}

// turnByTurn is "turn by turn lo–hi×" (roundRatios), or "" for a run of
// one turn per side.
func (r setsRuns) turnByTurn(f func(setsRan) float64) string {
	if len(r.sidecarRounds) < 2 {
		return ""
	}
	lo, hi := r.roundRatios(f)
	return fmt.Sprintf("turn by turn %.2f–%.2f×", lo, hi)
}

// roundRatios returns the lowest and highest ratio of f over the sidecar's
// turns to f over the forward-only proxy's, turn by turn.
func (r setsRuns) roundRatios(f func(setsRan) float64) (lo, hi float64) {
	for i := range min(len(r.sidecarRounds), len(r.floorRounds)) {
		ratio := f(r.sidecarRounds[i]) / f(r.floorRounds[i])
		if i == 0 || ratio < lo {
			lo = ratio
		}
		if i == 0 || ratio > hi {
			hi = ratio
		}
	}
	return lo, hi
}

// setsRan is what a run of Sets did: Sets completed in how long, and the
// bench process's CPU time (processCPU) and runtime counters
// (readRuntimeCounts) meanwhile.
type setsRan struct {
	sets    int64
	elapsed time.Duration
	cpu     time.Duration
	runtime runtimeCounts
}

// settleTime is how long the bench waits after each turn of a throughput
// row before the next side's: the work a side's Sets left behind (a
// journal's flushes and compactions, notifications still to read, the
// collection of their garbage) is counted as that side's CPU, not the next
// side's.
const settleTime = 500 * time.Millisecond

// settle waits settleTime and counts the process's CPU time and runtime
// counters meanwhile in r (not its Sets or elapsed time).
func (r *setsRan) settle(ctx context.Context) error {
	cpu, counts := processCPU(), readRuntimeCounts()
	select {
	case <-time.After(settleTime):
	case <-ctx.Done():
		return ctx.Err()
	}
	r.cpu += processCPU() - cpu
	r.runtime = r.runtime.plus(readRuntimeCounts().since(counts))
	return nil
}

// add counts another run of the same side in r.
func (r *setsRan) add(o setsRan) {
	r.sets += o.sets
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.runtime = r.runtime.plus(o.runtime)
}

// allocsPerSet is the process's heap allocations per Set completed.
func (r setsRan) allocsPerSet() float64 { return float64(r.runtime.allocs) / float64(max(r.sets, 1)) }

// allocKBPerSet is the kilobytes of those allocations per Set completed.
func (r setsRan) allocKBPerSet() float64 {
	return float64(r.runtime.allocBytes) / 1000 / float64(max(r.sets, 1))
}

// goroutinesPerSet is the goroutines started per Set completed.
func (r setsRan) goroutinesPerSet() float64 {
	return float64(r.runtime.goroutines) / float64(max(r.sets, 1))
}

// schedulesPerSet is the scheduling-latency samples per Set completed
// (runtimeCounts.schedules).
func (r setsRan) schedulesPerSet() float64 {
	return float64(r.runtime.schedules) / float64(max(r.sets, 1))
}

// gcPerSet is the Go runtime's estimate of its garbage collector's CPU
// time per Set completed, in µs.
func (r setsRan) gcPerSet() float64 { return r.runtime.gcCPU * 1e6 / float64(max(r.sets, 1)) }

func (r setsRan) rate() float64 { return float64(r.sets) / r.elapsed.Seconds() }

// cpuPerSet is the process's CPU time per Set completed, in µs.
func (r setsRan) cpuPerSet() float64 {
	return float64(r.cpu.Nanoseconds()) / 1e3 / float64(max(r.sets, 1))
}

// coresUsed is the process's CPU time over the run's wall time.
func (r setsRan) coresUsed() float64 { return r.cpu.Seconds() / r.elapsed.Seconds() }

// setsRun runs clients goroutines (one gRPC connection each, as separate
// clients would), each Setting its own leaf as fast as it can, for d (or
// until the first Set completed, if later), and returns the Sets completed
// and the time taken. At the end each client finishes the Set it has in
// flight and starts no other: those Sets count, and the time until the
// last is answered. Cancelling them instead would make every turn end
// with a burst of abandoned Sets (a client that gives up is work for the
// sidecar, none for a relay) that steady clients never send.
func setsRun(ctx context.Context, s *side, clients int, d time.Duration) (setsRan, error) {
	conns, closeConns, err := dialClients(s, clients)
	if err != nil {
		return setsRan{}, err
	}
	defer closeConns()
	var count atomic.Int64
	var stopped atomic.Bool
	// Sets still in flight drainWait after the run's end fail it: a side
	// that stops answering is an error, not a slow rate.
	drainCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := make(chan struct{})
	var firstOnce sync.Once
	go func() {
		select {
		case <-time.After(d):
		case <-drainCtx.Done():
			return
		}
		select {
		case <-first:
		case <-drainCtx.Done():
			return
		}
		stopped.Store(true)
		select {
		case <-time.After(drainWait):
			cancel()
		case <-drainCtx.Done():
		}
	}()
	start, cpu, counts := time.Now(), processCPU(), readRuntimeCounts()
	g, gctx := errgroup.WithContext(drainCtx)
	for i, c := range conns {
		labeled("clients", func() {
			g.Go(func() error {
				for n := 0; !stopped.Load(); n++ {
					if _, err := setLeaf(gctx, c, clientLeaf(i), fmt.Sprintf("v%d", n)); err != nil {
						if drainCtx.Err() != nil && ctx.Err() == nil {
							return fmt.Errorf("a Set still in flight %v after the run's end: %w", drainWait, err)
						}
						return err
					}
					count.Add(1)
					firstOnce.Do(func() { close(first) })
				}
				return nil
			})
		})
	}
	err = g.Wait()
	elapsed, cpuUsed, counted := time.Since(start), processCPU()-cpu, readRuntimeCounts().since(counts)
	if err != nil {
		return setsRan{}, err
	}
	if ctx.Err() != nil {
		return setsRan{}, ctx.Err()
	}
	return setsRan{sets: count.Load(), elapsed: elapsed, cpu: cpuUsed, runtime: counted}, nil
}

// drainWait is how long setsRun waits, after a run's end, for the Sets in
// flight then.
const drainWait = 30 * time.Second

// pacedSetsRun offers perSecond Sets a second to s for d, open loop: the
// Sets are due at fixed intervals from the start, the k-th sent by driver
// k mod drivers (a gRPC connection each). A driver that falls behind
// sends its late Sets at once rather than skipping them, so that a slow
// Set delays the next ones without lowering the load offered; every Set
// due before d is sent, after d if late, and completes.
func pacedSetsRun(ctx context.Context, s *side, drivers, perSecond int, d time.Duration) (setsRan, error) {
	conns, closeConns, err := dialClients(s, drivers)
	if err != nil {
		return setsRan{}, err
	}
	defer closeConns()
	interval := time.Second / time.Duration(perSecond)
	var count atomic.Int64
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range conns {
		g.Go(func() error {
			for k := i; ; k += drivers {
				due := time.Duration(k) * interval
				if due >= d {
					return nil
				}
				if wait := due - time.Since(start); wait > 0 {
					select {
					case <-time.After(wait):
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				// The time as the value: unlike a count from 0 each run,
				// never what the leaf holds already, so every Set is a change.
				if _, err := setLeaf(gctx, c, clientLeaf(i), time.Now().Format(time.RFC3339Nano)); err != nil {
					return err
				}
				count.Add(1)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return setsRan{}, err
	}
	// The schedule spans d even when its last Set ended sooner; late
	// Sets make it longer, and the rate lower.
	return setsRan{sets: count.Load(), elapsed: max(time.Since(start), d)}, nil
}

// clientLeaf names the leaf the i-th client of setsRun and pacedSetsRun
// Sets.
func clientLeaf(i int) string { return fmt.Sprintf("client%d", i) }

// dialClients opens n gRPC connections to s, one per client, as separate
// clients would; closeConns closes them.
func dialClients(s *side, n int) (clients []gpb.GNMIClient, closeConns func(), err error) {
	var conns []*grpc.ClientConn
	closeConns = func() {
		for _, conn := range conns {
			conn.Close()
		}
	}
	for range n {
		conn, err := dialInsecure(s.addr)
		if err != nil {
			closeConns()
			return nil, nil, err
		}
		conns = append(conns, conn)
		clients = append(clients, gpb.NewGNMIClient(conn))
	}
	return clients, closeConns, nil
}

// configSize: scenario 3, Set p50 at 100 leaves and at cfg.leaves, each on
// a fresh rig.
func (b *bencher) configSize(ctx context.Context) ([]row, error) {
	n := min(b.cfg.sets, 500)
	var p50s, p50d [2]time.Duration
	for i, leaves := range []int{100, b.cfg.leaves} {
		r, err := b.startRig(ctx)
		if err != nil {
			return nil, err
		}
		sc, dr, err := latencyBoth(ctx, r, n, leaves, nil)
		r.close()
		if err != nil {
			return nil, err
		}
		p50s[i], p50d[i] = percentile(sc[0], 0.5), percentile(dr, 0.5)
	}
	small := newRow("Set p50 at 100 leaves", "ms", "lower", ms(p50s[0]), ms(p50d[0]))
	growth := float64(p50s[1]) / float64(p50s[0])
	large := newRow(fmt.Sprintf("Set p50 at %d leaves", b.cfg.leaves), "ms", "lower", ms(p50s[1]), ms(p50d[1])).
		withTarget(fmt.Sprintf("sidecar ≤ 1.2× its p50 at 100 leaves (is %.2f×)", growth), growth <= 1.2)
	large.Note = fmt.Sprintf("direct device grows %.2f× from 100 leaves", float64(p50d[1])/float64(p50d[0]))
	return []row{small, large}, nil
}

// repush: scenario 4. The sidecar holds cfg.leaves leaves (preloaded
// through it); its device restarts empty; the sidecar-side time is the
// agent's last re-push duration, the total runs from the restart until a
// preloaded leaf is back on the device and a new Set succeeded.
func (b *bencher) repush(ctx context.Context) ([]row, error) {
	s, err := b.startSidecar(ctx)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := preload(ctx, s.client, b.cfg.leaves); err != nil {
		return nil, err
	}
	before := s.sidecar.Agent().Status()
	s.dev.Stop()
	start := time.Now()
	if err := s.dev.Start(ctx, ""); err != nil {
		return nil, fmt.Errorf("restarting the device: %w", err)
	}
	if err := waitRepushed(ctx, s, before.LastRepush, b.cfg.leaves); err != nil {
		return nil, err
	}
	total := time.Since(start)
	after := s.sidecar.Agent().Status()
	took, onDevice := after.LastRepushDuration, after.LastRepushDeviceDuration
	own := took - onDevice
	label := fmt.Sprintf("re-push %d leaves", b.cfg.leaves)
	side := sidecarOnly(label+", sidecar-side", "s", "lower", own.Seconds()).withTarget("≤ 1 s", own <= time.Second)
	if after.Repushes > 0 {
		side.Note = fmt.Sprintf("agent re-pushed %d values in %v, %v of it waiting for the device",
			after.LastRepushValues, took.Round(time.Millisecond), onDevice.Round(time.Millisecond))
	}
	all := sidecarOnly(label+", restart → Set ok", "s", "lower", total.Seconds())
	if b.cfg.leaves == 100_000 {
		all = all.withTarget("≤ 5 s", total <= 5*time.Second)
	} else {
		all.Target = "≤ 5 s at 100,000 leaves (not this size)"
	}
	return []row{side, all}, nil
}

// waitRepushed waits until a re-push newer than since completed, the last
// preloaded leaf is on the device (a Get of it, straight to the device)
// and a Set through the sidecar succeeds.
func waitRepushed(ctx context.Context, s *side, since time.Time, leaves int) error {
	conn, err := dialInsecure(s.dev.Addr())
	if err != nil {
		return err
	}
	defer conn.Close()
	dev := gpb.NewGNMIClient(conn)
	last := benchLeafPath(fmt.Sprintf("bench%d", leaves-1))
	err = benchPoll(ctx, 5*time.Minute, "the re-push", func(ctx context.Context) (bool, error) {
		st := s.sidecar.Agent().Status()
		if !st.Connected || st.Repushing || !st.LastRepush.After(since) {
			return false, nil
		}
		_, err := dev.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{last}, Encoding: gpb.Encoding_JSON_IETF})
		if status.Code(err) == codes.NotFound {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return err
	}
	_, err = setLeaf(ctx, s.client, "after-restart", "ok")
	return err
}

// subscribe: scenario 5. subscribers STREAM subscriptions to /interfaces
// on each side; Sets go straight to that side's device from
// subscribeDrivers drivers; the figure is updates received per second per
// subscriber. The sides take turns, subscribeBlocks blocks of
// duration/subscribeBlocks each, with every subscription open throughout,
// so that a change in the machine's load touches both alike.
//
// Saturated (not paced), the drivers Set as fast as they can: on one
// machine the relay's CPU is taken from the device and its clients, so
// the row measures that machine's capacity. Its note gives the updates'
// latency on each side, from the device's timestamp (its Set's) to the
// subscriber's receipt, and the CPU time of the bench process (the
// devices, the sidecar and the clients) per update received. Paced, the
// drivers offer cfg.subscribeRate Sets a second, as a device producing
// changes at its own rate: the row measures whether the relay passes
// them all through. Its note gives the latency, the Sets sent per second
// and the updates received per Set per subscriber on each side.
func (b *bencher) subscribe(ctx context.Context, subscribers int, paced bool) ([]row, error) {
	r, err := b.startRig(ctx)
	if err != nil {
		return nil, err
	}
	defer r.close()
	perSecond := 0
	if paced {
		perSecond = b.cfg.subscribeRate
	}
	subCtx, cancelSubs := context.WithCancel(ctx)
	var sides [2]*subscription
	var wg sync.WaitGroup
	defer func() {
		cancelSubs()
		wg.Wait()
	}()
	for i, s := range []*side{r.sidecar, r.direct} {
		if sides[i], err = subscribeSide(subCtx, &wg, s, subscribers, perSecond); err != nil {
			return nil, fmt.Errorf("%s: %w", [2]string{"sidecar", "direct"}[i], err)
		}
	}
	block := b.cfg.duration / subscribeBlocks
	for range subscribeBlocks {
		for i, s := range sides {
			if err := s.drive(ctx, block); err != nil {
				return nil, fmt.Errorf("%s: driving Sets: %w", [2]string{"sidecar", "direct"}[i], err)
			}
		}
	}
	sc, dr := sides[0], sides[1]
	name := fmt.Sprintf("Subscribe STREAM, %d subscriber(s)", subscribers)
	if paced {
		name += ", paced"
	}
	out := newRow(name, "updates/s/sub", "higher", sc.rate(), dr.rate())
	latency := fmt.Sprintf("update latency p50 / p99: sidecar %.2f / %.2f ms, direct %.2f / %.2f ms",
		ms(percentile(sc.latency(), 0.5)), ms(percentile(sc.latency(), 0.99)), ms(percentile(dr.latency(), 0.5)), ms(percentile(dr.latency(), 0.99)))
	if paced {
		out.Note = fmt.Sprintf("%s; Sets sent: sidecar %.0f/s, direct %.0f/s (offered %d/s); updates per Set per subscriber: sidecar %.2f, direct %.2f",
			latency, sc.setRate(), dr.setRate(), perSecond, sc.updatesPerSet(), dr.updatesPerSet())
	} else {
		out.Note = fmt.Sprintf("%s; CPU per update: sidecar %.0f µs, direct %.0f µs", latency, sc.cpuPerUpdate(), dr.cpuPerUpdate())
	}
	return []row{out.withTarget("≥ 0.98× direct", out.Ratio >= 0.98)}, nil
}

// subscribeDrivers Set leaves on the device concurrently during a
// subscribe row; subscribeBlocks is the number of turns of each side;
// after a paced turn, the subscribers get up to subscribeSettle for the
// updates of its last Sets (far above their p99 latency).
const (
	subscribeDrivers = 4
	subscribeBlocks  = 5
	subscribeSettle  = time.Second
)

// subscription is the subscribers of one side of a subscribe row and
// what they received while that side's Sets were driven.
type subscription struct {
	side      *side
	perSecond int // Sets offered a second; 0: as many as the drivers manage
	counts    []updateCount
	counting  atomic.Bool // while this side's Sets are driven
	sets      int64       // Sets sent while counting
	elapsed   time.Duration
	cpu       time.Duration
}

// subscribeSide creates the drivers' leaves on s's device, opens
// subscribers subscriptions to s, running in wg until ctx ends, and
// returns once each has had its initial sync. Its Sets will be driven at
// perSecond (0: as fast as they go).
func subscribeSide(ctx context.Context, wg *sync.WaitGroup, s *side, subscribers, perSecond int) (*subscription, error) {
	if err := createDriverLeaves(ctx, s.dev.Addr()); err != nil {
		return nil, err
	}
	sub := &subscription{side: s, perSecond: perSecond, counts: make([]updateCount, subscribers)}
	synced := make(chan error, subscribers)
	for i := range subscribers {
		wg.Go(func() { countUpdates(ctx, s.client, &sub.counting, &sub.counts[i], synced) })
	}
	for range subscribers {
		if err := <-synced; err != nil {
			return nil, err
		}
	}
	return sub, nil
}

// createDriverLeaves Sets the leaves of the subscribe drivers once,
// straight on the device at addr (through the sidecar they would be its
// to manage): a Set that creates an interface also yields updates of its
// key leaves, and while counting every Set is to yield one update.
func createDriverLeaves(ctx context.Context, addr string) error {
	clients, closeConns, err := dialClients(&side{addr: addr}, 1)
	if err != nil {
		return err
	}
	defer closeConns()
	for i := range subscribeDrivers {
		if _, err := setLeaf(ctx, clients[0], clientLeaf(i), "created"); err != nil {
			return err
		}
	}
	return nil
}

// drive drives Sets straight on the side's device for d, counting the
// updates its subscribers receive meanwhile.
func (s *subscription) drive(ctx context.Context, d time.Duration) error {
	device := &side{addr: s.side.dev.Addr()}
	cpu := processCPU()
	s.counting.Store(true)
	var ran setsRan
	var err error
	if s.perSecond == 0 {
		ran, err = setsRun(ctx, device, subscribeDrivers, d)
	} else {
		ran, err = pacedSetsRun(ctx, device, subscribeDrivers, s.perSecond, d)
	}
	s.sets += ran.sets
	s.elapsed += ran.elapsed
	if err == nil && s.perSecond != 0 {
		// The updates of the last Sets are still on their way, more of
		// them on the sidecar's side (the extra hop): waiting for them
		// keeps the sides even and makes updates per Set exact.
		err = s.awaitUpdates(ctx)
	}
	s.counting.Store(false)
	s.cpu += processCPU() - cpu
	return err
}

// awaitUpdates waits, still counting, until the subscribers have received
// one update each of every Set sent, or for subscribeSettle at most.
func (s *subscription) awaitUpdates(ctx context.Context) error {
	want := int(s.sets) * len(s.counts)
	for deadline := time.Now().Add(subscribeSettle); s.updates() < want && time.Now().Before(deadline); {
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// updates is the number of updates counted, in all.
func (s *subscription) updates() int {
	var n int
	for i := range s.counts {
		n += s.counts[i].get()
	}
	return n
}

// rate is the updates per second per subscriber.
func (s *subscription) rate() float64 {
	return float64(s.updates()) / float64(len(s.counts)) / s.elapsed.Seconds()
}

// setRate is the Sets sent per second.
func (s *subscription) setRate() float64 {
	return float64(s.sets) / s.elapsed.Seconds()
}

// updatesPerSet is the updates received per Set sent, per subscriber.
func (s *subscription) updatesPerSet() float64 {
	if s.sets == 0 {
		return 0
	}
	return float64(s.updates()) / float64(len(s.counts)) / float64(s.sets)
}

// cpuPerUpdate is the bench process's CPU time per update counted, in µs.
func (s *subscription) cpuPerUpdate() float64 {
	return float64(s.cpu.Microseconds()) / float64(s.updates())
}

// latency is the latency of every notification counted.
func (s *subscription) latency() []time.Duration {
	var out []time.Duration
	for i := range s.counts {
		s.counts[i].mu.Lock()
		out = append(out, s.counts[i].latency...)
		s.counts[i].mu.Unlock()
	}
	return out
}

// processCPU is the CPU time, user and system, the bench process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runtimeCounts are Go runtime counters of the bench process: the heap
// objects it allocated and their bytes, and its estimate of the CPU time its garbage
// collector took (runtime/metrics; an overestimate, says its doc, updated
// as collections run: over a run of seconds, many collections, a share to
// compare between sides, not to add to processCPU).
type runtimeCounts struct {
	allocs, allocBytes uint64
	gcCPU              float64 // seconds
	// schedules counts the samples of the runtime's scheduling latency
	// histogram: a fixed share of the goroutines made to run (every
	// wake-up and hand-off). goroutines counts the goroutines started.
	schedules, goroutines uint64
}

// since is what c counted after earlier.
func (c runtimeCounts) since(earlier runtimeCounts) runtimeCounts {
	return runtimeCounts{allocs: c.allocs - earlier.allocs, allocBytes: c.allocBytes - earlier.allocBytes,
		gcCPU: c.gcCPU - earlier.gcCPU, schedules: c.schedules - earlier.schedules, goroutines: c.goroutines - earlier.goroutines}
}

// plus is c and more counted together.
func (c runtimeCounts) plus(more runtimeCounts) runtimeCounts {
	return runtimeCounts{allocs: c.allocs + more.allocs, allocBytes: c.allocBytes + more.allocBytes,
		gcCPU: c.gcCPU + more.gcCPU, schedules: c.schedules + more.schedules, goroutines: c.goroutines + more.goroutines}
}

// readRuntimeCounts reads the bench process's runtimeCounts now.
func readRuntimeCounts() runtimeCounts {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/sched/latencies:seconds"}, {Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	var c runtimeCounts
	if s[0].Value.Kind() == metrics.KindUint64 {
		c.allocs = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		c.allocBytes = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindFloat64 {
		c.gcCPU = s[2].Value.Float64()
	}
	if s[3].Value.Kind() == metrics.KindFloat64Histogram {
		for _, n := range s[3].Value.Float64Histogram().Counts {
			c.schedules += n
		}
	}
	if s[4].Value.Kind() == metrics.KindUint64 {
		c.goroutines = s[4].Value.Uint64()
	}
	return c
}

// updateCount is what one subscriber received while counting: its
// updates and the latency of each notification.
type updateCount struct {
	mu      sync.Mutex
	updates int
	latency []time.Duration
}

func (c *updateCount) add(n *gpb.Notification) {
	lat := time.Since(time.Unix(0, n.GetTimestamp()))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates += len(n.GetUpdate()) + len(n.GetDelete())
	c.latency = append(c.latency, lat)
}

func (c *updateCount) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates
}

// countUpdates subscribes STREAM ON_CHANGE to /interfaces, reports on
// synced once the initial sync arrived (or the failure), then adds every
// notification received while counting to n, until ctx ends.
func countUpdates(ctx context.Context, c gpb.GNMIClient, counting *atomic.Bool, n *updateCount, synced chan<- error) {
	report := func(err error) {
		if synced != nil {
			synced <- err
			synced = nil
		}
	}
	stream, err := c.Subscribe(ctx)
	if err != nil {
		report(fmt.Errorf("gNMI Subscribe: %w", err))
		return
	}
	req := &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
		Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}}}, Mode: gpb.SubscriptionMode_ON_CHANGE}},
	}}}
	if err := stream.Send(req); err != nil {
		report(fmt.Errorf("gNMI Subscribe send: %w", err))
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			report(fmt.Errorf("gNMI Subscribe, before the sync: %w", err))
			return
		}
		if resp.GetSyncResponse() {
			report(nil)
			continue
		}
		if u := resp.GetUpdate(); u != nil && counting.Load() {
			n.add(u)
		}
	}
}
