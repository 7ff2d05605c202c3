package drift

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
)

// Defaults of the Options left zero.
const (
	DefaultInterval     = 10 * time.Second
	DefaultDebounce     = 200 * time.Millisecond
	DefaultRevertLimit  = 3
	DefaultRevertWindow = 10 * time.Minute
	// DefaultMaxSuspects bounds the notified paths kept for the cheap
	// check; past it their subtree is compared whole.
	DefaultMaxSuspects = 1024
)

// Author is the author of the proposals that adopt drift.
const Author = "device"

// Mode is how the watcher learns of changes on the device.
type Mode string

// The modes.
const (
	// ModeOnChange: a Subscribe STREAM ON_CHANGE to the managed subtrees.
	ModeOnChange Mode = "on-change"
	// ModePoll: the device refused ON_CHANGE; a Get every Interval.
	ModePoll Mode = "poll"
	// ModeOff: --drift-policy off.
	ModeOff Mode = "off"
)

// Device is what the watcher reads the device with: a gNMI client
// (gpb.GNMIClient has both).
type Device interface {
	Get(ctx context.Context, in *gpb.GetRequest, opts ...grpc.CallOption) (*gpb.GetResponse, error)
	Subscribe(ctx context.Context, opts ...grpc.CallOption) (gpb.GNMI_SubscribeClient, error)
}

