package testbed_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// The STREAM details: heartbeat_interval, suppress_redundant, interval
// validation. Time is the behaviour here, so the tests bound it, generously:
// a heartbeat or sample must come within 5 s (it is due within 100-300 ms),
// and "nothing comes" is checked over a few sample intervals.

const (
	eth0Config = "/interfaces/interface[name=eth0]/config"
	// soon bounds how long a due notification may take to arrive.
	soon = 5 * time.Second
)

// events receives a stream's responses in the background.
type events struct {
	t  *testing.T
	ch chan eventOrErr
}

type eventOrErr struct {
	ev  event
	err error
}

// streamEvents subscribes with list and pumps the responses.
func streamEvents(t *testing.T, c gpb.GNMIClient, list *gpb.SubscriptionList) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}}); err != nil {
		t.Fatal(err)
	}
	e := &events{t: t, ch: make(chan eventOrErr, 100)}
	go func() {
		for {
			resp, err := sub.Recv()
			if err != nil {
				e.ch <- eventOrErr{err: err}
				return
			}
			ev := event{sync: resp.GetSyncResponse(), updates: map[string]*gpb.TypedValue{}}
			n := resp.GetUpdate()
			for _, u := range n.GetUpdate() {
				ev.updates[pathStr(append(append([]*gpb.PathElem{}, n.GetPrefix().GetElem()...), u.GetPath().GetElem()...))] = u.GetVal()
			}
			for _, d := range n.GetDelete() {
				ev.deletes = append(ev.deletes, pathStr(d.GetElem()))
			}
			e.ch <- eventOrErr{ev: ev}
		}
	}()
	return e
}

func pathStr(elems []*gpb.PathElem) string {
	s, err := ygotPathString(&gpb.Path{Elem: elems})
	if err != nil {
		return "?"
	}
	return s
}

// next returns the next response, failing the test unless it comes within d.
func (e *events) next(d time.Duration) event {
	e.t.Helper()
	select {
	case x := <-e.ch:
		if x.err != nil {
			e.t.Fatalf("Recv: %v", x.err)
		}
		return x.ev
	case <-time.After(d):
		e.t.Fatalf("no notification within %v", d)
	}
	return event{}
}

// none fails the test if a response comes within d.
func (e *events) none(d time.Duration, why string) {
	e.t.Helper()
	select {
	case x := <-e.ch:
		e.t.Fatalf("%s; got %+v (err %v)", why, x.ev, x.err)
	case <-time.After(d):
	}
}

// untilSync returns what came before the sync_response.
func (e *events) untilSync() map[string]*gpb.TypedValue {
	e.t.Helper()
	all := map[string]*gpb.TypedValue{}
	for {
		ev := e.next(soon)
		if ev.sync {
			return all
		}
		for k, v := range ev.updates {
			all[k] = v
		}
	}
}

func streamList(updatesOnly bool, subs ...*gpb.Subscription) *gpb.SubscriptionList {
	return &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO, UpdatesOnly: updatesOnly, Subscription: subs}
}

// TestSubscribeHeartbeat: an ON_CHANGE (or TARGET_DEFINED) subscription
// with a heartbeat_interval gets its current values again once per
// interval although nothing changed, and the changes in between as ever.
func TestSubscribeHeartbeat(t *testing.T) {
	for _, mode := range []gpb.SubscriptionMode{gpb.SubscriptionMode_ON_CHANGE, gpb.SubscriptionMode_TARGET_DEFINED} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			_, c := startDevice(t, testbed.Options{})
			mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("steady")), upd(t, eth0MTU, uintV(1500))}})
			e := streamEvents(t, c, streamList(false, &gpb.Subscription{Path: p(t, eth0Config), Mode: mode, HeartbeatInterval: uint64(testbed.MinInterval)}))
			if got := e.untilSync(); got[eth0Desc].GetStringVal() != "steady" {
				t.Fatalf("initial values %v", got)
			}
			for i := range 3 {
				ev := e.next(soon)
				if ev.updates[eth0Desc].GetStringVal() != "steady" || ev.updates[eth0MTU].GetUintVal() != 1500 {
					t.Fatalf("heartbeat %d: got %+v, want every leaf with its unchanged value", i, ev)
				}
			}
		})
	}

	t.Run("without a heartbeat nothing comes while nothing changes", func(t *testing.T) {
		t.Parallel()
		_, c := startDevice(t, testbed.Options{})
		setLeaf(t, c, eth0Desc, str("steady"))
		e := streamEvents(t, c, streamList(false, &gpb.Subscription{Path: p(t, eth0Config), Mode: gpb.SubscriptionMode_ON_CHANGE}))
		e.untilSync()
		e.none(3*testbed.MinInterval, "an ON_CHANGE subscription without heartbeat_interval sent something although nothing changed")
	})
}

