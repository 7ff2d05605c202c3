package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// rig is a sidecar without its northbound side: a journal on disk, an
// agent, a trace file, and a simulated device on loopback. It can restart
// the sidecar (close and reopen the journal) and the device.
type rig struct {
	t         testing.TB
	dev       *testbed.Device
	dir       string
	tracePath string
	opts      agent.Options
	// maxMemTable is the journal's MaxMemTableSize (0: its default).
	maxMemTable int64

	traceFile io.Closer
	j         *journal.Journal
	a         *agent.Agent
	cancel    context.CancelFunc
	done      chan error
}

func newRig(t testing.TB, devOpts testbed.Options, opts agent.Options) *rig {
	t.Helper()
	dir := t.TempDir()
	if devOpts.Logger == nil {
		devOpts.Logger = sidecartest.Logger(t).With("component", "device")
	}
	dev := testbed.StartT(t, devOpts)
	opts.Target = dev.Addr()
	if opts.BackoffInitial == 0 {
		opts.BackoffInitial, opts.BackoffMax = 5*time.Millisecond, 50*time.Millisecond
	}
	if opts.ApplyTimeout == 0 {
		opts.ApplyTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = sidecartest.Logger(t)
	}
	if opts.Resync == 0 {
		opts.Resync = 200 * time.Millisecond
	}
	if keep := os.Getenv("AGENT_TRACE_DIR"); keep != "" {
		dir = keep
	}
	r := &rig{t: t, dev: dev, dir: filepath.Join(dir, "journal"), tracePath: filepath.Join(dir, "trace.jsonl"), opts: opts}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// openJournal opens the journal with the trace on, as a sidecar start does.
func (r *rig) openJournal() (*journal.Journal, io.Closer) {
	r.t.Helper()
	tracer, f, err := trace.OpenFile(r.tracePath)
	if err != nil {
		r.t.Fatal(err)
	}
	j, err := journal.Open(r.dir, journal.Options{NoSync: true, Observer: tracer.Observe, Retain: -1, MemTableSize: 1 << 20, MaxMemTableSize: r.maxMemTable})
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := j.Mastership(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	tracer.Begin(m)
	return j, f
}

// offline runs fn on the journal while the sidecar is stopped, as if an
// earlier sidecar run had made those transitions.
func (r *rig) offline(fn func(j *journal.Journal)) {
	r.t.Helper()
	r.stop()
	j, f := r.openJournal()
	fn(j)
	if err := j.Close(); err != nil {
		r.t.Fatal(err)
	}
	_ = f.Close()
	r.start()
}

// startedOffline journals ops as a proposal and records it committed and
// started, as a run that sent it to the device and crashed would have, and
// returns its index. Use it inside offline.
func startedOffline(t testing.TB, j *journal.Journal, ops ...*journal.Op) uint64 {
	t.Helper()
	ctx := context.Background()
	p, err := j.ProposeChange(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	i := p.GetIndex()
	if _, _, err := j.CommitChange(ctx, i); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.StartApply(ctx, i); err != nil {
		t.Fatal(err)
	}
	return i
}

// start opens the journal and runs the agent (a sidecar start).
func (r *rig) start() {
	r.t.Helper()
	j, f := r.openJournal()
	a, err := agent.New(j, r.opts)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.traceFile, r.j, r.a, r.cancel, r.done = f, j, a, cancel, make(chan error, 1)
	go func() { r.done <- a.Run(ctx) }()
}

// stop stops the agent and closes the journal (a clean sidecar stop).
func (r *rig) stop() {
	if r.j == nil {
		return
	}
	r.cancel()
	if err := <-r.done; err != nil {
		r.t.Errorf("agent.Run: %v", err)
	}
	if err := r.j.Close(); err != nil {
		r.t.Errorf("journal Close: %v", err)
	}
	_ = r.traceFile.Close()
	r.j = nil
}

func (r *rig) restartSidecar() {
	r.t.Helper()
	r.stop()
	r.start()
}

func (r *rig) restartDevice() {
	r.t.Helper()
	r.dev.Stop()
	if err := r.dev.Start(context.Background(), ""); err != nil {
		r.t.Fatalf("device restart: %v", err)
	}
}

// propose journals a Set and tells the agent, like the proxy does.
func (r *rig) propose(ops ...*journal.Op) uint64 {
	r.t.Helper()
	p, err := r.j.ProposeChange(context.Background(), ops)
	if err != nil {
		r.t.Fatalf("ProposeChange: %v", err)
	}
	r.a.Notify()
	return p.GetIndex()
}

// rollback proposes the rollback of i.
func (r *rig) rollback(i uint64) error {
	_, _, err := r.j.ProposeRollback(context.Background(), i)
	if err == nil {
		r.a.Notify()
	}
	return err
}

// wait waits until done(proposal i) holds.
func (r *rig) wait(i uint64, done func(*journal.Proposal) bool) *journal.Proposal {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := r.a.Wait(ctx, i, done)
	if err != nil {
		last, _ := r.j.Proposal(context.Background(), i)
		r.t.Fatalf("proposal %d: %v (last seen: %v)", i, err, last)
	}
	return p
}

func (r *rig) waitApplied(i uint64) *journal.Proposal {
	r.t.Helper()
	return r.wait(i, agent.Applied)
}

// eventually polls cond until it holds or 20 s pass.
func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	// Generous: a loaded CI machine running -race slows every Set.
	sidecartest.Eventually(r.t, time.Minute, what, cond)
}

// quiescent reports whether every proposal is finished and the device is
// synced for the current term over a live connection.
func (r *rig) quiescent() (bool, error) {
	ctx := context.Background()
	c, err := r.j.Configuration(ctx)
	if err != nil {
		return false, err
	}
	m, err := r.j.Mastership(ctx)
	if err != nil {
		return false, err
	}
	st := r.a.Status()
	if !st.Connected || st.Term != m.GetTerm() || c.GetApplied().GetTerm() != m.GetTerm() || c.GetStatus() != journal.StatusComplete {
		return false, nil
	}
	// The journal records a re-push complete before the agent records it
	// in its status (LastRepush*): a re-push is over once both did.
	if st.Repushing {
		return false, nil
	}
	// Synced to the device as it runs now: right after a device restart the
	// agent may not have seen the old connection break yet, and its term
	// still looks current. applied.target is the boot time of the device
	// incarnation the configuration was pushed to (or adopted by), when
	// the liveness stream reads it.
	if !r.opts.WatchConnectionState && c.GetApplied().GetTarget() != uint64(r.dev.BootTime().UnixNano()) {
		return false, nil
	}
	// A commit-confirmed still outstanding will roll its change back.
	if _, err := r.j.CommitConfirm(ctx); !errors.Is(err, journal.ErrNotFound) {
		return false, err
	}
	done := true
	err = r.j.Proposals(ctx, 0, 0, func(p *journal.Proposal) error {
		ch := p.GetChange()
		if !journal.Finished(ch.GetCommit()) || !agent.Applied(p) {
			done = false
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return done, err
}

var errStop = errors.New("stop")

func (r *rig) waitQuiescent() {
	r.t.Helper()
	r.eventually("quiescence", func() bool {
		ok, err := r.quiescent()
		if err != nil {
			r.t.Fatal(err)
		}
		return ok
	})
	// The journal's Observer writes a transition's trace line after the
	// transaction is visible to readers, so the trace may lag the state
	// just read by a line or two: give it a moment to catch up. A real
	// violation persists and verify reports it.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		lines, err := trace.ReadFile(r.tracePath)
		if err == nil {
			rep := trace.Check(lines)
			rep.CheckQuiescent()
			if len(rep.Violations) == 0 && len(trace.CheckApplied(rep.Applied, r.applied())) == 0 {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// applied returns the journal's applied values.
func (r *rig) applied() []*journal.PathValue {
	r.t.Helper()
	var out []*journal.PathValue
	if err := r.j.Applied(context.Background(), nil, func(pv *journal.PathValue) error {
		out = append(out, pv)
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// verify checks the trace (Order, Sequential, rollback order, terms,
// Liveness at quiescence) and Consistency of the journal and the device.
func (r *rig) verify() *trace.Report {
	r.t.Helper()
	leaves := sidecartest.DeviceLeaves(r.t, r.dev)
	return trace.Verify(r.t, r.tracePath, trace.VerifyOptions{Quiescent: true, Applied: r.applied(), Device: leaves,
		OutOfSync: r.outOfSync()})
}

// outOfSync returns the journal's out-of-sync records.
func (r *rig) outOfSync() []*journal.OutOfSync {
	r.t.Helper()
	recs, err := r.j.OutOfSync(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return recs
}

func (r *rig) deviceLeaf(path string) (*gpb.TypedValue, bool) {
	r.t.Helper()
	v, ok := sidecartest.DeviceLeaves(r.t, r.dev)[path]
	return v, ok
}

func (r *rig) config() *journal.Configuration {
	r.t.Helper()
	c, err := r.j.Configuration(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// --- operations ---

func str(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

func uintv(n uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}}
}

func updateOp(t testing.TB, p string, v *gpb.TypedValue) *journal.Op {
	pp := sidecartest.Path(t, p)
	return &journal.Op{Kind: journal.OpUpdate, Path: pp, Values: []*journal.Leaf{{Path: pp, Value: v}}}
}

func deleteOp(t testing.TB, p string) *journal.Op {
	return &journal.Op{Kind: journal.OpDelete, Path: sidecartest.Path(t, p)}
}

func descPath(intf string) string {
	return fmt.Sprintf("/interfaces/interface[name=%s]/config/description", intf)
}

func mtuPath(intf string) string {
	return fmt.Sprintf("/interfaces/interface[name=%s]/config/mtu", intf)
}
