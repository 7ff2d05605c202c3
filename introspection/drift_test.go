package introspection_test

import (
	"context"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// pathLeaf is the key of leaf of the entry of descPath in container
// (drift or diff) in a leafTree.
func pathLeaf(container, leaf string) string {
	return leafKey(&gpb.Path{Elem: []*gpb.PathElem{{Name: container}, {Name: "path", Key: map[string]string{"path": descPath}},
		{Name: "state"}, {Name: leaf}}})
}

// TestIntrospectDrift: drift/ shows the watcher's state and, once the
// device is changed behind the sidecar's back, the drifted path with both
// values; an ON_CHANGE subscription follows it; diff/ compares on each Get
// or ONCE subscription, and a STREAM subscription to it is refused.
func TestIntrospectDrift(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("uplink")))
	sidecartest.Eventually(t, waitFor, "a first comparison", func() bool { return r.Drift.Status().Checks > 0 })
	tr := introLeaves(t, r, "/drift/state")
	for name, want := range map[string]*gpb.TypedValue{"policy": sidecartest.StringVal("report"), "mode": sidecartest.StringVal("on-change"),
		"paths": sidecartest.UintVal(0), "detected": sidecartest.UintVal(0)} {
		if got := tr["/drift/state/"+name]; !proto.Equal(got, want) {
			t.Errorf("drift/state/%s = %v, want %v", name, got, want)
		}
	}
	if tr["/drift/state/last-check"] == nil || tr["/drift/state/watch-error"] != nil {
		t.Errorf("drift/state %v", tr)
	}
	if got := introLeaves(t, r, "/diff"); len(got) != 2 || !proto.Equal(got["/diff/state/paths"], sidecartest.UintVal(0)) {
		t.Errorf("diff of a device in sync: %v", got)
	}
	_, err := introGet(t, r, "/diff/path")
	sidecartest.WantStatus(t, err, codes.NotFound, "no such element")

	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_STREAM, onChangeSub(t, "/drift")))
	followed := untilSyncTree(t, stream)

	dev := sidecartest.Dial(t, r.Target)
	if _, err := dev.Set(ctx, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("hacked"))); err != nil {
		t.Fatal(err)
	}
	followStream(t, stream, followed, "the drifted path", func(tr leafTree) bool { return tr[pathLeaf("drift", "device-value")] != nil })
	wantDrift := leafTree{
		pathLeaf("drift", "path"):            sidecartest.StringVal(descPath),
		pathLeaf("drift", "kind"):            sidecartest.StringVal("CHANGED"),
		pathLeaf("drift", "journal-value"):   sidecartest.StringVal("uplink"),
		pathLeaf("drift", "journal-deleted"): boolTV(false),
		pathLeaf("drift", "device-value"):    &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`"hacked"`)}},
		pathLeaf("drift", "device-absent"):   boolTV(false),
		pathLeaf("drift", "proposal"):        sidecartest.UintVal(1),
		pathLeaf("drift", "reverts"):         sidecartest.UintVal(0),
	}
	got := introLeaves(t, r, "/drift/path")
	if got[pathLeaf("drift", "since")] == nil {
		t.Errorf("no since: %v", got)
	}
	delete(got, pathLeaf("drift", "since"))
	wantTree(t, got, wantDrift)

	got = introLeaves(t, r, "/diff")
	if !proto.Equal(got["/diff/state/paths"], sidecartest.UintVal(1)) || got["/diff/state/time"] == nil ||
		!proto.Equal(got[pathLeaf("diff", "device-value")], wantDrift[pathLeaf("drift", "device-value")]) || got[pathLeaf("diff", "since")] != nil {
		t.Errorf("diff: %v", got)
	}
	once := sidecartest.SubscribeOnce(t, r.Client, sidecarSubscription(gpb.SubscriptionList_ONCE, onChangeSub(t, "/diff/state/paths")))
	if len(once) != 2 || !proto.Equal(once[0].GetUpdate().GetUpdate()[0].GetVal(), sidecartest.UintVal(1)) {
		t.Errorf("diff ONCE: %v", once)
	}
	// A wildcard does not compare the device.
	for k := range introLeaves(t, r, "/*/state") {
		if len(k) > 5 && k[:5] == "/diff" {
			t.Errorf("a wildcard read diff: %s", k)
		}
	}

	for _, mode := range []gpb.SubscriptionMode{gpb.SubscriptionMode_ON_CHANGE, gpb.SubscriptionMode_SAMPLE} {
		_, err := sidecartest.SubscribeToEnd(t, r.Client, sidecarSubscription(gpb.SubscriptionList_STREAM,
			&gpb.Subscription{Path: sidecartest.Path(t, "/diff"), Mode: mode}))
		sidecartest.WantStatus(t, err, codes.InvalidArgument, "diff compares the device", "gnmi-sidecar:/drift")
	}
}
