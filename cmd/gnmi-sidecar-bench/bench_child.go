package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// child is `gnmi-sidecar serve` running as a child process of the bench.
type child struct {
	cmd     *exec.Cmd
	addr    string
	conn    *grpc.ClientConn
	client  gpb.GNMIClient
	stderr  *lockedBuffer
	started time.Time
	// metrics receives the metrics address serve prints after its listen
	// address (closed without one when metrics are off or it exits).
	metrics     <-chan string
	metricsAddr string // from metrics, once read (metricsAddress)
}

// metricsAddress is the child's metrics address, "" if it has none.
func (c *child) metricsAddress(ctx context.Context) (string, error) {
	if c.metricsAddr == "" {
		select {
		case c.metricsAddr = <-c.metrics:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return c.metricsAddr, nil
}

// lockedBuffer collects the child's stderr for error messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sidecarBinary is the gnmi-sidecar run for the child-process rows: the
// product build (without the devtools tag, so without the simulated
// device this executable links), by default next to this executable, where
// make puts both.
func (b *bencher) sidecarBinary() (string, error) {
	if b.cfg.sidecarBinary != "" {
		return b.cfg.sidecarBinary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this executable (set --sidecar-binary): %w", err)
	}
	bin := filepath.Join(filepath.Dir(exe), "gnmi-sidecar")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no product gnmi-sidecar next to this executable (build it with go build ./cmd/gnmi-sidecar, or set --sidecar-binary): %w", err)
	}
	return bin, nil
}

// startChild runs `serve --target target --journal-dir dir` with default
// options otherwise (extra, appended, override them), and returns once it
// printed its address.
func (b *bencher) startChild(ctx context.Context, target, dir string, extra ...string) (*child, error) {
	bin, err := b.sidecarBinary()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--target", target, "--journal-dir", dir,
		"--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	return startProcess(ctx, nil, bin, args...)
}

// startProcess runs bin with args, and env added to this process's
// environment: a process that prints "gnmi-sidecar listening on ADDR" as
// serve does. It returns once the process printed it, with a gNMI client
// for ADDR.
func startProcess(ctx context.Context, env []string, bin string, args ...string) (*child, error) {
	c := &child{stderr: &lockedBuffer{}}
	c.cmd = exec.Command(bin, args...)
	if env != nil {
		c.cmd.Env = append(os.Environ(), env...)
	}
	c.cmd.Stderr = c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %s: %w", bin, args[0], err)
	}
	addr, metrics, err := readListenAddr(ctx, stdout)
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s child: %w; stderr: %s", args[0], err, c.stderr.String())
	}
	c.addr, c.metrics = addr, metrics
	if c.conn, err = dialInsecure(addr); err != nil {
		c.stop()
		return nil, err
	}
	c.client = gpb.NewGNMIClient(c.conn)
	return c, nil
}

// readListenAddr reads the child's stdout until "gnmi-sidecar listening on
// ADDR", then drains the rest in the background; metrics receives the
// address of the "gnmi-sidecar metrics on ADDR" line that follows (closed
// without one if none comes).
func readListenAddr(ctx context.Context, stdout interface{ Read([]byte) (int, error) }) (addr string, metrics <-chan string, err error) {
	const prefix, metricsPrefix = "gnmi-sidecar listening on ", "gnmi-sidecar metrics on "
	found := make(chan string, 1)
	foundMetrics := make(chan string, 1)
	go func() {
		out, outMetrics := found, foundMetrics // nil once sent
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), prefix); ok && out != nil {
				out <- a
				out = nil
			}
			if a, ok := strings.CutPrefix(sc.Text(), metricsPrefix); ok && outMetrics != nil {
				outMetrics <- a
				close(outMetrics)
				outMetrics = nil
			}
		}
		if out != nil {
			close(out)
		}
		if outMetrics != nil {
			close(outMetrics)
		}
	}()
	select {
	case a, ok := <-found:
		if !ok {
			return "", nil, fmt.Errorf("exited before listening")
		}
		return a, foundMetrics, nil
	case <-ctx.Done():
		return "", nil, ctx.Err()
	case <-time.After(2 * time.Minute):
		return "", nil, fmt.Errorf("no listen address after 2 min")
	}
}

