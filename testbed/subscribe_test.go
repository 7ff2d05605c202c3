package testbed_test

import (
	"context"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// event is one thing a subscriber saw.
type event struct {
	sync    bool
	updates map[string]*gpb.TypedValue
	deletes []string
}

func recvEvent(t *testing.T, sub gpb.GNMI_SubscribeClient) event {
	t.Helper()
	resp, err := sub.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if resp.GetSyncResponse() {
		return event{sync: true}
	}
	ev := event{updates: map[string]*gpb.TypedValue{}}
	n := resp.GetUpdate()
	for _, u := range n.GetUpdate() {
		s, _ := ygot.PathToString(&gpb.Path{Elem: append(append([]*gpb.PathElem{}, n.GetPrefix().GetElem()...), u.GetPath().GetElem()...)})
		ev.updates[s] = u.GetVal()
	}
	for _, d := range n.GetDelete() {
		s, _ := ygot.PathToString(&gpb.Path{Elem: append(append([]*gpb.PathElem{}, n.GetPrefix().GetElem()...), d.GetElem()...)})
		ev.deletes = append(ev.deletes, s)
	}
	return ev
}

// untilSync collects updates up to the sync_response.
func untilSync(t *testing.T, sub gpb.GNMI_SubscribeClient) map[string]*gpb.TypedValue {
	t.Helper()
	all := map[string]*gpb.TypedValue{}
	for {
		ev := recvEvent(t, sub)
		if ev.sync {
			return all
		}
		for k, v := range ev.updates {
			all[k] = v
		}
	}
}

func subscribe(t *testing.T, c gpb.GNMIClient, mode gpb.SubscriptionList_Mode, subs ...*gpb.Subscription) gpb.GNMI_SubscribeClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	sub, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode: mode, Subscription: subs, Encoding: gpb.Encoding_PROTO,
	}}}); err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestSubscribeOnce(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("uplink")), upd(t, "/system/config/hostname", str("r1"))}})
	sub := subscribe(t, c, gpb.SubscriptionList_ONCE, &gpb.Subscription{Path: p(t, "/interfaces/interface[name=eth0]/config")})
	got := untilSync(t, sub)
	if got[eth0Desc].GetStringVal() != "uplink" {
		t.Errorf("ONCE got %v, want %s = uplink", got, eth0Desc)
	}
	if _, ok := got["/system/config/hostname"]; ok {
		t.Errorf("ONCE sent a leaf outside the subscription: %v", got)
	}
	if _, err := sub.Recv(); err == nil {
		t.Error("ONCE stream did not end after sync_response")
	}
}

// TestSubscribeOnceWildcards: subscriptions whose paths hold wildcards
// (* and ... in names, * in keys) get the data under them, as Get does.
func TestSubscribeOnceWildcards(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("uplink")), upd(t, "/system/config/hostname", str("r1"))}})
	for _, path := range []string{
		"/interfaces/...", "/interfaces/*/config", "/interfaces/interface[name=*]/config",
		"/*/interface/config", "/.../description", "/...",
	} {
		t.Run(path, func(t *testing.T) {
			sub := subscribe(t, c, gpb.SubscriptionList_ONCE, &gpb.Subscription{Path: p(t, path)})
			if got := untilSync(t, sub); got[eth0Desc].GetStringVal() != "uplink" {
				t.Errorf("ONCE %s got %v, want %s = uplink", path, got, eth0Desc)
			}
		})
	}
}

func TestSubscribePoll(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("first"))
	sub := subscribe(t, c, gpb.SubscriptionList_POLL, &gpb.Subscription{Path: p(t, eth0Desc)})
	if got := untilSync(t, sub); got[eth0Desc].GetStringVal() != "first" {
		t.Fatalf("first poll got %v", got)
	}
	setLeaf(t, c, eth0Desc, str("second"))
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
		t.Fatal(err)
	}
	if got := untilSync(t, sub); got[eth0Desc].GetStringVal() != "second" {
		t.Fatalf("second poll got %v, want the value set in between", got)
	}
}

func TestSubscribeStreamOnChange(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("initial"))
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM,
		&gpb.Subscription{Path: p(t, "/interfaces/interface[name=*]/config/description"), Mode: gpb.SubscriptionMode_ON_CHANGE})
	if got := untilSync(t, sub); got[eth0Desc].GetStringVal() != "initial" {
		t.Fatalf("initial sync got %v", got)
	}

	setLeaf(t, c, "/system/config/hostname", str("not-subscribed"))
	setLeaf(t, c, "/interfaces/interface[name=eth1]/config/description", str("new"))
	ev := recvEvent(t, sub)
	if len(ev.updates) != 1 || ev.updates["/interfaces/interface[name=eth1]/config/description"].GetStringVal() != "new" {
		t.Fatalf("after Set got %+v, want exactly the eth1 description", ev)
	}

	mustSet(t, c, &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/interface[name=eth0]")}})
	ev = recvEvent(t, sub)
	if len(ev.deletes) != 1 || ev.deletes[0] != eth0Desc {
		t.Fatalf("after delete got %+v, want a delete of %s", ev, eth0Desc)
	}
}

