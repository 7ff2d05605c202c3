// Command setstages splits the time of the Sets in an execution trace of
// gnmi-sidecar-bench (--scenarios latency --trace FILE) into the stages a
// Set goes through in the sidecar, from the runtime/trace regions the
// bench's client, the proxy, the journal and the agent mark
// (docs/bench.md, "Where a Set's time goes"):
//
//	go run ./hack/setstages FILE
//
// For each Set through the sidecar (a "client.Set" region holding a "set"
// region) it finds the regions of that Set on the other goroutines (the
// journal's writer, the agent's applier) and prints, per stage, the
// median and mean over all Sets, in microseconds.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// span is one region instance.
type span struct {
	kind       string
	g          trace.GoID
	start, end trace.Time
}

func (s span) dur() time.Duration { return s.end.Sub(s.start) }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: setstages TRACE-FILE (from gnmi-sidecar-bench --scenarios latency --trace TRACE-FILE)")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "setstages:", err)
		os.Exit(1)
	}
}

func run(file string, out io.Writer) error {
	spans, err := readSpans(file)
	if err != nil {
		return err
	}
	byKind := make(map[string][]span)
	for _, s := range spans {
		byKind[s.kind] = append(byKind[s.kind], s)
	}
	for _, ss := range byKind {
		slices.SortFunc(ss, func(a, b span) int { return int(a.start - b.start) })
	}
	var rows []stages
	for _, set := range byKind["set"] {
		if st, ok := stagesOf(set, byKind); ok {
			rows = append(rows, st)
		}
	}
	if len(rows) == 0 {
		return errors.New("no Set through the sidecar with all its regions in the trace (run gnmi-sidecar-bench --scenarios latency --trace FILE)")
	}
	var direct [4][]time.Duration
	for _, c := range byKind["client.Set"] {
		if _, through := first(byKind["set"], -1, c.start, c.end); through {
			continue
		}
		if throughFloor(byKind, c) {
			continue // through the bench's floor proxies
		}
		if h, ok := first(byKind["device.handle"], -1, c.start, c.end); ok {
			for k, d := range []time.Duration{c.dur(), h.start.Sub(c.start), h.dur(), c.end.Sub(h.end)} {
				direct[k] = append(direct[k], d)
			}
		}
	}
	fmt.Fprintf(out, "%d Sets through the sidecar\n", len(rows))
	fmt.Fprintf(out, "%-62s %9s %9s\n", "stage", "p50 µs", "mean µs")
	for k, name := range stageNames {
		var d []time.Duration
		for _, r := range rows {
			d = append(d, r[k])
		}
		fmt.Fprintf(out, "%-62s %9.1f %9.1f\n", name, us(median(d)), us(mean(d)))
	}
	// Badger syncs the value log, then the memtable's log, in each commit.
	// The commits made while a floor proxy's Set runs are its journal's
	// (one small record each), the others the sidecar's.
	type commits struct{ total, vlog, wal []time.Duration }
	var sidecarCommits, floorCommits commits
	for _, c := range byKind["journal.commit"] {
		to := &sidecarCommits
		if during(byKind["floor.journal.Set"], c) {
			to = &floorCommits
		}
		var syncs []span
		for _, m := range byKind["msync"] {
			if m.start >= c.start && m.end <= c.end {
				syncs = append(syncs, m)
			}
		}
		if len(syncs) == 2 {
			to.total = append(to.total, c.dur())
			to.vlog, to.wal = append(to.vlog, syncs[0].dur()), append(to.wal, syncs[1].dur())
		}
	}
	for _, cs := range []struct {
		whose string
		commits
	}{{"the sidecar's journal", sidecarCommits}, {"the floor proxy's journal (one small record each)", floorCommits}} {
		if len(cs.total) == 0 {
			continue
		}
		fmt.Fprintf(out, "\nBadger's commits with two syncs (msync), %s: %d\n", cs.whose, len(cs.total))
		fmt.Fprintf(out, "%-62s %9.1f %9.1f\n", "  the commit", us(median(cs.total)), us(mean(cs.total)))
		fmt.Fprintf(out, "%-62s %9.1f %9.1f\n", "  of which: the value log's sync", us(median(cs.vlog)), us(mean(cs.vlog)))
		fmt.Fprintf(out, "%-62s %9.1f %9.1f\n", "  of which: the memtable's log's sync", us(median(cs.wal)), us(mean(cs.wal)))
	}
	if len(direct[0]) > 0 {
		fmt.Fprintf(out, "\n%d Sets direct\n", len(direct[0]))
		for k, name := range []string{"total (client's Set)", "  of which: → the device's Set handler (gRPC out)",
			"  of which: the device's Set handler", "  of which: handler → client (gRPC back)"} {
			fmt.Fprintf(out, "%-62s %9.1f %9.1f\n", name, us(median(direct[k])), us(mean(direct[k])))
		}
	}
	return nil
}

