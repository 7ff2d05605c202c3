package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// call is one request to a gNMI server; exactly one field is set.
type call struct {
	caps *gpb.CapabilityRequest
	get  *gpb.GetRequest
	set  *gpb.SetRequest
	// sub is sent in order on one Subscribe stream, which is then read
	// until it ends.
	sub []*gpb.SubscribeRequest
	// raw is sent as it is: what a Go client refuses to marshal.
	raw *rawCall
}

// rawCall is an already encoded request message of a gNMI method.
type rawCall struct {
	method string // Capabilities, Get, Set or Subscribe
	msg    []byte
}

// badCase is one malformed or hostile request and the error it must get.
type badCase struct {
	name string
	call call
	code codes.Code
	msg  []string // substrings of the message
	// device: the sidecar hands the request to the device, so its answer
	// must be the device's own (the same request is sent to the device
	// directly to compare).
	device bool
}

// TestBadInput sends malformed and hostile requests to every RPC of a
// running sidecar (gRPC on 127.0.0.1 in front of the simulated device):
// each fails with its gRPC code and a message saying what is wrong, and
// afterwards the journal and the device are exactly as they were.
func TestBadInput(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	proxyConn, deviceConn := sidecartest.Conn(t, r.Addr), sidecartest.Conn(t, r.Target)

	run := func(t *testing.T, cases []badCase) {
		t.Helper()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				lastIndex, setCount := r.LastIndex(t), r.Dev.SetCount()
				err := do(t, r.Client, proxyConn, tc.call)
				st := sidecartest.WantStatus(t, err, tc.code, tc.msg...)
				t.Logf("%v: %.300s", st.Code(), st.Message())
				if len(st.Message()) > maxMessage && !tc.device {
					t.Errorf("message of %d bytes, want at most %d: %.200q...", len(st.Message()), maxMessage, st.Message())
				}
				if tc.device {
					direct := status.Convert(do(t, sidecartest.Dial(t, r.Target), deviceConn, tc.call))
					if st.Code() != direct.Code() || st.Message() != direct.Message() {
						t.Errorf("the sidecar answered %v %q, the device itself %v %q", st.Code(), st.Message(), direct.Code(), direct.Message())
					}
				}
				if got := r.LastIndex(t); got != lastIndex {
					t.Errorf("journal's last index moved from %d to %d", lastIndex, got)
				}
				if got := r.Dev.SetCount(); got != setCount {
					t.Errorf("%d Sets reached the device", got-setCount)
				}
			})
		}
	}

	// An empty journal: nothing to roll back, nothing to introspect. The
	// agent's first re-push writes the journal: wait for it.
	sidecartest.Eventually(t, waitFor, "the first re-push", func() bool {
		c, err := r.Journal.Configuration(t.Context())
		return err == nil && c.GetStatus() == journal.StatusComplete
	})
	empty := snapshot(t, r)
	run(t, []badCase{{
		name: "Set/rollback of the newest change of an empty journal",
		call: call{set: sidecartest.RollbackRequest(t, 0)},
		code: codes.NotFound, msg: []string{"nothing to roll back", "no change is in effect"},
	}, {
		name: "Set/rollback of proposal 1 of an empty journal",
		call: call{set: sidecartest.RollbackRequest(t, 1)},
		code: codes.NotFound, msg: []string{"cannot roll back proposal 1", "does not exist"},
	}, {
		name: "Set/ASYNC rollback of the newest change of an empty journal",
		call: call{set: &gpb.SetRequest{Extension: []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, &sidecarpb.Request{
			Mode: sidecarpb.SetMode_SET_MODE_ASYNC, Rollback: &sidecarpb.Rollback{}})}}},
		code: codes.NotFound, msg: []string{"nothing to roll back"},
	}, {
		name: "Set/confirm with no commit-confirmed outstanding",
		call: call{set: sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{}))},
		code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"},
	}, {
		name: "Get/proposals of an empty journal",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: []*gpb.Path{sidecartest.Path(t, "/proposals")}}},
		code: codes.NotFound, msg: []string{"gnmi-sidecar:/proposals", "no such element"},
	}})
	if diff := cmp.Diff(empty, snapshot(t, r), protocmp.Transform()); diff != "" {
		t.Errorf("the empty journal or the device changed (-before +after):\n%s", diff)
	}

	// A journal with a change rolled back (1) and two in effect (2, 3).
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("rolled back")))
	r.MustSet(t, sidecartest.RollbackRequest(t, 1))
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("kept")))
	r.MustSet(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(1500)))
	before := snapshot(t, r)

	cases := slices.Concat(capabilitiesCases(t), getCases(t), setCases(t), subscribeCases(t))
	run(t, cases)

	if diff := cmp.Diff(before, snapshot(t, r), protocmp.Transform()); diff != "" {
		t.Errorf("the journal or the device changed (-before +after):\n%s", diff)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("kept"))
	// The sidecar still serves.
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("after")))
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("after"))
}

// maxMessage bounds the message of every refusal: a person reads it.
const maxMessage = 1024

// maxRecv is the sidecar's receive limit in these tests: gRPC's default,
// which is gnmi-sidecar serve's default --max-recv-msg-size.
const maxRecv = 4 << 20

