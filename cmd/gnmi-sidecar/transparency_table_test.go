package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// The table of TestTransparency (transparency_test.go), in the order it
// runs: Capabilities; Sets that build the state the reads then read (and
// Sets the device or the sidecar refuse); union_replace; Gets; Subscribes;
// then the requests the sidecar answers itself.

// alice is the credentials of the rows that send some, as gnmic -u alice -p
// secret sends them.
var alice = metadata.Pairs("username", "alice", "password", "secret")

// withRequestID is md and a custom header.
func withRequestID(md metadata.MD, id string) metadata.MD {
	return metadata.Join(md, metadata.Pairs("x-request-id", id))
}

// Why only the code is compared for a Set the sidecar refuses itself,
// before journaling (mask 4): its own message says what to fix.
const sidecarRefuses = "the sidecar refuses this Set itself before journaling it (docs/extension.md, Requests the sidecar refuses itself)"

func transparencyTable(h *transHarness) []transRow {
	i0, i1 := h.intf[0], h.intf[1]
	// path parses one of the table's own paths; the rows' closures call
	// it from their subtests, so a malformed one (a bug of the table)
	// panics rather than failing the parent test from there.
	path := func(s string) *gpb.Path {
		if s == "/" {
			return &gpb.Path{}
		}
		p, err := ygot.StringToStructuredPath(s)
		if err != nil {
			panic(fmt.Sprintf("transparency table: path %q: %v", s, err))
		}
		return p
	}
	intf := func(name, rest string) string { return "/interfaces/interface[name=" + name + "]" + rest }
	desc0, desc1 := intf(i0, "/config/description"), intf(i1, "/config/description")
	mtu0, mtu1 := intf(i0, "/config/mtu"), intf(i1, "/config/mtu")
	const (
		hostname = "/system/config/hostname"
		domain   = "/system/config/domain-name"
		banner   = "/system/config/login-banner"
		search   = "/system/dns/config/search"
	)
	str := func(s string) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}} }
	u64 := func(n uint64) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}} }
	ietf := func(s string) *gpb.TypedValue {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
	}
	jsonv := func(s string) *gpb.TypedValue {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(s)}}
	}
	upd := func(p string, v *gpb.TypedValue) *gpb.Update { return &gpb.Update{Path: path(p), Val: v} }
	update := func(p string, v *gpb.TypedValue) *gpb.SetRequest {
		return &gpb.SetRequest{Update: []*gpb.Update{upd(p, v)}}
	}
	withPathTarget := func(p string) *gpb.Path {
		x := path(p)
		x.Target = "tr-target"
		return x
	}
	withOrigin := func(origin, p string) *gpb.Path {
		x := path(p)
		x.Origin = origin
		return x
	}
	//lint:ignore SA1019 the deprecated field is what the rows send
	elementOnly := &gpb.Path{Element: []string{"system", "config", "hostname"}}
	registered := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: 1234, Msg: []byte("opaque")}}}
	depth := func(n uint32) *gnmi_ext.Extension {
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Depth{Depth: &gnmi_ext.Depth{Level: n}}}
	}
	history := func(h *gnmi_ext.History) *gnmi_ext.Extension {
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: h}}
	}
	commit := func(c *gnmi_ext.Commit) *gnmi_ext.Extension {
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
	}
	configSub := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_ConfigSubscription{ConfigSubscription: &gnmi_ext.ConfigSubscription{
		Action: &gnmi_ext.ConfigSubscription_Start{Start: &gnmi_ext.ConfigSubscriptionStart{}}}}}
	arbitration := func(id uint64) *gnmi_ext.Extension {
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: &gnmi_ext.MasterArbitration{
			ElectionId: &gnmi_ext.Uint128{Low: id}}}}
	}
	get := func(enc gpb.Encoding, dt gpb.GetRequest_DataType, paths ...string) *gpb.GetRequest {
		r := &gpb.GetRequest{Encoding: enc, Type: dt}
		for _, p := range paths {
			r.Path = append(r.Path, path(p))
		}
		return r
	}
	sub := func(p string, mode gpb.SubscriptionMode) *gpb.Subscription {
		return &gpb.Subscription{Path: path(p), Mode: mode}
	}
	list := func(mode gpb.SubscriptionList_Mode, enc gpb.Encoding, subs ...*gpb.Subscription) *gpb.SubscribeRequest {
		return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
			Mode: mode, Encoding: enc, Subscription: subs}}}
	}
	listOf := func(l *gpb.SubscriptionList, exts ...*gnmi_ext.Extension) *gpb.SubscribeRequest {
		return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: l}, Extension: exts}
	}
	sample := func(p string, interval time.Duration) *gpb.Subscription {
		return &gpb.Subscription{Path: path(p), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(interval)}
	}
	const tick = 100 * time.Millisecond // the simulated device's shortest interval

	rows := []transRow{
		// --- Capabilities ---
		{name: "Capabilities", caps: &gpb.CapabilityRequest{}},
		{name: "Capabilities with a registered extension", caps: &gpb.CapabilityRequest{Extension: []*gnmi_ext.Extension{registered}}},
		{name: "Capabilities with an extension of a kind unknown to gNMI", caps: &gpb.CapabilityRequest{Extension: []*gnmi_ext.Extension{{}}}},

		// --- Set: the state the reads read ---
		{name: "Set update string leaf (PROTO scalar)", set: update(desc0, str("uplink"))},
		{name: "Set update uint and bool leaves", set: &gpb.SetRequest{Update: []*gpb.Update{
			upd(mtu0, u64(9000)), upd(intf(i0, "/config/enabled"), &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}})}}},
		{name: "Set update JSON_IETF list entry", set: update(intf(i1, ""),
			ietf(`{"openconfig-interfaces:name":"`+i1+`","openconfig-interfaces:config":{"name":"`+i1+`","description":"second","mtu":1500},`+
				`"openconfig-interfaces:subinterfaces":{"subinterface":[{"index":0,"config":{"index":0,"description":"sub"}}]}}`))},
		{name: "Set update JSON container", set: update("/system/config", jsonv(`{"hostname":"tr-host","domain-name":"example.net"}`))},
		{name: "Set update leaf-list", set: update(search, &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{
			Element: []*gpb.TypedValue{str("a.example"), str("b.example")}}}})},
		{name: "Set update JSON_IETF scalar at a leaf", set: update(mtu1, ietf(`1400`))},
		{name: "Set replace JSON_IETF container", set: &gpb.SetRequest{Replace: []*gpb.Update{
			upd(intf(i0, "/config"), ietf(`{"name":"`+i0+`","description":"replaced","mtu":9100}`))}}},
		{name: "Set with a prefix", set: &gpb.SetRequest{Prefix: path(intf(i1, "")), Update: []*gpb.Update{upd("/config/description", str("via-prefix"))}}},
		{name: "Set with target and origin in the prefix", set: &gpb.SetRequest{
			Prefix: &gpb.Path{Target: "tr-target", Origin: "openconfig", Elem: path("/system/config").GetElem()},
			Update: []*gpb.Update{upd("/login-banner", str("hello"))}}},

		// --- Sets as real clients send them: a target, an origin,
		// credentials and custom metadata (issue 25); the device's view
		// shows they reach it unchanged ---
		{name: "Set with credentials", set: update(desc1, str("as-alice")), md: alice},
		{name: "Set with custom metadata", set: update(desc1, str("traced")), md: metadata.Pairs("x-request-id", "req-42", "x-tenant", "blue")},
		{name: "Set with a target, credentials and custom metadata, several operations", set: &gpb.SetRequest{
			Prefix:  &gpb.Path{Target: "dev1"},
			Delete:  []*gpb.Path{path(banner)},
			Replace: []*gpb.Update{upd(intf(i1, "/config"), ietf(`{"name":"`+i1+`","description":"dev1-replaced","mtu":1500}`))},
			Update:  []*gpb.Update{upd(desc0, str("dev1")), upd(hostname, str("dev1-host"))}},
			md: withRequestID(alice, "req-43")},
		{name: "Set with origin openconfig in the prefix", set: &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig"},
			Update: []*gpb.Update{upd(desc1, str("prefix-origin"))}}},
		{name: "Set with origin openconfig on the path", set: &gpb.SetRequest{
			Update: []*gpb.Update{{Path: withOrigin("openconfig", desc1), Val: str("path-origin")}}}},
		{name: "Set with a target and credentials, refused by the device", set: &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1"},
			Update: []*gpb.Update{upd(mtu0, str("not-a-number"))}}, md: alice},
		{name: "Set union_replace with a target and credentials", set: &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1", Origin: "openconfig"},
			UnionReplace: []*gpb.Update{upd("/system/config", ietf(`{"hostname":"tr-host","domain-name":"example.net","login-banner":"hello"}`))}},
			md: withRequestID(alice, "req-44")},
		{name: "Capabilities with credentials", caps: &gpb.CapabilityRequest{}, md: alice},
		{name: "Get with a target and credentials", get: &gpb.GetRequest{Prefix: &gpb.Path{Target: "dev1"}, Path: []*gpb.Path{path("/system/config")},
			Encoding: gpb.Encoding_JSON_IETF}, md: withRequestID(alice, "req-45")},
		{name: "Subscribe ONCE with a target and credentials", sub: &subScript{req: &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{
			Subscribe: &gpb.SubscriptionList{Prefix: &gpb.Path{Target: "dev1"}, Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_JSON_IETF,
				Subscription: []*gpb.Subscription{{Path: path("/system/config")}}}}}}, md: withRequestID(alice, "req-46")},

		{name: "Set delete a leaf", set: &gpb.SetRequest{Delete: []*gpb.Path{path(banner)}}},
		{name: "Set delete a missing path", set: &gpb.SetRequest{Delete: []*gpb.Path{path(intf(i1, "/config/enabled"))}}},
		{name: "Set delete, replace and update in one request", set: &gpb.SetRequest{
			Delete:  []*gpb.Path{path(domain)},
			Replace: []*gpb.Update{upd(desc1, str("r"))},
			Update:  []*gpb.Update{upd(mtu1, u64(1500))}}},
		{name: "Set update JSON_IETF at the root", set: update("/", ietf(`{"openconfig-system:system":{"config":{"hostname":"root-host"}}}`))},
		{name: "Set with MasterArbitration", set: &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("arbitrated"))},
			Extension: []*gnmi_ext.Extension{arbitration(10)}},
			deviceViewDiffers: "the sidecar arbitrates among its own clients and does not pass their election ids on (docs/extension.md); with --master-arbitration it sends its own"},
		{name: "Set with a lower MasterArbitration election id", set: &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("stale"))},
			Extension: []*gnmi_ext.Extension{arbitration(5)}},
			maskMessage: "the sidecar arbitrates among its own clients (docs/extension.md, Master arbitration among clients); both refuse with PermissionDenied"},
		{name: "Set with a registered extension", set: &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("uplink"))},
			Extension: []*gnmi_ext.Extension{registered}}},
		{name: "Set with the Depth extension", set: &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("x"))},
			Extension: []*gnmi_ext.Extension{depth(1)}}, maskMessage: sidecarRefuses},
		{name: "Set with the History extension", set: &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("x"))},
			Extension: []*gnmi_ext.Extension{history(&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: 1}})}}, maskMessage: sidecarRefuses},
		{name: "Set with the ConfigSubscription extension", set: &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("x"))},
			Extension: []*gnmi_ext.Extension{configSub}}, maskMessage: sidecarRefuses},
		{name: "Set with no operations", set: &gpb.SetRequest{}},

		// --- Set: refused ---
		{name: "Set of a leaf not in the schema", set: update(intf(i0, "/config/no-such-leaf"), str("x"))},
		{name: "Set of an invalid value", set: update(mtu0, str("not-a-number"))},
		{name: "Set of a read-only state leaf", set: update("/system/state/boot-time", u64(1))},
		{name: "Set of an ASCII value", set: update(desc0, &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: "text"}})},
		{name: "Set of a BYTES value", set: update(desc0, &gpb.TypedValue{Value: &gpb.TypedValue_BytesVal{BytesVal: []byte("raw")}})},
		{name: "Set of a wildcard path", set: update("/interfaces/interface[name=*]/config/description", str("x")), maskMessage: sidecarRefuses},
		{name: "Set delete with a wildcard key", set: &gpb.SetRequest{Delete: []*gpb.Path{path(intf(i1, "/subinterfaces/subinterface[index=*]/config/description"))}}},
		{name: "Set of a path in the deprecated element field", set: &gpb.SetRequest{Update: []*gpb.Update{{Path: elementOnly, Val: str("x")}}},
			maskMessage: sidecarRefuses},
		{name: "Set update without a value", set: &gpb.SetRequest{Update: []*gpb.Update{{Path: path(desc0)}}}, maskMessage: sidecarRefuses},
		//lint:ignore SA1019 the deprecated field is what the row sends
		{name: "Set update in the deprecated value field", set: &gpb.SetRequest{Update: []*gpb.Update{{Path: path(desc0), Value: &gpb.Value{Value: []byte(`"x"`), Type: gpb.Encoding_JSON}}}},
			maskMessage: sidecarRefuses},
		{name: "Set of JSON that is not JSON", set: update("/system/config", ietf(`{"hostname":`)), maskMessage: sidecarRefuses},
		{name: "Set with a path origin contradicting the prefix's", set: &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig"},
			Update: []*gpb.Update{{Path: withOrigin("other", hostname), Val: str("x")}}}, maskMessage: sidecarRefuses},
		{name: "Set with a target on an operation's path", set: &gpb.SetRequest{Update: []*gpb.Update{{Path: withPathTarget(desc0), Val: str("x")}}},
			maskMessage: sidecarRefuses},
		{name: "Set of origin cli", set: &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Origin: "cli"},
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: "hostname cli\n"}}}}}},

		// --- union_replace ---
		{name: "Set union_replace of one container", set: &gpb.SetRequest{UnionReplace: []*gpb.Update{
			upd(intf(i0, "/config"), ietf(`{"name":"`+i0+`","description":"union","mtu":9000}`))}}},
		// One after the other, the entry's replace would drop the config's
		// description; as a union both stay.
		{name: "Set union_replace of overlapping paths", set: &gpb.SetRequest{UnionReplace: []*gpb.Update{
			upd(intf(i1, "/config"), ietf(`{"name":"`+i1+`","description":"from-the-first"}`)),
			upd(intf(i1, ""), ietf(`{"openconfig-interfaces:name":"`+i1+`","openconfig-interfaces:config":{"name":"`+i1+`","mtu":1500}}`))}}},
		{name: "Set union_replace with an update", set: &gpb.SetRequest{
			UnionReplace: []*gpb.Update{upd("/system/config", ietf(`{"hostname":"union-host","domain-name":"example.net"}`))},
			Update:       []*gpb.Update{upd(desc0, str("uplink"))}}},
		{name: "Set union_replace of origin cli", set: &gpb.SetRequest{UnionReplace: []*gpb.Update{{Path: &gpb.Path{Origin: "cli"},
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: "hostname cli\n"}}}}}},
		// The same state as union_replace leaves it, journaled: later rows
		// start from a journal in step with the device either way.
		{name: "Set replace of both interfaces", set: &gpb.SetRequest{Replace: []*gpb.Update{
			upd(intf(i1, ""), ietf(`{"openconfig-interfaces:name":"`+i1+`","openconfig-interfaces:config":{"name":"`+i1+`","description":"from-the-first","mtu":1500}}`)),
			upd(intf(i0, "/config"), ietf(`{"name":"`+i0+`","description":"uplink","mtu":9000}`))},
			Update: []*gpb.Update{upd("/system/config", ietf(`{"hostname":"union-host","domain-name":"example.net"}`))}}},

		// --- Get ---
		{name: "Get leaf JSON_IETF", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_ALL, desc0)},
		{name: "Get leaf JSON", get: get(gpb.Encoding_JSON, gpb.GetRequest_ALL, desc0)},
		{name: "Get leaf PROTO", get: get(gpb.Encoding_PROTO, gpb.GetRequest_ALL, desc0)},
		{name: "Get leaf-list PROTO", get: get(gpb.Encoding_PROTO, gpb.GetRequest_ALL, search)},
		{name: "Get container CONFIG", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_CONFIG, "/system/config")},
		{name: "Get list entry STATE", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_STATE, intf(i1, ""))},
		{name: "Get OPERATIONAL", get: get(gpb.Encoding_JSON, gpb.GetRequest_OPERATIONAL, "/interfaces")},
		{name: "Get the root", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_ALL, "/")},
		{name: "Get a wildcard PROTO", get: get(gpb.Encoding_PROTO, gpb.GetRequest_ALL, "/interfaces/interface[name=*]/config/mtu")},
		{name: "Get with target and origin in the prefix", get: &gpb.GetRequest{Encoding: gpb.Encoding_PROTO,
			Prefix: &gpb.Path{Target: "tr-target", Origin: "openconfig", Elem: path("/system").GetElem()}, Path: []*gpb.Path{path("/config/hostname")}}},
		{name: "Get two paths", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_ALL, desc0, hostname)},
		{name: "Get with Depth 1", get: &gpb.GetRequest{Encoding: gpb.Encoding_JSON_IETF, Path: []*gpb.Path{path(intf(i0, ""))},
			Extension: []*gnmi_ext.Extension{depth(1)}}},
		{name: "Get with Depth 2 PROTO", get: &gpb.GetRequest{Encoding: gpb.Encoding_PROTO, Path: []*gpb.Path{path("/interfaces")},
			Extension: []*gnmi_ext.Extension{depth(2)}}},
		{name: "Get with a registered extension", get: &gpb.GetRequest{Encoding: gpb.Encoding_PROTO, Path: []*gpb.Path{path(desc0)},
			Extension: []*gnmi_ext.Extension{registered}}},
		{name: "Get with use_models", get: &gpb.GetRequest{Encoding: gpb.Encoding_PROTO, Path: []*gpb.Path{path(desc0)},
			UseModels: []*gpb.ModelData{{Name: "openconfig-interfaces"}}}},
		{name: "Get encoding ASCII", get: get(gpb.Encoding_ASCII, gpb.GetRequest_ALL, desc0)},
		{name: "Get encoding BYTES", get: get(gpb.Encoding_BYTES, gpb.GetRequest_ALL, desc0)},
		{name: "Get an unknown encoding", get: get(gpb.Encoding(42), gpb.GetRequest_ALL, desc0)},
		{name: "Get an unknown data type", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_DataType(9), desc0)},
		{name: "Get a missing path", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_ALL, intf("no-such-interface", ""))},
		{name: "Get a path not in the schema", get: get(gpb.Encoding_JSON_IETF, gpb.GetRequest_ALL, "/no-such-container/leaf")},
		{name: "Get a path in the deprecated element field", get: &gpb.GetRequest{Path: []*gpb.Path{elementOnly}}},
		{name: "Get of origin cli", get: &gpb.GetRequest{Path: []*gpb.Path{{Origin: "cli"}}}},
		{name: "Get with a target on a path", get: &gpb.GetRequest{Path: []*gpb.Path{withPathTarget(desc0)}}},
		{name: "Get with the commit-confirmed extension", get: &gpb.GetRequest{Path: []*gpb.Path{path(desc0)},
			Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "x", Action: &gnmi_ext.Commit_Confirm{Confirm: &gnmi_ext.CommitConfirm{}}})}}},
		{name: "Get with the ConfigSubscription extension", get: &gpb.GetRequest{Path: []*gpb.Path{path(desc0)},
			Extension: []*gnmi_ext.Extension{configSub}}},

		// --- Subscribe ---
		{name: "Subscribe ONCE PROTO", sub: &subScript{req: list(gpb.SubscriptionList_ONCE, gpb.Encoding_PROTO, sub(desc0, 0))}},
		{name: "Subscribe ONCE JSON_IETF container", sub: &subScript{req: list(gpb.SubscriptionList_ONCE, gpb.Encoding_JSON_IETF, sub("/system", 0))}},
		{name: "Subscribe ONCE two subscriptions", sub: &subScript{req: list(gpb.SubscriptionList_ONCE, gpb.Encoding_JSON,
			sub(intf(i0, "/config"), 0), sub("/interfaces/interface[name=*]/config/mtu", 0))}},
		{name: "Subscribe ONCE with target and origin in the prefix", sub: &subScript{req: listOf(&gpb.SubscriptionList{
			Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_PROTO,
			Prefix:       &gpb.Path{Target: "tr-target", Origin: "openconfig", Elem: path("/interfaces").GetElem()},
			Subscription: []*gpb.Subscription{sub("/interface[name="+i1+"]/config", 0)}})}},
		{name: "Subscribe ONCE with Depth 1", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_PROTO,
			Subscription: []*gpb.Subscription{sub("/interfaces/interface", 0)}}, depth(1))}},
		{name: "Subscribe ONCE with a registered extension", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE,
			Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{sub(hostname, 0)}}, registered)}},
		{name: "Subscribe POLL, three polls", sub: &subScript{req: list(gpb.SubscriptionList_POLL, gpb.Encoding_PROTO, sub(intf(i1, "/config"), 0)),
			polls: 3, pollSets: []*gpb.SetRequest{update(desc1, str("poll-1")), update(desc1, str("poll-2"))}}},
		{name: "Subscribe STREAM ON_CHANGE", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_PROTO, sub(intf(i1, "/config"), gpb.SubscriptionMode_ON_CHANGE)),
			trigger: []*gpb.SetRequest{update(desc1, str("changed")), {Delete: []*gpb.Path{path(mtu1)}}}, collect: 2}},
		{name: "Subscribe STREAM TARGET_DEFINED", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_PROTO, sub(intf(i1, "/config"), gpb.SubscriptionMode_TARGET_DEFINED)),
			trigger: []*gpb.SetRequest{update(mtu1, u64(1500))}, collect: 1}},
		{name: "Subscribe STREAM updates_only", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
			UpdatesOnly: true, Subscription: []*gpb.Subscription{sub(intf(i1, "/config"), gpb.SubscriptionMode_ON_CHANGE)}}),
			trigger: []*gpb.SetRequest{update(desc1, str("updates-only"))}, collect: 1}},
		{name: "Subscribe STREAM ON_CHANGE with heartbeat_interval", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM,
			Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{{Path: path(desc0), Mode: gpb.SubscriptionMode_ON_CHANGE, HeartbeatInterval: uint64(tick)}}}),
			collect: 2}},
		{name: "Subscribe STREAM SAMPLE", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_PROTO, sample(intf(i0, "/config"), tick)), collect: 2}},
		{name: "Subscribe STREAM SAMPLE suppress_redundant", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM,
			Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{{Path: path(intf(i0, "/config")), Mode: gpb.SubscriptionMode_SAMPLE,
				SampleInterval: uint64(tick), SuppressRedundant: true}}}),
			trigger: []*gpb.SetRequest{update(mtu0, u64(9100))}, collect: 1}},
		{name: "Subscribe STREAM SAMPLE suppress_redundant with heartbeat_interval", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM,
			Encoding: gpb.Encoding_PROTO, Subscription: []*gpb.Subscription{{Path: path(intf(i0, "/config")), Mode: gpb.SubscriptionMode_SAMPLE,
				SampleInterval: uint64(tick), SuppressRedundant: true, HeartbeatInterval: uint64(2 * tick)}}}),
			collect: 2}},
		{name: "Subscribe STREAM allow_aggregation", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM,
			Encoding: gpb.Encoding_JSON_IETF, AllowAggregation: true, Subscription: []*gpb.Subscription{sub(intf(i0, "/config"), gpb.SubscriptionMode_ON_CHANGE)}}),
			trigger: []*gpb.SetRequest{update(intf(i0, "/config"), ietf(`{"description":"aggregated","mtu":9000}`))}, collect: 1}},
		{name: "Subscribe STREAM two subscriptions", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_PROTO,
			sub(desc0, gpb.SubscriptionMode_ON_CHANGE), sub(hostname, gpb.SubscriptionMode_ON_CHANGE)),
			trigger: []*gpb.SetRequest{update(hostname, str("stream-host")), {Update: []*gpb.Update{upd(desc0, str("both")), upd(hostname, str("both-host"))}}},
			collect: 2}},
		{name: "Subscribe STREAM JSON", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_JSON, sub(search, gpb.SubscriptionMode_ON_CHANGE)),
			trigger: []*gpb.SetRequest{update(search, &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{
				Element: []*gpb.TypedValue{str("c.example")}}}})}, collect: 1}},
		{name: "Subscribe encoding ASCII", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_ASCII, sub(desc0, 0))}},
		{name: "Subscribe encoding BYTES", sub: &subScript{req: list(gpb.SubscriptionList_ONCE, gpb.Encoding_BYTES, sub(desc0, 0))}},
		{name: "Subscribe sample_interval too short", sub: &subScript{req: list(gpb.SubscriptionList_STREAM, gpb.Encoding_PROTO, sample(desc0, time.Millisecond))}},
		{name: "Subscribe heartbeat_interval too short", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM,
			Subscription: []*gpb.Subscription{{Path: path(desc0), Mode: gpb.SubscriptionMode_ON_CHANGE, HeartbeatInterval: 1}}})}},
		{name: "Subscribe with a Poll first", sub: &subScript{req: &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}}},
		{name: "Subscribe with no subscriptions", sub: &subScript{req: list(gpb.SubscriptionList_ONCE, gpb.Encoding_PROTO)}},
		{name: "Subscribe an unknown list mode", sub: &subScript{req: list(gpb.SubscriptionList_Mode(9), gpb.Encoding_PROTO, sub(desc0, 0))}},
		{name: "Subscribe with the ConfigSubscription extension", sub: &subScript{req: listOf(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM,
			Subscription: []*gpb.Subscription{sub(desc0, gpb.SubscriptionMode_ON_CHANGE)}}, configSub)}},

		// --- answered by the sidecar ---
		{name: "Set for History: h1", set: update(desc1, str("h1")), after: func(t *testing.T, h *transHarness) {
			time.Sleep(time.Millisecond)
			h.marks["t1"] = time.Now().UnixNano()
			v, err := h.directGet(t, path(desc1))
			if err != nil {
				t.Fatal(err)
			}
			h.values["t1"] = v
		}},
		{name: "Set for History: h2", set: update(desc1, str("h2")), after: func(t *testing.T, h *transHarness) {
			time.Sleep(time.Millisecond)
			h.marks["t2"] = time.Now().UnixNano()
		}},
		{name: "Get with History snapshot_time",
			expect: "one notification at the snapshot time holding what the device held then (h1, read from it directly at that time)",
			answered: func(t *testing.T, h *transHarness) error {
				resp, err := h.sidecar.Get(rpcCtx(t), &gpb.GetRequest{Path: []*gpb.Path{path(desc1)}, Encoding: gpb.Encoding_PROTO,
					Extension: []*gnmi_ext.Extension{history(&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: h.marks["t1"]}})}})
				if err != nil {
					return err
				}
				want := &gpb.GetResponse{Notification: []*gpb.Notification{{Timestamp: h.marks["t1"],
					Update: []*gpb.Update{{Path: path(desc1), Val: h.values["t1"]}}}}}
				return protoDiff(want, resp)
			}},
		{name: "Subscribe ONCE with History snapshot_time",
			expect: "the same values as the Get, then sync_response, then the end of the stream",
			answered: func(t *testing.T, h *transHarness) error {
				got, end := subscribeAll(t, h.sidecar, &gpb.SubscribeRequest{
					Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Encoding: gpb.Encoding_PROTO,
						Subscription: []*gpb.Subscription{{Path: path(desc1)}}}},
					Extension: []*gnmi_ext.Extension{history(&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: h.marks["t1"]}})}})
				if end != nil {
					return end
				}
				return valuesAre(got, []*gpb.TypedValue{h.values["t1"]}, 1)
			}},
		{name: "Subscribe STREAM with a History range",
			expect: "the value at the start (h1), sync_response, the change committed in the range (h2), then the end of the stream",
			answered: func(t *testing.T, h *transHarness) error {
				got, end := subscribeAll(t, h.sidecar, &gpb.SubscribeRequest{
					Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{Mode: gpb.SubscriptionList_STREAM, Encoding: gpb.Encoding_PROTO,
						Subscription: []*gpb.Subscription{{Path: path(desc1)}}}},
					Extension: []*gnmi_ext.Extension{history(&gnmi_ext.History{Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{
						Start: h.marks["t1"], End: h.marks["t2"]}}})}})
				if end != nil {
					return end
				}
				return valuesAre(got, []*gpb.TypedValue{h.values["t1"], str("h2")}, 1)
			}},
		{name: "Set with commit-confirmed, then confirm",
			expect: "the change applied at once, kept after confirm (the device holds it both times)",
			answered: func(t *testing.T, h *transHarness) error {
				if _, err := h.sidecar.Set(rpcCtx(t), &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("confirmed"))},
					Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "tr-1", Action: &gnmi_ext.Commit_Commit{
						Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationOf(time.Minute)}}})}}); err != nil {
					return fmt.Errorf("commit: %w", err)
				}
				if err := h.deviceHolds(t, path(desc0), str("confirmed")); err != nil {
					return fmt.Errorf("after commit: %w", err)
				}
				if _, err := h.sidecar.Set(rpcCtx(t), &gpb.SetRequest{Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "tr-1",
					Action: &gnmi_ext.Commit_Confirm{Confirm: &gnmi_ext.CommitConfirm{}}})}}); err != nil {
					return fmt.Errorf("confirm: %w", err)
				}
				return h.deviceHolds(t, path(desc0), str("confirmed"))
			}},
		{name: "Set with commit-confirmed, then cancel",
			expect: "the change applied, then rolled back by the cancel (the device holds the value before it again)",
			answered: func(t *testing.T, h *transHarness) error {
				if _, err := h.sidecar.Set(rpcCtx(t), &gpb.SetRequest{Update: []*gpb.Update{upd(desc0, str("cancelled"))},
					Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "tr-2", Action: &gnmi_ext.Commit_Commit{
						Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationOf(time.Minute)}}})}}); err != nil {
					return fmt.Errorf("commit: %w", err)
				}
				if err := h.deviceHolds(t, path(desc0), str("cancelled")); err != nil {
					return fmt.Errorf("after commit: %w", err)
				}
				if _, err := h.sidecar.Set(rpcCtx(t), &gpb.SetRequest{Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "tr-2",
					Action: &gnmi_ext.Commit_Cancel{Cancel: &gnmi_ext.CommitCancel{}}})}}); err != nil {
					return fmt.Errorf("cancel: %w", err)
				}
				return h.deviceHolds(t, path(desc0), str("confirmed"))
			}},
		{name: "Set rolling back the newest change",
			expect: "the device holds the value before the change again, and the answer is the rollback's Response",
			answered: func(t *testing.T, h *transHarness) error {
				mustSidecarSet(t, h, update(desc0, str("rolled-back")))
				msg, err := proto.Marshal(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{}})
				if err != nil {
					return err
				}
				resp, err := h.sidecar.Set(rpcCtx(t), &gpb.SetRequest{Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_RegisteredExt{
					RegisteredExt: &gnmi_ext.RegisteredExtension{Id: gnmi_ext.ExtensionID_EID_EXPERIMENTAL, Msg: msg}}}}})
				if err != nil {
					return fmt.Errorf("rollback: %w", err)
				}
				if r, err := responseExt(resp); err != nil || r.GetPhase() != sidecarpb.Phase_PHASE_ROLLBACK || r.GetApply() != sidecarpb.Status_STATUS_COMPLETE {
					return fmt.Errorf("rollback answered %v (%v), want phase ROLLBACK, apply COMPLETE", r, err)
				}
				return h.deviceHolds(t, path(desc0), str("confirmed"))
			}},
		{name: "Get of origin gnmi-sidecar",
			expect: "the sidecar's own tree: configuration/state/last-index, a uint",
			answered: func(t *testing.T, h *transHarness) error {
				resp, err := h.sidecar.Get(rpcCtx(t), &gpb.GetRequest{Path: []*gpb.Path{withOrigin("gnmi-sidecar", "/configuration/state/last-index")}})
				if err != nil {
					return err
				}
				n := resp.GetNotification()
				if len(n) != 1 || len(n[0].GetUpdate()) != 1 || n[0].GetUpdate()[0].GetVal().GetUintVal() == 0 {
					return fmt.Errorf("got %v", resp)
				}
				return nil
			}},
	}
	return rows
}

