package proxy_test

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// A History range under either spelling of the openconfig tree (no
// origin, origin openconfig) has the changes of a leaf written under
// both.
func TestHistoryRangeDefaultOrigin(t *testing.T) {
	const host = "/system/config/hostname"
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, host, sidecartest.StringVal("a")))
	second := sidecartest.UpdateRequest(t, host, sidecartest.StringVal("b"))
	second.Update[0].Path.Origin = "openconfig"
	r.MustSet(t, second)
	t1, t2 := committedAt(t, r, 1), committedAt(t, r, 2)
	for _, origin := range []string{"", "openconfig"} {
		t.Run("origin="+origin, func(t *testing.T) {
			req := historySubscription(t, gpb.SubscriptionList_ONCE, true, rangeExt(t1.UnixNano(), t2.UnixNano()+1), "/system")
			req.GetSubscribe().GetSubscription()[0].GetPath().Origin = origin
			before, _, _, err := subscribeAll(t, r.Client, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(before) != 2 || before[0].GetTimestamp() != t1.UnixNano() || before[1].GetTimestamp() != t2.UnixNano() {
				t.Fatalf("got %v, want the changes at t1 and t2", before)
			}
		})
	}
}