// --- the cases, by RPC ---

// huge is a string that takes a request over the receive limit.
var huge = strings.Repeat("x", maxRecv+1024)

// badUTF8 stands for bytes that are not UTF-8 in a request marshalled by
// withBadUTF8; it has their length.
const badUTF8 = "@@NOT-UTF8@@"

// withBadUTF8 marshals m and replaces every badUTF8 in it with bytes that
// are not UTF-8: what a Go client refuses to send, and other clients may.
func withBadUTF8(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(badUTF8)) {
		t.Fatalf("%T does not contain %q", m, badUTF8)
	}
	return bytes.ReplaceAll(b, []byte(badUTF8), bytes.Repeat([]byte{0xff}, len(badUTF8)))
}

// garbage is not a protobuf message: a field of wire type 7.
var garbage = []byte{0x0f, 0xff, 0xff}

// deepPath has n elements.
func deepPath(n int) *gpb.Path {
	p := &gpb.Path{}
	for range n {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: "config"})
	}
	return p
}

// manyKeys is descPath with n keys on the interface element.
func manyKeys(t testing.TB, n int) *gpb.Path {
	p := sidecartest.Path(t, descPath)
	for k := range n {
		p.Elem[1].Key[fmt.Sprintf("key%06d", k)] = "value"
	}
	return p
}

func capabilitiesCases(t testing.TB) []badCase {
	return []badCase{{
		name: "Capabilities/beyond the receive limit",
		call: call{caps: &gpb.CapabilityRequest{Extension: []*gnmi_ext.Extension{sidecartest.RegisteredExtension(proxy.ExtensionID, []byte(huge))}}},
		code: codes.ResourceExhausted, msg: []string{"received message larger than max", fmt.Sprint(maxRecv)},
	}, {
		name: "Capabilities/not a protobuf message",
		call: call{raw: &rawCall{method: "Capabilities", msg: garbage}},
		code: codes.Internal, msg: []string{"unmarshal", "cannot parse invalid wire-format data"},
	}}
}