// stop ends the child with SIGTERM (SIGKILL after 10 s) and waits for it.
func (c *child) stop() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// rss is a process's resident memory in MB: in all (VmRSS), and its
// anonymous (Go heap, Badger's memtable) and file-backed (the binary,
// Badger's memory-mapped files; the kernel can drop these) parts, the
// latter by kind of file (see fileKind).
type rss struct {
	total, anon, file float64
	files             map[string]float64
}

func (r rss) String() string {
	s := fmt.Sprintf("%.0f MB anonymous, %.0f MB file-backed", r.anon, r.file)
	var parts []string
	for _, kind := range []string{"tables", "value log", "memtable logs", "binary", "other"} {
		if mb := r.files[kind]; mb >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.0f", kind, mb))
		}
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// fileKind names what a memory-mapped file of serve is: Badger's tables
// (.sst), value log (.vlog) and memtable write-ahead logs (.mem), the
// executable, or other.
func fileKind(path, exe string) string {
	switch {
	case strings.HasSuffix(path, ".sst"):
		return "tables"
	case strings.HasSuffix(path, ".vlog"):
		return "value log"
	case strings.HasSuffix(path, ".mem"):
		return "memtable logs"
	case path == exe:
		return "binary"
	}
	return "other"
}

// fileRSS sums the resident memory of the process's file mappings by kind
// (fileKind), in MB, from /proc/PID/smaps.
func fileRSS(pid int) (map[string]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the child's memory map: %w", err)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	out := map[string]float64{}
	kind := ""
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			// A mapping's header: address perms offset dev inode [path].
			kind = ""
			if len(fields) >= 6 && strings.HasPrefix(fields[5], "/") {
				kind = fileKind(fields[5], exe)
			}
		case len(fields) == 3 && fields[0] == "Rss:" && kind != "":
			var kb float64
			if _, err := fmt.Sscan(fields[1], &kb); err != nil {
				return nil, fmt.Errorf("smaps Rss %q: %w", fields[1], err)
			}
			out[kind] += kb / 1024
		}
	}
	return out, nil
}

func (c *child) rss() (rss, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return rss{}, fmt.Errorf("reading the child's RSS: %w", err)
	}
	var out rss
	fields := map[string]*float64{"VmRSS:": &out.total, "RssAnon:": &out.anon, "RssFile:": &out.file}
	for line := range strings.SplitSeq(string(data), "\n") {
		for name, v := range fields {
			if rest, ok := strings.CutPrefix(line, name); ok {
				var kb float64
				if _, err := fmt.Sscan(rest, &kb); err != nil {
					return rss{}, fmt.Errorf("%s %q: %w", name, rest, err)
				}
				*v = kb / 1024
				delete(fields, name)
			}
		}
	}
	if len(fields) > 0 {
		return rss{}, fmt.Errorf("no VmRSS, RssAnon or RssFile in /proc/%d/status", c.cmd.Process.Pid)
	}
	if out.files, err = fileRSS(c.cmd.Process.Pid); err != nil {
		return rss{}, err
	}
	return out, nil
}

// cpu is the CPU time, user and system, the child has used so far
// (/proc/PID/stat, in clock ticks of 1/100 s).
func (c *child) cpu() (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("reading the child's CPU time: %w", err)
	}
	// After the command's name in parentheses: state is field 3, utime 14
	// and stime 15.
	_, rest, _ := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", c.cmd.Process.Pid)
	}
	var utime, stime int64
	if _, err := fmt.Sscan(fields[11]+" "+fields[12], &utime, &stime); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat utime, stime: %w", c.cmd.Process.Pid, err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// wakeups is how many times the child's threads have been switched out
// so far: the sum over /proc/PID/task/*/status of voluntary_ctxt_switches
// (it blocked: waited for a timer, a lock, the network) and
// nonvoluntary_ctxt_switches (it was preempted). Each follows a wake-up
// of the thread. Threads that exited are not counted.
func (c *child) wakeups() (uint64, error) {
	pid := c.cmd.Process.Pid
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the child's threads: %w", err)
	}
	var n uint64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			name, rest, ok := strings.Cut(line, ":")
			if !ok || (name != "voluntary_ctxt_switches" && name != "nonvoluntary_ctxt_switches") {
				continue
			}
			var v uint64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				return 0, fmt.Errorf("/proc/%d/task/%s/status %s: %w", pid, t.Name(), name, err)
			}
			n += v
		}
	}
	return n, nil
}

