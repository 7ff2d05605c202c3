package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Subscribe is implemented here rather than with the gnmi module's
// subscribe+cache packages: that server requires a target name in every
// request, treats SAMPLE as ON_CHANGE (no periodic samples) and logs through
// glog. The device's tree is already in memory and every Set yields a diff,
// so ONCE/POLL walk the tree and STREAM forwards diffs (ON_CHANGE) or
// re-walks on a ticker (SAMPLE).

// defaultSampleInterval is used for SAMPLE subscriptions with
// sample_interval 0.
const defaultSampleInterval = time.Second

// MinInterval is the shortest sample_interval and heartbeat_interval a
// STREAM subscription may ask for (the sidecar's introspection tree has
// the same minimum); a shorter one is refused with InvalidArgument, as a
// real target refuses intervals it cannot honour.
const MinInterval = 100 * time.Millisecond

// maxUpdatesPerNotification keeps each response well under gRPC's default
// 4 MB message limit on large trees.
const maxUpdatesPerNotification = 1000

// watcher receives the change notifications of every committed Set.
type watcher struct {
	subs    []subscription // what the stream asked for
	mu      sync.Mutex
	pending []*gpb.Notification
	signal  chan struct{}
}

// cares reports whether a change that touched t (nil: anything) of a root
// of type rootType can concern one of the watcher's subscriptions. It is
// conservative: it looks at top-level fields and list keys only.
func (w *watcher) cares(rootType reflect.Type, t *touched) bool {
	if t == nil {
		return true
	}
	for _, s := range w.subs {
		elems := s.path.GetElem()
		for i := 0; i < rootType.NumField(); i++ {
			_, whole := t.whole[i]
			keys, entries := t.entries[i]
			if !whole && !entries {
				continue
			}
			tag, ok := rootType.Field(i).Tag.Lookup("path")
			if !ok {
				continue
			}
			for _, alt := range strings.Split(tag, "|") {
				if subReaches(elems, strings.Split(alt, "/"), keys, whole) {
					return true
				}
			}
		}
	}
	return false
}

// subReaches reports whether subscription path elems can match data at or
// under the field path parts (a list field, when keys lists the entries
// touched, unless whole).
func subReaches(elems []*gpb.PathElem, parts []string, keys []reflect.Value, whole bool) bool {
	for j, part := range parts {
		if j >= len(elems) || elems[j].GetName() == "..." {
			return true
		}
		e := elems[j]
		if e.GetName() != "*" && e.GetName() != part {
			return false
		}
		if j != len(parts)-1 || whole || len(e.GetKey()) != 1 {
			continue
		}
		for _, v := range e.GetKey() {
			if v == "*" {
				return true
			}
			for _, k := range keys {
				if fmt.Sprint(k.Interface()) == v {
					return true
				}
			}
			return false
		}
	}
	return true
}

func (w *watcher) push(n *gpb.Notification) {
	w.mu.Lock()
	w.pending = append(w.pending, n)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *watcher) take() []*gpb.Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending
	w.pending = nil
	return p
}

// watch registers a watcher for subs and returns it with the leaves of the
// tree it starts from, so no change between the two is lost or seen twice;
// with noLeaves (updates_only, and no SAMPLE that needs them) it returns
// none.
func (d *Device) watch(subs []subscription, noLeaves bool) (*watcher, []leaf, func(), error) {
	w := &watcher{subs: subs, signal: make(chan struct{}, 1)}
	d.tree.RLock()
	d.mu.Lock()
	d.watchers[w] = struct{}{}
	d.mu.Unlock()
	var root ygot.ValidatedGoStruct
	if !noLeaves {
		root = viewOf(d.current(), subPaths(subs))
	}
	d.tree.RUnlock()
	unwatch := func() {
		d.mu.Lock()
		delete(d.watchers, w)
		d.mu.Unlock()
	}
	if noLeaves {
		return w, nil, unwatch, nil
	}
	leaves, err := leavesOf(root, nil, time.Now().UnixNano())
	if err != nil {
		unwatch()
		return nil, nil, nil, status.Errorf(codes.Internal, "walking the configuration: %v", err)
	}
	return w, leaves, unwatch, nil
}