func getCases(t testing.TB) []badCase {
	path := func(s string) []*gpb.Path { return []*gpb.Path{sidecartest.Path(t, s)} }
	desc := path(descPath)
	history := func(h *gnmi_ext.History) []*gnmi_ext.Extension {
		return []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: h}}}
	}
	snapshot := &gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: time.Now().UnixNano()}}
	return []badCase{{
		name: "Get/beyond the receive limit",
		call: call{get: &gpb.GetRequest{Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: huge}}}}}},
		code: codes.ResourceExhausted, msg: []string{"received message larger than max", fmt.Sprint(maxRecv)},
	}, {
		name: "Get/not a protobuf message",
		call: call{raw: &rawCall{method: "Get", msg: garbage}},
		code: codes.Internal, msg: []string{"unmarshal", "cannot parse invalid wire-format data"},
	}, {
		name: "Get/invalid UTF-8 in an element name",
		call: call{raw: &rawCall{method: "Get", msg: withBadUTF8(t, &gpb.GetRequest{Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: badUTF8}}}}})}},
		code: codes.Internal, msg: []string{"unmarshal", "invalid UTF-8"},
	}, {
		name: "Get/invalid UTF-8 in a key of the introspection tree",
		call: call{raw: &rawCall{method: "Get", msg: withBadUTF8(t, &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(),
			Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "proposals"}, {Name: "proposal", Key: map[string]string{"index": badUTF8}}}}}})}},
		code: codes.Internal, msg: []string{"unmarshal", "invalid UTF-8"},
	}, {
		name: "Get/unknown encoding",
		call: call{get: &gpb.GetRequest{Path: desc, Encoding: 42}},
		code: codes.Unimplemented, msg: []string{"encoding 42 is not supported"}, device: true,
	}, {
		name: "Get/unknown encoding, introspection",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"), Encoding: 42}},
		code: codes.InvalidArgument, msg: []string{"unknown encoding 42"},
	}, {
		name: "Get/unknown data type",
		call: call{get: &gpb.GetRequest{Path: desc, Type: 9}},
		code: codes.InvalidArgument, msg: []string{"data type 9"}, device: true,
	}, {
		name: "Get/unknown data type, introspection",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"), Type: 9}},
		code: codes.InvalidArgument, msg: []string{"unknown Get data type 9"},
	}, {
		name: "Get/unknown data type with History",
		call: call{get: &gpb.GetRequest{Path: desc, Type: 9, Extension: history(snapshot)}},
		code: codes.InvalidArgument, msg: []string{"data type 9"},
	}, {
		name: "Get/unknown encoding with History",
		call: call{get: &gpb.GetRequest{Path: desc, Encoding: 42, Extension: history(snapshot)}},
		code: codes.InvalidArgument, msg: []string{"unknown encoding 42"},
	}, {
		name: "Get/a deep path",
		// Not deeper: the simulated device takes quadratic time on it.
		call: call{get: &gpb.GetRequest{Path: []*gpb.Path{deepPath(300)}}},
		code: codes.NotFound, device: true,
	}, {
		name: "Get/a deep path, introspection",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: []*gpb.Path{deepPath(100_000)}}},
		code: codes.NotFound, msg: []string{`no element "config"`},
	}, {
		name: "Get/a deep path with History",
		call: call{get: &gpb.GetRequest{Path: []*gpb.Path{deepPath(100_000)}, Extension: history(snapshot)}},
		code: codes.NotFound, msg: []string{"nothing was configured there"},
	}, {
		name: "Get/a huge key map, introspection",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "proposals"},
			{Name: "proposal", Key: manyKeys(t, 100_000).GetElem()[1].GetKey()}}}}}},
		code: codes.InvalidArgument, msg: []string{"proposal has one key, index"},
	}, {
		name: "Get/an index beyond uint64, introspection",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/proposals/proposal[index=18446744073709551616]")}},
		code: codes.InvalidArgument, msg: []string{"18446744073709551616", "is not a number"},
	}, {
		name: "Get/a target on a path, introspection",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: []*gpb.Path{{Target: "dev1", Elem: []*gpb.PathElem{{Name: "configuration"}}}}}},
		code: codes.InvalidArgument, msg: []string{`target "dev1"`, "prefix"},
	}, {
		name: "Get/a target on a path with History",
		call: call{get: &gpb.GetRequest{Path: []*gpb.Path{{Target: "dev1", Elem: desc[0].GetElem()}}, Extension: history(snapshot)}},
		code: codes.InvalidArgument, msg: []string{`target "dev1"`, "prefix"},
	}, {
		name: "Get/mixes the introspection origin with the device's",
		call: call{get: &gpb.GetRequest{Path: []*gpb.Path{sidecartest.IntrospectionPath(t, "/configuration"), desc[0]}}},
		code: codes.InvalidArgument, msg: []string{"mixes", "separate requests"},
	}, {
		name: "Get/prefix origin gnmi-sidecar, path origin openconfig",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: []*gpb.Path{{Origin: "openconfig", Elem: desc[0].GetElem()}}}},
		code: codes.InvalidArgument, msg: []string{`path origin "openconfig" contradicts prefix origin "gnmi-sidecar"`},
	}, {
		name: "Get/History and the introspection origin",
		call: call{get: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"), Extension: history(snapshot)}},
		code: codes.InvalidArgument, msg: []string{"History", "gnmi-sidecar"},
	}, {
		name: "Get/two History extensions",
		call: call{get: &gpb.GetRequest{Path: desc, Extension: append(history(snapshot), history(snapshot)...)}},
		code: codes.InvalidArgument, msg: []string{"more than one History extension"},
	}, {
		name: "Get/History snapshot_time before 1970",
		call: call{get: &gpb.GetRequest{Path: desc, Extension: history(&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: -1}})}},
		code: codes.InvalidArgument, msg: []string{"snapshot_time must be a positive time", "-1"},
	}, {
		name: "Get/History snapshot_time in the future",
		call: call{get: &gpb.GetRequest{Path: desc, Extension: history(&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: math.MaxInt64}})}},
		code: codes.Unimplemented, msg: []string{"in the future"},
	}, {
		name: "Get/History range",
		call: call{get: &gpb.GetRequest{Path: desc, Extension: history(&gnmi_ext.History{Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{Start: 1, End: 2}}})}},
		code: codes.InvalidArgument, msg: []string{"range applies to Subscribe"},
	}, {
		name: "Get/History without a time",
		call: call{get: &gpb.GetRequest{Path: desc, Extension: history(&gnmi_ext.History{})}},
		code: codes.InvalidArgument, msg: []string{"snapshot_time must be a positive time"},
	}}
}

