package testbed_test

import (
	"context"
	"sort"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func jsonV(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(s)}}
}

func boolV(b bool) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: b}}
}

// isScalar reports whether v is a scalar TypedValue (not JSON, bytes or
// proto, not empty).
func isScalar(v *gpb.TypedValue) bool {
	switch v.GetValue().(type) {
	case *gpb.TypedValue_StringVal, *gpb.TypedValue_IntVal, *gpb.TypedValue_UintVal,
		*gpb.TypedValue_BoolVal, *gpb.TypedValue_DoubleVal, *gpb.TypedValue_FloatVal,
		*gpb.TypedValue_DecimalVal, *gpb.TypedValue_LeaflistVal:
		return true
	}
	return false
}

// TestSubscribeStreamDecomposesJSONSets checks that a Set of a JSON or
// JSON_IETF value at a container reaches an ON_CHANGE STREAM subscriber as
// one update per changed leaf (full leaf paths with list keys, scalar
// values), never as a JSON blob, and that a Replace that drops leaves
// reaches it as deletes of those leaves.
func TestSubscribeStreamDecomposesJSONSets(t *testing.T) {
	const (
		eth0 = "/interfaces/interface[name=eth0]"
		eth1 = "/interfaces/interface[name=eth1]"
	)
	twoInterfaces := `{"interface": [
		{"name": "eth0", "config": {"name": "eth0", "description": "up", "mtu": 1500}},
		{"name": "eth1", "config": {"name": "eth1", "description": "down"}}]}`
	tests := []struct {
		name     string
		before   []*gpb.SetRequest // applied before subscribing
		subs     []string          // ON_CHANGE subscription paths
		subEnc   gpb.Encoding      // the subscription's encoding
		set      func(t *testing.T) *gpb.SetRequest
		updates  map[string]*gpb.TypedValue
		deletes  []string
		sentinel string // a subscribed leaf to set afterwards, to see that nothing else was sent
	}{
		{
			name: "update container JSON_IETF", subs: []string{"/system/config"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/system/config", jsonIETF(`{"hostname": "h1", "domain-name": "d1"}`))}}
			},
			updates:  map[string]*gpb.TypedValue{"/system/config/hostname": str("h1"), "/system/config/domain-name": str("d1")},
			sentinel: "/system/config/login-banner",
		},
		{
			name: "update container JSON, module-qualified names", subs: []string{"/system"}, subEnc: gpb.Encoding_JSON_IETF,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/system/config", jsonV(`{"openconfig-system:hostname": "h1", "openconfig-system:domain-name": "d1"}`))}}
			},
			updates:  map[string]*gpb.TypedValue{"/system/config/hostname": str("h1"), "/system/config/domain-name": str("d1")},
			sentinel: "/system/config/login-banner",
		},
		{
			name: "update sends only changed leaves",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{
				{Path: p(t, "/system/config"), Val: jsonIETF(`{"hostname": "h1", "domain-name": "d1"}`)}}}},
			subs: []string{"/system/config"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/system/config", jsonIETF(`{"hostname": "h2", "domain-name": "d1"}`))}}
			},
			updates:  map[string]*gpb.TypedValue{"/system/config/hostname": str("h2")},
			sentinel: "/system/config/login-banner",
		},
		{
			name: "replace container drops a leaf",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{
				{Path: p(t, "/system/config"), Val: jsonIETF(`{"hostname": "h1", "domain-name": "d1"}`)}}}},
			subs: []string{"/system/config"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/system/config", jsonIETF(`{"hostname": "h2"}`))}}
			},
			updates:  map[string]*gpb.TypedValue{"/system/config/hostname": str("h2")},
			deletes:  []string{"/system/config/domain-name"},
			sentinel: "/system/config/login-banner",
		},
		{
			name: "delete container",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{
				{Path: p(t, "/system/config"), Val: jsonIETF(`{"hostname": "h1", "domain-name": "d1"}`)}}}},
			subs: []string{"/system/config"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/system/config")}}
			},
			deletes:  []string{"/system/config/hostname", "/system/config/domain-name"},
			sentinel: "/system/config/login-banner",
		},
		{
			name: "update list of two entries JSON_IETF", subs: []string{"/interfaces"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces", jsonIETF(twoInterfaces))}}
			},
			updates: map[string]*gpb.TypedValue{
				eth0 + "/name": str("eth0"), eth0 + "/config/name": str("eth0"), eth0 + "/config/description": str("up"), eth0 + "/config/mtu": uintV(1500),
				eth1 + "/name": str("eth1"), eth1 + "/config/name": str("eth1"), eth1 + "/config/description": str("down"),
			},
			sentinel: eth0 + "/config/description",
		},
		{
			name: "update list of two entries JSON, wildcard subscription", subs: []string{"/interfaces/interface[name=*]/config"}, subEnc: gpb.Encoding_JSON,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces", jsonV(twoInterfaces))}}
			},
			updates: map[string]*gpb.TypedValue{
				eth0 + "/config/name": str("eth0"), eth0 + "/config/description": str("up"), eth0 + "/config/mtu": uintV(1500),
				eth1 + "/config/name": str("eth1"), eth1 + "/config/description": str("down"),
			},
			sentinel: eth0 + "/config/description",
		},
		{
			name:   "replace list drops an entry and a leaf",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{{Path: p(t, "/interfaces"), Val: jsonIETF(twoInterfaces)}}}},
			subs:   []string{"/interfaces"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/interfaces", jsonIETF(
					`{"interface": [{"name": "eth0", "config": {"name": "eth0", "description": "changed"}}]}`))}}
			},
			updates:  map[string]*gpb.TypedValue{eth0 + "/config/description": str("changed")},
			deletes:  []string{eth0 + "/config/mtu", eth1 + "/name", eth1 + "/config/name", eth1 + "/config/description"},
			sentinel: eth0 + "/config/description",
		},
		{
			name:   "replace list entry drops a leaf",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{{Path: p(t, "/interfaces"), Val: jsonIETF(twoInterfaces)}}}},
			subs:   []string{"/interfaces/interface[name=eth0]"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Replace: []*gpb.Update{upd(t, eth0, jsonIETF(
					`{"name": "eth0", "config": {"name": "eth0", "description": "changed", "enabled": false}}`))}}
			},
			updates:  map[string]*gpb.TypedValue{eth0 + "/config/description": str("changed"), eth0 + "/config/enabled": boolV(false)},
			deletes:  []string{eth0 + "/config/mtu"},
			sentinel: eth0 + "/config/description",
		},
		{
			name:   "update compressed container of a list entry",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{{Path: p(t, "/interfaces"), Val: jsonIETF(twoInterfaces)}}}},
			subs:   []string{"/interfaces"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth1+"/config", jsonIETF(`{"description": "x", "mtu": 9000}`))}}
			},
			updates:  map[string]*gpb.TypedValue{eth1 + "/config/description": str("x"), eth1 + "/config/mtu": uintV(9000)},
			sentinel: eth0 + "/config/description",
		},
		{
			name:   "replace compressed container of a list entry",
			before: []*gpb.SetRequest{{Update: []*gpb.Update{{Path: p(t, "/interfaces"), Val: jsonIETF(twoInterfaces)}}}},
			subs:   []string{"/interfaces"}, subEnc: gpb.Encoding_PROTO,
			set: func(t *testing.T) *gpb.SetRequest {
				return &gpb.SetRequest{Replace: []*gpb.Update{upd(t, eth0+"/config", jsonIETF(`{"name": "eth0", "mtu": 1400}`))}}
			},
			updates:  map[string]*gpb.TypedValue{eth0 + "/config/mtu": uintV(1400)},
			deletes:  []string{eth0 + "/config/description"},
			sentinel: eth1 + "/config/description",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, c := startDevice(t, testbed.Options{})
			for _, req := range tc.before {
				mustSet(t, c, req)
			}
			var subs []*gpb.Subscription
			for _, s := range tc.subs {
				subs = append(subs, &gpb.Subscription{Path: p(t, s), Mode: gpb.SubscriptionMode_ON_CHANGE})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sub, err := c.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Mode: gpb.SubscriptionList_STREAM, UpdatesOnly: true, Subscription: subs, Encoding: tc.subEnc,
			}}}); err != nil {
				t.Fatal(err)
			}
			if ev := recvEvent(t, sub); !ev.sync {
				t.Fatalf("first response %+v, want sync_response", ev)
			}

			mustSet(t, c, tc.set(t))
			ev := recvEvent(t, sub)
			for path, v := range ev.updates {
				if !isScalar(v) {
					t.Errorf("update %s carries %v, want a scalar value", path, v)
				}
			}
			for path, want := range tc.updates {
				if got, ok := ev.updates[path]; !ok || !proto.Equal(got, want) {
					t.Errorf("update %s = %v, want %v", path, got, want)
				}
			}
			for path, v := range ev.updates {
				if _, ok := tc.updates[path]; !ok {
					t.Errorf("unexpected update %s = %v", path, v)
				}
			}
			sort.Strings(ev.deletes)
			wantDeletes := append([]string(nil), tc.deletes...)
			sort.Strings(wantDeletes)
			if len(ev.deletes) != len(wantDeletes) {
				t.Errorf("deletes %v, want %v", ev.deletes, wantDeletes)
			} else {
				for i := range wantDeletes {
					if ev.deletes[i] != wantDeletes[i] {
						t.Errorf("deletes %v, want %v", ev.deletes, wantDeletes)
						break
					}
				}
			}

			// Nothing else of the Set follows: the next event is the
			// sentinel's.
			setLeaf(t, c, tc.sentinel, str("sentinel"))
			ev = recvEvent(t, sub)
			if len(ev.updates) != 1 || len(ev.deletes) != 0 || ev.updates[tc.sentinel].GetStringVal() != "sentinel" {
				t.Errorf("after the Set's notification got %+v, want only the sentinel %s", ev, tc.sentinel)
			}
		})
	}
}