// Options configures a Watcher. Journal and Agent are required, and
// Target unless Device is set.
type Options struct {
	// Policy is what to do about drift (default PolicyReport).
	Policy Policy
	// Interval is how often the configuration is compared when the
	// device refuses ON_CHANGE (default DefaultInterval).
	Interval time.Duration
	// Debounce is how long a notified change waits for the ones that
	// follow it before it is checked (default DefaultDebounce).
	Debounce time.Duration
	// RevertLimit and RevertWindow: a path reverted RevertLimit times
	// within RevertWindow is no longer reverted (defaults
	// DefaultRevertLimit, DefaultRevertWindow).
	RevertLimit  int
	RevertWindow time.Duration
	// BackoffInitial and BackoffMax bound the wait before the watcher
	// subscribes again after an error (defaults 100 ms and 30 s; it
	// doubles per failure, ±50 % jitter).
	BackoffInitial, BackoffMax time.Duration
	// MaxSuspects bounds the notified paths kept until they are checked
	// (default DefaultMaxSuspects).
	MaxSuspects int

	// Target is the device's gNMI address; the watcher connects to it as
	// the proxy does, with TLS and the sidecar's own device credentials
	// (Username, Password) if set. MaxRecvBytes caps a device answer
	// (default 64 MiB).
	Target             string
	TLS                *tls.Config
	Username, Password string
	MaxRecvBytes       int
	// DeviceTarget is the gNMI target the watcher's Gets and subscription
	// name in their prefix (--device-target), "" none.
	DeviceTarget string
	// Device, if set, is used instead of a connection to Target.
	Device Device

	Journal *journal.Journal
	Agent   *agent.Agent
	// Schema is the device's YANG schema (--yang), nil for none.
	Schema *leaves.Schema
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Policy == "" {
		o.Policy = PolicyReport
	}
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{
		{&o.Interval, DefaultInterval}, {&o.Debounce, DefaultDebounce}, {&o.RevertWindow, DefaultRevertWindow},
		{&o.BackoffInitial, 100 * time.Millisecond}, {&o.BackoffMax, 30 * time.Second},
	} {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if o.RevertLimit <= 0 {
		o.RevertLimit = DefaultRevertLimit
	}
	if o.MaxSuspects <= 0 {
		o.MaxSuspects = DefaultMaxSuspects
	}
	if o.MaxRecvBytes <= 0 {
		o.MaxRecvBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Status is the watcher's state, for introspection and metrics.
type Status struct {
	Policy Policy
	Mode   Mode
	// Interval is the comparison period in ModePoll.
	Interval time.Duration
	// Paths is the number of drifted paths now.
	Paths int
	// LastCheck is when the configuration was last compared with the
	// device (zero: not yet).
	LastCheck time.Time
	// WatchError is why the watcher cannot watch the device now ("" when
	// it can).
	WatchError string
	// Checks counts the comparisons, Detected the paths found drifted
	// (each time one drifts anew), Reverts the paths reverted, Adoptions
	// the paths adopted, since the watcher started.
	Checks, Detected, Reverts, Adoptions uint64
	// Notes counts the device's notifications looked at (Explained),
	// which need no comparison when the journal explains them.
	Notes uint64
	// ReadMethod is how the device's configuration was last read
	// (devread.Method: get-config/JSON_IETF, get-all/JSON, ...; "" before
	// the first read that worked).
	ReadMethod string
	// ReadChecked: a read of the device's configuration has ended.
	// Readable: the last one worked; else ReadError says why not.
	ReadChecked, Readable bool
	ReadError             string
}

// Watcher watches the device for drift and acts on it (see the package
// doc). Create it with New, run it with Run.
type Watcher struct {
	opts Options
	log  *slog.Logger
	dev  Device
	// reader reads the device's configuration, for comparisons and
	// adoptions, with the method that works (package devread).
	reader *devread.Reader
	conn   *grpc.ClientConn // when New dialed Target
	dec    *leaves.Decomposer

	pokes    chan struct{} // new suspects
	checkNow chan struct{}

	mu       sync.Mutex
	tracker  *Tracker
	status   Status
	suspects map[string]Note // by path key; notified, not yet checked
	overflow map[string]bool // scope keys whose notifications overflowed
	first    time.Time       // when the oldest unchecked notification came
	// brokeTerm is the agent's term when the subscription last broke
	// (0: none pending), at brokeAt (see settledAfterBreak).
	brokeTerm uint64
	brokeAt   time.Time
}

// New returns a watcher; it does nothing until Run.
func New(opts Options) (*Watcher, error) {
	if opts.Journal == nil || opts.Agent == nil {
		return nil, errors.New("drift: Journal and Agent are required")
	}
	if opts.Device == nil && opts.Target == "" {
		return nil, errors.New("drift: Target or Device is required")
	}
	if _, err := ParsePolicy(string(opts.Policy)); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	opts = opts.withDefaults()
	w := &Watcher{
		opts:     opts,
		log:      opts.Logger.With("component", "drift"),
		dev:      opts.Device,
		dec:      leaves.NewDecomposer(opts.Schema, opts.Journal.Keys()),
		pokes:    make(chan struct{}, 1),
		checkNow: make(chan struct{}, 1),
		tracker:  NewTracker(opts.Policy, opts.RevertLimit, opts.RevertWindow),
		suspects: map[string]Note{},
		overflow: map[string]bool{},
	}
	w.status = Status{Policy: opts.Policy, Mode: ModeOnChange, Interval: opts.Interval}
	if opts.Policy == PolicyOff {
		w.status.Mode = ModeOff
	}
	if w.dev == nil {
		creds := insecure.NewCredentials()
		if opts.TLS != nil {
			creds = credentials.NewTLS(opts.TLS)
		}
		conn, err := grpc.NewClient("passthrough:///"+opts.Target,
			grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxRecvBytes)))
		if err != nil {
			return nil, fmt.Errorf("drift: device %s: %w", opts.Target, err)
		}
		w.conn, w.dev = conn, gpb.NewGNMIClient(conn)
	}
	w.reader = devread.NewWithOptions(devread.Options{Client: w.dev, Schema: opts.Schema, Logger: opts.Logger})
	return w, nil
}

// Close closes the watcher's device connection.
func (w *Watcher) Close() error {
	if w.conn != nil {
		return w.conn.Close()
	}
	return nil
}

// Status returns the watcher's state.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status
	st.Paths = w.tracker.Len()
	rs := w.reader.Status()
	st.ReadMethod, st.ReadChecked, st.Readable = rs.Method.String(), rs.Checked, rs.Readable()
	if rs.Err != nil {
		st.ReadError = rs.Err.Error()
	}
	return st
}

// Records returns the drifted paths, in path order.
func (w *Watcher) Records() []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tracker.Records()
}

// CheckNow asks for a comparison of every managed subtree as soon as the
// pipeline is at rest.
func (w *Watcher) CheckNow() { poke(w.checkNow) }

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// outgoing adds the sidecar's own device credentials to ctx.
func (w *Watcher) outgoing(ctx context.Context) context.Context {
	if w.opts.Username == "" && w.opts.Password == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "username", w.opts.Username, "password", w.opts.Password)
}

