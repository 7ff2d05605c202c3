package introspection

// Subscribe to origin gnmi-sidecar: ONCE, POLL, and STREAM with ON_CHANGE,
// TARGET_DEFINED (same as ON_CHANGE) or SAMPLE subscriptions.

import (
	"context"
	"io"
	"math"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
)

const (
	// defaultSampleInterval is a SAMPLE subscription's interval when the
	// request names none; minSampleInterval the shortest accepted.
	defaultSampleInterval = time.Second
	minSampleInterval     = 100 * time.Millisecond
	// introspectCoalesce is the least time between two renders of an
	// ON_CHANGE subscription: the wake-ups of a burst of transitions (one
	// Set makes several) fold into a few notifications.
	introspectCoalesce = 20 * time.Millisecond
	// introspectResync re-renders an ON_CHANGE subscription without a
	// wake-up: the agent does not see retention dropping proposals.
	introspectResync = time.Second
)

// subscriptionGroup is subscriptions rendered together: all the ON_CHANGE
// (and TARGET_DEFINED) ones of a stream, or one SAMPLE subscription.
type subscriptionGroup struct {
	view     *treeView
	interval time.Duration // SAMPLE; 0 for ON_CHANGE
	suppress bool          // SAMPLE: suppress_redundant

	next    time.Time       // SAMPLE: when the next sample is due
	last    time.Time       // ON_CHANGE: when it was last rendered
	dirty   bool            // ON_CHANGE: woken since then
	changes <-chan struct{} // ON_CHANGE: closed on the agent's next change
}

func (g *subscriptionGroup) onChange() bool { return g.interval == 0 }

// wakeAt is when g is next due, unless woken earlier.
func (g *subscriptionGroup) wakeAt() time.Time {
	switch {
	case !g.onChange():
		return g.next
	case g.dirty:
		return g.last.Add(introspectCoalesce)
	}
	return g.last.Add(introspectResync)
}

// subscription is one Subscribe stream of origin gnmi-sidecar.
type subscription struct {
	t      *Tree
	stream gpb.GNMI_SubscribeServer
	list   *gpb.SubscriptionList
	groups []*subscriptionGroup
}

