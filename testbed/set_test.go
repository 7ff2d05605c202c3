package testbed_test

import (
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
	"github.com/google/go-cmp/cmp"
)

func TestCapabilities(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	resp, err := c.Capabilities(ctxT(t), &gpb.CapabilityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]bool{}
	for _, m := range resp.GetSupportedModels() {
		models[m.GetName()] = true
	}
	for _, want := range []string{"openconfig-interfaces", "openconfig-system", "openconfig-network-instance"} {
		if !models[want] {
			t.Errorf("model %s missing from %v", want, resp.GetSupportedModels())
		}
	}
	encs := map[gpb.Encoding]bool{}
	for _, e := range resp.GetSupportedEncodings() {
		encs[e] = true
	}
	for _, want := range []gpb.Encoding{gpb.Encoding_JSON_IETF, gpb.Encoding_JSON, gpb.Encoding_PROTO} {
		if !encs[want] {
			t.Errorf("encoding %v missing from %v", want, resp.GetSupportedEncodings())
		}
	}
	if resp.GetGNMIVersion() == "" {
		t.Error("empty gNMI version")
	}
}

// setCase is a Set on a new device, after setup, and what it must do.
type setCase struct {
	name    string
	opts    testbed.Options
	setup   []*gpb.SetRequest
	req     func(t *testing.T) *gpb.SetRequest
	code    codes.Code
	msgHas  string            // the error message must name this
	want    map[string]string // path → value (TypedValue text) after the Set
	missing []string          // paths that must be NotFound after the Set
}