// errors of a watch session, which Run acts on.
var (
	errScopeChanged = errors.New("the managed subtrees changed")
	errNoOnChange   = errors.New("the device refused the ON_CHANGE subscription")
	// errBroken: an established subscription ended (the device
	// restarted, the connection broke): subscribe again.
	errBroken = errors.New("the subscription ended")
)

// Run watches the device until ctx ends (then it returns nil). With
// PolicyOff it only waits.
func (w *Watcher) Run(ctx context.Context) error {
	if w.opts.Policy == PolicyOff {
		w.log.Info("drift detection is off (--drift-policy off)")
		<-ctx.Done()
		return nil
	}
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     w.opts.BackoffInitial,
		MaxInterval:         w.opts.BackoffMax,
		Multiplier:          2,
		RandomizationFactor: 0.5,
	}
	bo.Reset()
	for {
		err := w.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, errScopeChanged):
			continue
		case errors.Is(err, errNoOnChange):
			w.setMode(ModePoll)
			w.log.Warn("the device refused the ON_CHANGE subscription: comparing the configuration with a Get every interval instead (drift is seen within the interval)",
				"interval", w.opts.Interval, "err", err)
			continue
		case errors.Is(err, journal.ErrClosed), errors.Is(err, journal.ErrFailed), errors.Is(err, journal.ErrCorrupt):
			return nil // the sidecar is stopping; the agent reports it
		case errors.Is(err, devread.ErrUnreadable):
			// The reader logged it once and Status shows it (ReadError):
			// try again after the backoff, quietly.
			d := bo.NextBackOff()
			w.log.Debug("cannot read the device's configuration; comparing again later", "err", err, "retry_in", d)
			if err := sleep(ctx, d); err != nil {
				return nil
			}
			continue
		case errors.Is(err, errBroken):
			// It worked until now: subscribe again soon, quietly (the
			// agent reports a device that went away).
			bo.Reset()
			d := bo.NextBackOff()
			w.log.Debug("the drift subscription ended; subscribing again", "err", err, "retry_in", d)
			if err := sleep(ctx, d); err != nil {
				return nil
			}
			continue
		}
		d := bo.NextBackOff()
		w.watchError(err, d)
		if err := sleep(ctx, d); err != nil {
			return nil
		}
	}
}

// watchError reports that watching failed, once per distinct error.
func (w *Watcher) watchError(err error, retry time.Duration) {
	msg := err.Error()
	w.mu.Lock()
	same := w.status.WatchError == msg
	w.status.WatchError = msg
	w.mu.Unlock()
	if same {
		return
	}
	attrs := []any{"err", msg, "retry_in", retry.Round(time.Millisecond)}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		// The device is away: the agent reports it.
		w.log.Info("cannot watch the device for drift until it is reachable; retrying", attrs...)
		return
	case codes.Unauthenticated, codes.PermissionDenied:
		attrs = append(attrs, "hint", "the watcher reads the device with the sidecar's own credentials (--device-username)")
	case codes.NotFound:
		if w.opts.DeviceTarget == "" {
			attrs = append(attrs, "hint", "a device that serves several gNMI targets needs the one to read: --device-target")
		}
	}
	w.log.Warn("cannot watch the device for drift; retrying", attrs...)
}

func (w *Watcher) clearWatchError() {
	w.mu.Lock()
	was := w.status.WatchError
	w.status.WatchError = ""
	w.mu.Unlock()
	if was != "" {
		w.log.Info("watching the device for drift again")
	}
}

func (w *Watcher) setMode(m Mode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status.Mode = m
}

func (w *Watcher) mode() Mode {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status.Mode
}

