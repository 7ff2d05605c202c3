package metrics

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// openJournal opens a journal in a temporary directory whose Observer is
// the collector's, and loads the collector.
func openJournal(t *testing.T, dir string, opts journal.Options) (*journal.Journal, *Journal) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	c := NewJournal()
	opts.NoSync, opts.MemTableSize = true, 1<<20
	opts.Observer = c.Observe
	j, err := journal.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	if err := c.Load(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j, c
}

// series gathers c on a pedantic registry (which also checks Describe
// against Collect) and returns every sample of the family name, keyed by
// its labels ("" when it has none; "k=v,k=v" sorted by label name
// otherwise, as gathered).
func series(t *testing.T, c prometheus.Collector, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func one(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	s := series(t, c, name)
	v, ok := s[""]
	if !ok || len(s) != 1 {
		t.Fatalf("%s: %v, want one unlabelled sample", name, s)
	}
	return v
}

func update(leaf, v string) []*journal.Op {
	p := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "a"}, {Name: leaf}}}
	return []*journal.Op{{Kind: journal.OpUpdate, Path: p, Values: []*journal.Leaf{{Path: p,
		Value: &gnmi.TypedValue{Value: &gnmi.TypedValue_StringVal{StringVal: v}}}}}}
}

// connect records a new term and completes its re-push, as the agent does.
func connect(t *testing.T, ctx context.Context, j *journal.Journal) uint64 {
	t.Helper()
	m, err := j.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.StartReconcile(ctx, m.GetTerm()); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CompleteReconcile(ctx, m.GetTerm(), 0); err != nil {
		t.Fatal(err)
	}
	return m.GetTerm()
}

