package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// DefaultLivenessPath is the path the liveness stream subscribes to: it
// changes only when the device restarts, so the stream is idle, and its
// value tells one device incarnation from the next.
const DefaultLivenessPath = "/system/state/boot-time"

// Options configures an Agent. Target is required; the rest has defaults.
type Options struct {
	// Target is the device's gNMI address, host:port.
	Target string
	// TLS secures the device connection; nil means plaintext.
	TLS *tls.Config
	// Username and Password are sent as request metadata on every RPC.
	Username, Password string
	// Persistent: the device keeps its configuration across restarts, so
	// a new term needs no re-push.
	Persistent bool
	// Fencing sends MasterArbitration{election_id: term} with every Set.
	Fencing bool
	// LivenessPath is subscribed to (STREAM, ON_CHANGE) to detect a broken
	// connection at once (default DefaultLivenessPath). A device that
	// refuses the subscription is watched through the connection state.
	LivenessPath string
	// DeviceTarget is the gNMI target the liveness subscription names in
	// its prefix, for a device that serves several and routes on it;
	// "" names none. Changes' Sets carry their own clients' prefixes.
	DeviceTarget string
	// WatchConnectionState skips the liveness stream and watches the gRPC
	// connection state only.
	WatchConnectionState bool
	// DialTimeout bounds establishing a session (default 10 s).
	DialTimeout time.Duration
	// ApplyTimeout bounds one device Set (default 30 s). A change's Set
	// whose client waits for its answer (SYNC) goes with the client's
	// remaining deadline instead when it is sooner, less ClientMargin.
	// A Set that times out is in doubt: the device is read back.
	ApplyTimeout time.Duration
	// RetryCodes are the device answers after which a change no client
	// waits for (acknowledged: ASYNC, or one whose client a restart lost)
	// is sent again, at most RetryAttempts times in all (default 5) and
	// for at most RetryFor (default 1 min), after a backoff from
	// BackoffInitial doubling up to BackoffMax; past that it is recorded
	// applied with its paths out of sync (journal.CauseChange), to be
	// settled with resolve. Default none: every answer is the change's
	// outcome.
	RetryCodes    []codes.Code
	RetryAttempts int
	RetryFor      time.Duration
	// BackoffInitial and BackoffMax bound the reconnect delay (defaults
	// 100 ms and 10 s); it doubles per failed attempt, ±50 % jitter.
	BackoffInitial, BackoffMax time.Duration
	// MaxSetBytes caps one re-push or rollback SetRequest (default 3 MiB,
	// under gRPC's default 4 MiB message limit).
	MaxSetBytes int
	// MaxSetValues caps the values (paths) of one re-push or rollback
	// SetRequest (default 2,000), so that a device that takes long per
	// value still answers each Set well within ApplyTimeout.
	MaxSetValues int
	// MaxRecvBytes caps a device response (default 64 MiB).
	MaxRecvBytes int
	// Resync is how often a loop with nothing to do re-reads the journal
	// even without a notification (default 1 min). Every journal
	// transition notifies the loops: this is a safety net, kept slow so
	// that an idle sidecar does not wake for it. A failed step is retried,
	// and a waiting client's proposal re-read, every second at most
	// (retryPeriod).
	Resync time.Duration
	// CompletionLinger is how long the record of the device's answer to a
	// Set waits for the next proposal to share its journal transaction
	// (default 2 ms; see completeBatch). A client answered at once
	// typically sends its next Set within a few hundred microseconds.
	CompletionLinger time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.LivenessPath == "" {
		o.LivenessPath = DefaultLivenessPath
	}
	if o.WatchConnectionState {
		o.LivenessPath = ""
	}
	defaults := []struct {
		v *time.Duration
		d time.Duration
	}{
		{&o.DialTimeout, 10 * time.Second},
		{&o.ApplyTimeout, 30 * time.Second},
		{&o.BackoffInitial, 100 * time.Millisecond},
		{&o.BackoffMax, 10 * time.Second},
		{&o.Resync, time.Minute},
		{&o.RetryFor, time.Minute},
	}
	for _, d := range defaults {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if o.MaxSetBytes <= 0 {
		o.MaxSetBytes = 3 << 20
	}
	if o.CompletionLinger <= 0 {
		o.CompletionLinger = 2 * time.Millisecond
	}
	if o.MaxSetValues <= 0 {
		o.MaxSetValues = 2000
	}
	if o.MaxRecvBytes <= 0 {
		o.MaxRecvBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryAttempts <= 0 {
		o.RetryAttempts = 5
	}
	return o
}

// Status is the agent's view of the device, for health checks and
// introspection.
type Status struct {
	// Connected: a session is up.
	Connected bool
	// Term is the session's term (0 while it has none).
	Term uint64
	// Repushing: a re-push is running.
	Repushing bool
	// LastRepush is when the last re-push completed, with how many values
	// it sent and how long it took.
	LastRepush         time.Time
	LastRepushValues   int
	LastRepushDuration time.Duration
	// LastRepushDeviceDuration is the part of LastRepushDuration spent
	// waiting for the device to answer the re-push's Sets; the rest is
	// the sidecar's own (reading the journal, building and sending Sets,
	// recording the term).
	LastRepushDeviceDuration time.Duration
	// Repushes counts the re-pushes completed since New.
	Repushes uint64
	// LastError is the newest device error the agent met ("" if none).
	LastError string
	// SetRetries counts the device Sets sent again: after a lost
	// connection (on a new session, after a backoff), or after an answer
	// with one of Options.RetryCodes.
	SetRetries uint64
	// SetsRefused counts the device's definitive refusals.
	SetsRefused uint64
	// Connects and Disconnects count the sessions established with the
	// device and those that ended, since New.
	Connects, Disconnects uint64
	// Retrying is the acknowledged change the agent is sending again after
	// an answer with one of Options.RetryCodes, nil if none.
	Retrying *Retrying
	// Fenced: with Options.Fencing, the device refused a Set because
	// another client holds a higher election id. The agent no longer
	// connects or writes; FencedBy is the device's answer.
	Fenced   bool
	FencedBy string
}

// Agent drives the journal's proposals onto one device. Create it with
// New, run it with Run; Notify after journaling a proposal or rollback.
type Agent struct {
	j    *journal.Journal
	opts Options
	log  *slog.Logger

	commitWake chan struct{}
	applyWake  chan struct{}

	// deviceMu is held while configuration is sent to the device (the
	// applier's sends, an operator's retry, a drift revert): one writer
	// at a time.
	deviceMu sync.Mutex
	// pushes counts the starts and ends of the pushes made outside the
	// applier (RetryOutOfSync, RevertDrift): odd while one runs (see Rest).
	pushes atomic.Uint64
	// busy counts the Busy holds under way (Rest is not at rest).
	busy atomic.Int64

	mu       sync.Mutex
	sess     *session
	sessions uint64
	changed  chan struct{} // closed and replaced after every transition
	// waiting holds, by proposal index, the channels WaitChange's waiters
	// sleep on: closed when the agent's progress passes the index, when
	// the proposal is accepted, or when the agent is fenced, the only
	// news that may end their wait. The transitions' broadcasts (changed)
	// would wake every waiting client at every step of every batch.
	// Guarded by mu.
	waiting    waiters
	status     Status
	noLiveness bool // the device refused the liveness subscription
	// accountRefused is the device's last refusal of the device account
	// (reportAccountRefused), "" if none.
	accountRefused string

	// responses holds the device's SetResponse of recently applied
	// proposals, for the proxy's SYNC replies; responseOrder evicts the
	// oldest beyond maxResponses (replies nobody waited for).
	responses     map[uint64]*gpb.SetResponse
	responseOrder []uint64
	// accepted holds, as applied, the proposals the device accepted whose
	// completion is not yet recorded (see completeBatch).
	accepted map[uint64]*journal.Proposal
	// creds holds, without a device account, the request metadata of the
	// clients of proposals not yet applied (credentials.go).
	creds map[uint64]metadata.MD
	// rollbackCreds is creds for the rollbacks clients asked for, by the
	// index of the proposal rolled back.
	rollbackCreds map[uint64]metadata.MD
	// clients holds the waiting clients of proposals not yet applied
	// (clients.go).
	clients map[uint64]*waitingClient

	// Only the applier goroutine uses these. reached is the newest
	// proposal an earlier Set may have carried to the device without its
	// outcome being recorded: a rejection of a proposal up to it must be
	// restored first (see restore). At the start of Run it is every
	// proposal: an earlier run may have sent any of them. isolateThrough:
	// the device rejected a batch ending there, so the proposals up to it go
	// one at a time until the offending one is found.
	reached        uint64
	isolateThrough uint64
	// retry is the change being sent, attempt by attempt (answers.go).
	retry retryState
	// refusedAt holds the device's answer to a refused batch for the one
	// proposal in it the answer names (blame): its outcome when its turn
	// comes.
	refusedAt map[uint64]*status.Status

	// progress is the newest index up to which every proposal's commit
	// (committed) and change apply (applied) are Finished; both only grow,
	// as commits and applies finish in index order. Guarded by mu.
	progress struct{ committed, applied uint64 }
}

// New returns an agent for journal j. It does not connect until Run.
func New(j *journal.Journal, opts Options) (*Agent, error) {
	if opts.Target == "" {
		return nil, errors.New("agent: no device address (Options.Target)")
	}
	opts = opts.withDefaults()
	a := &Agent{
		j:             j,
		opts:          opts,
		log:           opts.Logger.With("component", "agent", "device", opts.Target),
		commitWake:    make(chan struct{}, 1),
		applyWake:     make(chan struct{}, 1),
		changed:       make(chan struct{}),
		responses:     make(map[uint64]*gpb.SetResponse),
		accepted:      make(map[uint64]*journal.Proposal),
		waiting:       newWaiters(),
		creds:         make(map[uint64]metadata.MD),
		rollbackCreds: make(map[uint64]metadata.MD),
		clients:       make(map[uint64]*waitingClient),
		refusedAt:     make(map[uint64]*status.Status),
	}
	if opts.TLS == nil && (opts.Username != "" || opts.Password != "") {
		a.log.Warn("device credentials are sent over a plaintext connection")
	}
	return a, nil
}

// Run drives the state machine until ctx ends or the journal closes. It
// returns nil when ctx ended; an apply in flight then stays in progress in
// the journal and is sent again by the next run.
func (a *Agent) Run(ctx context.Context) error {
	c, err := a.j.Configuration(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("agent: %w", err)
	}
	a.reached = c.GetLastIndex()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.connectLoop(ctx) })
	g.Go(func() error { return a.loop(ctx, "committer", a.commitWake, a.nextCommit) })
	g.Go(func() error { return a.loop(ctx, "applier", a.applyWake, a.nextApply) })
	g.Go(func() error { return a.confirmLoop(ctx) })
	g.Go(func() error {
		// A failed journal stops the agent now, not at its loops' next look.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.j.Failed():
			return fmt.Errorf("agent: %w", a.j.Failure())
		}
	})
	err = g.Wait()
	if s := a.session(); s != nil {
		s.end(errors.New("agent stopped"))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// Notify tells the agent the journal has new work (a proposal or a
// rollback was journaled).
func (a *Agent) Notify() {
	poke(a.commitWake)
	poke(a.applyWake)
	a.broadcast()
}

// Wait blocks until done(proposal i) holds, ctx ends or the journal closes,
// and returns the proposal as it then was.
func (a *Agent) Wait(ctx context.Context, i uint64, done func(*journal.Proposal) bool) (*journal.Proposal, error) {
	return a.wait(ctx, nil, i, doneWhen{full: done}, a.Changes, func() bool { return true }, nil)
}

// doneWhen is what a wait waits for: full(proposal), or, if status is set,
// status(the proposal's status view, journal.ProposalStatus), checked
// first so that the whole proposal is read only once it holds.
type doneWhen struct {
	status, full func(*journal.Proposal) bool
}

// statusDone is a doneWhen for a predicate that reads only what the
// status view holds.
func statusDone(done func(*journal.Proposal) bool) doneWhen {
	return doneWhen{status: done, full: done}
}

// wait is Wait that sleeps on the channel changes returns (a.Changes, or
// a narrower one) and, once woken, reads proposal i again only if worth
// reports it may be done now; it reads it anyway once per retry period.
//
// early, if not nil, may return proposal i as done before the journal
// records it; it is asked after every change. The wait ends with ctx,
// and with ErrWaitStopped once stop (nil: never) is closed.
func (a *Agent) wait(ctx context.Context, stop <-chan struct{}, i uint64, done doneWhen, changes func() <-chan struct{}, worth func() bool,
	early func() *journal.Proposal) (*journal.Proposal, error) {
	read := true
	t := time.NewTimer(a.retryPeriod())
	defer t.Stop()
	for {
		changed := changes()
		if a.Fenced() {
			return nil, ErrFenced
		}
		if early != nil {
			if p := early(); p != nil {
				return p, nil
			}
		}
		if read || worth() {
			p, err := a.readIfDone(ctx, i, done)
			if err != nil || p != nil {
				return p, err
			}
		}
		select {
		case <-changed:
			read = false
		case <-t.C:
			read = true
			t.Reset(a.retryPeriod())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			return nil, ErrWaitStopped
		}
	}
}

// ErrWaitStopped ends a WaitChangeUntil whose stop channel was closed.
var ErrWaitStopped = errors.New("agent: wait stopped")

// waiters are the channels of the clients waiting for their proposals'
// commits and for their applies, by proposal index. They are apart
// because a waiter of an apply can end its wait only on news of applies
// (or the device's acceptance): a client whose proposal is committed
// and waits for the device would otherwise be woken by every later
// commit, for nothing, several times a Set under load.
type waiters struct {
	commit, apply map[uint64]chan struct{}
}

func newWaiters() waiters {
	return waiters{commit: make(map[uint64]chan struct{}), apply: make(map[uint64]chan struct{})}
}

// of returns the channels of waiters for the apply if applied, else for
// the commit.
func (w waiters) of(applied bool) map[uint64]chan struct{} {
	if applied {
		return w.apply
	}
	return w.commit
}

// waitingOn returns the channel closed when proposal i's commit, or its
// apply if applied, may be finished (see Agent.waiting).
func (a *Agent) waitingOn(i uint64, applied bool) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.waiting.of(applied)
	c, ok := m[i]
	if !ok {
		c = make(chan struct{})
		m[i] = c
	}
	return c
}

