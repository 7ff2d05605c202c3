package testbed_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func depthExt(level uint32) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Depth{Depth: &gnmi_ext.Depth{Level: level}}}
}

// depthDevice is a device holding an interface with a subinterface, a
// second interface and a hostname.
func depthDevice(t *testing.T) gpb.GNMIClient {
	t.Helper()
	_, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{
		upd(t, eth0Desc, str("uplink")), upd(t, eth0MTU, uintV(9000)),
		upd(t, "/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=0]/config/description", str("sub")),
		upd(t, eth1Desc, str("second")),
		upd(t, hostname, str("r1")),
	}})
	return c
}

// TestGetDepth: the Depth extension (gnmi-depth.md) on Get keeps the
// leaves up to level N below the requested node: its own leaves are level
// 1, those of a container or list entry right below it level 2, and the
// entries of a requested list count as the list itself. Whatever is left
// with nothing is left out; a path with nothing within the depth is
// NotFound.
func TestGetDepth(t *testing.T) {
	c := depthDevice(t)
	tests := []struct {
		name  string
		path  string
		depth uint32
		json  bool // the JSON encoding (else JSON_IETF)
		dt    gpb.GetRequest_DataType
		want  []string // JSON values, one per update
		code  codes.Code
	}{
		{name: "level 1 of a list entry: its own leaves", path: "/interfaces/interface[name=eth0]", depth: 1,
			want: []string{`{"name":"eth0"}`}},
		{name: "level 2: and those of its containers", path: "/interfaces/interface[name=eth0]", depth: 2,
			want: []string{`{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":9000}}`}},
		{name: "level 3: and the entries of its lists", path: "/interfaces/interface[name=eth0]", depth: 3,
			want: []string{`{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":9000},"subinterfaces":{"subinterface":[{"index":0}]}}`}},
		{name: "0 is no limit", path: "/interfaces/interface[name=eth0]/subinterfaces", depth: 0,
			want: []string{`{"subinterface":[{"index":0,"config":{"index":0,"description":"sub"}}]}`}},
		{name: "a list's entries count as the list", path: "/interfaces/interface", depth: 1,
			want: []string{`[{"name":"eth0"},{"name":"eth1"}]`}},
		{name: "the JSON encoding's keyed lists", path: "/interfaces/interface", depth: 1, json: true,
			want: []string{`{"eth0":{"name":"eth0"},"eth1":{"name":"eth1"}}`}},
		{name: "a container above a list", path: "/interfaces", depth: 2,
			want: []string{`{"interface":[{"name":"eth0"},{"name":"eth1"}]}`}},
		{name: "a wildcard: each entry", path: "/interfaces/interface[name=*]", depth: 1,
			want: []string{`{"name":"eth0"}`, `{"name":"eth1"}`}},
		{name: "a leaf is its own level", path: eth0Desc, depth: 1, want: []string{`"uplink"`}},
		{name: "STATE data", path: "/interfaces/interface[name=eth1]", depth: 2, dt: gpb.GetRequest_STATE,
			want: []string{`{"name":"eth1","state":{"name":"eth1","description":"second"}}`}},
		{name: "nothing within the depth", path: "/interfaces", depth: 1, code: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := gpb.Encoding_JSON_IETF
			if tc.json {
				enc = gpb.Encoding_JSON
			}
			resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, tc.path)}, Encoding: enc, Type: tc.dt,
				Extension: []*gnmi_ext.Extension{depthExt(tc.depth)}})
			if status.Code(err) != tc.code {
				t.Fatalf("Get: %v, want code %v", err, tc.code)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "within Depth") {
					t.Errorf("error %v does not say nothing is within the depth", err)
				}
				return
			}
			var got []any
			for _, u := range resp.GetNotification()[0].GetUpdate() {
				raw := u.GetVal().GetJsonIetfVal()
				if raw == nil {
					raw = u.GetVal().GetJsonVal()
				}
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				got = append(got, unqualified(v))
			}
			var want []any
			for _, w := range tc.want {
				want = append(want, jsonOf(t, w))
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("Get %s with Depth %d = %s, want %v", tc.path, tc.depth, g, tc.want)
			}
		})
	}

	t.Run("PROTO: scalar leaves within the depth", func(t *testing.T) {
		resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, "/interfaces/interface[name=eth0]")}, Encoding: gpb.Encoding_PROTO,
			Extension: []*gnmi_ext.Extension{depthExt(2)}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range resp.GetNotification()[0].GetUpdate() {
			got = append(got, pathStr(u.GetPath().GetElem()))
		}
		sort.Strings(got)
		want := []string{"/interfaces/interface[name=eth0]/config/description", "/interfaces/interface[name=eth0]/config/mtu",
			"/interfaces/interface[name=eth0]/config/name", "/interfaces/interface[name=eth0]/name"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("leaves (-want +got):\n%s", diff)
		}
	})
}

