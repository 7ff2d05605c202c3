package testbed_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

const (
	eth1Desc = "/interfaces/interface[name=eth1]/config/description"
	hostname = "/system/config/hostname"
	domain   = "/system/config/domain-name"
)

func asciiV(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: s}}
}

// TestSetUnionReplace: gNMI 0.10 union_replace on the device's single
// schema (OpenConfig): the union of the request's union_replace values
// replaces the data at each of their paths, after the deletes and
// replaces and before the updates; origins it cannot model are refused
// with Unimplemented, and so is any union_replace with
// Options.NoUnionReplace.
func TestSetUnionReplace(t *testing.T) {
	ur := func(t *testing.T, path string, v *gpb.TypedValue) *gpb.Update { return upd(t, path, v) }
	eth0 := []*gpb.SetRequest{{Update: []*gpb.Update{
		upd(t, eth0Desc, str("old")), upd(t, eth0MTU, uintV(1500)),
		upd(t, eth1Desc, str("untouched")),
		upd(t, hostname, str("r0")), upd(t, domain, str("example.net")),
	}}}
	runSetCases(t, []setCase{{
		name:  "one path: what the value does not carry is removed",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","mtu":9100}`))}}
		},
		want:    map[string]string{eth0MTU: `uint_val:9100`, eth1Desc: `string_val:"untouched"`, hostname: `string_val:"r0"`},
		missing: []string{eth0Desc},
	}, {
		name:  "a scalar at a leaf",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, eth0Desc, str("new"))}}
		},
		want: map[string]string{eth0Desc: `string_val:"new"`, eth0MTU: `uint_val:1500`},
	}, {
		name:  "several disjoint paths, each replaced",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{
				ur(t, "/system/config", &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`{"hostname":"r1"}`)}}),
				ur(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","description":"d"}`)),
			}}
		},
		want:    map[string]string{hostname: `string_val:"r1"`, eth0Desc: `string_val:"d"`, eth1Desc: `string_val:"untouched"`},
		missing: []string{domain, eth0MTU},
	}, {
		// Replaced one after the other, the second replace would drop the
		// first's description; as a union both stay.
		name:  "overlapping paths: their union, not one replace after the other",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{
				ur(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","description":"from the first"}`)),
				ur(t, "/interfaces", jsonIETF(`{"openconfig-interfaces:interface":[{"name":"eth0","config":{"name":"eth0","mtu":9000}}]}`)),
			}}
		},
		want:    map[string]string{eth0Desc: `string_val:"from the first"`, eth0MTU: `uint_val:9000`},
		missing: []string{eth1Desc},
	}, {
		name:  "overlapping values: the later one wins",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{
				ur(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","description":"first"}`)),
				ur(t, eth0Desc, str("second")),
			}}
		},
		want:    map[string]string{eth0Desc: `string_val:"second"`},
		missing: []string{eth0MTU},
	}, {
		name:  "the root",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, "/", jsonIETF(`{"openconfig-system:system":{"config":{"hostname":"only"}}}`))}}
		},
		want:    map[string]string{hostname: `string_val:"only"`},
		missing: []string{eth0Desc, eth1Desc, domain},
	}, {
		name:  "origin openconfig on the prefix and the path",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			path := p(t, "/config/hostname")
			path.Origin = "openconfig"
			return &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig", Elem: p(t, "/system").GetElem()},
				UnionReplace: []*gpb.Update{{Path: path, Val: str("r2")}}}
		},
		want: map[string]string{hostname: `string_val:"r2"`, domain: `string_val:"example.net"`},
	}, {
		// gNMI order: deletes, replaces, union_replaces, updates. The
		// replace's domain-name is cleared by the union_replace of
		// /system/config; the update's hostname wins over the union's.
		name:  "with delete, replace and update, in gNMI order",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{
				Update:       []*gpb.Update{upd(t, hostname, str("from-the-update"))},
				UnionReplace: []*gpb.Update{ur(t, "/system/config", jsonIETF(`{"hostname":"from-the-union","login-banner":"hi"}`))},
				Replace:      []*gpb.Update{upd(t, domain, str("from-the-replace.net"))},
				Delete:       []*gpb.Path{p(t, eth1Desc)},
			}
		},
		want:    map[string]string{hostname: `string_val:"from-the-update"`, "/system/config/login-banner": `string_val:"hi"`},
		missing: []string{domain, eth1Desc},
	}, {
		name:  "an invalid value refuses the whole Set",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{
				ur(t, "/system/config", jsonIETF(`{"hostname":"fine"}`)),
				ur(t, eth0MTU, str("not a number")),
			}}
		},
		code: codes.InvalidArgument, msgHas: eth0MTU,
	}, {
		name: "a path not in the schema",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, "/interfaces/interface[name=eth0]/config/no-such-leaf", str("x"))}}
		},
		code: codes.NotFound, msgHas: "no-such-leaf",
	}, {
		name: "a state path",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, "/system/state/boot-time", uintV(1))}}
		},
		code: codes.InvalidArgument, msgHas: "union_replace of a read-only (state) path",
	}, {
		name: "a value that is not valid JSON",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, "/system/config", jsonIETF(`{"hostname":`))}}
		},
		code: codes.InvalidArgument, msgHas: "/system/config",
	}, {
		name: "a union_replace without a value",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{{Path: p(t, hostname)}}}
		},
		code: codes.InvalidArgument, msgHas: "has no value",
	}, {
		name:  "origin cli",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{{Path: &gpb.Path{Origin: "cli"}, Val: asciiV("hostname r9\n")}}}
		},
		code: codes.Unimplemented, msgHas: `union_replace of origin "cli" is not implemented`,
	}, {
		name:  "openconfig with cli",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{
				{Path: &gpb.Path{Origin: "cli"}, Val: asciiV("hostname r9\n")},
				ur(t, "/system/config", jsonIETF(`{"hostname":"r9"}`)),
			}}
		},
		code: codes.Unimplemented, msgHas: `union_replace of several origins ("cli", "openconfig")`,
	}, {
		name:  "openconfig with a native origin",
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			native := p(t, "/system/config")
			native.Origin = "acme_native"
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{
				{Path: native, Val: jsonIETF(`{"hostname":"r9"}`)},
				{Path: &gpb.Path{Origin: "openconfig", Elem: p(t, "/interfaces").GetElem()}, Val: jsonIETF(`{}`)},
			}}
		},
		code: codes.Unimplemented, msgHas: "several origins",
	}, {
		name:  "a device without union_replace",
		opts:  testbed.Options{NoUnionReplace: true},
		setup: eth0,
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{UnionReplace: []*gpb.Update{ur(t, eth0Desc, str("x"))}}
		},
		code: codes.Unimplemented, msgHas: "union_replace is not supported by this device",
	}})
}

