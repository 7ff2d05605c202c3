package metrics

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Label values of the proposal metrics.
const (
	PhaseChange   = "change"
	PhaseRollback = "rollback"
	StepCommit    = "commit"
	StepApply     = "apply"
)

var (
	phaseNames = [...]string{PhaseChange, PhaseRollback}
	stepNames  = [...]string{StepCommit, StepApply}
	// statusNames is indexed by journal.Status; "" (UNSET: the step does
	// not exist yet) is not counted.
	statusNames = [...]string{
		journal.StatusUnset:      "",
		journal.StatusPending:    "pending",
		journal.StatusInProgress: "in_progress",
		journal.StatusComplete:   "complete",
		journal.StatusAborted:    "aborted",
		journal.StatusFailed:     "failed",
	}
	// actions are the journal's transitions, so that every series of the
	// transition counter exists from the start.
	actions = []journal.Action{
		journal.ActionProposeChange, journal.ActionCommitChange, journal.ActionFailCommit,
		journal.ActionStartApply, journal.ActionCompleteApply, journal.ActionFailApply, journal.ActionAbortApply, journal.ActionRebase,
		journal.ActionProposeRollback, journal.ActionCommitRollback, journal.ActionStartApplyRollback,
		journal.ActionCompleteApplyRollback, journal.ActionConnect, journal.ActionStartReconcile,
		journal.ActionCompleteReconcile, journal.ActionSetCommitConfirm, journal.ActionClearCommitConfirm,
		journal.ActionCompact,
	}
)

// commitBuckets (seconds): a commit is a journal transaction (an fsync),
// plus the wait for the proposals before it.
var commitBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// applyBuckets (seconds): an apply is a device Set, plus any reconnect and
// re-push while it is in progress.
var applyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// scrapeTimeout bounds the journal reads of one scrape.
const scrapeTimeout = 5 * time.Second

// Journal is the journal's metrics. Observe must receive every event of the
// journal (call it from journal.Options.Observer); Load binds the collector
// to the open journal and reads the retained proposals once. Until Load,
// only the transition counter and the latency histograms are collected.
//
// The proposal counts are kept up to date from the events, so a scrape
// costs O(1) in the number of retained proposals; the collector keeps one
// small record per retained proposal.
type Journal struct {
	transitions   *prometheus.CounterVec
	commitLatency *prometheus.HistogramVec
	applyLatency  *prometheus.HistogramVec
	// The series Observe adds to at every transition, looked up once
	// (a vector's WithLabelValues hashes the labels at every call).
	transitionsBy                   map[journal.Action]prometheus.Counter
	commitLatencyBy, applyLatencyBy [len(phaseNames)]prometheus.Observer

	proposalsDesc *prometheus.Desc
	queueDesc     *prometheus.Desc
	retainedDesc  *prometheus.Desc
	outOfSyncDesc *prometheus.Desc
	termDesc      *prometheus.Desc
	sizeDesc      *prometheus.Desc
	lastDesc      *prometheus.Desc
	committedDesc *prometheus.Desc
	appliedDesc   *prometheus.Desc
	ccDesc        *prometheus.Desc
	ccDeadline    *prometheus.Desc
	freeDesc      *prometheus.Desc
	capacityDesc  *prometheus.Desc
	writableDesc  *prometheus.Desc

	mu    sync.Mutex
	j     *journal.Journal // nil until Load
	state map[uint64]proposalState
	// dropped: no proposal below it is in state (retention dropped them).
	dropped uint64
	counts  counts
	queued  int
	// While Load reads, loading is set and events wait in pending.
	loading bool
	pending []journal.Event
}

// proposalState is what the counts need of one proposal: the status of
// each step of its change, and of its rollback (UNSET unless its phase is
// Rollback).
type proposalState struct {
	steps [len(phaseNames)][len(stepNames)]journal.Status
}

// counts is the number of proposals per phase, step and status.
type counts [len(phaseNames)][len(stepNames)][len(statusNames)]int

func stateOf(p *journal.Proposal) proposalState {
	var s proposalState
	ch := p.GetChange()
	s.steps[0] = [2]journal.Status{ch.GetCommit(), ch.GetApply()}
	if p.GetPhase() == journal.PhaseRollback {
		rb := p.GetRollback()
		s.steps[1] = [2]journal.Status{rb.GetCommit(), rb.GetApply()}
	}
	return s
}

