package proxy_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

func snapshotExt(t time.Time) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{
		Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: t.UnixNano()}}}}
}

func rangeExt(start, end int64) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{
		Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{Start: start, End: end}}}}}
}

// committedAt is when proposal i's change was committed.
func committedAt(t testing.TB, r *sidecartest.Sidecar, i uint64) time.Time {
	t.Helper()
	return r.Proposal(t, i).GetChange().GetCommitted().AsTime()
}

// leaves flattens notifications into path → value (deletes as nil).
func leaves(t testing.TB, ns ...*gpb.Notification) map[string]*gpb.TypedValue {
	t.Helper()
	out := map[string]*gpb.TypedValue{}
	for _, n := range ns {
		for _, d := range n.GetDelete() {
			out[sidecartest.FullPath(n.GetPrefix(), d)] = nil
		}
		for _, u := range n.GetUpdate() {
			out[sidecartest.FullPath(n.GetPrefix(), u.GetPath())] = u.GetVal()
		}
	}
	return out
}

func wantLeaves(t testing.TB, got, want map[string]*gpb.TypedValue) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmp.Comparer(proto.Equal)); diff != "" {
		t.Errorf("leaves (-want +got):\n%s", diff)
	}
}

// historyRig is a sidecar with three committed changes, at t1 < t2 < t3:
// description one; description two and mtu 1500; mtu deleted.
type historyRig struct {
	*sidecartest.Sidecar
	t1, t2, t3 time.Time
}

func newHistoryRig(t *testing.T, opts sidecartest.Options) *historyRig {
	r := sidecartest.Start(t, opts)
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	r.MustSet(t, &gpb.SetRequest{Update: []*gpb.Update{
		{Path: sidecartest.Path(t, descPath), Val: sidecartest.StringVal("two")},
		{Path: sidecartest.Path(t, mtuPath), Val: sidecartest.UintVal(1500)}}})
	r.MustSet(t, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, mtuPath)}})
	return &historyRig{Sidecar: r, t1: committedAt(t, r, 1), t2: committedAt(t, r, 2), t3: committedAt(t, r, 3)}
}

// entryPath is the interface of descPath and mtuPath, and marker the value
// the journal records its entry with.
const entryPath = "/interfaces/interface[name=eth0]"

var marker = &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("{}")}}