// session watches the current managed subtrees until they change, the
// subscription breaks, or ctx ends: one subscription (ModeOnChange) or
// one polling period (ModePoll).
func (w *Watcher) session(ctx context.Context) error {
	scopes, err := w.opts.Journal.AppliedRoots(ctx)
	if err != nil {
		return err
	}
	mark, err := w.appliedMark(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &watchSession{w: w, scopes: scopes, mark: mark, dirty: map[string]*gpb.Path{}, since: map[string]time.Time{}}
	if len(scopes) == 0 {
		w.clearWatchError()
		return s.loop(ctx, nil) // nothing managed: wait for the first values
	}
	if w.mode() == ModePoll {
		w.clearWatchError()
		return s.loop(ctx, nil)
	}
	stream, err := w.subscribe(ctx, scopes)
	if err != nil {
		return err
	}
	w.clearWatchError()
	w.log.Debug("watching the device for drift", "subtrees", len(scopes))
	broken := make(chan error, 1)
	go func() { broken <- w.receive(stream, scopes) }()
	return s.loop(ctx, broken)
}

// prefix is the prefix of the watcher's requests: the device target, if any.
func (w *Watcher) prefix() *gpb.Path {
	return gnmipath.TargetPrefix(w.opts.DeviceTarget)
}

// subscribe opens the ON_CHANGE subscription to scopes and waits for its
// sync_response (updates_only: the device sends nothing before it).
func (w *Watcher) subscribe(ctx context.Context, scopes []*gpb.Path) (gpb.GNMI_SubscribeClient, error) {
	stream, err := w.dev.Subscribe(w.outgoing(ctx))
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	list := &gpb.SubscriptionList{Prefix: w.prefix(), Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_JSON_IETF, UpdatesOnly: true}
	for _, p := range scopes {
		list.Subscription = append(list.Subscription, &gpb.Subscription{Path: p, Mode: gpb.SubscriptionMode_ON_CHANGE})
	}
	if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}}); err != nil {
		_, err = stream.Recv() // the stream's status says why
		return nil, w.subscribeError(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil, w.subscribeError(err)
		}
		if resp.GetSyncResponse() {
			return stream, nil
		}
	}
}

// subscribeError classifies a failed subscription: the codes a device
// answers a subscription mode it does not support with mean polling.
func (w *Watcher) subscribeError(err error) error {
	switch status.Code(err) {
	case codes.Unimplemented, codes.InvalidArgument:
		return fmt.Errorf("%w: %w", errNoOnChange, err)
	}
	return fmt.Errorf("subscribe: %w", err)
}

// receive turns the subscription's notifications into suspects until the
// stream ends, and returns why it ended.
func (w *Watcher) receive(stream gpb.GNMI_SubscribeClient, scopes []*gpb.Path) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		n := resp.GetUpdate()
		if n == nil {
			continue
		}
		var notes []Note
		for _, p := range n.GetDelete() {
			notes = append(notes, Note{Path: gnmipath.Join(n.GetPrefix(), p)})
		}
		for _, u := range n.GetUpdate() {
			notes = append(notes, Note{Path: gnmipath.Join(n.GetPrefix(), u.GetPath()), Value: u.GetVal()})
		}
		w.suspect(notes, scopes)
	}
}

// suspect records notes to check, the latest per path, and wakes the
// session. Past MaxSuspects, the subtree of a note is compared whole.
func (w *Watcher) suspect(notes []Note, scopes []*gpb.Path) {
	added := false
	w.mu.Lock()
	for _, n := range notes {
		if leaves.IsState(n.Path, w.opts.Schema) {
			continue
		}
		scope := scopeOf(n.Path, scopes)
		if scope == nil {
			continue
		}
		if len(w.suspects) == 0 && len(w.overflow) == 0 {
			w.first = time.Now()
		}
		k := key(n.Path)
		if _, ok := w.suspects[k]; !ok && len(w.suspects) >= w.opts.MaxSuspects {
			w.overflow[key(scope)] = true
		} else {
			w.suspects[k] = n
		}
		added = true
	}
	w.mu.Unlock()
	if added {
		poke(w.pokes)
	}
}

// pending reports whether notes wait to be checked.
func (w *Watcher) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.suspects) > 0 || len(w.overflow) > 0
}

// takeSuspects returns and forgets the notes to check, the scopes whose
// notes overflowed, and when the first of them came.
func (w *Watcher) takeSuspects() ([]Note, map[string]bool, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	notes := make([]Note, 0, len(w.suspects))
	for _, k := range slices.Sorted(maps.Keys(w.suspects)) {
		notes = append(notes, w.suspects[k])
	}
	over, first := w.overflow, w.first
	w.suspects, w.overflow, w.first = map[string]Note{}, map[string]bool{}, time.Time{}
	return notes, over, first
}

