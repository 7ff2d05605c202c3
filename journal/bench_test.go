package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// The benchmarks do a fixed amount of work per iteration, so that
// `-benchtime=1x` (make bench) gives meaningful figures; the figures are
// reported as custom metrics.

func leafOp(n int, value int64) *Op {
	p := &gnmi.Path{Elem: []*gnmi.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": fmt.Sprintf("eth%d", n)}},
		{Name: "config"}, {Name: "mtu"},
	}}
	return &Op{Kind: OpUpdate, Path: p, Values: []*Leaf{{Path: p, Value: &gnmi.TypedValue{
		Value: &gnmi.TypedValue_UintVal{UintVal: uint64(value)}}}}}
}

// change runs one durable append+commit+apply and returns its latency.
func change(b testing.TB, j *Journal, term uint64, leaf int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	p, err := j.ProposeChange(ctx, []*Op{leafOp(leaf, int64(leaf))})
	if err != nil {
		b.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, _, err := j.CommitChange(ctx, p.Index); return err },
		func() error { _, _, err := j.StartApply(ctx, p.Index); return err },
		func() error { _, _, err := j.CompleteApply(ctx, p.Index, term); return err },
	} {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkChangeLatency: one writer, durable (fsync'd) append, commit,
// start-apply and complete-apply of a one-leaf change (4 transactions).
func BenchmarkChangeLatency(b *testing.B) {
	j := openTest(b, "", Options{})
	term := synced(b, j)
	const changes = 200
	var lat []time.Duration
	for range b.N {
		for n := range changes {
			lat = append(lat, change(b, j, term, n%50))
		}
	}
	b.ReportMetric(micros(percentile(lat, 0.5)), "p50-µs/change")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs/change")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkConcurrentAppend: durable ProposeChange from 1, 8 and 64
// concurrent writers, a fixed 1,920 proposals per run. Group commit shares
// one transaction and fsync among the writers queued together.
func BenchmarkConcurrentAppend(b *testing.B) {
	const total = 1920
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			j := openTest(b, "", Options{})
			ctx := context.Background()
			var elapsed time.Duration
			commits0 := j.commits.Load()
			for range b.N {
				start := time.Now()
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						for n := range total / writers {
							if _, err := j.ProposeChange(ctx, []*Op{leafOp(w, int64(n))}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			props := float64(total * b.N)
			b.ReportMetric(props/elapsed.Seconds(), "proposals/s")
			b.ReportMetric(props/float64(j.commits.Load()-commits0), "proposals/fsync")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkPipeline: 1, 8 and 64 writers propose a fixed 960 changes while
// one driver (the agent's role) commits and applies them in index order, as
// soon as each is proposed. Reports applied changes per second: the
// driver's transactions share fsyncs with the writers' appends.
func BenchmarkPipeline(b *testing.B) {
	const total = 960
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			j := openTest(b, "", Options{})
			term := synced(b, j)
			ctx := context.Background()
			var elapsed time.Duration
			for range b.N {
				c, err := j.Configuration(ctx)
				if err != nil {
					b.Fatal(err)
				}
				first := c.LastIndex + 1
				start := time.Now()
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						for n := range total / writers {
							if _, err := j.ProposeChange(ctx, []*Op{leafOp(w, int64(n))}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				for i := first; i < first+total; {
					_, _, err := j.CommitChange(ctx, i)
					if errors.Is(err, ErrNotFound) {
						runtime.Gosched() // not proposed yet
						continue
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, _, err := j.StartApply(ctx, i); err != nil {
						b.Fatal(err)
					}
					if _, _, err := j.CompleteApply(ctx, i, term); err != nil {
						b.Fatal(err)
					}
					i++
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(total*b.N)/elapsed.Seconds(), "applied-changes/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// prepareLeaves fills a journal in dir with `leaves` committed and applied
// leaves (1,000 per proposal), written without fsync.
func prepareLeaves(b *testing.B, dir string, leaves int) {
	j, err := Open(dir, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	term := synced(b, j)
	ctx := context.Background()
	for base := 0; base < leaves; base += 1000 {
		var ops []*Op
		for n := base; n < min(base+1000, leaves); n++ {
			ops = append(ops, leafOp(n, int64(n)))
		}
		p, err := j.ProposeChange(ctx, ops)
		if err != nil {
			b.Fatal(err)
		}
		commitAndApply(b, j, term, p.Index)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConfigSize: the same durable one-leaf change against a journal
// holding 100 leaves and one holding 100,000, alternating so both see the
// same disk conditions. The target is ratio ≤ 1.2.
func BenchmarkConfigSize(b *testing.B) {
	small, large := b.TempDir(), b.TempDir()
	prepareLeaves(b, small, 100)
	prepareLeaves(b, large, 100_000)
	js, jl := openTest(b, small, Options{}), openTest(b, large, Options{})
	ts, tl := synced(b, js), synced(b, jl)
	const changes = 200
	var latS, latL []time.Duration
	b.ResetTimer()
	for range b.N {
		for n := range changes {
			// Touch existing leaves spread over the configuration.
			latS = append(latS, change(b, js, ts, n%100))
			latL = append(latL, change(b, jl, tl, (n*499)%100_000))
		}
	}
	p50S, p50L := percentile(latS, 0.5), percentile(latL, 0.5)
	b.ReportMetric(micros(p50S), "p50-µs/change@100")
	b.ReportMetric(micros(p50L), "p50-µs/change@100k")
	b.ReportMetric(float64(p50L)/float64(p50S), "ratio-100k/100")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRetention: what retention costs per proposal it drops. A
// journal of 16 leaves Set 20,000 times through the whole cycle (propose,
// commit, start, complete: a record and a history delta each) is reopened
// with the default retention (newest 10,000) and durable transactions, and
// Compact drops the 10,000 oldest proposals with their history deltas in
// slices (retentionSlice), each a transaction of its own with its fsync.
// Reports the writer's time per dropped proposal, and the longest slice:
// what a Set arriving during retention can wait behind it at most.
func BenchmarkRetention(b *testing.B) {
	const sets, retain = 20_000, 10_000
	var perDrop, longest time.Duration
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		j, err := Open(dir, Options{NoSync: true, Retain: -1})
		if err != nil {
			b.Fatal(err)
		}
		term := synced(b, j)
		for n := range sets {
			change(b, j, term, n%16)
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		// The writer calls the background retention too once Compact's
		// first slice is durable: slices come from both goroutines.
		var mu sync.Mutex
		last := time.Now()
		j, err = Open(dir, Options{Retain: retain, RetentionInterval: time.Hour,
			onSlice: func(sliceStats) {
				mu.Lock()
				defer mu.Unlock()
				now := time.Now()
				longest, last = max(longest, now.Sub(last)), now
			}})
		if err != nil {
			b.Fatal(err)
		}
		c0, err := j.Configuration(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		mu.Lock()
		last = start
		mu.Unlock()
		if _, err := j.Compact(context.Background()); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		c, err := j.Configuration(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		dropped := c.GetFirstIndex() - c0.GetFirstIndex()
		if dropped < sets-retain {
			b.Fatalf("retention dropped %d proposals, want at least %d", dropped, sets-retain)
		}
		perDrop += elapsed / time.Duration(dropped)
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(micros(perDrop/time.Duration(b.N)), "µs/dropped-proposal")
	b.ReportMetric(micros(longest), "longest-slice-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReopen1M: time to open a journal holding 1,000,000 proposal
// records and read the configuration and the newest proposal (the target
// is ≤ 2 s). The records are written directly in large batches.
func BenchmarkReopen1M(b *testing.B) {
	const proposals = 1_000_000
	dir := b.TempDir()
	j, err := Open(dir, Options{NoSync: true, Retain: -1})
	if err != nil {
		b.Fatal(err)
	}
	op := leafOp(1, 1500)
	now := timestamppb.Now()
	pv := &PathValue{Path: op.Path, Value: op.Values[0].Value}
	wb := j.db.NewWriteBatch()
	for i := uint64(1); i <= proposals; i++ {
		pv.Index = i
		p := &Proposal{Index: i, Phase: PhaseChange,
			Change: &Change{Ops: []*Op{op}, Values: []*PathValue{pv}, Commit: StatusComplete, Apply: StatusComplete,
				Proposed: now, Committed: now, ApplyStarted: now, Applied: now},
			Rollback: &Rollback{Index: i - 1, Values: []*PathValue{pv}}}
		v, err := encodeRecord(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := wb.Set(proposalKey(i), v); err != nil {
			b.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	c := &Configuration{Committed: &journalpb.Committed{Proposal: proposals, Index: proposals},
		Applied: &journalpb.Applied{Proposal: proposals, Index: proposals}, LastIndex: proposals, FirstIndex: 1}
	if err := j.submit(context.Background(), func(w *writeTxn) error { return w.put(keyConfiguration, c) }); err != nil {
		b.Fatal(err)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	var size int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		j, err := Open(dir, Options{Retain: -1})
		if err != nil {
			b.Fatal(err)
		}
		c, err := j.Configuration(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := j.Proposal(context.Background(), c.LastIndex); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/reopen")

	// Restart after a crash: Badger also replays the memtables that were
	// not flushed. A helper appends 20,000 more proposals and is killed.
	b.StopTimer()
	fillAndKill(b, dir, 20_000)
	start := time.Now()
	j, err = Open(dir, Options{Retain: -1})
	if err != nil {
		b.Fatal(err)
	}
	c, err = j.Configuration(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := j.Proposal(context.Background(), c.LastIndex); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "ms/reopen-after-kill")
	if c.LastIndex != proposals+20_000 {
		b.Fatalf("after the kill: last index %d", c.LastIndex)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)/(1<<20), "MB-on-disk")
	b.ReportMetric(0, "ns/op")
}

// fillAndKill has a helper process append n proposals to the journal in
// dir and kills it with SIGKILL once they are durable.
func fillAndKill(b *testing.B, dir string, n int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=fill", "JOURNAL_DIR="+dir, fmt.Sprintf("JOURNAL_FILL=%d", n))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "filled\n" {
		_ = cmd.Process.Kill()
		b.Fatalf("fill helper: %q, %v", line, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// runFillHelper appends JOURNAL_FILL proposals from 64 writers, says so
// and waits to be killed.
func runFillHelper(dir, count string) error {
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	j, err := Open(dir, Options{Retain: -1})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Go(func() {
			for k := w; k < n; k += 64 {
				if _, err := j.ProposeChange(context.Background(), []*Op{leafOp(k, int64(k))}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Println("filled")
	time.Sleep(time.Hour) // until SIGKILL
	return nil
}

// BenchmarkRSS: resident memory of a separate process holding an open
// journal, empty and with 100,000 leaves (after streaming all of them once).
// The target is ≤ 150 MB with 100,000 leaves.
func BenchmarkRSS(b *testing.B) {
	empty, full := b.TempDir(), b.TempDir()
	prepareLeaves(b, full, 100_000)
	var rssEmpty, rssFull, anonFull float64
	for range b.N {
		rssEmpty, _ = measureRSS(b, empty)
		rssFull, anonFull = measureRSS(b, full)
	}
	b.ReportMetric(rssEmpty, "MB-rss-empty")
	b.ReportMetric(rssFull, "MB-rss-100k-leaves")
	// The rest is Badger's tables, memory-mapped, paged in by the full scan.
	b.ReportMetric(anonFull, "MB-anon-100k-leaves")
	b.ReportMetric(0, "ns/op")
}

// measureRSS returns the helper's resident and anonymous memory in MB.
func measureRSS(b *testing.B, dir string) (rss, anon float64) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=rss", "JOURNAL_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("rss helper: %v", err)
	}
	var rssKB, anonKB float64
	if _, err := fmt.Sscan(string(out), &rssKB, &anonKB); err != nil {
		b.Fatalf("rss helper printed %q: %v", out, err)
	}
	return rssKB / 1024, anonKB / 1024
}

// runRSSHelper opens the journal, reads every committed and applied value
// and prints its VmRSS and RssAnon in kB.
func runRSSHelper(dir string) error {
	j, err := Open(dir, Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	count := 0
	for _, scan := range []func(context.Context, *gnmi.Path, func(*PathValue) error) error{j.Committed, j.Applied} {
		if err := scan(ctx, nil, func(*PathValue) error { count++; return nil }); err != nil {
			return err
		}
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var rss, anon string
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			rss = strings.Fields(v)[0]
		}
		if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			anon = strings.Fields(v)[0]
		}
	}
	if rss == "" || anon == "" {
		return fmt.Errorf("no VmRSS/RssAnon in /proc/self/status (read %d values)", count)
	}
	fmt.Printf("%s %s\n", rss, anon)
	return j.Close()
}

// BenchmarkPathKey: the key of a typical configuration path (every
// journaled value and every read is keyed by it), 100,000 times.
func BenchmarkPathKey(b *testing.B) {
	p := leafOp(7, 1500).GetPath()
	const keys = 100_000
	var allocs runtime.MemStats
	runtime.ReadMemStats(&allocs)
	before := allocs.Mallocs
	start := time.Now()
	for range b.N {
		for range keys {
			_ = PathKey(p)
		}
	}
	runtime.ReadMemStats(&allocs)
	n := float64(b.N * keys)
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/key")
	b.ReportMetric(float64(allocs.Mallocs-before)/n, "allocs/key")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFusedChange: one writer, durable; a one-leaf change as the agent
// takes it now: propose, commit and start-apply in one transaction (a then
// function), complete-apply in a second one.
func BenchmarkFusedChange(b *testing.B) {
	j := openTest(b, "", Options{})
	term := synced(b, j)
	ctx := context.Background()
	const changes = 200
	var lat []time.Duration
	for range b.N {
		for n := range changes {
			start := time.Now()
			p, err := j.ProposeChange(ctx, []*Op{leafOp(n%50, int64(n))}, func(tx *Tx) error {
				c, err := tx.Configuration()
				if err != nil {
					return err
				}
				if _, _, err := tx.CommitChange(c.GetLastIndex()); err != nil {
					return err
				}
				_, _, err = tx.StartApply(c.GetLastIndex())
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := j.CompleteApply(ctx, p.GetIndex(), term); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.ReportMetric(micros(percentile(lat, 0.5)), "p50-µs/change")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs/change")
	b.ReportMetric(0, "ns/op")
}

// jsonInterfaces is a JSON_IETF value of /interfaces with n interfaces of
// 10 leaves each (the key, and nine config leaves), round r's values.
func jsonInterfaces(n, r int) []byte {
	var b strings.Builder
	b.WriteString(`{"interface":[`)
	for k := range n {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"eth%d","config":{"name":"eth%d","mtu":%d,"description":"uplink %d-%d","enabled":true,`+
			`"type":"iana-if-type:ethernetCsmacd","loopback-mode":false,"tpid":"TPID_0X8100","forwarding-viewable":true,"hold-time-up":%d}}`,
			k, k, 1500+r, k, r, r)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkJSONSet1000: one writer, durable; a JSON_IETF Update of
// /interfaces with 100 interfaces of 10 leaves (the entry, whose key is its
// marker, and 9 config leaves: 1,000 units) decomposed leaf by leaf,
// journaled and committed in one transaction as the agent does (the
// rollback values of every leaf included), each round rewriting every
// leaf. The design's target is 20 ms.
func BenchmarkJSONSet1000(b *testing.B) {
	j := openTest(b, "", Options{})
	ctx := context.Background()
	path := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "interfaces"}}}
	// The list's keys, as a keyed path teaches them without a schema.
	j.Keys().Learn(&gnmi.Path{Elem: []*gnmi.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth0"}}}})
	const rounds = 20
	var lat []time.Duration
	for range b.N {
		for r := range rounds {
			val := &gnmi.TypedValue{Value: &gnmi.TypedValue_JsonIetfVal{JsonIetfVal: jsonInterfaces(100, r)}}
			start := time.Now()
			p, err := j.ProposeChange(ctx, []*Op{{Kind: OpUpdate, Path: path, Values: []*Leaf{{Path: path, Value: val}}}}, func(tx *Tx) error {
				c, err := tx.Configuration()
				if err != nil {
					return err
				}
				_, _, err = tx.CommitChange(c.GetLastIndex())
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			if got := len(Units(p.GetChange().GetOps()[0])); got != 1000 {
				b.Fatalf("%d units, want 1,000 (100 entries of 9 config leaves)", got)
			}
		}
	}
	b.ReportMetric(float64(percentile(lat, 0.5))/float64(time.Millisecond), "p50-ms/set")
	b.ReportMetric(float64(percentile(lat, 0.99))/float64(time.Millisecond), "p99-ms/set")
	b.ReportMetric(0, "ns/op")
}