func subPaths(subs []subscription) []*gpb.Path {
	paths := make([]*gpb.Path, len(subs))
	for i, s := range subs {
		paths[i] = s.path
	}
	return paths
}

func (d *Device) broadcast(n *gpb.Notification) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.watchers {
		w.push(n)
	}
}

type subscription struct {
	path     *gpb.Path // full
	mode     gpb.SubscriptionMode
	interval time.Duration // SAMPLE: between samples
	// heartbeat (0: none): ON_CHANGE sends the current values again
	// every heartbeat; SAMPLE with suppress_redundant sends every value
	// at least once per heartbeat.
	heartbeat time.Duration
	// suppress (SAMPLE): send only the values that changed since sent.
	suppress bool
	// depth (gnmi_ext.Depth; 0: none) limits the leaves to that many
	// levels below path (see depthAllows).
	depth uint32
}

// pathMatches reports whether leaf lies at or below sub, honouring "*"
// element names and key values and a trailing "...".
func pathMatches(sub, leaf *gpb.Path) bool {
	le := leaf.GetElem()
	for i, e := range sub.GetElem() {
		if e.GetName() == "..." {
			return true
		}
		if i >= len(le) {
			return false
		}
		if e.GetName() != "*" && e.GetName() != le[i].GetName() {
			return false
		}
		for k, v := range e.GetKey() {
			if v != "*" && le[i].GetKey()[k] != v {
				return false
			}
		}
	}
	return true
}

func matchesAny(subs []subscription, p *gpb.Path) bool {
	for _, s := range subs {
		if pathMatches(s.path, p) && depthAllows(s.depth, s.path, p) {
			return true
		}
	}
	return false
}

func (s *gnmiServer) Subscribe(srv gpb.GNMI_SubscribeServer) error {
	req, err := srv.Recv()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	sl := req.GetSubscribe()
	if sl == nil {
		return status.Error(codes.InvalidArgument, "the first SubscribeRequest must carry a subscription list")
	}
	if len(sl.GetSubscription()) == 0 {
		return status.Error(codes.InvalidArgument, "subscription list has no subscriptions")
	}
	switch sl.GetEncoding() {
	case gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO:
	default:
		return status.Errorf(codes.Unimplemented, "encoding %v is not supported; use JSON, JSON_IETF or PROTO", sl.GetEncoding())
	}
	if err := s.d.refusedEncoding(sl.GetEncoding()); err != nil {
		return err
	}
	depth, err := checkExtensions(rpcSubscribe, req.GetExtension())
	if err != nil {
		return err
	}
	stream := sl.GetMode() == gpb.SubscriptionList_STREAM
	var subs []subscription
	for _, sub := range sl.GetSubscription() {
		full, err := joinPath(sl.GetPrefix(), sub.GetPath())
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "%s: %v", pathString(sub.GetPath()), err)
		}
		mode := sub.GetMode()
		if mode == gpb.SubscriptionMode_TARGET_DEFINED {
			mode = gpb.SubscriptionMode_ON_CHANGE
		}
		if _, ok := gpb.SubscriptionMode_name[int32(mode)]; !ok {
			return status.Errorf(codes.InvalidArgument, "%s: unknown subscription mode %d (TARGET_DEFINED, ON_CHANGE or SAMPLE)", pathString(full), mode)
		}
		if s.d.opts.RefuseOnChange && stream && mode == gpb.SubscriptionMode_ON_CHANGE {
			return status.Errorf(codes.Unimplemented, "%s: ON_CHANGE subscriptions are not supported by this device; use SAMPLE, ONCE or POLL", pathString(full))
		}
		x := subscription{path: full, mode: mode, suppress: sub.GetSuppressRedundant(), depth: depth}
		if stream {
			// The intervals concern STREAM subscriptions only; ONCE and
			// POLL ignore them.
			if x.interval, err = streamInterval(full, "sample_interval", sub.GetSampleInterval(), defaultSampleInterval); err != nil {
				return err
			}
			if x.heartbeat, err = streamInterval(full, "heartbeat_interval", sub.GetHeartbeatInterval(), 0); err != nil {
				return err
			}
		}
		subs = append(subs, x)
	}
	target := sl.GetPrefix().GetTarget()
	if target == "" {
		target = s.d.opts.Target
	}
	respPrefix := &gpb.Path{Target: target, Origin: sl.GetPrefix().GetOrigin()}
	ss := &subscribeStream{stream: srv, prefix: respPrefix, exts: s.d.echoed(req.GetExtension())}

	switch sl.GetMode() {
	case gpb.SubscriptionList_ONCE:
		if err := ss.sendTree(s.d, subs); err != nil {
			return err
		}
		return ss.sendSync()
	case gpb.SubscriptionList_POLL:
		for {
			if err := ss.sendTree(s.d, subs); err != nil {
				return err
			}
			if err := ss.sendSync(); err != nil {
				return err
			}
			next, err := srv.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if next.GetPoll() == nil {
				return status.Error(codes.InvalidArgument, "a POLL subscription accepts only Poll requests after the subscription list")
			}
		}
	case gpb.SubscriptionList_STREAM:
		return s.stream(ss, subs, sl.GetUpdatesOnly())
	}
	return status.Errorf(codes.InvalidArgument, "subscription list mode %v is not supported", sl.GetMode())
}