func TestSubscribeStreamToEmptyPathGetsSyncThenUpdates(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, eth0Desc), Mode: gpb.SubscriptionMode_TARGET_DEFINED})
	if got := untilSync(t, sub); len(got) != 0 {
		t.Fatalf("got %v before sync, want nothing", got)
	}
	setLeaf(t, c, eth0Desc, str("arrived"))
	if ev := recvEvent(t, sub); ev.updates[eth0Desc].GetStringVal() != "arrived" {
		t.Fatalf("got %+v, want the new value", ev)
	}
}

func TestSubscribeStreamUpdatesOnly(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("old"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode: gpb.SubscriptionList_STREAM, UpdatesOnly: true, Subscription: []*gpb.Subscription{{Path: p(t, eth0Desc)}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, sub); !ev.sync {
		t.Fatalf("updates_only: first response %+v, want sync_response", ev)
	}
	setLeaf(t, c, eth0Desc, str("new"))
	if ev := recvEvent(t, sub); ev.updates[eth0Desc].GetStringVal() != "new" {
		t.Fatalf("got %+v, want the new value", ev)
	}
}

func TestSubscribeStreamSample(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("sampled"))
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{
		Path: p(t, eth0Desc), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(testbed.MinInterval)})
	untilSync(t, sub)
	// Unchanged data keeps arriving: that is what distinguishes SAMPLE.
	for i := 0; i < 3; i++ {
		if ev := recvEvent(t, sub); ev.updates[eth0Desc].GetStringVal() != "sampled" {
			t.Fatalf("sample %d: got %+v", i, ev)
		}
	}
	setLeaf(t, c, eth0Desc, str("changed"))
	for {
		ev := recvEvent(t, sub)
		if ev.updates[eth0Desc].GetStringVal() == "changed" {
			break
		}
		if ev.updates[eth0Desc].GetStringVal() != "sampled" {
			t.Fatalf("unexpected sample %+v", ev)
		}
	}
}

func TestSubscribeErrors(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	tests := []struct {
		name string
		req  *gpb.SubscribeRequest
		code codes.Code
	}{
		{name: "poll first", req: &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}, code: codes.InvalidArgument},
		{name: "no subscriptions", req: &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{}}}, code: codes.InvalidArgument},
		{name: "bad path", req: &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
			Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: ""}}}}}}}}, code: codes.InvalidArgument},
		{name: "bad encoding", req: &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
			Encoding: gpb.Encoding_ASCII, Subscription: []*gpb.Subscription{{Path: p(t, eth0Desc)}}}}}, code: codes.Unimplemented},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := c.Subscribe(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			_, err = sub.Recv()
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
		})
	}
}

// TestSubscribeRefuseOnChange: with Options.RefuseOnChange a STREAM
// subscription in mode ON_CHANGE or TARGET_DEFINED is refused with
// Unimplemented, while SAMPLE, ONCE and POLL still work; without it the
// same ON_CHANGE subscription syncs.
func TestSubscribeRefuseOnChange(t *testing.T) {
	_, c := startDevice(t, testbed.Options{RefuseOnChange: true})
	setLeaf(t, c, eth0Desc, str("x"))
	for _, mode := range []gpb.SubscriptionMode{gpb.SubscriptionMode_ON_CHANGE, gpb.SubscriptionMode_TARGET_DEFINED} {
		sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, eth0Desc), Mode: mode})
		_, err := sub.Recv()
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("STREAM %v: got %v, want Unimplemented", mode, err)
		}
	}
	sample := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{
		Path: p(t, eth0Desc), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(testbed.MinInterval)})
	if got := untilSync(t, sample); got[eth0Desc].GetStringVal() != "x" {
		t.Fatalf("SAMPLE: got %v", got)
	}
	for _, list := range []gpb.SubscriptionList_Mode{gpb.SubscriptionList_ONCE, gpb.SubscriptionList_POLL} {
		sub := subscribe(t, c, list, &gpb.Subscription{Path: p(t, eth0Desc), Mode: gpb.SubscriptionMode_ON_CHANGE})
		if got := untilSync(t, sub); got[eth0Desc].GetStringVal() != "x" {
			t.Fatalf("%v: got %v", list, got)
		}
	}

	_, plain := startDevice(t, testbed.Options{})
	sub := subscribe(t, plain, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, eth0Desc), Mode: gpb.SubscriptionMode_ON_CHANGE})
	untilSync(t, sub)
}