// TestSubscribeDepth: the Depth extension on Subscribe limits the leaves
// of every subscription the same way.
func TestSubscribeDepth(t *testing.T) {
	c := depthDevice(t)
	sub, err := c.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{
		Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_PROTO,
			Subscription: []*gpb.Subscription{{Path: p(t, "/interfaces/interface[name=eth0]")}, {Path: p(t, "/system")}}}},
		Extension: []*gnmi_ext.Extension{depthExt(1)},
	}); err != nil {
		t.Fatal(err)
	}
	got := untilSync(t, sub)
	var paths []string
	for k := range got {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	if want := []string{"/interfaces/interface[name=eth0]/name"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("ONCE with Depth 1 sent %v, want %v (/system has no leaf of its own)", paths, want)
	}

	stream, err := c.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&gpb.SubscribeRequest{
		Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
			Subscription: []*gpb.Subscription{{Path: p(t, "/interfaces/interface[name=eth0]"), Mode: gpb.SubscriptionMode_ON_CHANGE}}}},
		Extension: []*gnmi_ext.Extension{depthExt(2)},
	}); err != nil {
		t.Fatal(err)
	}
	if got := untilSync(t, stream); len(got) != 4 {
		t.Errorf("STREAM with Depth 2 sent %v first, want name and the three config leaves", got)
	}
	setLeaf(t, c, "/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=0]/config/description", str("deeper"))
	setLeaf(t, c, eth0Desc, str("within"))
	if ev := recvEvent(t, stream); len(ev.updates) != 1 || ev.updates[eth0Desc].GetStringVal() != "within" {
		t.Errorf("got %+v, want only the change within the depth (%s)", ev, eth0Desc)
	}
}

