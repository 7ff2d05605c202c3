package proxy

import (
	"context"
	"errors"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// The History extension (gnmi_ext.History; OpenConfig gnmi-history.md,
// docs/design.md §4), answered from the journal's committed configuration and its
// history of changes, never from the device: a snapshot_time on Get or on
// a ONCE Subscribe returns the configuration as the journal had committed
// it then; a range on Subscribe returns that configuration at the start,
// then every change committed in [start, end), each notification
// timestamped with its commit time.

// MaxUpdatesPerNotification bounds one Notification the sidecar answers
// itself: of History, and of the introspection tree.
const MaxUpdatesPerNotification = 1000

// historyExtension returns the History extension of a Get or Subscribe
// request (nil if absent).
func historyExtension(exts []*gnmi_ext.Extension) (*gnmi_ext.History, error) {
	var out *gnmi_ext.History
	for _, e := range exts {
		if h := e.GetHistory(); h != nil {
			if out != nil {
				return nil, status.Error(codes.InvalidArgument, "more than one History extension in one request")
			}
			out = h
		}
	}
	return out, nil
}

// snapshotTime validates a History snapshot_time.
func snapshotTime(h *gnmi_ext.History) (time.Time, error) {
	ns := h.GetSnapshotTime()
	if ns <= 0 {
		return time.Time{}, status.Errorf(codes.InvalidArgument, "History snapshot_time must be a positive time in nanoseconds since the Unix epoch, got %d", ns)
	}
	t := time.Unix(0, ns)
	if now := time.Now(); t.After(now) {
		return time.Time{}, status.Errorf(codes.Unimplemented, "History snapshot_time %s is in the future (the sidecar's clock reads %s)",
			t.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return t, nil
}

// historyError maps a journal error of a History read.
func historyError(err error) error {
	if errors.Is(err, journal.ErrCompacted) {
		return status.Errorf(codes.OutOfRange, "%v (retention keeps the history of the newest proposals only)", err)
	}
	return JournalError(err)
}

// historyGet answers a Get with History{snapshot_time}: one notification
// per requested path, with the values committed at and under it then.
func (s *Server) historyGet(ctx context.Context, req *gpb.GetRequest, h *gnmi_ext.History) (*gpb.GetResponse, error) {
	if h.GetRange() != nil {
		return nil, status.Error(codes.InvalidArgument, "a History range applies to Subscribe; Get takes a snapshot_time")
	}
	if _, ok := gpb.GetRequest_DataType_name[int32(req.GetType())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown Get data type %d", req.GetType())
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	if _, ok := gpb.Encoding_name[int32(req.GetEncoding())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown encoding %d", req.GetEncoding())
	}
	t, err := snapshotTime(h)
	if err != nil {
		return nil, err
	}
	paths := req.GetPath()
	if len(paths) == 0 {
		paths = []*gpb.Path{{}}
	}
	resp := &gpb.GetResponse{}
	for _, p := range paths {
		pattern := gnmipath.Join(req.GetPrefix(), p)
		ups, err := s.committedAt(ctx, t, pattern, req.GetPrefix())
		if err != nil {
			return nil, err
		}
		if len(ups) == 0 {
			return nil, status.Errorf(codes.NotFound, "%s: nothing was configured there at %s", gnmipath.Short(pattern), t.UTC().Format(time.RFC3339Nano))
		}
		resp.Notification = append(resp.Notification, &gpb.Notification{Timestamp: t.UnixNano(), Prefix: req.GetPrefix(), Update: ups})
	}
	return resp, nil
}

// committedAt returns, as updates relative to prefix, the values committed
// at time t at or under the paths pattern matches.
func (s *Server) committedAt(ctx context.Context, t time.Time, pattern, prefix *gpb.Path) ([]*gpb.Update, error) {
	var ups []*gpb.Update
	err := s.opts.Journal.CommittedAt(ctx, t, concretePart(pattern), func(pv *journal.PathValue) error {
		if pv.GetDeleted() || !gnmipath.MatchesOrUnder(pattern.GetElem(), pv.GetPath().GetElem()) {
			return nil
		}
		ups = append(ups, &gpb.Update{Path: gnmipath.Relative(pv.GetPath(), prefix), Val: pv.GetValue()})
		return nil
	})
	if err != nil {
		return nil, historyError(err)
	}
	return ups, nil
}

// historySubscribe answers a Subscribe with the History extension.
func (s *Server) historySubscribe(stream gpb.GNMI_SubscribeServer, first *gpb.SubscribeRequest, h *gnmi_ext.History) error {
	ctx := stream.Context()
	if err := s.settle(ctx); err != nil {
		return err
	}
	list := first.GetSubscribe()
	mode := list.GetMode()
	if _, ok := gpb.SubscriptionList_Mode_name[int32(mode)]; !ok {
		return status.Errorf(codes.InvalidArgument, "unknown subscription list mode %d", mode)
	}
	if _, ok := gpb.Encoding_name[int32(list.GetEncoding())]; !ok {
		return status.Errorf(codes.InvalidArgument, "unknown encoding %d", list.GetEncoding())
	}
	patterns := make([]*gpb.Path, 0, len(list.GetSubscription()))
	for _, sub := range list.GetSubscription() {
		patterns = append(patterns, gnmipath.Join(list.GetPrefix(), sub.GetPath()))
	}
	if len(patterns) == 0 {
		patterns = append(patterns, gnmipath.Join(list.GetPrefix(), &gpb.Path{}))
	}
	send := func(n *gpb.Notification) error {
		return stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: n}})
	}
	sync := func() error {
		return stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}})
	}

	if h.GetRange() == nil {
		if mode != gpb.SubscriptionList_ONCE {
			return status.Errorf(codes.InvalidArgument, "a History snapshot_time needs subscription mode ONCE, got %s", mode)
		}
		t, err := snapshotTime(h)
		if err != nil {
			return err
		}
		if err := s.sendSnapshot(ctx, t, patterns, list.GetPrefix(), send); err != nil {
			return err
		}
		return sync()
	}

	if mode == gpb.SubscriptionList_POLL {
		return status.Error(codes.InvalidArgument, "a History range needs subscription mode STREAM (or ONCE), got POLL")
	}
	start, end := h.GetRange().GetStart(), h.GetRange().GetEnd()
	if start < 0 || start > end {
		return status.Errorf(codes.InvalidArgument, "History range: start %d must be at least 0 and not after end %d (nanoseconds since the Unix epoch)", start, end)
	}
	from, until := time.Unix(0, start), time.Unix(0, end)
	if now := time.Now(); from.After(now) {
		return status.Errorf(codes.Unimplemented, "History range start %s is in the future (the sidecar's clock reads %s)",
			from.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	if !list.GetUpdatesOnly() {
		if err := s.sendSnapshot(ctx, from, patterns, list.GetPrefix(), send); err != nil {
			return err
		}
	}
	if mode == gpb.SubscriptionList_STREAM {
		if err := sync(); err != nil {
			return err
		}
	}
	if err := s.sendChanges(ctx, from, until, mode == gpb.SubscriptionList_STREAM, patterns, list.GetPrefix(), send); err != nil {
		return err
	}
	if mode == gpb.SubscriptionList_ONCE {
		return sync()
	}
	return nil
}

// sendSnapshot sends the values committed at time t under patterns, in
// notifications timestamped t.
func (s *Server) sendSnapshot(ctx context.Context, t time.Time, patterns []*gpb.Path, prefix *gpb.Path, send func(*gpb.Notification) error) error {
	for _, pattern := range patterns {
		ups, err := s.committedAt(ctx, t, pattern, prefix)
		if err != nil {
			return err
		}
		for len(ups) > 0 {
			n := min(len(ups), MaxUpdatesPerNotification)
			if err := send(&gpb.Notification{Timestamp: t.UnixNano(), Prefix: prefix, Update: ups[:n]}); err != nil {
				return err
			}
			ups = ups[n:]
		}
	}
	return nil
}

// sendChanges sends every change committed in [from, until) under
// patterns, one notification per journal change, timestamped with its
// commit time. With follow, it keeps sending changes as they are
// committed until until passes (a range ending in the future).
func (s *Server) sendChanges(ctx context.Context, from, until time.Time, follow bool, patterns []*gpb.Path, prefix *gpb.Path, send func(*gpb.Notification) error) error {
	// Each read starts at the time of the last change sent; sentAtLast
	// counts the changes at exactly that time already sent, which the read
	// returns again.
	last, sentAtLast := from, 0
	for {
		changed := s.opts.Agent.Changes()
		now := time.Now()
		to := until
		if to.After(now) {
			to = now
		}
		atLast := 0
		err := s.opts.Journal.History(ctx, last, to, func(d *journal.HistoryDelta) error {
			t := d.GetTime().AsTime()
			switch {
			case !t.Before(until):
				return nil
			case t.Equal(last):
				atLast++
				if atLast <= sentAtLast {
					return nil
				}
				sentAtLast = atLast
			default:
				last, atLast, sentAtLast = t, 1, 1
			}
			if n := deltaNotification(d, patterns, prefix); n != nil {
				return send(n)
			}
			return nil
		})
		if err != nil {
			return historyError(err)
		}
		if !follow || !until.After(now) {
			return nil
		}
		select {
		case <-changed:
		case <-time.After(time.Until(until)):
		case <-s.streams.Done():
			return status.Error(codes.Unavailable, "the sidecar is shutting down")
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// deltaNotification is the notification of one journal change under
// patterns (nil if it touched nothing there): updates for the values it
// wrote, deletes for the paths it deleted.
func deltaNotification(d *journal.HistoryDelta, patterns []*gpb.Path, prefix *gpb.Path) *gpb.Notification {
	if d.GetKind() == journal.HistoryKindDropTombstones {
		return nil // retention forgetting deletes: nothing changed
	}
	n := &gpb.Notification{Timestamp: d.GetTime().AsTime().UnixNano(), Prefix: prefix}
	for _, e := range d.GetEntries() {
		after := e.GetAfter()
		path := after.GetPath()
		if path == nil {
			path = e.GetBefore().GetPath()
		}
		if !matchesAny(patterns, path) {
			continue
		}
		if after == nil || after.GetDeleted() {
			n.Delete = append(n.Delete, gnmipath.Relative(path, prefix))
		} else {
			n.Update = append(n.Update, &gpb.Update{Path: gnmipath.Relative(path, prefix), Val: after.GetValue()})
		}
	}
	if len(n.Update)+len(n.Delete) == 0 {
		return nil
	}
	return n
}

func matchesAny(patterns []*gpb.Path, p *gpb.Path) bool {
	for _, pattern := range patterns {
		if gnmipath.SameOrigin(pattern, p) && gnmipath.MatchesOrUnder(pattern.GetElem(), p.GetElem()) {
			return true
		}
	}
	return false
}

// concretePart returns the leading part of pattern without wildcards: the
// subtree every match lies in.
func concretePart(pattern *gpb.Path) *gpb.Path {
	out := &gpb.Path{Origin: pattern.GetOrigin()}
	for _, e := range pattern.GetElem() {
		if gnmipath.Wild(e) {
			break
		}
		out.Elem = append(out.Elem, e)
	}
	return out
}