func setCases(t testing.TB) []badCase {
	desc := func() *gpb.Path { return sidecartest.Path(t, descPath) }
	val := sidecartest.StringVal("x")
	update := func(p *gpb.Path, v *gpb.TypedValue) []*gpb.Update { return []*gpb.Update{{Path: p, Val: v}} }
	ext := func(req *sidecarpb.Request) []*gnmi_ext.Extension {
		return []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, req)}
	}
	commit := func(id string, d *durationpb.Duration) *gnmi_ext.Extension {
		return sidecartest.CommitExtension(id, &gnmi_ext.CommitRequest{RollbackDuration: d})
	}
	// An Extension carrying only a field this gnmi_ext does not know.
	unknownExt := &gnmi_ext.Extension{}
	unknownExt.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	return []badCase{{
		name: "Set/beyond the receive limit",
		call: call{set: &gpb.SetRequest{Update: update(desc(), sidecartest.StringVal(huge))}},
		code: codes.ResourceExhausted, msg: []string{"received message larger than max", fmt.Sprint(maxRecv)},
	}, {
		name: "Set/not a protobuf message",
		call: call{raw: &rawCall{method: "Set", msg: garbage}},
		code: codes.Internal, msg: []string{"unmarshal", "cannot parse invalid wire-format data"},
	}, {
		name: "Set/invalid UTF-8 in an element name",
		call: call{raw: &rawCall{method: "Set", msg: withBadUTF8(t, &gpb.SetRequest{Update: update(&gpb.Path{Elem: []*gpb.PathElem{{Name: badUTF8}}}, val)})}},
		code: codes.Internal, msg: []string{"unmarshal", "invalid UTF-8"},
	}, {
		name: "Set/invalid UTF-8 in a key value",
		call: call{raw: &rawCall{method: "Set", msg: withBadUTF8(t, &gpb.SetRequest{Update: update(&gpb.Path{Elem: []*gpb.PathElem{
			{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": badUTF8}}}}, val)})}},
		code: codes.Internal, msg: []string{"unmarshal", "invalid UTF-8"},
	}, {
		name: "Set/invalid UTF-8 in a string value",
		call: call{raw: &rawCall{method: "Set", msg: withBadUTF8(t, &gpb.SetRequest{Update: update(desc(), sidecartest.StringVal(badUTF8))})}},
		code: codes.Internal, msg: []string{"unmarshal", "invalid UTF-8"},
	}, {
		name: "Set/invalid UTF-8 in a JSON value",
		call: call{set: &gpb.SetRequest{Update: update(desc(), &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("\"\xff\xfe\"")}})}},
		code: codes.InvalidArgument, msg: []string{"update of " + descPath, "json_ietf_val", "UTF-8"},
	}, {
		name: "Set/a JSON value that is not JSON",
		call: call{set: &gpb.SetRequest{Replace: []*gpb.Update{{Path: desc(), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`{"a": `)}}}}}},
		code: codes.InvalidArgument, msg: []string{"replace of " + descPath, "json_val", "not valid JSON"},
	}, {
		// Without the device's YANG the sidecar does not know the keys of
		// a list no keyed path named yet: it could not roll the entries
		// back or re-push them exactly (docs/values.md).
		name: "Set/a JSON list whose keys the sidecar does not know",
		call: call{set: &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/acl/acl-sets"),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"acl-set":[{"name":"a","type":"ACL_IPV4","config":{"name":"a","type":"ACL_IPV4"}}]}`)}}}}}},
		code: codes.FailedPrecondition, msg: []string{"/acl/acl-sets/acl-set", "key names", "--yang"},
	}, {
		name: "Set/a list entry without its key",
		call: call{set: &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]/subinterfaces"),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"subinterface":[{"config":{"description":"x"}}]}`)}}}}}},
		code: codes.FailedPrecondition, msg: []string{"/interfaces/interface[name=eth0]/subinterfaces/subinterface", "--yang"},
	}, {
		name: "Set/a key leaf that contradicts the path",
		call: call{set: &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]"),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"name":"eth1"}`)}}}}}},
		code: codes.InvalidArgument, msg: []string{"/interfaces/interface[name=eth0]/name", "eth0"},
	}, {
		name: "Set/a deep path",
		call: call{set: &gpb.SetRequest{Update: update(deepPath(100_000), val)}},
		code: codes.InvalidArgument, msg: []string{"100000 elements", fmt.Sprint(journal.MaxPathElems)},
	}, {
		name: "Set/a deep prefix",
		call: call{set: &gpb.SetRequest{Prefix: deepPath(journal.MaxPathElems), Update: update(sidecartest.Path(t, "/description"), val)}},
		code: codes.InvalidArgument, msg: []string{fmt.Sprintf("%d elements", journal.MaxPathElems+1)},
	}, {
		name: "Set/a huge key map",
		call: call{set: &gpb.SetRequest{Update: update(manyKeys(t, 10_000), val)}},
		code: codes.InvalidArgument, msg: []string{"bytes", fmt.Sprint(journal.MaxPathBytes)},
	}, {
		name: "Set/a huge element name",
		call: call{set: &gpb.SetRequest{Delete: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: strings.Repeat("n", 70_000)}}}}}},
		code: codes.InvalidArgument, msg: []string{"bytes", fmt.Sprint(journal.MaxPathBytes)},
	}, {
		name: "Set/a target on a path",
		call: call{set: &gpb.SetRequest{Update: update(&gpb.Path{Target: "dev1", Elem: desc().GetElem()}, val)}},
		code: codes.InvalidArgument, msg: []string{`target "dev1"`, "prefix"},
	}, {
		name: "Set/prefix target and path target differ",
		call: call{set: &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1"}, Delete: []*gpb.Path{{Target: "dev2", Elem: desc().GetElem()}}}},
		code: codes.InvalidArgument, msg: []string{`target "dev2"`, "prefix"},
	}, {
		name: "Set/prefix origin gnmi-sidecar",
		call: call{set: &gpb.SetRequest{Prefix: sidecartest.IntrospectionPrefix(), Update: update(sidecartest.Path(t, "/configuration/state/last-index"), sidecartest.UintVal(1))}},
		code: codes.InvalidArgument, msg: []string{"gnmi-sidecar", "read-only"},
	}, {
		name: "Set/commit-confirmed and the sidecar's rollback",
		call: call{set: &gpb.SetRequest{Extension: append(ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{}}), commit("c1", nil))}},
		code: codes.InvalidArgument, msg: []string{"both a rollback and the commit-confirmed extension"},
	}, {
		name: "Set/two commit-confirmed extensions",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: []*gnmi_ext.Extension{commit("c1", nil), commit("c2", nil)}}},
		code: codes.InvalidArgument, msg: []string{"more than one commit-confirmed extension"},
	}, {
		name: "Set/commit-confirmed without an action",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{Id: "c1"}}}}}},
		code: codes.InvalidArgument, msg: []string{"commit-confirmed", "no action"},
	}, {
		name: "Set/commit-confirmed with a negative rollback_duration",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: []*gnmi_ext.Extension{commit("c1", durationpb.New(-time.Minute))}}},
		code: codes.InvalidArgument, msg: []string{"rollback_duration must be greater than 0"},
	}, {
		name: "Set/commit-confirmed confirm with operations",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: []*gnmi_ext.Extension{
			sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})}}},
		code: codes.InvalidArgument, msg: []string{"confirm must carry no operations"},
	}, {
		name: "Set/commit-confirmed commit without operations",
		call: call{set: sidecartest.BareRequest(commit("c1", nil))},
		code: codes.InvalidArgument, msg: []string{"commit-confirmed commit carries no operations"},
	}, {
		name: "Set/rollback of index 0 with operations",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{}})}},
		code: codes.InvalidArgument, msg: []string{"rollback", "must carry no operations"},
	}, {
		name: "Set/a tag and a rollback",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{}, Tag: &sidecarpb.Tag{Name: "x"}})}},
		code: codes.InvalidArgument, msg: []string{"both a rollback and a tag"},
	}, {
		name: "Set/a dry run of a commit-confirmed",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: append(ext(&sidecarpb.Request{DryRun: true}), commit("c1", nil))}},
		code: codes.InvalidArgument, msg: []string{"both the commit-confirmed extension and a dry run"},
	}, {
		name: "Set/a tag with operations",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "x"}})}},
		code: codes.InvalidArgument, msg: []string{"tag Set", "must carry no operations"},
	}, {
		name: "Set/a tag with a bad name",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "no spaces"}})}},
		code: codes.InvalidArgument, msg: []string{`tag name "no spaces"`, "letters, digits"},
	}, {
		name: "Set/a tag named by a number",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "42"}})}},
		code: codes.InvalidArgument, msg: []string{"is a number"},
	}, {
		name: "Set/deleting a tag that does not exist",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "nope", Delete: true}})}},
		code: codes.NotFound, msg: []string{`no tag "nope"`},
	}, {
		name: "Set/deleting a tag with an index",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "x", Index: proto.Uint64(1), Delete: true}})}},
		code: codes.InvalidArgument, msg: []string{"deleted by its name alone"},
	}, {
		name: "Set/a tag at a proposal that does not exist",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "x", Index: proto.Uint64(99)}})}},
		code: codes.NotFound, msg: []string{"proposal 99 does not exist"},
	}, {
		name: "Set/a rollback to an unknown tag",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{ToTag: "nope"}})}},
		code: codes.NotFound, msg: []string{`no tag "nope"`},
	}, {
		name: "Set/a rollback of a proposal and to a point",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: 2, ToTag: "x"}})}},
		code: codes.InvalidArgument, msg: []string{"one proposal (index) or a point"},
	}, {
		name: "Set/a rollback to a tag and to an index",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{ToIndex: proto.Uint64(1), ToTag: "x"}})}},
		code: codes.InvalidArgument, msg: []string{"not both"},
	}, {
		name: "Set/a comment too long",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: ext(&sidecarpb.Request{Comment: strings.Repeat("x", 1025)})}},
		code: codes.InvalidArgument, msg: []string{"comment is 1025 bytes long", "at most 1024"},
	}, {
		name: "Set/a comment with a newline",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: ext(&sidecarpb.Request{Comment: "a\nb"})}},
		code: codes.InvalidArgument, msg: []string{"control character U+000A", "one line"},
	}, {
		name: "Set/rollback of a proposal that does not exist",
		call: call{set: sidecartest.RollbackRequest(t, 99)},
		code: codes.NotFound, msg: []string{"cannot roll back proposal 99", "does not exist"},
	}, {
		name: "Set/rollback of the largest index",
		call: call{set: sidecartest.RollbackRequest(t, math.MaxUint64)},
		code: codes.NotFound, msg: []string{fmt.Sprint(uint64(math.MaxUint64)), "does not exist"},
	}, {
		name: "Set/rollback of a change already rolled back",
		call: call{set: sidecartest.RollbackRequest(t, 1)},
		code: codes.FailedPrecondition, msg: []string{"already rolled back"},
	}, {
		name: "Set/rollback of a change that is not the newest",
		call: call{set: sidecartest.RollbackRequest(t, 2)},
		code: codes.FailedPrecondition, msg: []string{"roll back proposal 3 first"},
	}, {
		name: "Set/the sidecar extension with an unknown mode and a rollback",
		call: call{set: &gpb.SetRequest{Extension: ext(&sidecarpb.Request{Mode: -1, Rollback: &sidecarpb.Rollback{}})}},
		code: codes.InvalidArgument, msg: []string{"unknown set mode -1"},
	}, {
		// TestSetBadInput's cases, as they were.
		name: "Set/a tag with an extension for the device",
		call: call{set: &gpb.SetRequest{Extension: append(ext(&sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "x"}}), sidecartest.RegisteredExtension(42, nil))}},
		code: codes.InvalidArgument, msg: []string{"cannot carry extensions for the device"},
	}, {
		name: "Set/garbage in the sidecar extension",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: []*gnmi_ext.Extension{sidecartest.RegisteredExtension(999, []byte{0xff, 0xff, 0xff})}}},
		code: codes.InvalidArgument, msg: []string{"id 999", "gnmisidecar.extension.v1.Request"},
	}, {
		name: "Set/two sidecar extensions",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: append(ext(&sidecarpb.Request{}), ext(sidecartest.AsyncMode())...)}},
		code: codes.InvalidArgument, msg: []string{"more than one sidecar extension"},
	}, {
		name: "Set/unknown set mode",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: ext(&sidecarpb.Request{Mode: 7})}},
		code: codes.InvalidArgument, msg: []string{"unknown set mode 7"},
	}, {
		name: "Set/commit-confirmed without an id",
		call: call{set: &gpb.SetRequest{Update: update(desc(), val), Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{
			Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{}}}}}}}},
		code: codes.InvalidArgument, msg: []string{"commit-confirmed", "id is required"},
	}, {
		name: "Set/a Set on the introspection origin",
		call: call{set: &gpb.SetRequest{Update: update(&gpb.Path{Origin: "gnmi-sidecar",
			Elem: []*gpb.PathElem{{Name: "configuration"}, {Name: "state"}, {Name: "last-index"}}}, val)}},
		code: codes.InvalidArgument, msg: []string{"gnmi-sidecar", "read-only"},
	}, {
		name: "Set/element without a name",
		call: call{set: &gpb.SetRequest{Update: update(&gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: ""}, {Name: "description"}}}, val)}},
		code: codes.InvalidArgument, msg: []string{"element without a name"},
	}, {
		name: "Set/wildcard element",
		call: call{set: &gpb.SetRequest{Update: update(sidecartest.Path(t, "/interfaces/*/config/description"), val)}},
		code: codes.InvalidArgument, msg: []string{"wildcard", "concrete"},
	}, {
		name: "Set/wildcard key in an update",
		call: call{set: &gpb.SetRequest{Update: update(sidecartest.Path(t, "/interfaces/interface[name=*]/config/description"), val)}},
		code: codes.InvalidArgument, msg: []string{"wildcard"},
	}, {
		name: "Set/a delete with the ... wildcard",
		call: call{set: &gpb.SetRequest{Delete: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "..."}}}}}},
		code: codes.InvalidArgument, msg: []string{`"..."`, "name the paths"},
	}, {
		name: "Set/wildcard in the prefix",
		call: call{set: &gpb.SetRequest{Prefix: sidecartest.Path(t, "/interfaces/interface[name=*]"), Update: update(sidecartest.Path(t, "config/description"), val)}},
		code: codes.InvalidArgument, msg: []string{"wildcard"},
	}, {
		name: "Set/deprecated path element field",
		call: call{set: &gpb.SetRequest{Delete: []*gpb.Path{{Element: []string{"interfaces", "interface", "eth0"}}}}},
		code: codes.InvalidArgument, msg: []string{"deprecated element field", "elem"},
	}, {
		name: "Set/deprecated Update.value",
		call: call{set: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc(),
			//lint:ignore SA1019 the deprecated field is what is under test
			Value: &gpb.Value{Value: []byte(`"x"`), Type: gpb.Encoding_JSON}}}}},
		code: codes.InvalidArgument, msg: []string{"deprecated value field", "val"},
	}, {
		name: "Set/update without val",
		call: call{set: &gpb.SetRequest{Update: []*gpb.Update{{Path: desc()}}}},
		code: codes.InvalidArgument, msg: []string{"update of " + descPath, "no value"},
	}, {
		name: "Set/replace with an empty TypedValue",
		call: call{set: &gpb.SetRequest{Replace: []*gpb.Update{{Path: desc(), Val: &gpb.TypedValue{}}}}},
		code: codes.InvalidArgument, msg: []string{"replace of " + descPath, "no value"},
	}, {
		name: "Set/update without a path",
		call: call{set: &gpb.SetRequest{Update: []*gpb.Update{{Val: val}}}},
		code: codes.InvalidArgument, msg: []string{"without a path"},
	}, {
		name: "Set/path origin contradicts prefix origin",
		call: call{set: &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig"}, Update: update(&gpb.Path{Origin: "cli", Elem: desc().GetElem()}, val)}},
		code: codes.InvalidArgument, msg: []string{`"cli"`, `"openconfig"`, "contradicts"},
	}}
}