// rssSettle is how long the child must have idled before its RSS is read
// (atRest).
const rssSettle = time.Second

// startupWork is how long after its start serve does one-time work
// whatever the journal holds: the journal's first look at its tables, a
// second after it opened, compacts the level 0 the preparation left.
const startupWork = 2 * time.Second

// driftChecks is serve's counter of drift comparisons.
const driftChecks = "gnmi_sidecar_drift_checks_total"

// atRest waits until the child has done its startup's one-time work and
// idled since: its drift watcher has compared the device with the journal
// (the first comparison of a session covers the whole scope, tens of MB
// of garbage with thousands of leaves, which it gives back when done) and
// has compared nothing for rssSettle, and startupWork has passed. Read
// any earlier, the RSS catches one of those bursts: with 3,000 leaves, a
// read a second after the probe Set read 49–59 MB in 6 of 36 runs against
// 29–33 at rest (docs/bench.md, "Values encoded once"). It polls serve's
// metrics four times a second.
func (c *child) atRest(ctx context.Context) error {
	addr, err := c.metricsAddress(ctx)
	if err != nil {
		return err
	}
	if addr == "" {
		return errors.New("serve printed no metrics address: cannot tell when it is at rest")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last, since := -1.0, time.Now()
	for {
		checks, err := scrapeCounter(ctx, addr, driftChecks)
		if err != nil {
			return err
		}
		if checks != last {
			last, since = checks, time.Now()
		}
		if checks >= 1 && time.Since(since) >= rssSettle && time.Since(c.started) >= startupWork {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for serve at rest (%s %v, unchanged for %s): %w", driftChecks, last, time.Since(since).Round(time.Millisecond), ctx.Err())
		case <-t.C:
		}
	}
}

// scrapeCounter reads counter name (without labels) from the Prometheus
// metrics served at addr.
func scrapeCounter(ctx context.Context, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	// Not gzip, which Go's client asks for by default: serve's compressor
	// alone would add a megabyte to the RSS the row measures.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading serve's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading serve's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("serve's metrics: %w", err)
	}
	f, ok := families[name]
	if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter() == nil {
		return 0, fmt.Errorf("serve's metrics have no counter %s", name)
	}
	return f.GetMetric()[0].GetCounter().GetValue(), nil
}

// rss: scenario 6, the RSS of serve with an empty journal and with
// cfg.leaves leaves journaled (the journal prepared in this process
// without fsync; the child re-pushes them to its empty device).
func (b *bencher) rss(ctx context.Context) ([]row, error) {
	idle, err := b.childRSS(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("idle: %w", err)
	}
	full, err := b.childRSS(ctx, b.cfg.leaves)
	if err != nil {
		return nil, fmt.Errorf("%d leaves: %w", b.cfg.leaves, err)
	}
	r1 := sidecarOnly("RSS of serve, idle", "MB", "lower", idle.total).withTarget("≤ 30 MB", idle.total <= 30)
	r1.Note = idle.String()
	r2 := sidecarOnly(fmt.Sprintf("RSS of serve, %d leaves journaled", b.cfg.leaves), "MB", "lower", full.total)
	r2.Note = full.String()
	// Issue 36's targets: ≤ 40 MB with 3,000 leaves, ≤ 120 MB with 100,000.
	switch b.cfg.leaves {
	case 3_000:
		r2 = r2.withTarget("≤ 40 MB", full.total <= 40)
	case 100_000:
		r2 = r2.withTarget("≤ 120 MB", full.total <= 120)
	default:
		r2.Target = "≤ 40 MB at 3,000 leaves, ≤ 120 MB at 100,000 (not this size)"
	}
	return []row{r1, r2}, nil
}