func must(t *testing.T, _ *journal.Proposal, _ *journal.Configuration, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestJournalMetrics(t *testing.T) {
	ctx := context.Background()
	j, c := openJournal(t, "", journal.Options{})

	if got := series(t, c, "gnmi_sidecar_proposals"); len(got) != 20 {
		t.Errorf("gnmi_sidecar_proposals has %d series, want 20 (2 phases x 2 steps x 5 statuses): %v", len(got), got)
	}
	for name, want := range map[string]float64{
		"gnmi_sidecar_queue_depth":                  0,
		"gnmi_sidecar_journal_retained_proposals":   0,
		"gnmi_sidecar_mastership_term":              0,
		"gnmi_sidecar_journal_writable":             1,
		"gnmi_sidecar_commit_confirmed_outstanding": 0,
	} {
		if got := one(t, c, name); got != want {
			t.Errorf("empty journal: %s = %v, want %v", name, got, want)
		}
	}

	term := connect(t, ctx, j)
	// Proposal 1 applied, 2 committed, 3 journaled only.
	for k := 1; k <= 3; k++ {
		if _, err := j.ProposeChange(ctx, update("x", fmt.Sprint(k))); err != nil {
			t.Fatal(err)
		}
	}
	p, cf, err := j.CommitChange(ctx, 1)
	must(t, p, cf, err)
	p, cf, err = j.StartApply(ctx, 1)
	must(t, p, cf, err)
	p, cf, err = j.CompleteApply(ctx, 1, term)
	must(t, p, cf, err)
	p, cf, err = j.CommitChange(ctx, 2)
	must(t, p, cf, err)

	want := map[string]float64{
		"phase=change,status=complete,step=commit": 2,
		"phase=change,status=pending,step=commit":  1,
		"phase=change,status=complete,step=apply":  1,
		"phase=change,status=pending,step=apply":   2,
	}
	checkProposals(t, c, want)
	for name, want := range map[string]float64{
		"gnmi_sidecar_queue_depth":                2,
		"gnmi_sidecar_journal_retained_proposals": 3,
		"gnmi_sidecar_mastership_term":            1,
		"gnmi_sidecar_journal_last_index":         3,
		"gnmi_sidecar_journal_committed_index":    2,
		"gnmi_sidecar_journal_applied_index":      1,
	} {
		if got := one(t, c, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := one(t, c, "gnmi_sidecar_journal_size_bytes"); got <= 0 {
		t.Errorf("gnmi_sidecar_journal_size_bytes = %v, want > 0", got)
	}
	if avail, size := one(t, c, "gnmi_sidecar_journal_filesystem_avail_bytes"), one(t, c, "gnmi_sidecar_journal_filesystem_size_bytes"); avail <= 0 || size < avail {
		t.Errorf("journal filesystem: %v available of %v, want 0 < available <= size", avail, size)
	}
	transitions := series(t, c, "gnmi_sidecar_journal_transitions_total")
	for action, want := range map[string]float64{"ProposeChange": 3, "CommitChange": 2, "StartApply": 1,
		"CompleteApply": 1, "Connect": 1, "CompleteReconcile": 1, "FailApply": 0, "Compact": 0} {
		if got := transitions["action="+action]; got != want {
			t.Errorf("transitions{action=%s} = %v, want %v", action, got, want)
		}
	}
	commits := series(t, c, "gnmi_sidecar_commit_duration_seconds")
	applies := series(t, c, "gnmi_sidecar_apply_duration_seconds")
	if commits["phase=change"] != 2 || commits["phase=rollback"] != 0 || applies["phase=change"] != 1 || applies["phase=rollback"] != 0 {
		t.Errorf("histogram counts: commit %v, apply %v; want commit change 2, apply change 1", commits, applies)
	}

	// Proposal 2 fails on the device: 3, committed meanwhile, is re-based,
	// committed again and applied.
	p, cf, err = j.CommitChange(ctx, 3)
	must(t, p, cf, err)
	p, cf, err = j.StartApply(ctx, 2)
	must(t, p, cf, err)
	p, cf, err = j.FailApply(ctx, 2, 3, "rejected")
	must(t, p, cf, err)
	checkProposals(t, c, map[string]float64{
		"phase=change,status=complete,step=commit": 2,
		"phase=change,status=pending,step=commit":  1,
		"phase=change,status=complete,step=apply":  1,
		"phase=change,status=failed,step=apply":    1,
		"phase=change,status=pending,step=apply":   1,
	})
	if got := series(t, c, "gnmi_sidecar_journal_transitions_total")["action=Rebase"]; got != 1 {
		t.Errorf("transitions{action=Rebase} = %v, want 1", got)
	}
	p, cf, err = j.CommitChange(ctx, 3)
	must(t, p, cf, err)
	p, cf, err = j.StartApply(ctx, 3)
	must(t, p, cf, err)
	p, cf, err = j.CompleteApply(ctx, 3, term)
	must(t, p, cf, err)
	checkProposals(t, c, map[string]float64{
		"phase=change,status=complete,step=commit": 3,
		"phase=change,status=complete,step=apply":  2,
		"phase=change,status=failed,step=apply":    1,
	})
	if got := one(t, c, "gnmi_sidecar_queue_depth"); got != 0 {
		t.Errorf("after the failure: queue depth %v, want 0", got)
	}

	// Proposal 3 rolled back.
	p, cf, err = j.ProposeRollback(ctx, 3)
	must(t, p, cf, err)
	if got := one(t, c, "gnmi_sidecar_queue_depth"); got != 1 {
		t.Errorf("rollback proposed: queue depth %v, want 1", got)
	}
	p, cf, err = j.CommitRollback(ctx, 3)
	must(t, p, cf, err)
	p, cf, err = j.StartApplyRollback(ctx, 3)
	must(t, p, cf, err)
	p, cf, err = j.CompleteApplyRollback(ctx, 3, term)
	must(t, p, cf, err)
	checkProposals(t, c, map[string]float64{
		"phase=change,status=complete,step=commit":   3,
		"phase=change,status=complete,step=apply":    2,
		"phase=change,status=failed,step=apply":      1,
		"phase=rollback,status=complete,step=commit": 1,
		"phase=rollback,status=complete,step=apply":  1,
	})
	commits = series(t, c, "gnmi_sidecar_commit_duration_seconds")
	applies = series(t, c, "gnmi_sidecar_apply_duration_seconds")
	if commits["phase=rollback"] != 1 || applies["phase=rollback"] != 1 || applies["phase=change"] != 3 {
		t.Errorf("histogram counts: commit %v, apply %v; want a rollback in each and 3 change applies", commits, applies)
	}
	if got := one(t, c, "gnmi_sidecar_queue_depth"); got != 0 {
		t.Errorf("rollback applied: queue depth %v, want 0", got)
	}
}

// checkProposals compares gnmi_sidecar_proposals with want (absent series
// want 0).
func checkProposals(t *testing.T, c prometheus.Collector, want map[string]float64) {
	t.Helper()
	got := series(t, c, "gnmi_sidecar_proposals")
	for k, v := range got {
		if v != want[k] {
			t.Errorf("gnmi_sidecar_proposals{%s} = %v, want %v", k, v, want[k])
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("gnmi_sidecar_proposals{%s} missing", k)
		}
	}
}

// scanned counts the retained proposals by phase, step and status from a
// scan of the journal, independently of the collector, and the queue.
func scanned(t *testing.T, j *journal.Journal) (map[string]float64, float64) {
	t.Helper()
	want := map[string]float64{}
	queue := 0.0
	name := func(s journal.Status) string {
		return strings.ToLower(strings.TrimPrefix(s.String(), "STATUS_"))
	}
	err := j.Proposals(context.Background(), 0, 0, func(p *journal.Proposal) error {
		ch, rb := p.GetChange(), p.GetRollback()
		want["phase=change,status="+name(ch.GetCommit())+",step=commit"]++
		want["phase=change,status="+name(ch.GetApply())+",step=apply"]++
		working := journal.Working(ch.GetApply())
		if p.GetPhase() == journal.PhaseRollback {
			want["phase=rollback,status="+name(rb.GetCommit())+",step=commit"]++
			want["phase=rollback,status="+name(rb.GetApply())+",step=apply"]++
			working = working || rb.GetApply() != journal.StatusComplete
		}
		if working {
			queue++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want, queue
}

// TestJournalMetricsMatchScan drives a journal through random transitions
// (those its guards refuse write nothing) with retention dropping old
// proposals, and checks that the counts kept from the events always match
// a scan, and that a collector loaded from the journal agrees.
func TestJournalMetricsMatchScan(t *testing.T) {
	const walkSteps = 2000
	ctx := context.Background()
	dir := t.TempDir()
	j, c := openJournal(t, dir, journal.Options{Retain: 8})
	rng := rand.New(rand.NewPCG(7, 11))
	term := connect(t, ctx, j)
	refused := func(err error) bool {
		return err == nil || errors.Is(err, journal.ErrGuard) || errors.Is(err, journal.ErrNotFound) ||
			errors.Is(err, journal.ErrCompacted) || errors.Is(err, journal.ErrInvalid)
	}
	for step := 0; step < walkSteps; step++ {
		cfg, err := j.Configuration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Mostly an index where something can happen, sometimes any.
		nextApply := uint64(0)
		if err := j.Proposals(ctx, 0, 0, func(p *journal.Proposal) error {
			if nextApply == 0 && journal.Working(p.GetChange().GetApply()) {
				nextApply = p.GetIndex()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		candidates := []uint64{cfg.GetCommitted().GetProposal() + 1, nextApply, nextApply,
			cfg.GetRollingBack(), cfg.GetRollingBack(),
			cfg.GetFirstIndex() + uint64(rng.IntN(int(cfg.GetLastIndex()-cfg.GetFirstIndex()+2)))}
		i := candidates[rng.IntN(len(candidates))]
		// As the agent, commit no change while a rollback is under way
		// (the journal would let it and the rollback could never commit).
		commitChange := func() {
			if cfg.GetRollingBack() == 0 {
				_, _, err = j.CommitChange(ctx, i)
			}
		}
		switch rng.IntN(14) {
		case 0, 1:
			// Proposals in every other block of 100 steps: in between
			// the queue drains and rollbacks become possible.
			if (step/100)%2 == 0 && (nextApply == 0 || cfg.GetLastIndex()-nextApply < 6) {
				_, err = j.ProposeChange(ctx, update(fmt.Sprint("l", rng.IntN(4)), fmt.Sprint(step)))
			} else if (step/100)%2 == 1 && nextApply != 0 {
				// Drain the queue as the agent does: start and complete
				// the next apply (or abort it, if that is what it needs).
				if _, _, err = j.StartApply(ctx, nextApply); err == nil {
					_, _, err = j.CompleteApply(ctx, nextApply, term)
				} else if refused(err) {
					_, _, err = j.AbortApply(ctx, nextApply)
				}
			}
		case 2:
			commitChange()
		case 3:
			if rng.IntN(3) == 0 {
				_, _, err = j.FailCommit(ctx, i, 3, "invalid")
			} else {
				commitChange()
			}
		case 4:
			_, _, err = j.StartApply(ctx, i)
		case 5:
			_, _, err = j.CompleteApply(ctx, i, term)
		case 6:
			if rng.IntN(3) == 0 {
				_, _, err = j.FailApply(ctx, i, 3, "rejected")
			} else {
				_, _, err = j.AbortApply(ctx, i)
			}
		case 7, 12, 13:
			if n, e := j.NewestRollbackable(ctx); e == nil {
				_, _, err = j.ProposeRollback(ctx, n)
			}
		case 8:
			_, _, err = j.CommitRollback(ctx, i)
		case 9:
			_, _, err = j.StartApplyRollback(ctx, i)
		case 10:
			_, _, err = j.CompleteApplyRollback(ctx, i, term)
		case 11:
			if rng.IntN(10) == 0 {
				term = connect(t, ctx, j)
			} else {
				_, err = j.Compact(ctx)
			}
		}
		if !refused(err) {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%50 == 0 || step == walkSteps-1 {
			want, queue := scanned(t, j)
			checkProposals(t, c, want)
			if got := one(t, c, "gnmi_sidecar_queue_depth"); got != queue {
				t.Fatalf("step %d: queue depth %v, scan says %v", step, got, queue)
			}
			if t.Failed() {
				t.Fatalf("step %d: the collector's counts differ from a scan", step)
			}
		}
	}
	want, _ := scanned(t, j)
	var summary []string
	for k, v := range want {
		summary = append(summary, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(summary)
	t.Logf("final counts: %s", strings.Join(summary, " "))
	transitions := series(t, c, "gnmi_sidecar_journal_transitions_total")
	t.Logf("transitions: %v", transitions)
	for _, a := range []journal.Action{journal.ActionCompleteApply, journal.ActionFailApply, journal.ActionAbortApply,
		journal.ActionFailCommit, journal.ActionCompleteApplyRollback, journal.ActionCompact} {
		if transitions["action="+string(a)] == 0 {
			t.Errorf("the walk never made a %s transition", a)
		}
	}
	retained := one(t, c, "gnmi_sidecar_journal_retained_proposals")

	// A new collector loaded from the reopened journal counts the same.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, c2 := openJournal(t, dir, journal.Options{Retain: 8})
	checkProposals(t, c2, want)
	if got := one(t, c2, "gnmi_sidecar_journal_retained_proposals"); got != retained {
		t.Errorf("reopened: retained %v, want %v", got, retained)
	}
	if got := one(t, c2, "gnmi_sidecar_mastership_term"); got != float64(term) {
		t.Errorf("reopened: term %v, want %d", got, term)
	}
	_ = j2
}

// TestJournalMetricsBeforeLoad: until Load, only the event metrics.
func TestJournalMetricsBeforeLoad(t *testing.T) {
	c := NewJournal()
	if got := series(t, c, "gnmi_sidecar_proposals"); len(got) != 0 {
		t.Errorf("before Load: %v", got)
	}
	if got := series(t, c, "gnmi_sidecar_journal_transitions_total"); len(got) != len(actions) {
		t.Errorf("transitions before any event: %d series, want %d", len(got), len(actions))
	}
}

// TestJournalMetricsClosed: a scrape of a closed journal still serves what
// it can, and says what it cannot.
func TestJournalMetricsClosed(t *testing.T) {
	j, c := openJournal(t, "", journal.Options{})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("gather of a closed journal: %v, want an error saying it is closed", err)
	}
	if len(mfs) == 0 {
		t.Error("gather of a closed journal returned nothing")
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "gnmi_sidecar_queue_depth"
	}
	if !found {
		t.Error("gather of a closed journal lacks gnmi_sidecar_queue_depth")
	}
}

// TestJournalMetricsLoadWhileBusy loads a collector while the journal keeps
// changing (proposals committed and applied, new ones proposed): the
// events during the read are neither lost nor counted twice, and the
// writer does not wait for the read.
func TestJournalMetricsLoadWhileBusy(t *testing.T) {
	ctx := context.Background()
	c := NewJournal()
	j, err := journal.Open(t.TempDir(), journal.Options{NoSync: true, MemTableSize: 1 << 20, Observer: c.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	term := connect(t, ctx, j)
	const preloaded = 3000
	for n := range preloaded {
		if _, err := j.ProposeChange(ctx, update(fmt.Sprintf("l%d", n%50), "v")); err != nil {
			t.Fatal(err)
		}
	}
	loaded := make(chan error, 1)
	go func() { loaded <- c.Load(ctx, j) }()
	busy := 0
	for i := uint64(1); ; i++ {
		select {
		case err := <-loaded:
			if err != nil {
				t.Fatal(err)
			}
			if busy == 0 {
				t.Fatal("the load finished before any transition ran alongside it")
			}
			want, queue := scanned(t, j)
			checkProposals(t, c, want)
			if got := one(t, c, "gnmi_sidecar_queue_depth"); got != queue {
				t.Errorf("queue depth %v, want %v", got, queue)
			}
			t.Logf("%d transitions ran during the load", busy)
			return
		default:
		}
		if i > preloaded {
			t.Fatal("every proposal applied before the load finished: load a larger journal")
		}
		p, c2, err := j.CommitChange(ctx, i)
		must(t, p, c2, err)
		p, c2, err = j.StartApply(ctx, i)
		must(t, p, c2, err)
		p, c2, err = j.CompleteApply(ctx, i, term)
		must(t, p, c2, err)
		if _, err := j.ProposeChange(ctx, update("new", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		busy += 4
	}
}

// The outstanding commit-confirmed is exported: outstanding 1, its
// deadline with its proposal and author; none: 0, and no deadline.
func TestCommitConfirmDeadline(t *testing.T) {
	ctx := context.Background()
	j, c := openJournal(t, "", journal.Options{})
	connect(t, ctx, j)
	if got := one(t, c, "gnmi_sidecar_commit_confirmed_outstanding"); got != 0 {
		t.Errorf("none outstanding: outstanding %v, want 0", got)
	}
	if got := series(t, c, "gnmi_sidecar_commit_confirmed_deadline_timestamp_seconds"); len(got) != 0 {
		t.Errorf("none outstanding: deadline %v, want no series", got)
	}
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := j.ProposeConfirmedChange(ctx, journal.Sender{Author: "alice"}, update("y", "1"), "cc1", deadline); err != nil {
		t.Fatal(err)
	}
	if got := one(t, c, "gnmi_sidecar_commit_confirmed_outstanding"); got != 1 {
		t.Errorf("outstanding %v, want 1", got)
	}
	got := series(t, c, "gnmi_sidecar_commit_confirmed_deadline_timestamp_seconds")
	if len(got) != 1 {
		t.Fatalf("deadline series %v, want one", got)
	}
	for labels, v := range got {
		if v != float64(deadline.Unix()) || !strings.Contains(labels, "proposal=1") {
			t.Errorf("deadline %s = %v, want %v with proposal=1", labels, v, deadline.Unix())
		}
	}
}
