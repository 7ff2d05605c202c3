// Command writerbusy shows, from an execution trace of gnmi-sidecar-bench
// (--trace FILE, typically with --scenarios throughput --clients 64), how
// busy the journal's writer was over time: per window of the run (250 ms
// by default), the sidecar's Sets per second, the writer's transactions
// per second, the share of the window it spent in a transaction
// ("journal.txn" regions), waiting on Badger's commit ("journal.commit")
// and lingering for company ("journal.linger"), and the client Sets per
// transaction (docs/bench.md, "Where a 64-client Set's CPU goes"):
//
//	go run ./hack/writerbusy [-window 250ms] FILE
//
// Windows with fewer than 20 transactions are left out (the rig's set-up,
// the direct side).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	window := flag.Duration("window", 250*time.Millisecond, "the length of a row's window")
	flag.Parse()
	if flag.NArg() != 1 || *window <= 0 {
		fmt.Fprintln(os.Stderr, "usage: writerbusy [-window D] TRACE-FILE (from gnmi-sidecar-bench --trace TRACE-FILE)")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *window, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "writerbusy:", err)
		os.Exit(1)
	}
}

// busy is what one window holds: time in each kind of region (started in
// the window), transactions and Sets through the sidecar.
type busy struct {
	txn, commit, linger time.Duration
	txns, sets          int
}

func run(file string, window time.Duration, out io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	type key struct {
		g    trace.GoID
		kind string
	}
	open := make(map[key]trace.Time)
	windows := make(map[int64]*busy)
	var first trace.Time
	var last int64
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if first == 0 {
			first = ev.Time()
		}
		switch ev.Kind() {
		case trace.EventRegionBegin:
			open[key{ev.Goroutine(), ev.Region().Type}] = ev.Time()
		case trace.EventRegionEnd:
			k := key{ev.Goroutine(), ev.Region().Type}
			start, ok := open[k]
			if !ok {
				continue // began before the trace did
			}
			delete(open, k)
			n := int64(start.Sub(first) / window)
			w := windows[n]
			if w == nil {
				w = &busy{}
				windows[n] = w
			}
			last = max(last, n)
			d := ev.Time().Sub(start)
			switch k.kind {
			case "journal.txn":
				w.txn += d
				w.txns++
			case "journal.commit":
				w.commit += d
			case "journal.linger":
				w.linger += d
			case "set": // the proxy's region of a Set through the sidecar
				w.sets++
			}
		}
	}
	perSecond := float64(time.Second) / float64(window)
	share := func(d time.Duration) float64 { return 100 * float64(d) / float64(window) }
	fmt.Fprintf(out, "%8s %8s %7s %9s %9s %9s %12s %12s\n", "at", "Sets/s", "txn/s", "in txn", "commit", "linger", "txn mean µs", "Sets per txn")
	for n := int64(0); n <= last; n++ {
		w := windows[n]
		if w == nil || w.txns < 20 {
			continue
		}
		fmt.Fprintf(out, "%7.2fs %8.0f %7.0f %8.0f%% %8.0f%% %8.0f%% %12.0f %12.1f\n",
			(time.Duration(n) * window).Seconds(), float64(w.sets)*perSecond, float64(w.txns)*perSecond,
			share(w.txn), share(w.commit), share(w.linger),
			float64(w.txn.Microseconds())/float64(w.txns), float64(w.sets)/float64(w.txns))
	}
	return nil
}