// wakeLocked wakes the waiters in m of the proposals up to through (all
// of them: math.MaxUint64). a.mu is held.
func wakeLocked(m map[uint64]chan struct{}, through uint64) {
	for i, c := range m {
		if i <= through {
			close(c)
			delete(m, i)
		}
	}
}

// wakeAllLocked wakes every waiter, of a commit or an apply, of the
// proposals up to through. a.mu is held.
func (a *Agent) wakeAllLocked(through uint64) {
	wakeLocked(a.waiting.commit, through)
	wakeLocked(a.waiting.apply, through)
}

// readIfDone returns proposal i if done holds for it, else nil.
func (a *Agent) readIfDone(ctx context.Context, i uint64, done doneWhen) (*journal.Proposal, error) {
	if done.status != nil {
		if ok, err := a.j.ProposalStatusIs(ctx, i, done.status); err != nil || !ok {
			return nil, err
		}
	}
	p, err := a.j.Proposal(ctx, i)
	if err != nil || !done.full(p) {
		return nil, err
	}
	return p, nil
}

// ErrFenced ends a Wait when the agent is fenced (Status.Fenced): the
// proposal waited for will not be applied by this run.
var ErrFenced = errors.New("agent: fenced: another client is master on the device")

// Applied reports whether proposal p is finished as far as the device is
// concerned: its change's apply is Finished and, if it is being rolled
// back, so is the rollback's (Complete, or Failed: refused by the device,
// its paths out of sync).
func Applied(p *journal.Proposal) bool {
	if !journal.Finished(p.GetChange().GetApply()) {
		return false
	}
	return p.GetPhase() != journal.PhaseRollback || journal.Finished(p.GetRollback().GetApply())
}