// queued reports whether the proposal still has device work to do: its
// change is not yet applied, or its rollback not yet applied.
func (s proposalState) queued() bool {
	if journal.Working(s.steps[0][1]) {
		return true
	}
	return s.steps[1][0] != journal.StatusUnset && s.steps[1][1] != journal.StatusComplete
}

// NewJournal returns the journal's collector.
func NewJournal() *Journal {
	t := &Journal{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "journal", Name: "transitions_total",
			Help: "Durable journal transitions, by action (the journal.Action names).",
		}, []string{"action"}),
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "commit_duration_seconds",
			Help:    "Time from a proposal (phase change) or a rollback (phase rollback) being journaled to its commit, by the journal's clock.",
			Buckets: commitBuckets,
		}, []string{"phase"}),
		applyLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "apply_duration_seconds",
			Help:    "Time from the start of an apply to the device's answer (accepted or definitively rejected), by phase, by the journal's clock; includes reconnects and re-pushes while it was in progress.",
			Buckets: applyBuckets,
		}, []string{"phase"}),
		proposalsDesc: prometheus.NewDesc(Namespace+"_proposals",
			"Retained proposals by phase (change, rollback), step (commit, apply) and the step's status. Every retained proposal counts once in each step of its change; a proposal being rolled back, or rolled back, counts in the rollback phase too.",
			[]string{"phase", "step", "status"}, nil),
		queueDesc: prometheus.NewDesc(Namespace+"_queue_depth",
			"Proposals journaled whose change or rollback is not yet applied to the device (or failed or aborted).", nil, nil),
		retainedDesc: prometheus.NewDesc(Namespace+"_journal_retained_proposals",
			"Proposal records the journal keeps (newest index - oldest kept index + 1).", nil, nil),
		outOfSyncDesc: prometheus.NewDesc(Namespace+"_out_of_sync_paths",
			"Paths where the device may not hold the applied configuration: it refused a rollback's or a re-push's value for good (gnmi-sidecar status lists them; gnmi-sidecar resolve settles them).", nil, nil),
		termDesc: prometheus.NewDesc(Namespace+"_mastership_term",
			"The mastership term recorded in the journal: it grows by one at every new connection to the device.", nil, nil),
		lastDesc: prometheus.NewDesc(Namespace+"_journal_last_index",
			"The newest proposal journaled (0: none).", nil, nil),
		committedDesc: prometheus.NewDesc(Namespace+"_journal_committed_index",
			"The newest proposal whose commit, and every earlier one's, is decided (journal's committed.proposal).", nil, nil),
		appliedDesc: prometheus.NewDesc(Namespace+"_journal_applied_index",
			"The newest proposal whose apply, and every earlier one's, is finished (journal's applied.proposal): last_index - applied_index is the apply lag in proposals.", nil, nil),
		sizeDesc: prometheus.NewDesc(Namespace+"_journal_size_bytes",
			"Disk space the journal's directory uses (allocated blocks, as du counts them).", nil, nil),
		ccDesc: prometheus.NewDesc(Namespace+"_commit_confirmed_outstanding",
			"1 while a commit-confirmed is outstanding (it blocks every other change until confirmed, cancelled or rolled back), else 0.", nil, nil),
		ccDeadline: prometheus.NewDesc(Namespace+"_commit_confirmed_deadline_timestamp_seconds",
			"When the outstanding commit-confirmed is rolled back unless confirmed (Unix seconds), by its proposal and author (who committed it); absent while none is outstanding.",
			[]string{"proposal", "author"}, nil),
		freeDesc: prometheus.NewDesc(Namespace+"_journal_filesystem_avail_bytes",
			"Free space of the journal's filesystem that the sidecar may use (statfs f_bavail).", nil, nil),
		capacityDesc: prometheus.NewDesc(Namespace+"_journal_filesystem_size_bytes",
			"Size of the journal's filesystem (statfs f_blocks).", nil, nil),
		writableDesc: prometheus.NewDesc(Namespace+"_journal_writable",
			"1 while the journal takes writes; 0 while it refuses them: its filesystem is read-only or has less free space than --journal-min-free, or a write failed inside the database (Sets are refused with RESOURCE_EXHAUSTED or UNAVAILABLE).", nil, nil),
		state:         make(map[uint64]proposalState),
		transitionsBy: make(map[journal.Action]prometheus.Counter, len(actions)),
	}
	for _, a := range actions {
		t.transitionsBy[a] = t.transitions.WithLabelValues(string(a))
	}
	for n, p := range phaseNames {
		t.commitLatencyBy[n] = t.commitLatency.WithLabelValues(p)
		t.applyLatencyBy[n] = t.applyLatency.WithLabelValues(p)
	}
	return t
}