// throughFloor reports whether client Set c went through one of the
// bench's floor proxies (a "floor.<kind>.Set" region within it).
func throughFloor(byKind map[string][]span, c span) bool {
	for kind, spans := range byKind {
		if strings.HasPrefix(kind, "floor.") {
			if _, ok := first(spans, -1, c.start, c.end); ok {
				return true
			}
		}
	}
	return false
}

// during reports whether s runs while one of spans (on any goroutine) does.
func during(spans []span, s span) bool {
	for _, o := range spans {
		if o.start <= s.start && s.end <= o.end {
			return true
		}
	}
	return false
}

// stageNames are the stages stagesOf measures, in the order of a Set.
var stageNames = []string{
	"client → proxy handler (northbound gRPC in)",
	"proxy: checks, request → journal operations",
	"journal: clean and decompose the operations",
	"handoff to the journal writer (queue, wake-up)",
	"journal txn: transitions (previous completion, propose, commit, start)",
	"journal txn: Badger commit (write + fsync)",
	"journal txn: after commit (observer, answers)",
	"handoff: txn durable → applier deciding",
	"applier: next step (journal reads, decision)",
	"applier: wake → prepare (between steps)",
	"applier: prepare (ready proposals, device SetRequest)",
	"prepare → device Set",
	"device Set (gRPC round trip, device work)",
	"  of which: → the device's Set handler (southbound gRPC out)",
	"  of which: the device's Set handler",
	"  of which: handler → answer (southbound gRPC back)",
	"completion: device answer → client's Set done waiting",
	"proxy: reply",
	"proxy handler → client (northbound gRPC out)",
	"total (client's Set)",
	"  of which the handler (set region)",
	"  handler: txn durable → waiting for the device",
}

// stages are one Set's stage durations, in stageNames order.
type stages []time.Duration

// stagesOf finds the regions of the Set whose proxy handler is set and
// measures its stages; ok is false if a region is missing (the Set at
// either end of the trace, or one the device refused).
func stagesOf(set span, byKind map[string][]span) (st stages, ok bool) {
	client, ok := enclosing(byKind["client.Set"], set)
	if !ok {
		return nil, false
	}
	propose, ok1 := first(byKind["set.propose"], set.g, set.start, set.end)
	wait, ok2 := first(byKind["set.wait"], set.g, set.start, set.end)
	clean, ok3 := first(byKind["journal.clean"], set.g, propose.start, propose.end)
	// The transaction that made the proposal durable: the last one to
	// start and end while the handler proposed.
	txn, ok4 := last(byKind["journal.txn"], -1, propose.start, propose.end)
	commit, ok5 := first(byKind["journal.commit"], txn.g, txn.start, txn.end)
	// What the applier did for this Set: the first device Set after the
	// transaction, before the handler's wait ended.
	device, ok6 := first(byKind["device.Set"], -1, txn.end, wait.end)
	next, ok7 := last(byKind["applier.next"], device.g, txn.end, device.start)
	prepare, ok8 := last(byKind["apply.prepare"], device.g, next.end, device.start)
	handle, ok9 := first(byKind["device.handle"], -1, device.start, device.end)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || !ok8 || !ok9 {
		return nil, false
	}
	return stages{
		set.start.Sub(client.start),
		clean.start.Sub(set.start),
		clean.dur(),
		txn.start.Sub(clean.end),
		commit.start.Sub(txn.start),
		commit.dur(),
		txn.end.Sub(commit.end),
		next.start.Sub(txn.end),
		next.dur(),
		prepare.start.Sub(next.end),
		prepare.dur(),
		device.start.Sub(prepare.end),
		device.dur(),
		handle.start.Sub(device.start),
		handle.dur(),
		device.end.Sub(handle.end),
		wait.end.Sub(device.end),
		set.end.Sub(wait.end),
		client.end.Sub(set.end),
		client.dur(),
		set.dur(),
		wait.start.Sub(txn.end),
	}, true
}