// maxResponses bounds the SetResponses kept for TakeResponse.
const maxResponses = 4096

// TakeResponse returns, once, the device's SetResponse to proposal i if
// this agent applied it recently.
func (a *Agent) TakeResponse(i uint64) (*gpb.SetResponse, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp, ok := a.responses[i]
	delete(a.responses, i)
	return resp, ok
}

func (a *Agent) keepResponse(i uint64, resp *gpb.SetResponse) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.responses[i] = resp
	a.responseOrder = append(a.responseOrder, i)
	if len(a.responseOrder) > maxResponses {
		delete(a.responses, a.responseOrder[0])
		a.responseOrder = a.responseOrder[1:]
	}
}

// Status returns the agent's view of the device.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.status
	st.Connected = a.sess.up()
	if a.sess != nil {
		st.Term = a.sess.getTerm()
	}
	return st
}

// Changes returns a channel closed after the next journal transition the
// agent or a Notify saw, or the next change of Status.
func (a *Agent) Changes() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

func (a *Agent) broadcast() {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.changed)
	a.changed = make(chan struct{})
}

// retryPeriod is how soon a failed step is tried again and a waiting
// client's proposal read again without a notification: a second, or
// Resync if shorter.
func (a *Agent) retryPeriod() time.Duration {
	return min(a.opts.Resync, time.Second)
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (a *Agent) session() *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sess
}