// streamInterval validates a STREAM subscription's sample_interval or
// heartbeat_interval (ns): 0 means def; anything shorter than MinInterval,
// or too long for a time.Duration, is InvalidArgument.
func streamInterval(full *gpb.Path, field string, ns uint64, def time.Duration) (time.Duration, error) {
	switch {
	case ns == 0:
		return def, nil
	case ns > math.MaxInt64:
		return 0, status.Errorf(codes.InvalidArgument, "%s: %s %d ns is too long", pathString(full), field, ns)
	case time.Duration(ns) < MinInterval:
		return 0, status.Errorf(codes.InvalidArgument, "%s: %s %v is below this device's minimum of %v", pathString(full), field, time.Duration(ns), MinInterval)
	}
	return time.Duration(ns), nil
}

// tick is a timer of a STREAM subscription that fired: subs[sub]'s sample
// or heartbeat.
type tick struct {
	sub       int
	heartbeat bool
}

// stream serves a STREAM subscription list: the initial values (unless
// updatesOnly) and sync_response, then, per subscription,
//
//   - ON_CHANGE (and TARGET_DEFINED): every change a Set makes, and with
//     a heartbeat_interval every value again once per interval;
//   - SAMPLE: every value once per sample_interval; with
//     suppress_redundant only the values that changed since they were last
//     sent (the initial state counts as sent, even with updatesOnly), and
//     with a heartbeat_interval as well every value once per heartbeat
//     interval, changed or not. Without suppress_redundant every sample
//     carries every value: the heartbeat adds nothing.
func (s *gnmiServer) stream(ss *subscribeStream, subs []subscription, updatesOnly bool) error {
	ctx := ss.stream.Context()
	noLeaves := updatesOnly
	for _, sub := range subs {
		noLeaves = noLeaves && !(sub.mode == gpb.SubscriptionMode_SAMPLE && sub.suppress)
	}
	w, leaves, unwatch, err := s.d.watch(subs, noLeaves)
	if err != nil {
		return err
	}
	defer unwatch()

	if !updatesOnly {
		if err := ss.sendLeaves(leaves, subs); err != nil {
			return err
		}
	}
	if err := ss.sendSync(); err != nil {
		return err
	}

	// sent holds, per SAMPLE subscription with suppress_redundant, the
	// value last sent at each path.
	sent := make([]map[string]*gpb.TypedValue, len(subs))
	var onChange []subscription
	ticks := make(chan tick)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	every := func(d time.Duration, t tick) {
		go func() {
			tk := time.NewTicker(d)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
					select {
					case ticks <- t:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	for i, sub := range subs {
		if sub.mode != gpb.SubscriptionMode_SAMPLE {
			onChange = append(onChange, sub)
			if sub.heartbeat > 0 {
				every(sub.heartbeat, tick{sub: i, heartbeat: true})
			}
			continue
		}
		every(sub.interval, tick{sub: i})
		if sub.suppress {
			sent[i] = map[string]*gpb.TypedValue{}
			for _, l := range leaves {
				if matchesAny(subs[i:i+1], l.path) {
					sent[i][pathString(l.path)] = l.val
				}
			}
			if sub.heartbeat > 0 {
				every(sub.heartbeat, tick{sub: i, heartbeat: true})
			}
		}
	}

	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case t := <-ticks:
			if err := ss.sendSample(s.d, subs[t.sub:t.sub+1], sent[t.sub], t.heartbeat); err != nil {
				return err
			}
		case <-w.signal:
			for _, n := range w.take() {
				if err := ss.sendChange(n, onChange); err != nil {
					return err
				}
			}
		}
	}
}

type subscribeStream struct {
	stream gpb.GNMI_SubscribeServer
	prefix *gpb.Path
	// exts are the registered extensions of the subscription list's
	// request, echoed with every sync_response.
	exts []*gnmi_ext.Extension
}

func (ss *subscribeStream) sendSync() error {
	return ss.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}, Extension: ss.exts})
}