// scopeOf returns the scope p lies in, nil if none.
func scopeOf(p *gpb.Path, scopes []*gpb.Path) *gpb.Path {
	for _, s := range scopes {
		if under(p, s) {
			return s
		}
	}
	return nil
}

// appliedMark identifies the applied configuration's state: it changes
// when a transition may have written a new subtree.
type appliedMark struct{ index, proposal, term, lastIndex uint64 }

func (w *Watcher) appliedMark(ctx context.Context) (appliedMark, error) {
	c, err := w.opts.Journal.Configuration(ctx)
	if err != nil {
		return appliedMark{}, err
	}
	return appliedMark{c.GetApplied().GetIndex(), c.GetApplied().GetProposal(), c.GetApplied().GetTerm(), c.GetLastIndex()}, nil
}

// scopeCheckPeriod is how soon after the agent reports a change a session
// looks whether the applied configuration lies in new subtrees (which it
// must subscribe to), and at most how often. Without changes it does not
// look.
const scopeCheckPeriod = time.Second

// breakWait bounds how long, after the subscription broke, a comparison
// waits for the agent to notice a device restart (a new term) before it
// trusts the agent's session.
const breakWait = 5 * time.Second

// watchSession is one subscription's (or polling period's) state, used by
// its loop only.
type watchSession struct {
	w      *Watcher
	scopes []*gpb.Path
	mark   appliedMark
	// dirty are the subtrees to compare whole, by key; since when the
	// first sign of drift in each came.
	dirty map[string]*gpb.Path
	since map[string]time.Time
}