func (a *Agent) noteError(err error) {
	a.mu.Lock()
	a.status.LastError = err.Error()
	a.mu.Unlock()
	a.broadcast()
}

// --- the loops ---

// loop runs one reconciler: decide, perform, repeat; with nothing to do it
// sleeps until woken or the resync period passes.
func (a *Agent) loop(ctx context.Context, name string, wake chan struct{}, next func(context.Context) (Step, error)) error {
	log := a.log.With("loop", name)
	for {
		region := trace.StartRegion(ctx, name+".next")
		step, err := next(ctx)
		region.End()
		if err == nil && step.Kind != StepWait {
			err = a.perform(ctx, step)
			if err == nil {
				if step.Kind.mayEnableCommit() {
					poke(a.commitWake)
				}
				poke(a.applyWake)
				a.broadcast()
				continue
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, journal.ErrClosed), errors.Is(err, journal.ErrFailed), errors.Is(err, journal.ErrCorrupt):
			return fmt.Errorf("agent %s: %w", name, err)
		case errors.Is(err, journal.ErrGuard):
			// Decided on a view the journal has since moved past (a term
			// that moved, a proposal another path finished): re-decide on
			// the next wake-up.
			log.Info("transition refused", "step", step.Kind, "proposal", step.Index, "err", err)
		default:
			log.Error("step failed", "step", step.Kind, "proposal", step.Index, "err", err)
		}
		resync := a.opts.Resync
		if err != nil {
			resync = a.retryPeriod()
		}
		t := time.NewTimer(resync)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// mayEnableCommit reports whether taking step k can enable a commit the
// committer waits for. A change's apply steps cannot: the commit guard
// reads the previous commit and the rollback under way, which only
// commits and rollbacks change. Waking the committer after every device
// Set would cost it a journal read per Set for nothing.
func (k StepKind) mayEnableCommit() bool {
	switch k {
	case StepStartApply, StepSendChange, StepAbortApply, StepCompleteAdopted:
		return false
	}
	return true
}

// view loads the state the decisions read.
func (a *Agent) view(ctx context.Context) (View, error) {
	c, err := a.j.Configuration(ctx)
	if err != nil {
		return View{}, err
	}
	m, err := a.j.Mastership(ctx)
	if err != nil {
		return View{}, err
	}
	return View{Config: c, Mastership: m, Link: a.link(), Policy: a.policy()}, nil
}

// policy is what the core knows of the options.
func (a *Agent) policy() Policy {
	return Policy{Persistent: a.opts.Persistent, Fencing: a.opts.Fencing,
		RetryCodes: a.opts.RetryCodes, RetryAttempts: a.opts.RetryAttempts, RetryFor: a.opts.RetryFor}
}

// answered is the core's decision on a device's answer.
func (a *Agent) answered(ev Event) Ready {
	return Decide(View{Policy: a.policy()}, ev)
}

// link is the southbound connection as the decisions see it.
func (a *Agent) link() Link {
	if s := a.session(); s.up() {
		return Link{Up: true, Term: s.getTerm()}
	}
	return Link{}
}

// proposalStatus loads what the decisions read of proposal i
// (journal.ProposalStatus), or nil if it does not exist or retention
// dropped it.
func (a *Agent) proposalStatus(ctx context.Context, i uint64) (*journal.Proposal, error) {
	if i == 0 {
		return nil, nil
	}
	p, err := a.j.ProposalStatus(ctx, i)
	if errors.Is(err, journal.ErrNotFound) || errors.Is(err, journal.ErrCompacted) {
		return nil, nil
	}
	return p, err
}

// oldest returns the oldest kept proposal with index >= from for which
// pending holds, and its predecessor, as load (nil for a missing one) gives
// them; nil if there is none.
func oldest(c *journal.Configuration, from uint64, pending func(*journal.Proposal) bool,
	load func(uint64) (*journal.Proposal, error)) (next, prev *journal.Proposal, err error) {
	for i := max(from, c.GetFirstIndex(), 1); i <= c.GetLastIndex(); i++ {
		p, err := load(i)
		if err != nil {
			return nil, nil, err
		}
		if p != nil && pending(p) {
			prev, err := load(i - 1)
			return p, prev, err
		}
	}
	return nil, nil, nil
}

func pendingCommit(p *journal.Proposal) bool {
	return p.GetChange().GetCommit() == journal.StatusPending
}

func unfinishedApply(p *journal.Proposal) bool {
	return !journal.Finished(p.GetChange().GetApply())
}

// nextCommit decides the committer's next step. Commits happen in index
// order, so the oldest pending commit is at or after committed.proposal+1
// (after a rollback, committed.proposal moves back, but every proposal
// up to the rolled-back one is already finished).
func (a *Agent) nextCommit(ctx context.Context) (Step, error) {
	return a.next(ctx, EventCommitTick,
		func(c *journal.Configuration) uint64 { return c.GetCommitted().GetProposal() + 1 },
		pendingCommit, a.noteCommitted)
}

// nextApply decides the applier's next step. The oldest unfinished apply
// is applied.proposal (in progress) or after it.
func (a *Agent) nextApply(ctx context.Context) (Step, error) {
	return a.next(ctx, EventApplyTick,
		func(c *journal.Configuration) uint64 { return c.GetApplied().GetProposal() },
		unfinishedApply, a.noteApplied)
}

// next loads what the core needs for a tick, the rollback under way or
// else the oldest proposal from from(configuration) on for which pending
// holds (with its predecessor), and asks it. Every proposal before that
// oldest one is done: next reports it to progressed.
func (a *Agent) next(ctx context.Context, tick EventKind,
	from func(*journal.Configuration) uint64, pending func(*journal.Proposal) bool, progressed func(uint64)) (Step, error) {
	v, err := a.view(ctx)
	if err != nil {
		return wait, err
	}
	var rolling, next, prev *journal.Proposal
	if i := v.Config.GetRollingBack(); i != 0 {
		rolling, err = a.proposalStatus(ctx, i)
	} else {
		next, prev, err = oldest(v.Config, from(v.Config), pending, func(i uint64) (*journal.Proposal, error) { return a.proposalStatus(ctx, i) })
		if err == nil {
			if next != nil {
				progressed(next.GetIndex() - 1)
			} else {
				progressed(v.Config.GetLastIndex())
			}
		}
	}
	if err != nil {
		return wait, err
	}
	return Decide(v, Event{Kind: tick, RollingBack: rolling, Next: next, Prev: prev}).Step, nil
}

// perform carries out one step: its device I/O, then its transition.
func (a *Agent) perform(ctx context.Context, step Step) error {
	attrs := make([]any, 0, 6)
	attrs = append(attrs, "step", step.Kind)
	if step.Index != 0 {
		attrs = append(attrs, "proposal", step.Index)
	}
	if step.Term != 0 {
		attrs = append(attrs, "term", step.Term)
	}
	log := a.log.With(attrs...)
	j := a.j
	var err error
	switch step.Kind {
	case StepConnect:
		return a.recordTerm(ctx, log)
	case StepDisconnect:
		if s := a.session(); s != nil && s.getTerm() == step.Term {
			log.Warn("term superseded; reconnecting")
			s.end(fmt.Errorf("term %d superseded", step.Term))
		}
		return nil
	case StepAdoptTerm:
		return a.adoptTerm(ctx, step.Term, log)
	case StepStartRepush:
		_, err = j.StartReconcile(ctx, step.Term)
	case StepRepush:
		a.deviceMu.Lock()
		defer a.deviceMu.Unlock()
		return a.repush(ctx, step.Term, log)
	case StepCommitChange:
		err = a.commitRun(ctx, step.Index, log)
	case StepAbortApply:
		var p *journal.Proposal
		if p, _, err = j.AbortApply(ctx, step.Index); err == nil {
			a.noteApplied(step.Index) // finished: its waiting client is answered now
			// Its client may have been answered already (ASYNC): say so.
			log.Warn("proposal aborted: its change will not reach the device",
				"reason", p.GetChange().GetError().GetMessage(), "depends_on", p.GetChange().GetAbortedBy())
		}
	case StepStartApply:
		_, _, err = j.StartApply(ctx, step.Index)
	case StepSendChange:
		a.deviceMu.Lock()
		defer a.deviceMu.Unlock()
		return a.sendChanges(ctx, step, log)
	case StepCompleteAdopted:
		a.deviceMu.Lock()
		defer a.deviceMu.Unlock()
		if a.termSession(step.Term) == nil {
			return nil
		}
		var p *journal.Proposal
		if p, _, err = j.CompleteApply(ctx, step.Index, step.Term); err == nil {
			a.noteApplied(step.Index)
			log.Info("recorded the device's values as applied", "author", p.GetChange().GetAuthor())
			return nil
		}
	case StepCommitRollback:
		_, _, err = j.CommitRollback(ctx, step.Index)
	case StepStartApplyRollback:
		_, _, err = j.StartApplyRollback(ctx, step.Index)
	case StepSendRollback:
		a.deviceMu.Lock()
		defer a.deviceMu.Unlock()
		return a.sendRollback(ctx, step, log)
	default:
		return fmt.Errorf("agent: unknown step %v", step)
	}
	if err == nil {
		log.Debug("done")
	}
	return err
}

// termSession returns the session holding term, or nil if it is gone (the
// step was decided for a connection that has since broken).
func (a *Agent) termSession(term uint64) *session {
	s := a.session()
	if !s.up() || s.getTerm() != term {
		return nil
	}
	return s
}

// recordTerm gives the current session a new term (spec
// ReconcileMastership): persisted before anything is sent under it.
func (a *Agent) recordTerm(ctx context.Context, log *slog.Logger) error {
	s := a.session()
	if !s.up() || s.getTerm() != 0 {
		return nil
	}
	m, err := a.j.Connect(ctx)
	if err != nil {
		return err
	}
	s.setTerm(m.GetTerm(), m.GetIncarnation())
	log.Info("connected to device", "term", m.GetTerm(), "conn", m.GetConn(), "session", s.id)
	return nil
}

func (a *Agent) adoptTerm(ctx context.Context, term uint64, log *slog.Logger) error {
	s := a.termSession(term)
	if s == nil {
		return nil
	}
	if ok, err := a.claim(ctx, s, term, log); !ok {
		return err
	}
	if _, err := a.j.StartReconcile(ctx, term); err != nil {
		return err
	}
	if _, err := a.j.CompleteReconcile(ctx, term, s.boot); err != nil {
		return err
	}
	s.synced.Store(true)
	log.Info("persistent device: no re-push needed")
	return nil
}

// repush sends the whole applied configuration to the device in the order
// it was written (spec ReconcileConfiguration, second branch) and records
// the term once the device answered all of it. Values the device refuses
// for good are narrowed down (pushSplitting) and recorded out of sync: the
// rest is pushed and the pipeline moves on. Any other failure ends the
// session: the next one re-pushes under a new term, after a backoff. Values the
// proposals in doubt overwrite are left out (see inDoubtPaths): those
// proposals are sent right after.
//
// It streams: one goroutine scans the journal and packs the next Set while
// the device works on the previous one, so the sidecar's own work hides
// behind the device's. Status.LastRepushDeviceDuration is the time spent
// waiting for the device's answers.
func (a *Agent) repush(ctx context.Context, term uint64, log *slog.Logger) error {
	s := a.termSession(term)
	if s == nil {
		return nil
	}
	if ok, err := a.claim(ctx, s, term, log); !ok {
		return err
	}
	a.setRepushing(true)
	defer a.setRepushing(false)
	start := time.Now()
	doubt, err := a.inDoubt(ctx)
	if err != nil {
		return err
	}
	device := a.deviceHolds(ctx, s, log)
	var values, held, same int
	var onDevice time.Duration
	out := a.newPushOutcome(nil)
	batches := make(chan *valueBatch, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(batches)
		put := func(b *valueBatch) error {
			select {
			case batches <- b:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		t := newTrackingBatcher(a.setLimits())
		err := a.j.ReplayApplied(gctx, func(pv *journal.PathValue) error {
			if doubt.holds(pv) {
				held++
				return nil
			}
			if device.Skip(pv) {
				same++
				return nil
			}
			values++
			if b := t.add(pv); b != nil {
				return put(b)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if b := t.flush(); b != nil {
			return put(b)
		}
		return nil
	})
	g.Go(func() error {
		for b := range batches {
			sent := time.Now()
			err := a.pushSplitting(s, term, b, out)
			onDevice += time.Since(sent)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("re-push not acknowledged", "values", values, "sets", out.sets, "err", err)
		return a.endSession(ctx, s, err, log)
	}
	outcome := journal.RepushOutcome{Refused: out.refused, Code: out.code(), Message: out.message(),
		Kept: func(rec *journal.OutOfSync) bool { return doubt.holds(rec.GetValue()) }}
	if _, err := a.j.CompleteReconcile(ctx, term, s.boot, outcome); err != nil {
		return err
	}
	a.reportRefused(log, "device refused part of the re-push; those paths are out of sync until resolved", out)
	s.synced.Store(true)
	took := time.Since(start)
	a.mu.Lock()
	a.status.LastRepush, a.status.LastRepushValues, a.status.LastRepushDuration = time.Now(), values, took
	a.status.LastRepushDeviceDuration = onDevice
	a.status.Repushes++
	a.mu.Unlock()
	a.broadcast()
	log.Info("re-pushed applied configuration", "values", values, "sets", out.sets, "took", took, "device", onDevice,
		"held_for_proposals_in_doubt", held, "refused", len(out.refused), "device_held_already", same)
	if values >= largeRepush {
		// The Sets of a large re-push are garbage now, tens of MB that
		// would stay resident until the runtime's scavenger returned them
		// bit by bit: give them back at once. A re-push is rare.
		debug.FreeOSMemory()
	}
	return nil
}

// claim announces this session's election id to the device with an empty
// Set, as the gNMI master arbitration specification asks of a new master,
// before anything is written under the new term (with Options.Fencing;
// otherwise it does nothing). ok is false if the session cannot go on: the
// device answered that another client is master (the agent is fenced) or
// did not answer (the session ends). A device that refuses the empty Set
// itself is logged and let be: the id is on every Set anyway.
func (a *Agent) claim(ctx context.Context, s *session, term uint64, log *slog.Logger) (ok bool, err error) {
	if !a.opts.Fencing {
		return true, nil
	}
	_, err = a.send(s, term, &gpb.SetRequest{})
	r := a.answered(Event{Kind: EventSetAnswer, Err: err})
	if r.Session != SessionKeep {
		return false, a.endSession(ctx, s, err, log)
	}
	if r.Answer == Refused {
		log.Warn("the device refused the empty Set announcing the election id; going on", "err", err)
	}
	return true, nil
}

// largeRepush is the number of values from which a re-push returns the
// memory it used to the operating system when it is done.
const largeRepush = 10_000

// setLimits bounds the re-push, rollback and restore Sets.
func (a *Agent) setLimits() setLimits {
	return setLimits{bytes: a.opts.MaxSetBytes, values: a.opts.MaxSetValues}
}

func (a *Agent) setRepushing(on bool) {
	a.mu.Lock()
	a.status.Repushing = on
	a.mu.Unlock()
	a.broadcast()
}

// stepProposal returns the session of step's term and the step's
// proposal; a nil session if the session has gone since the decision.
func (a *Agent) stepProposal(ctx context.Context, step Step) (*session, *journal.Proposal, error) {
	s := a.termSession(step.Term)
	if s == nil {
		return nil, nil, nil
	}
	p, err := a.j.Proposal(ctx, step.Index)
	if err != nil {
		return nil, nil, err
	}
	return s, p, nil
}

// sendRollback sends the rollback values of proposal step.Index and
// records the outcome (spec ApplyRollback). Values the device refuses for
// good are narrowed down (pushSplitting) and the rollback is recorded as
// failed with them out of sync (journal.FailApplyRollback): the pipeline
// moves on.
func (a *Agent) sendRollback(ctx context.Context, step Step, log *slog.Logger) error {
	s, p, err := a.stepProposal(ctx, step)
	if s == nil || err != nil {
		return err
	}
	out, err := a.pushValues(s, step.Term, inWriteOrder(p.GetRollback().GetValues()), a.rollbackCredentials(step.Index))
	if err != nil {
		return a.endSession(ctx, s, err, log)
	}
	if PushOutcome(Event{Push: PushRollback, Refused: out.refused}).Record == RecordCompleteApplyRollback {
		_, _, err = a.j.CompleteApplyRollback(ctx, step.Index, step.Term)
		if err == nil {
			a.dropRollbackCredentials(step.Index)
		}
		return err
	}
	_, _, err = a.j.FailApplyRollback(ctx, step.Index, step.Term, out.refused, out.code(), out.message())
	if err == nil {
		a.dropRollbackCredentials(step.Index)
		a.reportRefused(log, "device refused a rollback; its paths are out of sync until resolved", out)
	}
	return err
}

// endSession ends session s after a Set left without an answer (err), as
// the core decides: the agent is fenced (SessionFence), or the session
// goes, the apply stays in progress, and the next session, after a
// backoff, re-pushes and re-sends it.
func (a *Agent) endSession(ctx context.Context, s *session, err error, log *slog.Logger) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r := a.answered(Event{Kind: EventSetAnswer, Err: err})
	if r.Session == SessionFence {
		a.fence(s, err, log)
		return nil
	}
	a.noteError(err)
	a.mu.Lock()
	a.status.SetRetries++
	a.mu.Unlock()
	s.setFailed.Store(true)
	log.Warn("set not acknowledged; reconnecting", "outcome", r.Answer, "err", err)
	s.end(fmt.Errorf("set not acknowledged: %w", err))
	return nil
}

// fence stops the agent writing for good (until the sidecar restarts):
// the device answered that another client holds a higher election id.
// Raising its own id to win would make two writers take turns.
func (a *Agent) fence(s *session, err error, log *slog.Logger) {
	s.end(fmt.Errorf("fenced: %w", err))
	a.mu.Lock()
	first := !a.status.Fenced
	a.status.Fenced, a.status.FencedBy = true, err.Error()
	a.status.LastError = err.Error()
	a.wakeAllLocked(math.MaxUint64)
	a.mu.Unlock()
	if first {
		log.Error("fenced: the device says another client is master; this sidecar stops writing to it until restarted",
			"err", err, "election_id", s.electionID().String())
	}
	a.broadcast()
}

// Fenced reports whether the agent is fenced (Status.Fenced).
func (a *Agent) Fenced() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status.Fenced
}

// noteRefused counts a definitive refusal and keeps its error.
func (a *Agent) noteRefused(err error) {
	a.mu.Lock()
	a.status.SetsRefused++
	a.mu.Unlock()
	a.noteError(err)
}

// send sends one Set on session s under term.
func (a *Agent) send(s *session, term uint64, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	return a.sendAs(s, term, req, nil)
}

// sendAs is send with a client's request metadata md (nil: none; see
// credentials.go), within ApplyTimeout.
func (a *Agent) sendAs(s *session, term uint64, req *gpb.SetRequest, md metadata.MD) (*gpb.SetResponse, error) {
	ctx, cancel := context.WithTimeout(s.ctx, a.opts.ApplyTimeout)
	defer cancel()
	return a.sendWith(ctx, s, req, md)
}

// sendWith sends req on session s within ctx (a context of s.ctx), with
// request metadata md (nil: none) and, with fencing, the session's
// election id. req itself is left as it is: it may be sent again.
func (a *Agent) sendWith(ctx context.Context, s *session, req *gpb.SetRequest, md metadata.MD) (*gpb.SetResponse, error) {
	if a.opts.Fencing {
		req = &gpb.SetRequest{Prefix: req.GetPrefix(), Delete: req.GetDelete(), Replace: req.GetReplace(),
			Update: req.GetUpdate(), UnionReplace: req.GetUnionReplace(),
			Extension: append(slices.Clip(req.GetExtension()), fencing(s.electionID()))}
	}
	if md != nil {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	defer trace.StartRegion(ctx, "device.Set").End()
	return s.client.Set(ctx, req)
}

// --- the connector ---

// connectLoop keeps one session up, reconnecting with backoff.
func (a *Agent) connectLoop(ctx context.Context) error {
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     a.opts.BackoffInitial,
		MaxInterval:         a.opts.BackoffMax,
		Multiplier:          2,
		RandomizationFactor: 0.5,
	}
	bo.Reset()
	for {
		if a.Fenced() {
			<-ctx.Done()
			return ctx.Err()
		}
		s, err := a.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d := bo.NextBackOff()
			a.noteError(err)
			a.log.Warn("device unreachable", "err", err, "retry_in", d)
			if err := sleep(ctx, d); err != nil {
				return err
			}
			continue
		}
		a.mu.Lock()
		a.sess = s
		a.status.Connects++
		a.mu.Unlock()
		poke(a.applyWake)
		a.broadcast()

		<-s.ctx.Done()
		s.end(nil)
		a.mu.Lock()
		a.sess = nil
		a.status.Disconnects++
		a.mu.Unlock()
		poke(a.applyWake) // its next decision sees no session, now rather than at Resync
		a.broadcast()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("disconnected from device", "session", s.id, "term", s.getTerm(), "cause", context.Cause(s.ctx))
		if s.synced.Load() && !s.setFailed.Load() {
			// A session that worked and then broke (a device restart, a
			// network blip) reconnects at once; one that ended on a Set
			// without an answer backs off further each time.
			bo.Reset()
		}
		if err := sleep(ctx, bo.NextBackOff()); err != nil {
			return err
		}
	}
}

// connect establishes a new session: a fresh connection whose liveness
// stream the device has answered.
func (a *Agent) connect(ctx context.Context) (*session, error) {
	conn, err := dial(&a.opts)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	a.mu.Lock()
	a.sessions++
	s := &session{id: a.sessions, conn: conn, client: gpb.NewGNMIClient(conn), ctx: sctx, cancel: cancel}
	s.reader = devread.NewWithOptions(devread.Options{Client: s.client, Schema: a.j.Schema()})
	noLiveness := a.noLiveness || a.opts.LivenessPath == ""
	a.mu.Unlock()

	dctx, dcancel := context.WithTimeout(ctx, a.opts.DialTimeout)
	defer dcancel()
	if noLiveness {
		err = a.watchState(dctx, s)
	} else {
		err = a.watchLiveness(dctx, s)
		code := status.Code(err)
		credentials := code == codes.Unauthenticated || code == codes.PermissionDenied
		if code == codes.Unimplemented || code == codes.NotFound || code == codes.InvalidArgument || credentials && !a.deviceAccount() {
			msg := "device refused the liveness subscription; watching the connection state instead"
			if code == codes.NotFound && a.opts.DeviceTarget == "" {
				msg += ". A device that serves several gNMI targets needs the one to subscribe to: --device-target"
			}
			if credentials {
				msg = "device refused the liveness subscription without credentials; watching the connection state instead. " +
					"The sidecar's own Sets (re-push, drift revert, expired commit-confirmed revert) carry no credentials either: a device that requires them needs a device account (--device-username)"
			}
			// A fallback the sidecar takes on its own is a fact, not a
			// fault; one the operator may want to act on is a warning.
			level := slog.LevelInfo
			if credentials || code == codes.NotFound && a.opts.DeviceTarget == "" {
				level = slog.LevelWarn
			}
			a.log.Log(context.Background(), level, msg, "path", a.opts.LivenessPath, "err", err)
			a.mu.Lock()
			a.noLiveness = true
			a.mu.Unlock()
			s.end(err)
			return a.connect(ctx)
		}
		if credentials {
			// The first RPC with the device account: say plainly that the
			// device refuses it (once per answer; the connector retries
			// with backoff, the operator may fix the account meanwhile).
			a.reportAccountRefused(err)
			err = fmt.Errorf("the device refuses the sidecar's device account %q (check --device-username and its password): %w", a.opts.Username, err)
		}
	}
	if err != nil {
		s.end(err)
		return nil, fmt.Errorf("device %s: %w", a.opts.Target, err)
	}
	return s, nil
}

// reportAccountRefused logs, once per distinct answer, that the device
// refuses the sidecar's device account.
func (a *Agent) reportAccountRefused(err error) {
	msg := status.Convert(err).Message()
	a.mu.Lock()
	seen := a.accountRefused == msg
	a.accountRefused = msg
	a.mu.Unlock()
	if !seen {
		a.log.Error("the device refuses the sidecar's device account: check --device-username and its password (--device-password-file or $GNMI_SIDECAR_DEVICE_PASSWORD)",
			"username", a.opts.Username, "code", status.Code(err), "err", msg)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