func TestSet(t *testing.T) {
	tests := []setCase{{
		name: "update string leaf",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("uplink"))}}
		},
		want: map[string]string{eth0Desc: `string_val:"uplink"`, "/interfaces/interface[name=eth0]/name": `string_val:"eth0"`},
	}, {
		name: "update uint and bool leaves",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{
				upd(t, eth0MTU, uintV(9000)),
				upd(t, "/interfaces/interface[name=eth0]/config/enabled", &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}),
			}}
		},
		want: map[string]string{eth0MTU: `uint_val:9000`, "/interfaces/interface[name=eth0]/config/enabled": `bool_val:true`},
	}, {
		name: "JSON_IETF leaf value",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0MTU, jsonIETF(`1500`))}}
		},
		want: map[string]string{eth0MTU: `uint_val:1500`},
	}, {
		name: "JSON_IETF list entry",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces/interface[name=eth1]",
				jsonIETF(`{"name":"eth1","config":{"name":"eth1","description":"d1","mtu":9000}}`))}}
		},
		want: map[string]string{"/interfaces/interface[name=eth1]/config/description": `string_val:"d1"`, "/interfaces/interface[name=eth1]/config/mtu": `uint_val:9000`},
	}, {
		name: "JSON value on a config container",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{{Path: p(t, "/system/config"),
				Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`{"hostname":"r1","domain-name":"example.net"}`)}}}}}
		},
		want: map[string]string{"/system/config/hostname": `string_val:"r1"`, "/system/config/domain-name": `string_val:"example.net"`},
	}, {
		name: "JSON_IETF on a container with module-qualified names",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces",
				jsonIETF(`{"openconfig-interfaces:interface":[{"name":"eth2","config":{"name":"eth2","mtu":1400}}]}`))}}
		},
		want: map[string]string{"/interfaces/interface[name=eth2]/config/mtu": `uint_val:1400`},
	}, {
		name: "JSON_IETF at the root",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/", jsonIETF(`{"openconfig-system:system":{"config":{"hostname":"root-set"}}}`))}}
		},
		want: map[string]string{"/system/config/hostname": `string_val:"root-set"`},
	}, {
		name: "prefix joins the paths",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Prefix: p(t, "/interfaces/interface[name=eth3]"), Update: []*gpb.Update{upd(t, "/config/description", str("via prefix"))}}
		},
		want: map[string]string{"/interfaces/interface[name=eth3]/config/description": `string_val:"via prefix"`},
	}, {
		name:  "replace of a config container drops leaves it does not carry",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("old")), upd(t, eth0MTU, uintV(1500))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","mtu":9100}`))}}
		},
		want:    map[string]string{eth0MTU: `uint_val:9100`, "/interfaces/interface[name=eth0]/name": `string_val:"eth0"`},
		missing: []string{eth0Desc},
	}, {
		name:  "replace of a list entry",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("old")), upd(t, eth0MTU, uintV(1500))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Replace: []*gpb.Update{upd(t, "/interfaces/interface[name=eth0]", jsonIETF(`{"name":"eth0","config":{"name":"eth0","description":"new"}}`))}}
		},
		want:    map[string]string{eth0Desc: `string_val:"new"`},
		missing: []string{eth0MTU},
	}, {
		name:  "delete a leaf",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("old")), upd(t, eth0MTU, uintV(1500))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, eth0Desc)}}
		},
		want:    map[string]string{eth0MTU: `uint_val:1500`},
		missing: []string{eth0Desc},
	}, {
		name:  "delete a list entry",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("old"))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/interface[name=eth0]")}}
		},
		missing: []string{eth0Desc, "/interfaces/interface[name=eth0]"},
	}, {
		name:  "delete a compressed container",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("old")), upd(t, "/system/config/hostname", str("h"))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces")}}
		},
		want:    map[string]string{"/system/config/hostname": `string_val:"h"`},
		missing: []string{eth0Desc, "/interfaces"},
	}, {
		name: "delete of a missing path succeeds",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/interface[name=nope]/config/description")}}
		},
		missing: []string{"/interfaces/interface[name=nope]"},
	}, {
		name: "deletes, then replaces, then updates",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("old")),
			upd(t, "/interfaces/interface[name=eth1]/config/description", str("old1"))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{
				// Listed in the reverse of the order they must apply in.
				Update:  []*gpb.Update{upd(t, eth0Desc, str("from update"))},
				Replace: []*gpb.Update{upd(t, eth0Desc, str("from replace")), upd(t, "/interfaces/interface[name=eth1]/config/description", str("replaced1"))},
				Delete:  []*gpb.Path{p(t, "/interfaces/interface[name=eth0]"), p(t, "/interfaces/interface[name=eth1]")},
			}
		},
		want: map[string]string{eth0Desc: `string_val:"from update"`, "/interfaces/interface[name=eth1]/config/description": `string_val:"replaced1"`},
	}, {
		name: "wrong scalar type",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0MTU, str("big"))}}
		},
		code: codes.InvalidArgument, msgHas: eth0MTU, missing: []string{eth0MTU},
	}, {
		name: "value out of range",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0MTU, uintV(1<<20))}}
		},
		code: codes.InvalidArgument, msgHas: eth0MTU, missing: []string{eth0MTU},
	}, {
		name: "JSON with an unknown member",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces/interface[name=eth1]", jsonIETF(`{"config":{"colour":"red"}}`))}}
		},
		code: codes.InvalidArgument, msgHas: "/interfaces/interface[name=eth1]", missing: []string{"/interfaces/interface[name=eth1]"},
	}, {
		name: "invalid JSON",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces/interface[name=eth1]", jsonIETF(`{"config":`))}}
		},
		code: codes.InvalidArgument, msgHas: "/interfaces/interface[name=eth1]",
	}, {
		name: "list key and config name disagree",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces/interface[name=eth5]/config/name", str("other"))}}
		},
		code: codes.InvalidArgument, msgHas: "validation", missing: []string{"/interfaces/interface[name=eth5]"},
	}, {
		name: "unknown leaf",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces/interface[name=eth0]/config/colour", str("red"))}}
		},
		code: codes.NotFound, msgHas: "/interfaces/interface[name=eth0]/config/colour", missing: []string{"/interfaces/interface[name=eth0]"},
	}, {
		name: "unknown top-level path",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/bogus/thing", str("x"))}}
		},
		code: codes.NotFound, msgHas: "/bogus/thing",
	}, {
		name: "delete of an unknown path",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/bogus/thing")}}
		},
		code: codes.NotFound, msgHas: "/bogus/thing",
	}, {
		name: "unparseable path",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: ""}}}, Val: str("x")}}}
		},
		code: codes.InvalidArgument, msgHas: "empty name",
	}, {
		name: "read-only state path",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/system/state/boot-time", uintV(1))}}
		},
		code: codes.InvalidArgument, msgHas: "/system/state/boot-time",
	}, {
		name:  "delete with a wildcard key deletes every match",
		setup: []*gpb.SetRequest{{Update: []*gpb.Update{upd(t, eth0Desc, str("a")), upd(t, eth0MTU, uintV(1500)), upd(t, "/interfaces/interface[name=eth1]/config/description", str("b"))}}},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/interface[name=*]/config/description")}}
		},
		want:    map[string]string{eth0MTU: `uint_val:1500`},
		missing: []string{eth0Desc, "/interfaces/interface[name=eth1]/config/description"},
	}, {
		name: "delete with a wildcard key that matches nothing",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/interface[name=*]")}}
		},
	}, {
		name: "delete with a wildcard element name",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/*")}}
		},
		code: codes.Unimplemented, msgHas: "wildcard element name",
	}, {
		name: "update of a path with a wildcard",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{upd(t, "/interfaces/interface[name=*]/config/description", str("x"))}}
		},
		code: codes.InvalidArgument, msgHas: "update of a path with a wildcard", missing: []string{"/interfaces/interface[name=*]"},
	}, {
		name: "target on an operation's path",
		req: func(t *testing.T) *gpb.SetRequest {
			path := p(t, eth0Desc)
			path.Target = "dev1"
			return &gpb.SetRequest{Update: []*gpb.Update{{Path: path, Val: str("x")}}}
		},
		code: codes.InvalidArgument, msgHas: "allows a target only in the prefix", missing: []string{eth0Desc},
	}, {
		name: "target on the prefix",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1"}, Update: []*gpb.Update{upd(t, eth0Desc, str("x"))}}
		},
		want: map[string]string{eth0Desc: `string_val:"x"`},
	}, {
		name: "update without a value",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Update: []*gpb.Update{{Path: p(t, eth0Desc)}}}
		},
		code: codes.InvalidArgument, msgHas: eth0Desc, missing: []string{eth0Desc},
	}}
	runSetCases(t, tests)
}

// runSetCases runs each case on a device of its own: the Set's code and
// message, an unchanged configuration after an error, one UpdateResult per
// operation after a success, and the values after it.
func runSetCases(t *testing.T, tests []setCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, c := startDevice(t, tc.opts)
			for _, s := range tc.setup {
				mustSet(t, c, s)
			}
			before, err := d.ConfigLeaves()
			if err != nil {
				t.Fatal(err)
			}
			req := tc.req(t)
			resp, err := c.Set(ctxT(t), req)
			if status.Code(err) != tc.code {
				t.Fatalf("Set: got %v, want code %v", err, tc.code)
			}
			if err != nil {
				if !strings.Contains(status.Convert(err).Message(), tc.msgHas) {
					t.Errorf("error %q does not name %q", status.Convert(err).Message(), tc.msgHas)
				}
				after, err := d.ConfigLeaves()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(before, after, protocmp.Transform()); diff != "" {
					t.Errorf("a failed Set changed the configuration (-before +after):\n%s", diff)
				}
			} else {
				if resp.GetTimestamp() == 0 {
					t.Error("SetResponse has no timestamp")
				}
				wantOps := len(req.GetDelete()) + len(req.GetReplace()) + len(req.GetUnionReplace()) + len(req.GetUpdate())
				if len(resp.GetResponse()) != wantOps {
					t.Errorf("got %d UpdateResults, want one per operation (%d)", len(resp.GetResponse()), wantOps)
				}
			}
			for path, want := range tc.want {
				got, err := getVal(t, c, path)
				if err != nil {
					t.Errorf("Get %s: %v", path, err)
					continue
				}
				if got.String() != want && strings.ReplaceAll(got.String(), " ", "") != strings.ReplaceAll(want, " ", "") {
					t.Errorf("Get %s = %v, want %s", path, got, want)
				}
			}
			for _, path := range tc.missing {
				if _, err := getVal(t, c, path); status.Code(err) != codes.NotFound {
					t.Errorf("Get %s: got %v, want NotFound", path, err)
				}
			}
		})
	}
}

func TestSetResultsFollowOperationOrder(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	req := &gpb.SetRequest{
		Prefix:  p(t, "/interfaces"),
		Update:  []*gpb.Update{upd(t, "/interface[name=eth0]/config/mtu", uintV(1500))},
		Replace: []*gpb.Update{upd(t, "/interface[name=eth0]/config/description", str("r"))},
		Delete:  []*gpb.Path{p(t, "/interface[name=eth9]")},
	}
	resp := mustSet(t, c, req)
	want := []*gpb.UpdateResult{
		{Path: p(t, "/interface[name=eth9]"), Op: gpb.UpdateResult_DELETE},
		{Path: p(t, "/interface[name=eth0]/config/description"), Op: gpb.UpdateResult_REPLACE},
		{Path: p(t, "/interface[name=eth0]/config/mtu"), Op: gpb.UpdateResult_UPDATE},
	}
	if diff := cmp.Diff(want, resp.GetResponse(), protocmp.Transform()); diff != "" {
		t.Errorf("UpdateResults (-want +got):\n%s", diff)
	}
	if !proto.Equal(resp.GetPrefix(), req.GetPrefix()) {
		t.Errorf("response prefix %v, want the request's %v", resp.GetPrefix(), req.GetPrefix())
	}
}

func TestSetIsAtomic(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("before"))
	before, err := d.ConfigLeaves()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Set(ctxT(t), &gpb.SetRequest{Update: []*gpb.Update{
		upd(t, eth0Desc, str("after")),
		upd(t, "/interfaces/interface[name=eth1]/config/description", str("new entry")),
		upd(t, eth0MTU, str("not a number")), // third operation is invalid
	}})
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), eth0MTU) {
		t.Errorf("error %v does not name the failing path %s", err, eth0MTU)
	}
	after, err := d.ConfigLeaves()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after, protocmp.Transform()); diff != "" {
		t.Errorf("a failed Set changed the configuration (-before +after):\n%s", diff)
	}
	got, err := getVal(t, c, eth0Desc)
	if err != nil || got.GetStringVal() != "before" {
		t.Errorf("Get %s = %v, %v; want the old value", eth0Desc, got, err)
	}
	_, err = getVal(t, c, "/interfaces/interface[name=eth1]")
	wantCode(t, err, codes.NotFound)
}

func TestMasterArbitration(t *testing.T) {
	arb := func(high, low uint64) []*gnmi_ext.Extension {
		return []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{
			ElectionId: &gnmi_ext.Uint128{High: high, Low: low}}}}}
	}
	d, c := startDevice(t, testbed.Options{})
	steps := []struct {
		name    string
		ext     []*gnmi_ext.Extension
		code    codes.Code
		msgHas  string
		highest *testbed.ElectionID
	}{
		{name: "no extension is accepted", code: codes.OK},
		{name: "extension without election_id", ext: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{}}}}, code: codes.InvalidArgument, msgHas: "election_id"},
		{name: "first id is stored", ext: arb(0, 5), code: codes.OK, highest: &testbed.ElectionID{Low: 5}},
		{name: "lower id is refused, naming the current one", ext: arb(0, 3), code: codes.PermissionDenied, msgHas: "5", highest: &testbed.ElectionID{Low: 5}},
		{name: "equal id proceeds", ext: arb(0, 5), code: codes.OK, highest: &testbed.ElectionID{Low: 5}},
		{name: "higher id proceeds and is stored", ext: arb(0, 7), code: codes.OK, highest: &testbed.ElectionID{Low: 7}},
		{name: "high word counts", ext: arb(1, 0), code: codes.OK, highest: &testbed.ElectionID{High: 1}},
		{name: "lower after high word", ext: arb(0, 1<<40), code: codes.PermissionDenied, msgHas: "high:1", highest: &testbed.ElectionID{High: 1}},
		{name: "no extension still accepted", code: codes.OK, highest: &testbed.ElectionID{High: 1}},
	}
	for i, s := range steps {
		val := str(s.name)
		_, err := c.Set(ctxT(t), &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, val)}, Extension: s.ext})
		if status.Code(err) != s.code {
			t.Fatalf("step %d %q: got %v, want %v", i, s.name, err, s.code)
		}
		if err != nil && !strings.Contains(status.Convert(err).Message(), s.msgHas) {
			t.Errorf("step %q: message %q does not mention %q", s.name, status.Convert(err).Message(), s.msgHas)
		}
		got, gerr := getVal(t, c, eth0Desc)
		applied := gerr == nil && got.GetStringVal() == s.name
		if applied != (err == nil) {
			t.Errorf("step %q: Set error %v but value applied=%v", s.name, err, applied)
		}
		id, ok := d.ElectionID()
		if (s.highest != nil) != ok || (ok && id != *s.highest) {
			t.Errorf("step %q: highest election id = %v,%v; want %v", s.name, id, ok, s.highest)
		}
	}
}

// TestConcurrentSetsAndReads lets the race detector check that Sets never
// modify the tree while Gets, Subscribes and ConfigLeaves are reading it:
// Sets that install a new root (they touch /system) and Sets that change
// list entries in place.
func TestConcurrentSetsAndReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other *gpb.Update
		keep  bool // no delete of eth1: Sets of leaves only (the fast path)
	}{
		{"new root", upd(t, "/system/config/hostname", str("h")), false},
		{"in place", upd(t, "/interfaces/interface[name=eth2]/config/mtu", uintV(1500)), false},
		{"leaves only", upd(t, "/interfaces/interface[name=eth2]/config/mtu", uintV(1500)), true},
	} {
		t.Run(tc.name, func(t *testing.T) { concurrentSetsAndReads(t, tc.other, tc.keep) })
	}
}

func concurrentSetsAndReads(t *testing.T, other *gpb.Update, keep bool) {
	d, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("start"))
	done := make(chan struct{})
	errs := make(chan error, 3)
	go func() {
		defer func() { errs <- nil }()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{{}}, Encoding: gpb.Encoding_JSON_IETF}); err != nil {
				errs <- err
				return
			}
			if _, err := d.ConfigLeaves(); err != nil {
				errs <- err
				return
			}
		}
	}()
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, "/interfaces")})
	untilSync(t, sub)
	const sets = 50
	for i := 0; i < sets; i++ {
		req := &gpb.SetRequest{
			Update: []*gpb.Update{upd(t, eth0Desc, str(strings.Repeat("x", i+1))), other},
		}
		if !keep {
			req.Delete = []*gpb.Path{p(t, "/interfaces/interface[name=eth1]")}
		}
		if i%2 == 1 {
			req.Update = append(req.Update, upd(t, "/interfaces/interface[name=eth1]/config/description", str("back")))
		}
		mustSet(t, c, req)
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	// Every Set changed the description once, in order.
	for i := 0; i < sets; i++ {
		ev := recvEvent(t, sub)
		if got := ev.updates[eth0Desc].GetStringVal(); got != strings.Repeat("x", i+1) {
			t.Fatalf("change %d: got %+v", i, ev)
		}
	}
}

// TestSetLaterOperationRemovesAnEarlierOnesEntry: a Set whose replace of a
// list entry is undone by a later replace above it in the same Set is
// valid (gNMI applies the operations in order); the device must not
// validate the entry that is gone.
func TestSetLaterOperationRemovesAnEarlierOnesEntry(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Replace: []*gpb.Update{
		upd(t, "/interfaces/interface[name=eth2]", jsonIETF(`{"name":"eth2","subinterfaces":{"subinterface":[{"index":0,"config":{"index":0}}]}}`)),
		upd(t, "/interfaces", jsonIETF(`{"interface":[{"name":"eth0","config":{"name":"eth0"}}]}`)),
	}})
	resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, "/interfaces")}, Encoding: gpb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()); strings.Contains(got, "eth2") || !strings.Contains(got, "eth0") {
		t.Errorf("/interfaces after the Set: %s, want eth0 alone", got)
	}
}

// A refused path stays refused until the faults are cleared, whatever
// shape the Set gives it: a scalar at it or under it, or a JSON value at a
// container or list above it that holds it (member names with or without
// their module, list entries by key). Other values, and a delete above it,
// go through.
func TestRefuseSetsAt(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	mtu := "/interfaces/interface[name=eth0]/config/mtu"
	if err := d.RefuseSetsAt(mtu, codes.FailedPrecondition); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		req     *gpb.SetRequest
		refused bool
	}{
		{"scalar at the path", &gpb.SetRequest{Update: []*gpb.Update{upd(t, mtu, uintV(1500))}}, true},
		{"JSON_IETF at the container", &gpb.SetRequest{Update: []*gpb.Update{
			upd(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"description":"x","openconfig-interfaces:mtu":1500}`))}}, true},
		{"JSON at the list, the entry by key", &gpb.SetRequest{Replace: []*gpb.Update{
			upd(t, "/interfaces", &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(
				`{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}}]}`)}})}}, true},
		{"several updates, one of them refused", &gpb.SetRequest{Update: []*gpb.Update{
			upd(t, eth0Desc, str("ok")), upd(t, mtu, uintV(9000))}}, true},
		{"JSON at the container without it", &gpb.SetRequest{Update: []*gpb.Update{
			upd(t, "/interfaces/interface[name=eth0]/config", jsonIETF(`{"name":"eth0","description":"no mtu"}`))}}, false},
		{"another entry of the list", &gpb.SetRequest{Update: []*gpb.Update{
			upd(t, "/interfaces", jsonIETF(`{"interface":[{"name":"eth1","config":{"name":"eth1","mtu":1500}}]}`))}}, false},
		{"a delete above it", &gpb.SetRequest{Delete: []*gpb.Path{p(t, "/interfaces/interface[name=eth0]")}}, false},
	} {
		_, err := c.Set(ctxT(t), tc.req)
		if got := status.Code(err) == codes.FailedPrecondition; got != tc.refused || !tc.refused && err != nil {
			t.Errorf("%s: Set = %v, refused %v; want refused %v", tc.name, err, got, tc.refused)
		}
	}
	d.ClearFaults()
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, mtu, uintV(1500))}})
}