// enclosing returns the span of ss (sorted by start) that holds inner.
func enclosing(ss []span, inner span) (span, bool) {
	k := sort.Search(len(ss), func(k int) bool { return ss[k].start > inner.start })
	for k--; k >= 0; k-- {
		if ss[k].end >= inner.end {
			return ss[k], true
		}
		if inner.start.Sub(ss[k].start) > time.Second {
			break
		}
	}
	return span{}, false
}

// first returns the earliest span of ss (sorted by start) on goroutine g
// (-1: any) lying within [from, to].
func first(ss []span, g trace.GoID, from, to trace.Time) (span, bool) {
	k := sort.Search(len(ss), func(k int) bool { return ss[k].start >= from })
	for ; k < len(ss) && ss[k].start <= to; k++ {
		if (g == -1 || ss[k].g == g) && ss[k].end <= to {
			return ss[k], true
		}
	}
	return span{}, false
}

// last returns the latest-starting span of ss (sorted by start) on
// goroutine g (-1: any) lying within [from, to].
func last(ss []span, g trace.GoID, from, to trace.Time) (span, bool) {
	var out span
	found := false
	k := sort.Search(len(ss), func(k int) bool { return ss[k].start >= from })
	for ; k < len(ss) && ss[k].start <= to; k++ {
		if (g == -1 || ss[k].g == g) && ss[k].end <= to {
			out, found = ss[k], true
		}
	}
	return out, found
}

// readSpans reads every region of the trace.
func readSpans(file string) ([]span, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	type key struct {
		g    trace.GoID
		kind string
	}
	open := make(map[key][]trace.Time)
	var out []span
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		switch ev.Kind() {
		case trace.EventRegionBegin:
			k := key{ev.Goroutine(), ev.Region().Type}
			open[k] = append(open[k], ev.Time())
		case trace.EventRegionEnd:
			k := key{ev.Goroutine(), ev.Region().Type}
			starts := open[k]
			if len(starts) == 0 {
				continue // began before the trace did
			}
			out = append(out, span{kind: k.kind, g: k.g, start: starts[len(starts)-1], end: ev.Time()})
			open[k] = starts[:len(starts)-1]
		case trace.EventStateTransition:
			// Badger's syncs: a goroutine's time in an msync system call.
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			switch from, to := st.Goroutine(); {
			case to == trace.GoSyscall && inMsync(st.Stack):
				open[key{g, "msync"}] = []trace.Time{ev.Time()}
			case from == trace.GoSyscall:
				k := key{g, "msync"}
				if starts := open[k]; len(starts) == 1 {
					out = append(out, span{kind: "msync", g: g, start: starts[0], end: ev.Time()})
					delete(open, k)
				}
			}
		}
	}
}

// inMsync reports whether stack is in an msync system call.
func inMsync(stack trace.Stack) bool {
	for f := range stack.Frames() {
		if strings.HasSuffix(f.Func, ".Msync") {
			return true
		}
	}
	return false
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