// loop runs the session: checks when due, until the scopes change, the
// subscription breaks (broken; nil when polling) or ctx ends.
func (s *watchSession) loop(ctx context.Context, broken <-chan error) error {
	w := s.w
	poll := broken == nil && len(s.scopes) > 0
	// Every subtree is compared at the start: after a (re)subscription's
	// sync, and at each poll.
	for _, p := range s.scopes {
		s.markDirty(p, time.Time{})
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	scheduled := true // the timer runs
	schedule := func(d time.Duration) {
		timer.Reset(d)
		scheduled = true
	}
	// One look after the first period covers changes since the session
	// read its mark; later ones follow the agent's changes.
	scopeCheck := time.NewTimer(scopeCheckPeriod)
	defer scopeCheck.Stop()
	var changes <-chan struct{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-broken:
			w.noteBreak(w.opts.Agent.Status().Term, time.Now())
			if err == nil {
				err = errors.New("the device ended the subscription")
			}
			return fmt.Errorf("%w: %w", errBroken, err)
		case <-changes:
			changes = nil
			scopeCheck.Reset(scopeCheckPeriod)
			continue
		case <-scopeCheck.C:
			changes = w.opts.Agent.Changes()
			changed, err := s.scopesChanged(ctx)
			if err != nil {
				return err
			}
			if changed {
				return errScopeChanged
			}
			continue
		case <-w.checkNow:
			for _, p := range s.scopes {
				s.markDirty(p, time.Time{})
			}
			schedule(0)
			continue
		case <-w.pokes:
			// The first notification of a burst starts the wait; the
			// others join it.
			if !scheduled {
				schedule(w.opts.Debounce)
			}
			continue
		case <-timer.C:
			scheduled = false
		}
		next, err := s.process(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		switch {
		case next > 0:
			schedule(next)
		case poll:
			for _, p := range s.scopes {
				s.markDirty(p, time.Time{})
			}
			schedule(w.opts.Interval)
		case w.pending():
			schedule(w.opts.Debounce) // notified while checking
		}
	}
}

// noteBreak remembers the agent's term when the subscription broke: the
// next session's comparisons wait until the agent has a new one (the
// device restarted), for at most breakWait.
func (w *Watcher) noteBreak(term uint64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.brokeTerm, w.brokeAt = term, at
}

// scopesChanged reports whether the applied configuration now lies in a
// subtree the session does not cover (read only when it changed).
func (s *watchSession) scopesChanged(ctx context.Context) (bool, error) {
	mark, err := s.w.appliedMark(ctx)
	if err != nil || mark == s.mark {
		return false, err
	}
	s.mark = mark
	roots, err := s.w.opts.Journal.AppliedRoots(ctx)
	if err != nil {
		return false, err
	}
	for _, r := range roots {
		if scopeOf(r, s.scopes) == nil {
			return true, nil
		}
	}
	return false, nil
}

func (s *watchSession) markDirty(scope *gpb.Path, since time.Time) {
	k := key(scope)
	s.dirty[k] = scope
	if old, ok := s.since[k]; !ok || (!since.IsZero() && (old.IsZero() || since.Before(old))) {
		s.since[k] = since
	}
}

// process checks what is due once the pipeline is at rest: the notified
// paths the journal does not explain make their subtree dirty, and the
// dirty subtrees are compared. It returns when to try again (0: nothing
// left), or an error that ends the session (the device cannot be read).
func (s *watchSession) process(ctx context.Context) (time.Duration, error) {
	w := s.w
	rest, err := w.opts.Agent.Rest(ctx)
	if err != nil {
		return 0, err
	}
	if !rest.AtRest || !w.settledAfterBreak(rest) {
		return w.opts.Debounce, nil
	}
	notes, over, first := w.takeSuspects()
	for k := range over {
		if p := scopeByKey(k, s.scopes); p != nil {
			s.markDirty(p, first)
		}
	}
	var records []Record // the drifted paths, when there are notes to look at
	if len(notes) > 0 {
		records = w.Records()
	}
	var looked uint64 // notes looked at, added to Status.Notes once
	count := func() {
		if looked > 0 {
			w.mu.Lock()
			w.status.Notes += looked
			w.mu.Unlock()
		}
	}
	for _, n := range notes {
		scope := scopeOf(n.Path, s.scopes)
		if scope == nil || s.dirty[key(scope)] != nil {
			if scope != nil {
				s.markDirty(scope, first)
			}
			continue
		}
		if overlaps(n.Path, records) {
			// A drifted path changed again, maybe back: compare.
			s.markDirty(scope, first)
			continue
		}
		ok, err := w.explained(ctx, n)
		if err != nil {
			count()
			return 0, err
		}
		looked++
		if !ok {
			s.markDirty(scope, first)
		}
	}
	count()
	for _, k := range slices.Sorted(maps.Keys(s.dirty)) {
		scope := s.dirty[k]
		done, err := w.check(ctx, scope, s.since[k], rest)
		if err != nil {
			return 0, err
		}
		if !done {
			return w.opts.Debounce, nil // not at rest any more: later
		}
		delete(s.dirty, k)
		delete(s.since, k)
	}
	return 0, nil
}

// overlaps reports whether p is at, above or under the path of one of
// recs.
func overlaps(p *gpb.Path, recs []Record) bool {
	for _, r := range recs {
		if under(p, r.Path) || under(r.Path, p) {
			return true
		}
	}
	return false
}

func scopeByKey(k string, scopes []*gpb.Path) *gpb.Path {
	for _, s := range scopes {
		if key(s) == k {
			return s
		}
	}
	return nil
}

// settledAfterBreak reports whether a comparison may trust the agent's
// session after the subscription broke: the agent has moved to a new term
// (it noticed the device restart) or breakWait passed.
func (w *Watcher) settledAfterBreak(rest agent.Rest) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.brokeTerm == 0 {
		return true
	}
	if rest.Term != w.brokeTerm || time.Since(w.brokeAt) > breakWait {
		w.brokeTerm = 0
		return true
	}
	return false
}

// explained is Explained with the journal's values.
func (w *Watcher) explained(ctx context.Context, n Note) (bool, error) {
	at, err := w.opts.Journal.AppliedAt(ctx, NotePaths(n.Path))
	if err != nil {
		return false, err
	}
	lookup := Lookup{At: at, LiveUnder: func(p *gpb.Path) (bool, error) { return w.opts.Journal.AppliedLiveUnder(ctx, p) }}
	return Explained(n, lookup, w.opts.Schema), nil
}