// Observe records one journal event. It is quick and does not call the
// journal, as an Observer must; it waits while Load is reading the journal.
func (t *Journal) Observe(e journal.Event) {
	if c, ok := t.transitionsBy[e.Action]; ok {
		c.Inc()
	} else {
		t.transitions.WithLabelValues(string(e.Action)).Inc()
	}
	ch, rb := e.Proposal.GetChange(), e.Proposal.GetRollback()
	const change, rollback = 0, 1 // phaseNames
	switch e.Action {
	case journal.ActionCommitChange:
		observeBetween(t.commitLatencyBy[change], ch.GetProposed(), ch.GetCommitted())
	case journal.ActionCommitRollback:
		observeBetween(t.commitLatencyBy[rollback], rb.GetProposed(), rb.GetCommitted())
	case journal.ActionCompleteApply, journal.ActionFailApply:
		observeBetween(t.applyLatencyBy[change], ch.GetApplyStarted(), ch.GetApplied())
	case journal.ActionCompleteApplyRollback:
		observeBetween(t.applyLatencyBy[rollback], rb.GetApplyStarted(), rb.GetApplied())
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loading {
		t.pending = append(t.pending, e)
		return
	}
	t.apply(e)
}

// apply updates the counts with an event. It sets states rather than
// adding to them, so applying an event the state already reflects changes
// nothing (see Load).
func (t *Journal) apply(e journal.Event) {
	if e.Proposal != nil && e.Index != 0 {
		t.set(e.Index, stateOf(e.Proposal))
	}
	// The proposals a FailApply re-bases have their Rebase events, which
	// carry the new status.
	if e.Action == journal.ActionCompact && e.Configuration != nil {
		t.drop(e.Configuration.GetFirstIndex())
	}
}

// drop forgets the proposals below first. Retention drops a few of the
// oldest at a time, so it looks them up from the last floor (indexes are
// consecutive) rather than going through every retained proposal's state.
func (t *Journal) drop(first uint64) {
	if first <= t.dropped {
		return
	}
	forget := func(k uint64, s proposalState) {
		t.count(s, -1)
		delete(t.state, k)
	}
	if first-t.dropped <= uint64(len(t.state)) {
		for k := t.dropped; k < first; k++ {
			if s, ok := t.state[k]; ok {
				forget(k, s)
			}
		}
	} else {
		for k, s := range t.state {
			if k < first {
				forget(k, s)
			}
		}
	}
	t.dropped = first
}

func observeBetween(o prometheus.Observer, from, to *timestamppb.Timestamp) {
	if from == nil || to == nil {
		return
	}
	d := to.AsTime().Sub(from.AsTime())
	if d < 0 {
		d = 0 // the clock went back
	}
	o.Observe(d.Seconds())
}

// set records proposal i's state, replacing what was known of it.
func (t *Journal) set(i uint64, s proposalState) {
	if old, ok := t.state[i]; ok {
		t.count(old, -1)
	}
	t.state[i] = s
	t.count(s, 1)
}

func (t *Journal) count(s proposalState, delta int) {
	for p := range s.steps {
		for k, st := range s.steps[p] {
			if st > journal.StatusUnset && int(st) < len(statusNames) {
				t.counts[p][k][st] += delta
			}
		}
	}
	if s.queued() {
		t.queued += delta
	}
}

// Load binds the collector to j and reads the state of every retained
// proposal, which takes a while on a large journal: the proposal counts
// are collected once it is done. Events Observe receives meanwhile are kept
// and applied after the read, in order. Each event sets its proposal's
// state, so an event the read already saw is applied again harmlessly, and
// the last event of a proposal is its newest state: none is lost or counted
// twice, and the journal's writer never waits for the read.
func (t *Journal) Load(ctx context.Context, j *journal.Journal) error {
	t.mu.Lock()
	t.loading, t.pending = true, nil
	t.mu.Unlock()
	state := make(map[uint64]proposalState)
	err := j.ProposalStatuses(ctx, 0, 0, func(p *journal.Proposal) error {
		state[p.GetIndex()] = stateOf(p)
		return nil
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := t.pending
	t.loading, t.pending = false, nil
	if err != nil {
		return err
	}
	t.state, t.counts, t.queued, t.dropped = state, counts{}, 0, 0
	for _, s := range state {
		t.count(s, 1)
	}
	for _, e := range pending {
		t.apply(e)
	}
	t.j = j
	return nil
}

// Describe implements prometheus.Collector.
func (t *Journal) Describe(ch chan<- *prometheus.Desc) {
	t.transitions.Describe(ch)
	t.commitLatency.Describe(ch)
	t.applyLatency.Describe(ch)
	for _, d := range []*prometheus.Desc{t.proposalsDesc, t.queueDesc, t.retainedDesc, t.outOfSyncDesc, t.termDesc, t.sizeDesc,
		t.lastDesc, t.committedDesc, t.appliedDesc, t.ccDesc, t.ccDeadline, t.freeDesc, t.capacityDesc, t.writableDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Besides the counts kept from
// the events, it reads the configuration and mastership records (two
// small reads) and the sizes of the journal directory's files.
func (t *Journal) Collect(ch chan<- prometheus.Metric) {
	t.transitions.Collect(ch)
	t.commitLatency.Collect(ch)
	t.applyLatency.Collect(ch)

	t.mu.Lock()
	j, c, queued := t.j, t.counts, t.queued
	t.mu.Unlock()
	if j == nil {
		return
	}
	for p, phase := range phaseNames {
		for k, step := range stepNames {
			for st, status := range statusNames {
				if status != "" {
					ch <- prometheus.MustNewConstMetric(t.proposalsDesc, prometheus.GaugeValue, float64(c[p][k][st]), phase, step, status)
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(t.queueDesc, prometheus.GaugeValue, float64(queued))

	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if cfg, err := j.Configuration(ctx); err != nil {
		for _, d := range []*prometheus.Desc{t.retainedDesc, t.outOfSyncDesc, t.lastDesc, t.committedDesc, t.appliedDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
	} else {
		ch <- prometheus.MustNewConstMetric(t.lastDesc, prometheus.GaugeValue, float64(cfg.GetLastIndex()))
		ch <- prometheus.MustNewConstMetric(t.committedDesc, prometheus.GaugeValue, float64(cfg.GetCommitted().GetProposal()))
		ch <- prometheus.MustNewConstMetric(t.appliedDesc, prometheus.GaugeValue, float64(cfg.GetApplied().GetProposal()))
		ch <- prometheus.MustNewConstMetric(t.outOfSyncDesc, prometheus.GaugeValue, float64(cfg.GetOutOfSync()))
		retained := uint64(0)
		if last, first := cfg.GetLastIndex(), cfg.GetFirstIndex(); last >= first && last > 0 {
			retained = last - first + 1
		}
		ch <- prometheus.MustNewConstMetric(t.retainedDesc, prometheus.GaugeValue, float64(retained))
	}
	if m, err := j.Mastership(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(t.termDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(t.termDesc, prometheus.GaugeValue, float64(m.GetTerm()))
	}
	switch cc, err := j.CommitConfirm(ctx); {
	case errors.Is(err, journal.ErrNotFound):
		ch <- prometheus.MustNewConstMetric(t.ccDesc, prometheus.GaugeValue, 0)
	case err != nil:
		ch <- prometheus.NewInvalidMetric(t.ccDesc, err)
	default:
		ch <- prometheus.MustNewConstMetric(t.ccDesc, prometheus.GaugeValue, 1)
		ch <- prometheus.MustNewConstMetric(t.ccDeadline, prometheus.GaugeValue, float64(cc.GetDeadline().AsTime().UnixNano())/1e9,
			strconv.FormatUint(cc.GetProposal(), 10), cc.GetAuthor())
	}
	if size, err := diskUsage(j.Dir()); err != nil {
		ch <- prometheus.NewInvalidMetric(t.sizeDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(t.sizeDesc, prometheus.GaugeValue, float64(size))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(j.Dir(), &st); err != nil {
		ch <- prometheus.NewInvalidMetric(t.freeDesc, err)
		ch <- prometheus.NewInvalidMetric(t.capacityDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(t.freeDesc, prometheus.GaugeValue, float64(st.Bavail)*float64(st.Bsize))
		ch <- prometheus.MustNewConstMetric(t.capacityDesc, prometheus.GaugeValue, float64(st.Blocks)*float64(st.Bsize))
	}
	ch <- prometheus.MustNewConstMetric(t.writableDesc, prometheus.GaugeValue, boolValue(j.Writable() == nil))
}

// diskUsage returns the disk space the files under dir use: their
// allocated blocks, not their apparent sizes (Badger preallocates its
// value-log and memtable files sparsely).
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed by Badger while we walk
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}