func subscribeCases(t testing.TB) []badCase {
	list := func(l *gpb.SubscriptionList) *gpb.SubscribeRequest {
		return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: l}}
	}
	poll := &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}
	descSub := []*gpb.Subscription{{Path: sidecartest.Path(t, descPath)}}
	own := func(mode gpb.SubscriptionList_Mode, subs ...*gpb.Subscription) *gpb.SubscriptionList {
		return &gpb.SubscriptionList{Prefix: sidecartest.IntrospectionPrefix(), Mode: mode, Subscription: subs}
	}
	conf := &gpb.Subscription{Path: sidecartest.Path(t, "/configuration")}
	withHistory := func(l *gpb.SubscriptionList, h *gnmi_ext.History) *gpb.SubscribeRequest {
		req := list(l)
		req.Extension = []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: h}}}
		return req
	}
	timeRange := func(start, end int64) *gnmi_ext.History {
		return &gnmi_ext.History{Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{Start: start, End: end}}}
	}
	return []badCase{{
		name: "Subscribe/beyond the receive limit",
		call: call{sub: []*gpb.SubscribeRequest{list(&gpb.SubscriptionList{Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: huge}}}}}})}},
		code: codes.ResourceExhausted, msg: []string{"received message larger than max", fmt.Sprint(maxRecv)},
	}, {
		name: "Subscribe/not a protobuf message",
		call: call{raw: &rawCall{method: "Subscribe", msg: garbage}},
		code: codes.Internal, msg: []string{"unmarshal", "cannot parse invalid wire-format data"},
	}, {
		name: "Subscribe/invalid UTF-8 in a key",
		call: call{raw: &rawCall{method: "Subscribe", msg: withBadUTF8(t, list(&gpb.SubscriptionList{Subscription: []*gpb.Subscription{{Path: &gpb.Path{
			Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": badUTF8}}}}}}}))}},
		code: codes.Internal, msg: []string{"unmarshal", "invalid UTF-8"},
	}, {
		name: "Subscribe/no request in the first message",
		call: call{sub: []*gpb.SubscribeRequest{{}}},
		code: codes.InvalidArgument, msg: []string{"subscription list"}, device: true,
	}, {
		name: "Subscribe/a Poll first",
		call: call{sub: []*gpb.SubscribeRequest{poll}},
		code: codes.InvalidArgument, msg: []string{"subscription list"}, device: true,
	}, {
		name: "Subscribe/ONCE without subscriptions",
		call: call{sub: []*gpb.SubscribeRequest{list(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE})}},
		code: codes.InvalidArgument, msg: []string{"no subscriptions"}, device: true,
	}, {
		name: "Subscribe/ONCE without subscriptions, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_ONCE))}},
		code: codes.InvalidArgument, msg: []string{"no subscriptions"},
	}, {
		name: "Subscribe/STREAM with an unknown encoding",
		call: call{sub: []*gpb.SubscribeRequest{list(&gpb.SubscriptionList{Encoding: 42, Subscription: descSub})}},
		code: codes.Unimplemented, msg: []string{"encoding 42 is not supported"}, device: true,
	}, {
		name: "Subscribe/STREAM with an unknown encoding, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(&gpb.SubscriptionList{Prefix: sidecartest.IntrospectionPrefix(), Encoding: 42, Subscription: []*gpb.Subscription{conf}})}},
		code: codes.InvalidArgument, msg: []string{"unknown encoding 42"},
	}, {
		name: "Subscribe/unknown list mode",
		call: call{sub: []*gpb.SubscribeRequest{list(&gpb.SubscriptionList{Mode: 7, Subscription: descSub})}},
		code: codes.InvalidArgument, msg: []string{"mode 7"}, device: true,
	}, {
		name: "Subscribe/unknown list mode, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(7, conf))}},
		code: codes.InvalidArgument, msg: []string{"unknown subscription list mode 7"},
	}, {
		name: "Subscribe/STREAM with an unknown subscription mode, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: conf.GetPath(), Mode: 9}))}},
		code: codes.InvalidArgument, msg: []string{"unknown subscription mode 9"},
	}, {
		name: "Subscribe/STREAM SAMPLE below the minimum interval, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: conf.GetPath(), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: 1}))}},
		code: codes.InvalidArgument, msg: []string{"sample_interval", "below the minimum"},
	}, {
		name: "Subscribe/STREAM then a Poll, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_STREAM, conf)), poll}},
		code: codes.InvalidArgument, msg: []string{"Poll on a STREAM subscription"},
	}, {
		name: "Subscribe/POLL then a second subscription list",
		call: call{sub: []*gpb.SubscribeRequest{list(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_POLL, Subscription: descSub}), list(&gpb.SubscriptionList{Subscription: descSub})}},
		code: codes.InvalidArgument, msg: []string{"only Poll requests"}, device: true,
	}, {
		name: "Subscribe/POLL then a second subscription list, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_POLL, conf)), list(own(gpb.SubscriptionList_POLL, conf))}},
		code: codes.InvalidArgument, msg: []string{"one SubscriptionList, then only Polls"},
	}, {
		name: "Subscribe/a deep path, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_ONCE, &gpb.Subscription{Path: deepPath(100_000)}))}},
		code: codes.NotFound, msg: []string{`no element "config"`},
	}, {
		name: "Subscribe/a target on a path, introspection",
		call: call{sub: []*gpb.SubscribeRequest{list(own(gpb.SubscriptionList_ONCE, &gpb.Subscription{Path: &gpb.Path{Target: "dev1", Elem: conf.GetPath().GetElem()}}))}},
		code: codes.InvalidArgument, msg: []string{`target "dev1"`, "prefix"},
	}, {
		name: "Subscribe/History and the introspection origin",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(own(gpb.SubscriptionList_ONCE, conf), timeRange(1, 2))}},
		code: codes.InvalidArgument, msg: []string{"History", "gnmi-sidecar"},
	}, {
		name: "Subscribe/POLL with a History range",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_POLL, Subscription: descSub}, timeRange(1, 2))}},
		code: codes.InvalidArgument, msg: []string{"History range needs subscription mode STREAM (or ONCE)"},
	}, {
		name: "Subscribe/STREAM with a History snapshot_time",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Subscription: descSub},
			&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: 1}})}},
		code: codes.InvalidArgument, msg: []string{"snapshot_time needs subscription mode ONCE"},
	}, {
		name: "Subscribe/ONCE with a History range ending before it starts",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Subscription: descSub}, timeRange(2, 1))}},
		code: codes.InvalidArgument, msg: []string{"History range", "not after end"},
	}, {
		name: "Subscribe/ONCE with a History range starting in the future",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Subscription: descSub},
			timeRange(math.MaxInt64-1, math.MaxInt64))}},
		code: codes.Unimplemented, msg: []string{"in the future"},
	}, {
		name: "Subscribe/unknown list mode with History",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Mode: 7, Subscription: descSub}, timeRange(1, 2))}},
		code: codes.InvalidArgument, msg: []string{"unknown subscription list mode 7"},
	}, {
		name: "Subscribe/unknown encoding with History",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE, Encoding: 42, Subscription: descSub}, timeRange(1, 2))}},
		code: codes.InvalidArgument, msg: []string{"unknown encoding 42"},
	}, {
		name: "Subscribe/ONCE with a target on a path and History",
		call: call{sub: []*gpb.SubscribeRequest{withHistory(&gpb.SubscriptionList{Mode: gpb.SubscriptionList_ONCE,
			Subscription: []*gpb.Subscription{{Path: &gpb.Path{Target: "dev1", Elem: descSub[0].GetPath().GetElem()}}}}, timeRange(1, 2))}},
		code: codes.InvalidArgument, msg: []string{`target "dev1"`, "prefix"},
	}}
}