// check compares scope with the device and acts on what it finds, if the
// pipeline stays at rest (as before, rest) across the comparison; done is
// false when it did not. since is when the first sign of drift there came
// (zero: now).
func (w *Watcher) check(ctx context.Context, scope *gpb.Path, since time.Time, before agent.Rest) (done bool, err error) {
	var compared int
	diffs, oos, err := w.compare(ctx, scope, before, &compared)
	if compared >= largeCompare {
		// The comparison's copies of both sides are garbage now; the heap
		// goal they raised would keep them resident while the sidecar
		// idles, as it mostly does after the first comparison of a session.
		debug.FreeOSMemory()
	}
	if errors.Is(err, errBusy) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	now := time.Now()
	w.mu.Lock()
	ready := w.tracker.Update([]*gpb.Path{scope}, diffs, now, since)
	w.status.Checks++
	w.status.LastCheck = now
	w.status.Detected += uint64(len(ready.New))
	w.mu.Unlock()
	w.act(ctx, ready, oos)
	return true, nil
}

// largeCompare is the number of the journal's values compared from which
// a comparison returns the memory it used to the operating system when it
// is done.
const largeCompare = 2_000

// errBusy: the sidecar wrote to the device during a comparison.
var errBusy = errors.New("the sidecar is applying changes to the device")