func TestHistoryGet(t *testing.T) {
	r := newHistoryRig(t, sidecartest.Options{})
	iface := sidecartest.Path(t, "/interfaces/interface[name=eth0]")
	get := func(at time.Time, paths ...*gpb.Path) (*gpb.GetResponse, error) {
		return r.Client.Get(t.Context(), &gpb.GetRequest{Path: paths, Extension: []*gnmi_ext.Extension{snapshotExt(at)}})
	}
	for _, c := range []struct {
		name string
		at   time.Time
		path *gpb.Path
		want map[string]*gpb.TypedValue
	}{
		// The interface's entry shows as {} at its path (a marker: package
		// leaves), as the journal records it.
		{"at t1", r.t1, iface, map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("one")}},
		{"between t1 and t2", r.t1.Add((r.t2.Sub(r.t1)) / 2), iface, map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("one")}},
		{"at t2", r.t2, iface, map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("two"), mtuPath: sidecartest.UintVal(1500)}},
		{"at t3", r.t3, iface, map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("two")}},
		{"one leaf at t2", r.t2, sidecartest.Path(t, mtuPath), map[string]*gpb.TypedValue{mtuPath: sidecartest.UintVal(1500)}},
		{"a wildcard at t2", r.t2, sidecartest.Path(t, "/interfaces/interface[name=*]/config/mtu"), map[string]*gpb.TypedValue{mtuPath: sidecartest.UintVal(1500)}},
		{"everything at t2", r.t2, &gpb.Path{}, map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("two"), mtuPath: sidecartest.UintVal(1500)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := get(c.at, c.path)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			for _, n := range resp.GetNotification() {
				if n.GetTimestamp() != c.at.UnixNano() {
					t.Errorf("notification timestamp %d, want the snapshot time %d", n.GetTimestamp(), c.at.UnixNano())
				}
			}
			wantLeaves(t, leaves(t, resp.GetNotification()...), c.want)
		})
	}

	t.Run("with a prefix", func(t *testing.T) {
		resp, err := r.Client.Get(t.Context(), &gpb.GetRequest{Prefix: iface,
			Path: []*gpb.Path{sidecartest.Path(t, "/config")}, Extension: []*gnmi_ext.Extension{snapshotExt(r.t2)}})
		if err != nil {
			t.Fatal(err)
		}
		n := resp.GetNotification()[0]
		if !proto.Equal(n.GetPrefix(), iface) {
			t.Errorf("prefix %v, want the request's", n.GetPrefix())
		}
		wantLeaves(t, leaves(t, n), map[string]*gpb.TypedValue{descPath: sidecartest.StringVal("two"), mtuPath: sidecartest.UintVal(1500)})
	})

	for _, c := range []struct {
		name string
		req  *gpb.GetRequest
		code codes.Code
		msg  []string
	}{
		{"before the first commit", &gpb.GetRequest{Path: []*gpb.Path{iface},
			Extension: []*gnmi_ext.Extension{snapshotExt(r.t1.Add(-time.Millisecond))}}, codes.NotFound, []string{"nothing was configured"}},
		{"a deleted leaf", &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, mtuPath)},
			Extension: []*gnmi_ext.Extension{snapshotExt(r.t3)}}, codes.NotFound, []string{"mtu"}},
		{"in the future", &gpb.GetRequest{Path: []*gpb.Path{iface},
			Extension: []*gnmi_ext.Extension{snapshotExt(time.Now().Add(time.Hour))}}, codes.Unimplemented, []string{"future"}},
		{"zero time", &gpb.GetRequest{Path: []*gpb.Path{iface},
			Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}}}, codes.InvalidArgument, []string{"snapshot_time"}},
		{"a range on Get", &gpb.GetRequest{Path: []*gpb.Path{iface},
			Extension: []*gnmi_ext.Extension{rangeExt(r.t1.UnixNano(), r.t2.UnixNano())}}, codes.InvalidArgument, []string{"Subscribe"}},
		{"two History extensions", &gpb.GetRequest{Path: []*gpb.Path{iface},
			Extension: []*gnmi_ext.Extension{snapshotExt(r.t1), snapshotExt(r.t2)}}, codes.InvalidArgument, []string{"more than one"}},
		{"on the introspection origin", &gpb.GetRequest{Path: []*gpb.Path{{Origin: "gnmi-sidecar", Elem: []*gpb.PathElem{{Name: "proposals"}}}},
			Extension: []*gnmi_ext.Extension{snapshotExt(r.t1)}}, codes.InvalidArgument, []string{"gnmi-sidecar"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Client.Get(t.Context(), c.req)
			sidecartest.WantStatus(t, err, c.code, c.msg...)
		})
	}
}

func TestHistoryBeforeRetention(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Retain: 1})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	t1 := committedAt(t, r, 1)
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two")))
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three")))
	if _, err := r.Journal.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := r.Client.Get(t.Context(), &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)},
		Extension: []*gnmi_ext.Extension{snapshotExt(t1)}})
	sidecartest.WantStatus(t, err, codes.OutOfRange, "no longer kept", "retention")

	// The kept history still answers.
	t3 := committedAt(t, r, 3)
	resp, err := r.Client.Get(t.Context(), &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)},
		Extension: []*gnmi_ext.Extension{snapshotExt(t3)}})
	if err != nil {
		t.Fatal(err)
	}
	wantLeaves(t, leaves(t, resp.GetNotification()...), map[string]*gpb.TypedValue{descPath: sidecartest.StringVal("three")})
}

// subscribeAll sends req and collects every response until the stream
// ends, returning the notifications before and after the sync response
// and the stream's end.
func subscribeAll(t testing.TB, c gpb.GNMIClient, req *gpb.SubscribeRequest) (before, after []*gpb.Notification, synced bool, err error) {
	t.Helper()
	resps, err := sidecartest.SubscribeToEnd(t, c, req)
	for _, resp := range resps {
		switch {
		case resp.GetSyncResponse():
			synced = true
		case synced:
			after = append(after, resp.GetUpdate())
		default:
			before = append(before, resp.GetUpdate())
		}
	}
	return before, after, synced, err
}

func historySubscription(t testing.TB, mode gpb.SubscriptionList_Mode, updatesOnly bool, ext *gnmi_ext.Extension, paths ...string) *gpb.SubscribeRequest {
	list := &gpb.SubscriptionList{Mode: mode, UpdatesOnly: updatesOnly}
	for _, p := range paths {
		list.Subscription = append(list.Subscription, &gpb.Subscription{Path: sidecartest.Path(t, p)})
	}
	return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}, Extension: []*gnmi_ext.Extension{ext}}
}