// TestExtensionsRefused: the extensions this device does not support, or
// that do not belong to the RPC, are refused with its own status.
func TestExtensionsRefused(t *testing.T) {
	_, c := startDevice(t, testbed.Options{})
	setLeaf(t, c, eth0Desc, str("x"))
	history := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: 1}}}}
	commit := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{Id: "c1",
		Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(60e9)}}}}}
	configSub := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_ConfigSubscription{ConfigSubscription: &gnmi_ext.ConfigSubscription{
		Action: &gnmi_ext.ConfigSubscription_Start{Start: &gnmi_ext.ConfigSubscriptionStart{}}}}}
	tests := []struct {
		rpc    string
		ext    []*gnmi_ext.Extension
		code   codes.Code
		msgHas string
	}{
		{"Get", []*gnmi_ext.Extension{history}, codes.Unimplemented, "History extension is not supported by this device"},
		{"Subscribe", []*gnmi_ext.Extension{history}, codes.Unimplemented, "History extension is not supported by this device"},
		{"Set", []*gnmi_ext.Extension{history}, codes.InvalidArgument, "History extension applies to Get and Subscribe, not to Set"},
		{"Set", []*gnmi_ext.Extension{commit}, codes.Unimplemented, "commit-confirmed extension (Commit) is not supported by this device"},
		{"Get", []*gnmi_ext.Extension{commit}, codes.InvalidArgument, "applies to Set, not to Get"},
		{"Subscribe", []*gnmi_ext.Extension{commit}, codes.InvalidArgument, "applies to Set, not to Subscribe"},
		{"Set", []*gnmi_ext.Extension{depthExt(1)}, codes.InvalidArgument, "Depth extension applies to Get and Subscribe, not to Set"},
		{"Get", []*gnmi_ext.Extension{depthExt(1), depthExt(2)}, codes.InvalidArgument, "more than one Depth extension"},
		{"Subscribe", []*gnmi_ext.Extension{configSub}, codes.Unimplemented, "ConfigSubscription extension is not supported by this device"},
		{"Get", []*gnmi_ext.Extension{configSub}, codes.InvalidArgument, "ConfigSubscription extension applies to Subscribe, not to Get"},
		{"Set", []*gnmi_ext.Extension{configSub}, codes.InvalidArgument, "ConfigSubscription extension applies to Subscribe, not to Set"},
		{"Get", []*gnmi_ext.Extension{{}}, codes.OK, ""}, // an extension of a kind unknown to the device's gNMI: ignored
	}
	for _, tc := range tests {
		t.Run(tc.rpc+"/"+tc.msgHas, func(t *testing.T) {
			var err error
			switch tc.rpc {
			case "Get":
				_, err = c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0Desc)}, Extension: tc.ext})
			case "Set":
				_, err = c.Set(ctxT(t), &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("y"))}, Extension: tc.ext})
			case "Subscribe":
				sub, serr := c.Subscribe(ctxT(t))
				if serr != nil {
					t.Fatal(serr)
				}
				if serr := sub.Send(&gpb.SubscribeRequest{Extension: tc.ext, Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
					Mode: gpb.SubscriptionList_ONCE, Subscription: []*gpb.Subscription{{Path: p(t, eth0Desc)}}}}}); serr != nil {
					t.Fatal(serr)
				}
				_, err = sub.Recv()
			}
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msgHas) {
				t.Fatalf("%s: got %v, want %v naming %q", tc.rpc, err, tc.code, tc.msgHas)
			}
		})
	}
}

// TestRegisteredExtensionsEchoed: with Options.EchoExtensions every RPC
// answers with the registered extensions its request carried, whatever
// their id, unchanged: Get, Set and Capabilities in their response,
// Subscribe with each sync_response. Without it, none comes back.
func TestRegisteredExtensionsEchoed(t *testing.T) {
	_, c := startDevice(t, testbed.Options{EchoExtensions: true})
	exts := []*gnmi_ext.Extension{
		{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: 1234, Msg: []byte("opaque")}}},
		{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: gnmi_ext.ExtensionID_EID_EXPERIMENTAL, Msg: []byte{8, 1}}}},
	}
	check := func(t *testing.T, rpc string, got []*gnmi_ext.Extension) {
		t.Helper()
		if diff := cmp.Diff(exts, got, protocmp.Transform()); diff != "" {
			t.Errorf("%s response extensions (-sent +got):\n%s", rpc, diff)
		}
	}
	set := mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("x"))}, Extension: exts})
	check(t, "Set", set.GetExtension())
	get, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0Desc)}, Extension: exts})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "Get", get.GetExtension())
	caps, err := c.Capabilities(ctxT(t), &gpb.CapabilityRequest{Extension: exts})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "Capabilities", caps.GetExtension())
	sub, err := c.Subscribe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&gpb.SubscribeRequest{Extension: exts, Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode: gpb.SubscriptionList_ONCE, Subscription: []*gpb.Subscription{{Path: p(t, eth0Desc)}}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetSyncResponse() {
			check(t, "Subscribe sync_response", resp.GetExtension())
			break
		}
		if len(resp.GetExtension()) != 0 {
			t.Errorf("an update carries extensions %v; only sync_response echoes them", resp.GetExtension())
		}
	}
	plain, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0Desc)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.GetExtension()) != 0 {
		t.Errorf("a Get without extensions got %v back", plain.GetExtension())
	}

	_, quiet := startDevice(t, testbed.Options{})
	set = mustSet(t, quiet, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("x"))}, Extension: exts})
	get, err = quiet.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0Desc)}, Extension: exts})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.GetExtension())+len(get.GetExtension()) != 0 {
		t.Errorf("without EchoExtensions the device answered with extensions: Set %v, Get %v", set.GetExtension(), get.GetExtension())
	}
}