// TestSetUnionReplaceResults: one UpdateResult per operation, op
// UNION_REPLACE for the union_replaces, in the order the device applies
// them (deletes, replaces, union_replaces, updates), paths as sent.
func TestSetUnionReplaceResults(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	req := &gpb.SetRequest{
		Prefix:       p(t, "/interfaces"),
		Update:       []*gpb.Update{upd(t, "/interface[name=eth0]/config/mtu", uintV(1500))},
		UnionReplace: []*gpb.Update{upd(t, "/interface[name=eth0]/config/description", str("u1")), upd(t, "/interface[name=eth1]/config", jsonIETF(`{"name":"eth1"}`))},
		Replace:      []*gpb.Update{upd(t, "/interface[name=eth2]/config/description", str("r"))},
		Delete:       []*gpb.Path{p(t, "/interface[name=eth9]")},
	}
	resp := mustSet(t, c, req)
	want := []*gpb.UpdateResult{
		{Path: p(t, "/interface[name=eth9]"), Op: gpb.UpdateResult_DELETE},
		{Path: p(t, "/interface[name=eth2]/config/description"), Op: gpb.UpdateResult_REPLACE},
		{Path: p(t, "/interface[name=eth0]/config/description"), Op: gpb.UpdateResult_UNION_REPLACE},
		{Path: p(t, "/interface[name=eth1]/config"), Op: gpb.UpdateResult_UNION_REPLACE},
		{Path: p(t, "/interface[name=eth0]/config/mtu"), Op: gpb.UpdateResult_UPDATE},
	}
	if diff := cmp.Diff(want, resp.GetResponse(), protocmp.Transform()); diff != "" {
		t.Errorf("UpdateResults (-want +got):\n%s", diff)
	}
}

// TestSetUnionReplaceNotifies: an ON_CHANGE subscriber sees what a
// union_replace changed, as for any Set: the new values, and deletes of
// the leaves the union no longer carries.
func TestSetUnionReplaceNotifies(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("old")), upd(t, eth0MTU, uintV(1500))}})
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, "/interfaces"), Mode: gpb.SubscriptionMode_ON_CHANGE})
	untilSync(t, sub)
	mustSet(t, c, &gpb.SetRequest{UnionReplace: []*gpb.Update{upd(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","description":"new"}`))}})
	ev := recvEvent(t, sub)
	if ev.updates[eth0Desc].GetStringVal() != "new" || len(ev.deletes) != 1 || ev.deletes[0] != eth0MTU {
		t.Errorf("got updates %v, deletes %v; want %s = new and %s deleted", ev.updates, ev.deletes, eth0Desc, eth0MTU)
	}
}