// sendTree sends every leaf of the tree that matches subs.
func (ss *subscribeStream) sendTree(d *Device, subs []subscription) error {
	leaves, err := d.leaves(subs)
	if err != nil {
		return err
	}
	return ss.sendLeaves(leaves, subs)
}

// sendSample sends one sample of a SAMPLE subscription: every leaf that
// matches subs, or with sent (suppress_redundant) only those whose value
// differs from the one sent last, unless heartbeat; sent is brought up
// to date.
func (ss *subscribeStream) sendSample(d *Device, subs []subscription, sent map[string]*gpb.TypedValue, heartbeat bool) error {
	leaves, err := d.leaves(subs)
	if err != nil {
		return err
	}
	if sent == nil {
		return ss.sendLeaves(leaves, subs)
	}
	var out []leaf
	now := make(map[string]*gpb.TypedValue, len(sent))
	for _, l := range leaves {
		if !matchesAny(subs, l.path) {
			continue
		}
		k := pathString(l.path)
		now[k] = l.val
		if last, ok := sent[k]; heartbeat || !ok || !proto.Equal(last, l.val) {
			out = append(out, l)
		}
	}
	clear(sent)
	maps.Copy(sent, now) // a leaf gone is forgotten: sent again if it comes back
	return ss.sendLeaves(out, subs)
}

// leaves walks the part of the current tree that subs may reach into
// leaves (a superset of those subs match).
func (d *Device) leaves(subs []subscription) ([]leaf, error) {
	leaves, err := leavesOf(d.view(subPaths(subs)), nil, time.Now().UnixNano())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "walking the configuration: %v", err)
	}
	return leaves, nil
}

// sendLeaves sends the leaves that match subs, in notifications of at most
// maxUpdatesPerNotification updates.
func (ss *subscribeStream) sendLeaves(leaves []leaf, subs []subscription) error {
	ts := time.Now().UnixNano()
	var batch []*gpb.Update
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n := &gpb.Notification{Timestamp: ts, Prefix: ss.prefix, Update: batch}
		batch = nil
		return ss.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: n}})
	}
	for _, l := range leaves {
		if !matchesAny(subs, l.path) {
			continue
		}
		batch = append(batch, &gpb.Update{Path: l.path, Val: l.val})
		if len(batch) == maxUpdatesPerNotification {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// sendChange forwards the part of a Set's change notification that matches
// the ON_CHANGE subscriptions.
func (ss *subscribeStream) sendChange(n *gpb.Notification, subs []subscription) error {
	out := &gpb.Notification{Timestamp: n.GetTimestamp(), Prefix: ss.prefix}
	for _, u := range n.GetUpdate() {
		if matchesAny(subs, u.GetPath()) {
			out.Update = append(out.Update, u)
		}
	}
	for _, p := range n.GetDelete() {
		if matchesAny(subs, p) {
			out.Delete = append(out.Delete, p)
		}
	}
	if len(out.Update) == 0 && len(out.Delete) == 0 {
		return nil
	}
	return ss.stream.Send(&gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: out}})
}