func TestHistorySubscribe(t *testing.T) {
	r := newHistoryRig(t, sidecartest.Options{})
	iface := "/interfaces/interface[name=eth0]"

	t.Run("range ONCE", func(t *testing.T) {
		// [t2, t3]: the configuration at t2, then the changes at t2 and t3,
		// each timestamped with its commit time, then the sync response.
		before, after, synced, err := subscribeAll(t, r.Client,
			historySubscription(t, gpb.SubscriptionList_ONCE, false, rangeExt(r.t2.UnixNano(), r.t3.UnixNano()+1), iface))
		if err != nil || !synced || len(after) != 0 {
			t.Fatalf("stream ended with %v, synced %v, %d notifications after the sync", err, synced, len(after))
		}
		if len(before) != 3 {
			t.Fatalf("got %d notifications, want 3 (snapshot, t2, t3): %v", len(before), before)
		}
		wantLeaves(t, leaves(t, before[0]), map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("two"), mtuPath: sidecartest.UintVal(1500)})
		wantLeaves(t, leaves(t, before[1]), map[string]*gpb.TypedValue{descPath: sidecartest.StringVal("two"), mtuPath: sidecartest.UintVal(1500)})
		wantLeaves(t, leaves(t, before[2]), map[string]*gpb.TypedValue{mtuPath: nil})
		for k, want := range []time.Time{r.t2, r.t2, r.t3} {
			if got := before[k].GetTimestamp(); got != want.UnixNano() {
				t.Errorf("notification %d timestamp %d, want %d", k, got, want.UnixNano())
			}
		}
	})

	t.Run("range is half-open and updates_only skips the snapshot", func(t *testing.T) {
		before, _, _, err := subscribeAll(t, r.Client,
			historySubscription(t, gpb.SubscriptionList_ONCE, true, rangeExt(r.t1.UnixNano(), r.t3.UnixNano()), iface))
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != 2 || before[0].GetTimestamp() != r.t1.UnixNano() || before[1].GetTimestamp() != r.t2.UnixNano() {
			t.Fatalf("got %v, want the changes at t1 and t2 only", before)
		}
	})

	t.Run("range STREAM follows new changes until the end", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), waitFor)
		defer cancel()
		stream, err := r.Client.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now().Add(2 * time.Second)
		if err := stream.Send(historySubscription(t, gpb.SubscriptionList_STREAM, true, rangeExt(r.t3.UnixNano(), end.UnixNano()), descPath)); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil || !resp.GetSyncResponse() {
			t.Fatalf("first response %v, %v: want the sync response (updates_only)", resp, err)
		}
		r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("live")))
		resp, err = stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		wantLeaves(t, leaves(t, resp.GetUpdate()), map[string]*gpb.TypedValue{descPath: sidecartest.StringVal("live")})
		if got, want := resp.GetUpdate().GetTimestamp(), committedAt(t, r.Sidecar, 4).UnixNano(); got != want {
			t.Errorf("timestamp %d, want the commit time %d", got, want)
		}
		if _, err := stream.Recv(); err != io.EOF {
			t.Errorf("after the range's end: %v, want the stream to end", err)
		}
	})

	t.Run("snapshot ONCE", func(t *testing.T) {
		before, _, synced, err := subscribeAll(t, r.Client, historySubscription(t, gpb.SubscriptionList_ONCE, false, snapshotExt(r.t1), iface))
		if err != nil || !synced {
			t.Fatalf("%v, synced %v", err, synced)
		}
		wantLeaves(t, leaves(t, before...), map[string]*gpb.TypedValue{entryPath: marker, descPath: sidecartest.StringVal("one")})
	})

	for _, c := range []struct {
		name string
		req  *gpb.SubscribeRequest
		code codes.Code
		msg  string
	}{
		{"snapshot with STREAM", historySubscription(t, gpb.SubscriptionList_STREAM, false, snapshotExt(r.t1), iface), codes.InvalidArgument, "ONCE"},
		{"range with POLL", historySubscription(t, gpb.SubscriptionList_POLL, false, rangeExt(r.t1.UnixNano(), r.t2.UnixNano()), iface), codes.InvalidArgument, "STREAM"},
		{"start after end", historySubscription(t, gpb.SubscriptionList_ONCE, false, rangeExt(r.t2.UnixNano(), r.t1.UnixNano()), iface), codes.InvalidArgument, "not after end"},
		{"start in the future", historySubscription(t, gpb.SubscriptionList_ONCE, false, rangeExt(time.Now().Add(time.Hour).UnixNano(), time.Now().Add(2*time.Hour).UnixNano()), iface), codes.Unimplemented, "future"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := subscribeAll(t, r.Client, c.req)
			sidecartest.WantStatus(t, err, c.code, c.msg)
		})
	}
}