// Subscribe answers a Subscribe of origin gnmi-sidecar, whose first
// request (first) has been received from stream. It ends with the
// stream's context, or with ctx (a context of the stream's that the
// caller ends to drain it) with ctx's error.
func (t *Tree) Subscribe(ctx context.Context, stream gpb.GNMI_SubscribeServer, first *gpb.SubscribeRequest) error {
	list := first.GetSubscribe()
	if list == nil {
		return status.Error(codes.InvalidArgument, "the first SubscribeRequest must carry a SubscriptionList")
	}
	if err := noExtensions(first.GetExtension()); err != nil {
		return err
	}
	if err := t.settle(stream.Context()); err != nil {
		return err
	}
	groups, err := t.subscriptionGroups(list)
	if err != nil {
		return err
	}
	x := &subscription{t: t, stream: stream, list: list, groups: groups}
	log := t.log.With("origin", Origin, "mode", list.GetMode().String(), "subscriptions", len(list.GetSubscription()))
	log.Debug("introspection subscription")
	err = x.run(ctx)
	switch {
	case err == nil:
		return nil
	case stream.Context().Err() != nil:
		return status.FromContextError(stream.Context().Err()).Err()
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	log.Debug("introspection subscription ended", "err", err)
	return err
}

// subscriptionGroups checks a SubscriptionList and groups its
// subscriptions: one group for ONCE and POLL; for STREAM one for the
// ON_CHANGE and TARGET_DEFINED subscriptions and one per SAMPLE one.
func (t *Tree) subscriptionGroups(list *gpb.SubscriptionList) ([]*subscriptionGroup, error) {
	if _, ok := gpb.SubscriptionList_Mode_name[int32(list.GetMode())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown subscription list mode %d", list.GetMode())
	}
	if err := checkEncoding(list.GetEncoding()); err != nil {
		return nil, err
	}
	if len(list.GetSubscription()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the SubscriptionList has no subscriptions")
	}
	if _, err := requestPatterns(list.GetPrefix(), nil); err != nil {
		return nil, err // a wildcard prefix
	}
	var onChange []treePattern
	var groups []*subscriptionGroup
	for _, sub := range list.GetSubscription() {
		if _, ok := gpb.SubscriptionMode_name[int32(sub.GetMode())]; !ok {
			return nil, status.Errorf(codes.InvalidArgument, "unknown subscription mode %d", sub.GetMode())
		}
		p, err := newPattern(list.GetPrefix(), sub.GetPath())
		if err != nil {
			return nil, err
		}
		if list.GetMode() == gpb.SubscriptionList_STREAM && p.selection().diff {
			return nil, status.Errorf(codes.InvalidArgument,
				"%s: diff compares the device with the journal once per request: read it with Get, or Subscribe ONCE or POLL; follow the drift watcher's findings with a STREAM subscription to %s:/%s instead", p, Origin, Drift)
		}
		if list.GetMode() != gpb.SubscriptionList_STREAM || sub.GetMode() != gpb.SubscriptionMode_SAMPLE {
			onChange = append(onChange, p)
			continue
		}
		interval := time.Duration(sub.GetSampleInterval())
		switch {
		case sub.GetSampleInterval() == 0:
			interval = defaultSampleInterval
		case sub.GetSampleInterval() < uint64(minSampleInterval):
			return nil, status.Errorf(codes.InvalidArgument, "%s: sample_interval %v is below the minimum, %v", p, interval, minSampleInterval)
		case sub.GetSampleInterval() > math.MaxInt64:
			return nil, status.Errorf(codes.InvalidArgument, "%s: sample_interval %d ns is too long", p, sub.GetSampleInterval())
		}
		groups = append(groups, &subscriptionGroup{view: newView(t.src, []treePattern{p}), interval: interval, suppress: sub.GetSuppressRedundant()})
	}
	if len(onChange) > 0 {
		groups = append([]*subscriptionGroup{{view: newView(t.src, onChange)}}, groups...)
	}
	return groups, nil
}

// run serves the subscription until it is done (ONCE, or POLL when the
// client closes its side) or fails.
func (x *subscription) run(ctx context.Context) error {
	polls, ended := x.receive(ctx)
	if err := x.initial(ctx); err != nil {
		return err
	}
	switch x.list.GetMode() {
	case gpb.SubscriptionList_ONCE:
		return nil
	case gpb.SubscriptionList_POLL:
		return x.poll(ctx, polls, ended)
	}
	return x.streamChanges(ctx, ended)
}

// initial renders every group, sends the leaves unless updates_only, then
// sync_response.
func (x *subscription) initial(ctx context.Context) error {
	now := time.Now()
	for _, g := range x.groups {
		if g.onChange() {
			g.changes = x.t.agent.Changes() // before reading: no change is missed
		}
		d, err := g.view.refresh(ctx)
		if err != nil {
			return readError(err)
		}
		g.last, g.next = now, now.Add(g.interval)
		if !x.list.GetUpdatesOnly() {
			if err := x.send(d.updates, nil); err != nil {
				return err
			}
		}
	}
	return x.sync()
}

// poll answers each Poll with a snapshot and sync_response, until the
// client closes its side.
func (x *subscription) poll(ctx context.Context, polls <-chan struct{}, ended <-chan error) error {
	g := x.groups[0]
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			if err == io.EOF {
				return nil
			}
			return err
		case <-polls:
		}
		if _, err := g.view.refresh(ctx); err != nil {
			return readError(err)
		}
		if err := x.send(g.view.all(), nil); err != nil {
			return err
		}
		if err := x.sync(); err != nil {
			return err
		}
	}
}