// deviceHolds checks the device's value at p, read from it directly.
func (h *transHarness) deviceHolds(t *testing.T, p *gpb.Path, want *gpb.TypedValue) error {
	t.Helper()
	got, err := h.directGet(t, p)
	if err != nil {
		return err
	}
	if !proto.Equal(got, want) {
		return fmt.Errorf("the device holds %v at %s, want %v", got, pathText(p), want)
	}
	return nil
}

// protoDiff is nil when got equals want.
func protoDiff(want, got proto.Message) error {
	if !proto.Equal(want, got) {
		return fmt.Errorf("got %v\nwant %v", got, want)
	}
	return nil
}

// subscribeAll subscribes with req and reads until the stream ends; end is
// nil when it ended cleanly.
func subscribeAll(t *testing.T, c gpb.GNMIClient, req *gpb.SubscribeRequest) ([]*gpb.SubscribeResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(req); err != nil {
		return nil, err
	}
	var out []*gpb.SubscribeResponse
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("after %d responses: %v (%v)", len(out), err, status.Code(err))
		}
		out = append(out, resp)
	}
}

// valuesAre checks a Subscribe's responses: updates holding want's values
// in order, one per notification, and sync_response after the first
// syncAfter of them.
func valuesAre(got []*gpb.SubscribeResponse, want []*gpb.TypedValue, syncAfter int) error {
	var seen []*gpb.TypedValue
	syncAt := -1
	for _, r := range got {
		if r.GetSyncResponse() {
			syncAt = len(seen)
			continue
		}
		for _, u := range r.GetUpdate().GetUpdate() {
			seen = append(seen, u.GetVal())
		}
	}
	if len(seen) != len(want) || syncAt != syncAfter {
		return fmt.Errorf("got %v", got)
	}
	for k := range want {
		if !proto.Equal(seen[k], want[k]) {
			return fmt.Errorf("value %d is %v, want %v; got %v", k, seen[k], want[k], got)
		}
	}
	return nil
}