// compare reads the device's configuration at scope and the journal's,
// and compares them, if the pipeline is at rest as before throughout
// (else errBusy). compared, if not nil, receives the number of the
// journal's values compared.
func (w *Watcher) compare(ctx context.Context, scope *gpb.Path, before agent.Rest, compared *int) ([]Diff, []*journal.OutOfSync, error) {
	values, err := w.reader.Read(w.outgoing(ctx), w.opts.DeviceTarget, scope)
	if err != nil {
		return nil, nil, err
	}
	var applied []*journal.PathValue
	if compared != nil {
		defer func() { *compared = len(applied) }()
	}
	above, err := w.opts.Journal.AppliedAt(ctx, coveringPaths(scope))
	if err != nil {
		return nil, nil, err
	}
	for _, pv := range above {
		if pv != nil {
			applied = append(applied, pv)
		}
	}
	err = w.opts.Journal.Applied(ctx, scope, func(pv *journal.PathValue) error {
		applied = append(applied, pv)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	oos, err := w.opts.Journal.OutOfSync(ctx)
	if err != nil {
		return nil, nil, err
	}
	after, err := w.opts.Agent.Rest(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !before.Same(after) {
		return nil, nil, errBusy
	}
	device := []*gpb.Notification{{Update: values}} // full paths
	diffs := Compare(Input{Scope: scope, Applied: applied, Device: device, OutOfSync: oos, Decomposer: w.dec})
	return diffs, oos, nil
}

// act logs what a comparison found and carries out the policy.
func (w *Watcher) act(ctx context.Context, r Ready, oos []*journal.OutOfSync) {
	for _, rec := range r.New {
		w.log.Warn("configuration drift: the device differs from the journal", "path", gnmipath.String(rec.Path),
			"kind", rec.Kind.String(), "journal", show(rec.Journal, "(deleted)"), "device", show(rec.Device, "(absent)"),
			"proposal", rec.Index, "policy", string(w.opts.Policy))
	}
	for _, rec := range r.Cleared {
		if outOfSync(rec.Path, oos) {
			w.log.Info("configuration drift: path now out of sync (the device refused the journal's value; gnmi-sidecar status, resolve)",
				"path", gnmipath.String(rec.Path))
			continue
		}
		w.log.Info("configuration drift cleared: the device holds the journal's configuration again", "path", gnmipath.String(rec.Path))
	}
	for _, rec := range r.Capped {
		w.log.Warn("configuration drift keeps coming back: no longer reverting this path, only reporting it; find who changes it on the device, or keep the device's value with gnmi-sidecar resolve adopt PATH",
			"path", gnmipath.String(rec.Path), "reverts", rec.Reverts, "window", w.opts.RevertWindow)
	}
	if len(r.Revert) > 0 {
		w.revert(ctx, paths(r.Revert))
	}
	if len(r.Adopt) > 0 {
		w.adopt(ctx, paths(r.Adopt))
	}
	if len(r.Revert)+len(r.Adopt) > 0 {
		// Compare again once the pipeline is at rest: the device took the
		// revert (its notifications may tell too), refused it (the paths
		// are out of sync now), or the journal adopted its values. The
		// revert cap and a failed adoption's mark keep this from looping.
		poke(w.checkNow)
	}
}

func paths(recs []Record) []*gpb.Path {
	out := make([]*gpb.Path, len(recs))
	for n, r := range recs {
		out[n] = r.Path
	}
	return out
}

func outOfSync(p *gpb.Path, oos []*journal.OutOfSync) bool {
	for _, rec := range oos {
		if under(p, rec.GetValue().GetPath()) {
			return true
		}
	}
	return false
}

// revert puts the journal's values back at ps (agent.RevertDrift). The
// device's answers to it (notifications) bring the next comparison.
func (w *Watcher) revert(ctx context.Context, ps []*gpb.Path) {
	res, err := w.opts.Agent.RevertDrift(ctx, ps)
	if err != nil {
		w.log.Warn("could not revert configuration drift; tried again at the next comparison", "paths", len(ps), "err", err)
		return
	}
	w.mu.Lock()
	w.tracker.Reverted(ps, time.Now())
	w.status.Reverts += uint64(len(ps))
	w.mu.Unlock()
	for _, p := range ps {
		w.log.Info("configuration drift reverted: the journal's value is back on the device", "path", gnmipath.String(p))
	}
	if len(res.Refused) > 0 {
		w.log.Warn("the device refused part of the drift revert; those paths are out of sync (gnmi-sidecar status; resolve them with gnmi-sidecar resolve)",
			"refused", len(res.Refused))
	}
}

// adoptTimeout bounds the wait for an adopted proposal to be applied.
const adoptTimeout = 30 * time.Second

// maxComment bounds the comment of an adopted proposal (the sidecar
// extension's bound, proxy.MaxCommentBytes).
const maxComment = proxy.MaxCommentBytes

// adopt journals the device's values at ps as an adopted proposal
// authored "device" (proxy.AdoptionOps, agent.ProposeAdoption). A failure
// is logged and not tried again for the same drift.
func (w *Watcher) adopt(ctx context.Context, ps []*gpb.Path) {
	err := func() error {
		ctx, cancel := context.WithTimeout(ctx, adoptTimeout)
		defer cancel()
		ops, prefix, err := proxy.AdoptionOps(w.outgoing(ctx), w.reader, w.opts.DeviceTarget, ps)
		if err != nil {
			return err
		}
		by := journal.Sender{Author: Author, Comment: adoptComment(ps), Prefix: prefix}
		p, err := w.opts.Agent.ProposeAdoption(ctx, by, ops)
		if err != nil {
			return err
		}
		w.log.Info("configuration drift adopted: the journal records the device's values", "proposal", p.GetIndex(), "paths", len(ps))
		p, err = w.opts.Agent.WaitChange(ctx, p.GetIndex(), true)
		if err != nil {
			return fmt.Errorf("waiting for adopted proposal %d: %w", p.GetIndex(), err)
		}
		if journal.ChangeFailed(p) {
			return fmt.Errorf("adopted proposal %d failed: %s", p.GetIndex(), p.GetChange().GetError().GetMessage())
		}
		return nil
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.tracker.AdoptFailed(ps)
		w.log.Warn("could not adopt configuration drift; reporting it only until it changes (gnmi-sidecar resolve adopt PATH, or revert it)",
			"paths", len(ps), "err", err)
		return
	}
	w.status.Adoptions += uint64(len(ps))
}

// adoptComment is "drift adopted: P1, P2, ...", cut to maxComment bytes.
func adoptComment(ps []*gpb.Path) string {
	var b strings.Builder
	b.WriteString("drift adopted: ")
	for n, p := range ps {
		s := gnmipath.String(p)
		if n > 0 {
			s = ", " + s
		}
		if b.Len()+len(s) > maxComment-len(" …") {
			b.WriteString(" …")
			break
		}
		b.WriteString(s)
	}
	return b.String()
}

// show renders a value for a log line (none if v is nil).
func show(v *gpb.TypedValue, none string) string {
	if v == nil {
		return none
	}
	return Text(v)
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