// childRSS starts a serve child over a journal holding leaves leaves,
// waits until it is connected and has re-pushed, lets it settle, and
// returns its RSS.
func (b *bencher) childRSS(ctx context.Context, leaves int) (rss, error) {
	dev, err := b.startDevice(ctx)
	if err != nil {
		return rss{}, err
	}
	defer dev.Stop()
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-rss-")
	if err != nil {
		return rss{}, err
	}
	defer os.RemoveAll(dir)
	if leaves > 0 {
		if err := b.prepareLeaves(ctx, dir, leaves); err != nil {
			return rss{}, err
		}
	}
	c, err := b.startChild(ctx, dev.Addr(), dir)
	if err != nil {
		return rss{}, err
	}
	defer c.stop()
	if err := waitConnected(ctx, c.client); err != nil {
		return rss{}, fmt.Errorf("%w; stderr: %s", err, c.stderr.String())
	}
	if _, err := setLeaf(ctx, c.client, "rss", "probe"); err != nil {
		return rss{}, err
	}
	if err := c.atRest(ctx); err != nil {
		return rss{}, err
	}
	return c.rss()
}

// reopen: scenario 6, the time from starting serve over a journal of
// cfg.proposals proposals until it answers Capabilities, and until its
// agent is connected (re-push done) and a Set succeeds.
func (b *bencher) reopen(ctx context.Context) ([]row, error) {
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-reopen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prep := time.Now()
	if err := b.prepareProposals(ctx, dir, b.cfg.proposals); err != nil {
		return nil, err
	}
	prepTook := time.Since(prep)
	dev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	defer dev.Stop()
	c, err := b.startChild(ctx, dev.Addr(), dir)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if err := benchPoll(ctx, 5*time.Minute, "Capabilities", func(ctx context.Context) (bool, error) {
		_, err := c.client.Capabilities(ctx, &gpb.CapabilityRequest{})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	answered := time.Since(c.started)
	if err := waitConnected(ctx, c.client); err != nil {
		return nil, err
	}
	if _, err := setLeaf(ctx, c.client, "reopen", "ok"); err != nil {
		return nil, err
	}
	setOK := time.Since(c.started)
	label := fmt.Sprintf("restart with %d proposals", b.cfg.proposals)
	first := sidecarOnly(label+" → Capabilities", "s", "lower", answered.Seconds())
	if b.cfg.proposals >= 1_000_000 {
		first = first.withTarget("≤ 2 s", answered <= 2*time.Second)
	} else {
		first.Target = "≤ 2 s at 1,000,000 proposals (not this size)"
	}
	first.Note = fmt.Sprintf("journal prepared without fsync in %v", prepTook.Round(time.Millisecond))
	second := sidecarOnly(label+" → Set ok", "s", "lower", setOK.Seconds())
	return []row{first, second}, nil
}

// openPrepJournal opens a journal in dir for data preparation: no fsync
// (documented in docs/bench.md), every proposal kept, and a synced term.
func (b *bencher) openPrepJournal(ctx context.Context, dir string) (*journal.Journal, uint64, error) {
	j, err := journal.Open(dir, journal.Options{NoSync: true, Retain: -1, Logger: b.log.With("component", "prep-journal")})
	if err != nil {
		return nil, 0, fmt.Errorf("journal %s: %w", dir, err)
	}
	m, err := j.Connect(ctx)
	if err == nil {
		_, err = j.StartReconcile(ctx, m.Term)
	}
	if err == nil {
		_, err = j.CompleteReconcile(ctx, m.Term, 0)
	}
	if err != nil {
		_ = j.Close()
		return nil, 0, fmt.Errorf("preparing the journal's term: %w", err)
	}
	return j, m.Term, nil
}

func leafOp(name, value string) *journal.Op {
	p := benchLeafPath(name)
	return &journal.Op{Kind: journal.OpUpdate, Path: p, Values: []*journal.Leaf{{Path: p, Value: benchStr(value)}}}
}

// commitAndApply drives proposal i from proposed to applied.
func commitAndApply(ctx context.Context, j *journal.Journal, term, i uint64) error {
	if _, _, err := j.CommitChange(ctx, i); err != nil {
		return fmt.Errorf("CommitChange(%d): %w", i, err)
	}
	return applyProposal(ctx, j, term, i)
}

func applyProposal(ctx context.Context, j *journal.Journal, term, i uint64) error {
	if _, _, err := j.StartApply(ctx, i); err != nil {
		return fmt.Errorf("StartApply(%d): %w", i, err)
	}
	if _, _, err := j.CompleteApply(ctx, i, term); err != nil {
		return fmt.Errorf("CompleteApply(%d): %w", i, err)
	}
	return nil
}

// prepareLeaves writes n applied leaves bench0… into a new journal in dir,
// preloadBatch leaves per proposal.
func (b *bencher) prepareLeaves(ctx context.Context, dir string, n int) error {
	return b.withPrepJournal(ctx, dir, func(j *journal.Journal, term uint64) error {
		return preloadLeaves(ctx, j, term, n)
	})
}

// withPrepJournal opens a new journal in dir for data preparation, runs fn
// on it and closes it.
func (b *bencher) withPrepJournal(ctx context.Context, dir string, fn func(j *journal.Journal, term uint64) error) (err error) {
	j, term, err := b.openPrepJournal(ctx, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := j.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing the prepared journal: %w", cerr)
		}
	}()
	return fn(j, term)
}

// preloadLeaves proposes, commits and applies n leaves bench0…,
// preloadBatch leaves per proposal.
func preloadLeaves(ctx context.Context, j *journal.Journal, term uint64, n int) error {
	for base := 0; base < n; base += preloadBatch {
		var ops []*journal.Op
		for i := base; i < min(base+preloadBatch, n); i++ {
			ops = append(ops, leafOp(fmt.Sprintf("bench%d", i), "preloaded"))
		}
		p, err := j.ProposeChange(ctx, ops)
		if err != nil {
			return fmt.Errorf("ProposeChange: %w", err)
		}
		if err := commitAndApply(ctx, j, term, p.Index); err != nil {
			return err
		}
	}
	return nil
}

// prepareProposals writes n one-leaf proposals (over 100 leaves), all
// committed and applied, into a new journal in dir. Proposing runs 32-wide
// and overlaps with committing and applying, which go in index order, so
// the journal's writer batches them together.
func (b *bencher) prepareProposals(ctx context.Context, dir string, n int) error {
	return b.withPrepJournal(ctx, dir, func(j *journal.Journal, term uint64) error {
		return prepareProposals(ctx, j, term, n)
	})
}

// prepareProposals writes n one-leaf proposals into j (see
// bencher.prepareProposals).
func prepareProposals(ctx context.Context, j *journal.Journal, term uint64, n int) error {
	first, err := j.ProposeChange(ctx, []*journal.Op{leafOp("bench0", "v0")})
	if err != nil {
		return fmt.Errorf("ProposeChange: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	proposed := make(chan uint64, 1024)
	committed := make(chan uint64, 1024)
	g.Go(func() error { defer close(proposed); return proposeMany(gctx, j, n-1, proposed) })
	g.Go(func() error {
		defer close(committed)
		return commitInOrder(gctx, j, first.Index, proposed, committed)
	})
	g.Go(func() error {
		for i := range committed {
			if err := applyProposal(gctx, j, term, i); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}

// proposeMany proposes n one-leaf changes from 32 goroutines and sends each
// index on out.
func proposeMany(ctx context.Context, j *journal.Journal, n int, out chan<- uint64) error {
	const writers = 32
	g, gctx := errgroup.WithContext(ctx)
	for w := range writers {
		g.Go(func() error {
			for k := w; k < n; k += writers {
				p, err := j.ProposeChange(gctx, []*journal.Op{leafOp(fmt.Sprintf("bench%d", k%100), fmt.Sprintf("v%d", k))})
				if err != nil {
					return fmt.Errorf("ProposeChange: %w", err)
				}
				select {
				case out <- p.Index:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// commitInOrder commits first, then every index received on in, in index
// order (they arrive in any order), passing each on to out.
func commitInOrder(ctx context.Context, j *journal.Journal, first uint64, in <-chan uint64, out chan<- uint64) error {
	pending := map[uint64]bool{first: true}
	next := first
	commitReady := func() error {
		for pending[next] {
			delete(pending, next)
			if _, _, err := j.CommitChange(ctx, next); err != nil {
				return fmt.Errorf("CommitChange(%d): %w", next, err)
			}
			select {
			case out <- next:
			case <-ctx.Done():
				return ctx.Err()
			}
			next++
		}
		return nil
	}
	for i := range in {
		pending[i] = true
		if err := commitReady(); err != nil {
			return err
		}
	}
	if err := commitReady(); err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("%d proposals left uncommitted after index %d", len(pending), next)
	}
	return nil
}