// --- sending ---

// do sends c through client (or conn, for raw calls) and returns the
// RPC's error; a Subscribe that ends without one returns nil.
func do(t testing.TB, client gpb.GNMIClient, conn *grpc.ClientConn, c call) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	var err error
	switch {
	case c.caps != nil:
		_, err = client.Capabilities(ctx, c.caps)
	case c.get != nil:
		_, err = client.Get(ctx, c.get)
	case c.set != nil:
		_, err = client.Set(ctx, c.set)
	case c.sub != nil:
		err = subscribeError(ctx, client, c.sub)
	case c.raw != nil:
		err = rawError(ctx, conn, c.raw)
	default:
		t.Fatal("empty call")
	}
	return err
}

// subscribeError sends reqs on a new Subscribe stream and reads it until it
// ends.
func subscribeError(ctx context.Context, client gpb.GNMIClient, reqs []*gpb.SubscribeRequest) error {
	stream, err := client.Subscribe(ctx)
	if err != nil {
		return err
	}
	for _, req := range reqs {
		if err := stream.Send(req); err != nil {
			break // the server ended the stream: Recv tells why
		}
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// rawCodec sends and receives messages as bytes, under the name of the
// protobuf codec so the server decodes them as usual.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// rawError sends c's bytes to its gNMI method and returns the RPC's error.
func rawError(ctx context.Context, conn *grpc.ClientConn, c *rawCall) error {
	method := "/gnmi.gNMI/" + c.method
	codec := grpc.ForceCodec(rawCodec{})
	if c.method != "Subscribe" {
		var reply []byte
		return conn.Invoke(ctx, method, c.msg, &reply, codec)
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, codec)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(c.msg); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	for {
		var reply []byte
		if err := stream.RecvMsg(&reply); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// --- the state that must not change ---

// state is what a refused request must leave as it was: the journal's
// records and values, and the device's configuration.
type state struct {
	Configuration *journal.Configuration
	Mastership    *journal.Mastership
	CommitConfirm *journal.CommitConfirm
	Proposals     []*journal.Proposal
	Values        configValues
	Device        map[string]*gpb.TypedValue
	DeviceSets    int64
}

// snapshot is what r's journal and device hold, once settled.
func snapshot(t testing.TB, r *sidecartest.Sidecar) state {
	t.Helper()
	r.Settle(t)
	ctx := t.Context()
	var s state
	var err error
	if s.Configuration, err = r.Journal.Configuration(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Mastership, err = r.Journal.Mastership(ctx); err != nil {
		t.Fatal(err)
	}
	if s.CommitConfirm, err = r.Journal.CommitConfirm(ctx); err != nil && !errors.Is(err, journal.ErrNotFound) {
		t.Fatal(err)
	}
	err = r.Journal.Proposals(ctx, 1, 0, func(p *journal.Proposal) error {
		s.Proposals = append(s.Proposals, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Values = journalValues(t, r)
	s.Device = sidecartest.DeviceLeaves(t, r.Dev)
	s.DeviceSets = r.Dev.SetCount()
	return s
}