// streamChanges serves a STREAM subscription: each group when it is due.
// The ON_CHANGE group is due once the agent reports a change (at most every
// introspectCoalesce) or after introspectResync; a SAMPLE group every
// interval. A client closing its side does not end the stream.
func (x *subscription) streamChanges(ctx context.Context, ended <-chan error) error {
	var onChange *subscriptionGroup
	if x.groups[0].onChange() {
		onChange = x.groups[0]
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		wake := now.Add(time.Hour)
		for _, g := range x.groups {
			if !now.Before(g.wakeAt()) {
				if err := x.update(ctx, g, now); err != nil {
					return err
				}
			}
			if w := g.wakeAt(); w.Before(wake) {
				wake = w
			}
		}
		timer.Reset(time.Until(wake))
		var changes <-chan struct{}
		if onChange != nil && !onChange.dirty {
			changes = onChange.changes
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			if err != io.EOF {
				return err
			}
			ended = nil // half-closed: keep streaming
		case <-changes:
			onChange.dirty = true
		case <-timer.C:
		}
	}
}

// update re-renders group g and sends what it owes: the changes (ON_CHANGE,
// and SAMPLE with suppress_redundant) or every leaf and the deletes
// (SAMPLE).
func (x *subscription) update(ctx context.Context, g *subscriptionGroup, now time.Time) error {
	if g.onChange() {
		g.changes = x.t.agent.Changes()
		g.last, g.dirty = now, false
	} else if g.next = g.next.Add(g.interval); g.next.Before(now) {
		g.next = now.Add(g.interval) // fell behind: skip the missed samples
	}
	d, err := g.view.refresh(ctx)
	if err != nil {
		return proxy.JournalError(err)
	}
	if g.onChange() || g.suppress {
		return x.send(d.updates, d.deletes)
	}
	return x.send(g.view.all(), d.deletes)
}

// receive reads the client's further requests: Polls (POLL mode only) go
// to polls; the end of the client's side (io.EOF) or a bad request ends
// ended.
func (x *subscription) receive(ctx context.Context) (<-chan struct{}, <-chan error) {
	polls := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		for {
			req, err := x.stream.Recv()
			if err != nil {
				ended <- err
				return
			}
			switch {
			case req.GetPoll() != nil && x.list.GetMode() == gpb.SubscriptionList_POLL:
				select {
				case polls <- struct{}{}:
				case <-ctx.Done():
					return
				}
			case req.GetPoll() != nil:
				ended <- status.Errorf(codes.InvalidArgument, "Poll on a %v subscription (only POLL subscriptions are polled)", x.list.GetMode())
				return
			default:
				ended <- status.Error(codes.InvalidArgument, "a Subscribe stream takes one SubscriptionList, then only Polls")
				return
			}
		}
	}()
	return polls, ended
}

// send sends leaves as updates and paths as deletes, in notifications of
// at most proxy.MaxUpdatesPerNotification entries (deletes first: gNMI applies a
// notification's deletes before its updates).
func (x *subscription) send(updates []treeLeaf, deletes [][]*gpb.PathElem) error {
	prefix := x.list.GetPrefix()
	now := time.Now().UnixNano()
	for len(updates)+len(deletes) > 0 {
		n := &gpb.Notification{Timestamp: now, Prefix: prefix}
		k := min(len(deletes), proxy.MaxUpdatesPerNotification)
		for _, p := range deletes[:k] {
			n.Delete = append(n.Delete, relativePath(p, prefix))
		}
		deletes = deletes[k:]
		k = min(len(updates), proxy.MaxUpdatesPerNotification-len(n.Delete))
		n.Update = updatesOf(updates[:k], prefix)
		updates = updates[k:]
		if err := x.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: n}}); err != nil {
			return err
		}
	}
	return nil
}

func (x *subscription) sync() error {
	return x.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}})
}