// TestSubscribeSuppressRedundant: a SAMPLE subscription with
// suppress_redundant sends only the leaves whose value changed since it
// last sent them (the initial values count as sent); with a
// heartbeat_interval it also sends every leaf once per heartbeat.
func TestSubscribeSuppressRedundant(t *testing.T) {
	sample := func(suppress bool, heartbeat time.Duration) *gpb.Subscription {
		return &gpb.Subscription{Path: p(t, eth0Config), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(testbed.MinInterval),
			SuppressRedundant: suppress, HeartbeatInterval: uint64(heartbeat)}
	}
	setup := func(t *testing.T) gpb.GNMIClient {
		_, c := startDevice(t, testbed.Options{})
		mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("steady")), upd(t, eth0MTU, uintV(1500))}})
		return c
	}

	for _, updatesOnly := range []bool{false, true} {
		name := "after the initial values"
		if updatesOnly {
			name = "updates_only"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := setup(t)
			e := streamEvents(t, c, streamList(updatesOnly, sample(true, 0)))
			if got := e.untilSync(); updatesOnly != (len(got) == 0) {
				t.Fatalf("initial values %v (updates_only %v)", got, updatesOnly)
			}
			e.none(3*testbed.MinInterval, "suppress_redundant sent unchanged values")
			setLeaf(t, c, eth0MTU, uintV(9000))
			ev := e.next(soon)
			if len(ev.updates) != 1 || ev.updates[eth0MTU].GetUintVal() != 9000 {
				t.Fatalf("after a change got %+v, want only %s = 9000", ev, eth0MTU)
			}
			e.none(3*testbed.MinInterval, "suppress_redundant sent a value again that did not change")
			// A leaf that goes and comes back is sent again.
			mustSet(t, c, &gpb.SetRequest{Delete: []*gpb.Path{p(t, eth0Desc)}})
			e.none(3*testbed.MinInterval, "a SAMPLE subscription sent something for a deleted leaf")
			setLeaf(t, c, eth0Desc, str("steady"))
			if ev := e.next(soon); len(ev.updates) != 1 || ev.updates[eth0Desc].GetStringVal() != "steady" {
				t.Fatalf("after the leaf came back got %+v, want only %s", ev, eth0Desc)
			}
		})
	}

	t.Run("with a heartbeat", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		e := streamEvents(t, c, streamList(false, sample(true, 3*testbed.MinInterval)))
		e.untilSync()
		for i := range 2 {
			ev := e.next(soon)
			if ev.updates[eth0Desc].GetStringVal() != "steady" || ev.updates[eth0MTU].GetUintVal() != 1500 {
				t.Fatalf("heartbeat %d: got %+v, want every leaf, unchanged", i, ev)
			}
		}
	})

	t.Run("without suppress_redundant every sample carries every leaf", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		e := streamEvents(t, c, streamList(false, sample(false, 5*testbed.MinInterval)))
		e.untilSync()
		for i := range 3 {
			if ev := e.next(soon); len(ev.updates) != 3 { // name, description, mtu
				t.Fatalf("sample %d: got %+v, want every leaf", i, ev)
			}
		}
	})
}

// TestSubscribeIntervals: a STREAM subscription's sample_interval and
// heartbeat_interval below testbed.MinInterval (or beyond a
// time.Duration) are refused with InvalidArgument naming the field and the
// minimum; ONCE and POLL ignore them.
func TestSubscribeIntervals(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("x"))
	tests := []struct {
		name   string
		mode   gpb.SubscriptionList_Mode
		sub    *gpb.Subscription
		msgHas string // "" : accepted
	}{
		{name: "sample_interval too short", mode: gpb.SubscriptionList_STREAM,
			sub:    &gpb.Subscription{Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(10 * time.Millisecond)},
			msgHas: "sample_interval 10ms is below this device's minimum of 100ms"},
		{name: "heartbeat_interval too short", mode: gpb.SubscriptionList_STREAM,
			sub:    &gpb.Subscription{Mode: gpb.SubscriptionMode_ON_CHANGE, HeartbeatInterval: uint64(time.Millisecond)},
			msgHas: "heartbeat_interval 1ms is below this device's minimum of 100ms"},
		{name: "heartbeat_interval of a SAMPLE subscription too short", mode: gpb.SubscriptionList_STREAM,
			sub:    &gpb.Subscription{Mode: gpb.SubscriptionMode_SAMPLE, SuppressRedundant: true, HeartbeatInterval: 1},
			msgHas: "heartbeat_interval 1ns is below"},
		{name: "sample_interval too long", mode: gpb.SubscriptionList_STREAM,
			sub:    &gpb.Subscription{Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: math.MaxUint64},
			msgHas: "sample_interval 18446744073709551615 ns is too long"},
		{name: "unknown subscription mode", mode: gpb.SubscriptionList_STREAM,
			sub:    &gpb.Subscription{Mode: 7},
			msgHas: "unknown subscription mode 7"},
		{name: "the minimum", mode: gpb.SubscriptionList_STREAM,
			sub: &gpb.Subscription{Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(testbed.MinInterval), HeartbeatInterval: uint64(testbed.MinInterval)}},
		{name: "ONCE ignores the intervals", mode: gpb.SubscriptionList_ONCE,
			sub: &gpb.Subscription{Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: 1, HeartbeatInterval: 1}},
		{name: "POLL ignores the intervals", mode: gpb.SubscriptionList_POLL,
			sub: &gpb.Subscription{Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: 1, HeartbeatInterval: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.sub.Path = p(t, eth0Desc)
			e := streamEvents(t, c, &gpb.SubscriptionList{Mode: tc.mode, Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{tc.sub}})
			x := <-e.ch
			if tc.msgHas == "" {
				if x.err != nil {
					t.Fatalf("got %v, want the subscription accepted", x.err)
				}
				return
			}
			if status.Code(x.err) != codes.InvalidArgument || !strings.Contains(status.Convert(x.err).Message(), tc.msgHas) {
				t.Fatalf("got %v, want InvalidArgument naming %q", x.err, tc.msgHas)
			}
		})
	}
}

func ygotPathString(p *gpb.Path) (string, error) { return ygot.PathToString(p) }
