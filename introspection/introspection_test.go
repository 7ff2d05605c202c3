package introspection_test

// The introspection leafTree (origin gnmi-sidecar, docs/introspection.md)
// through a real sidecar: Get and Subscribe over gNMI.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// --- helpers ---

// proposalPath is the path string of a leaf of proposal i: rest is below
// proposals/proposal[index=i], with elems (for keys holding paths).
func proposalPath(i uint64, rest ...*gpb.PathElem) *gpb.Path {
	elems := []*gpb.PathElem{{Name: "proposals"}, {Name: "proposal", Key: map[string]string{"index": strconv.FormatUint(i, 10)}}}
	return &gpb.Path{Origin: proxy.IntrospectionOrigin, Elem: append(elems, rest...)}
}

// changeLeaf is the path of leaf name of the change of path p in proposal i.
func changeLeaf(i uint64, p, name string) *gpb.Path {
	return proposalPath(i, &gpb.PathElem{Name: "changes"},
		&gpb.PathElem{Name: "change", Key: map[string]string{"path": p}}, &gpb.PathElem{Name: "state"}, &gpb.PathElem{Name: name})
}

// key is the map key of a leaf path in the leaf maps below.
func leafKey(p *gpb.Path) string { return sidecartest.FullPath(nil, p) }

// leafTree is leaves by path (sidecartest.FullPath, without origin).
type leafTree map[string]*gpb.TypedValue

// apply applies a notification's deletes (each deletes its leaf) and
// updates to tr.
func (tr leafTree) apply(n *gpb.Notification) {
	for _, d := range n.GetDelete() {
		delete(tr, sidecartest.FullPath(n.GetPrefix(), d))
	}
	for _, u := range n.GetUpdate() {
		tr[sidecartest.FullPath(n.GetPrefix(), u.GetPath())] = u.GetVal()
	}
}

func treeOf(ns ...*gpb.Notification) leafTree {
	tr := leafTree{}
	for _, n := range ns {
		tr.apply(n)
	}
	return tr
}

func wantTree(t testing.TB, got, want leafTree) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("leaves (-want +got):\n%s", diff)
	}
}

// introGet Gets paths of origin gnmi-sidecar (strings, or *gpb.Path).
func introGet(t testing.TB, r *sidecartest.Sidecar, paths ...any) (*gpb.GetResponse, error) {
	t.Helper()
	req := &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Encoding: gpb.Encoding_PROTO}
	for _, p := range paths {
		switch p := p.(type) {
		case string:
			req.Path = append(req.Path, sidecartest.Path(t, p))
		case *gpb.Path:
			req.Path = append(req.Path, &gpb.Path{Elem: p.GetElem()})
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	return r.Client.Get(ctx, req)
}

// introLeaves Gets paths and returns the leaves, failing on an error.
func introLeaves(t testing.TB, r *sidecartest.Sidecar, paths ...any) leafTree {
	t.Helper()
	resp, err := introGet(t, r, paths...)
	if err != nil {
		t.Fatalf("Get %v: %v", paths, err)
	}
	return treeOf(resp.GetNotification()...)
}

func nanosTV(t *timestamppb.Timestamp) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: t.AsTime().UnixNano()}}
}

func boolTV(b bool) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: b}}
}

// sidecarSubscription is a SubscriptionList of origin gnmi-sidecar.
func sidecarSubscription(mode gpb.SubscriptionList_Mode, subs ...*gpb.Subscription) *gpb.SubscribeRequest {
	return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Prefix: sidecartest.IntrospectionPrefix(), Mode: mode, Encoding: gpb.Encoding_PROTO, Subscription: subs}}}
}

func onChangeSub(t testing.TB, p string) *gpb.Subscription {
	return &gpb.Subscription{Path: sidecartest.Path(t, p), Mode: gpb.SubscriptionMode_ON_CHANGE}
}

// follow applies the stream's notifications to tr until cond(tr) holds,
// failing if the stream ends first.
func followStream(t testing.TB, stream gpb.GNMI_SubscribeClient, tr leafTree, what string, cond func(leafTree) bool) {
	t.Helper()
	for !cond(tr) {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v (leaves: %v)", what, err, tr)
		}
		tr.apply(resp.GetUpdate())
	}
}

// untilSyncTree receives responses up to and including sync_response and
// returns the tree they build, deletes applied.
func untilSyncTree(t testing.TB, stream gpb.GNMI_SubscribeClient) leafTree {
	t.Helper()
	tr := leafTree{}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for sync_response: %v", err)
		}
		if resp.GetSyncResponse() {
			return tr
		}
		tr.apply(resp.GetUpdate())
	}
}

// --- Get ---

func TestIntrospectGet(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))) // 1
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"))) // 2
	r.MustSet(t, &gpb.SetRequest{Update: []*gpb.Update{                                // 3
		{Path: sidecartest.Path(t, mtuPath), Val: sidecartest.UintVal(9000)},
		{Path: sidecartest.Path(t, descPath), Val: sidecartest.StringVal("three")},
	}})
	r.MustSet(t, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, descPath)}}) // 4
	r.Settle(t)
	conf, err := r.Journal.Configuration(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st := r.Agent.Status()
	p2 := r.Proposal(t, 2).GetChange()
	if p2.GetAuthor() != "127.0.0.1" {
		t.Errorf("proposal 2's author is %q, want the client's address (no certificate, no username)", p2.GetAuthor())
	}
	state := func(i uint64, name string) string {
		return leafKey(proposalPath(i, &gpb.PathElem{Name: "state"}, &gpb.PathElem{Name: name}))
	}
	op := func(i uint64, seq int, name string) string {
		return leafKey(proposalPath(i, &gpb.PathElem{Name: "operations"},
			&gpb.PathElem{Name: "operation", Key: map[string]string{"seq": strconv.Itoa(seq)}}, &gpb.PathElem{Name: "state"}, &gpb.PathElem{Name: name}))
	}
	change := func(i uint64, p, name string) string { return leafKey(changeLeaf(i, p, name)) }
	allApplied := leafTree{}
	for i := uint64(1); i <= 4; i++ {
		allApplied[state(i, "apply-status")] = sidecartest.StringVal("COMPLETE")
	}
	deviceState := leafTree{
		"/device/state/address":   sidecartest.StringVal(r.Target),
		"/device/state/connected": boolTV(true),
		"/device/state/term":      sidecartest.UintVal(st.Term),
		"/device/state/repushing": boolTV(false),
		"/device/state/fenced":    boolTV(false),
	}
	if !st.LastRepush.IsZero() {
		deviceState["/device/state/last-repush-time"] = &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: st.LastRepush.UnixNano()}}
		deviceState["/device/state/last-repush-values"] = sidecartest.UintVal(uint64(st.LastRepushValues))
		deviceState["/device/state/last-repush-duration"] = &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: int64(st.LastRepushDuration)}}
		deviceState["/device/state/last-repush-device-duration"] = &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: int64(st.LastRepushDeviceDuration)}}
	}

	for _, tc := range []struct {
		name  string
		paths []any
		want  leafTree
	}{{
		name:  "configuration after four Sets",
		paths: []any{"/configuration/state"},
		want: leafTree{
			"/configuration/state/committed-index":    sidecartest.UintVal(4),
			"/configuration/state/committed-proposal": sidecartest.UintVal(4),
			"/configuration/state/applied-index":      sidecartest.UintVal(4),
			"/configuration/state/applied-proposal":   sidecartest.UintVal(4),
			"/configuration/state/applied-term":       sidecartest.UintVal(conf.GetApplied().GetTerm()),
			"/configuration/state/applied-target":     sidecartest.UintVal(conf.GetApplied().GetTarget()),
			"/configuration/state/status":             sidecartest.StringVal("COMPLETE"),
			"/configuration/state/first-index":        sidecartest.UintVal(1),
			"/configuration/state/last-index":         sidecartest.UintVal(4),
			"/configuration/state/out-of-sync":        sidecartest.UintVal(0),
			"/configuration/state/resolutions":        sidecartest.UintVal(0),
		},
	}, {
		name:  "device",
		paths: []any{"/device"},
		want:  deviceState,
	}, {
		name:  "one proposal's state",
		paths: []any{"/proposals/proposal[index=2]/state"},
		want: leafTree{
			state(2, "index"):         sidecartest.UintVal(2),
			state(2, "phase"):         sidecartest.StringVal("CHANGE"),
			state(2, "commit-status"): sidecartest.StringVal("COMPLETE"),
			state(2, "apply-status"):  sidecartest.StringVal("COMPLETE"),
			state(2, "proposed"):      nanosTV(p2.GetProposed()),
			state(2, "committed"):     nanosTV(p2.GetCommitted()),
			state(2, "apply-started"): nanosTV(p2.GetApplyStarted()),
			state(2, "applied"):       nanosTV(p2.GetApplied()),
			state(2, "operations"):    sidecartest.UintVal(1),
			state(2, "author"):        sidecartest.StringVal(p2.GetAuthor()),
		},
	}, {
		name:  "operations of a Set of two updates",
		paths: []any{"/proposals/proposal[index=3]/operations"},
		want: leafTree{
			op(3, 1, "kind"): sidecartest.StringVal("UPDATE"), op(3, 1, "path"): sidecartest.StringVal(mtuPath), op(3, 1, "value"): sidecartest.UintVal(9000),
			op(3, 2, "kind"): sidecartest.StringVal("UPDATE"), op(3, 2, "path"): sidecartest.StringVal(descPath), op(3, 2, "value"): sidecartest.StringVal("three"),
		},
	}, {
		name:  "changes: the value written and the one before",
		paths: []any{"/proposals/proposal[index=2]/changes"},
		want: leafTree{
			change(2, descPath, "path"):             sidecartest.StringVal(descPath),
			change(2, descPath, "deleted"):          boolTV(false),
			change(2, descPath, "value"):            sidecartest.StringVal("two"),
			change(2, descPath, "previous-index"):   sidecartest.UintVal(1),
			change(2, descPath, "previous-deleted"): boolTV(false),
			change(2, descPath, "previous-value"):   sidecartest.StringVal("one"),
		},
	}, {
		name:  "a delete: no value, the previous one kept",
		paths: []any{"/proposals/proposal[index=4]/operations", "/proposals/proposal[index=4]/changes"},
		want: leafTree{
			op(4, 1, "kind"):                        sidecartest.StringVal("DELETE"),
			op(4, 1, "path"):                        sidecartest.StringVal(descPath),
			change(4, descPath, "path"):             sidecartest.StringVal(descPath),
			change(4, descPath, "deleted"):          boolTV(true),
			change(4, descPath, "previous-index"):   sidecartest.UintVal(3),
			change(4, descPath, "previous-deleted"): boolTV(false),
			change(4, descPath, "previous-value"):   sidecartest.StringVal("three"),
		},
	}, {
		name:  "a change key selects one change",
		paths: []any{changeLeaf(3, mtuPath, "previous-deleted"), changeLeaf(1, descPath, "previous-deleted")},
		want: leafTree{
			change(3, mtuPath, "previous-deleted"):  boolTV(true),
			change(1, descPath, "previous-deleted"): boolTV(true),
		},
	}, {
		name: "the writers of the description, overwritten thrice",
		paths: []any{proposalPath(0, &gpb.PathElem{Name: "changes"},
			&gpb.PathElem{Name: "change", Key: map[string]string{"path": descPath}}, &gpb.PathElem{Name: "state"}, &gpb.PathElem{Name: "previous-index"})},
		want: nil, // filled below: proposal index 0 is replaced by *
	}, {
		name:  "wildcard key",
		paths: []any{"/proposals/proposal[index=*]/state/apply-status"},
		want:  allApplied,
	}, {
		name:  "omitted key",
		paths: []any{"/proposals/proposal/state/apply-status"},
		want:  allApplied,
	}, {
		name:  "any depth",
		paths: []any{"/.../apply-status"},
		want:  allApplied,
	}, {
		name:  "wildcard element",
		paths: []any{"/*/state/connected"},
		want:  leafTree{"/device/state/connected": boolTV(true)},
	}, {
		name:  "any depth under one proposal",
		paths: []any{"/proposals/proposal[index=4]/.../kind"},
		want:  leafTree{op(4, 1, "kind"): sidecartest.StringVal("DELETE")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				p := tc.paths[0].(*gpb.Path)
				p.Elem[1].Key["index"] = "*"
				tc.want = leafTree{
					change(1, descPath, "previous-index"): sidecartest.UintVal(0),
					change(2, descPath, "previous-index"): sidecartest.UintVal(1),
					change(3, descPath, "previous-index"): sidecartest.UintVal(2),
					change(4, descPath, "previous-index"): sidecartest.UintVal(3),
				}
			}
			wantTree(t, introLeaves(t, r, tc.paths...), tc.want)
		})
	}

	t.Run("all proposals", func(t *testing.T) {
		all := introLeaves(t, r, "/proposals")
		one := introLeaves(t, r, "/proposals/proposal[index=3]")
		if len(one) < 20 {
			t.Fatalf("proposal 3 has %d leaves: %v", len(one), one)
		}
		for k, v := range one {
			if !proto.Equal(all[k], v) {
				t.Errorf("/proposals has %s = %v, /proposals/proposal[index=3] has %v", k, all[k], v)
			}
		}
		if got := len(introLeaves(t, r, "/")); got <= len(all) {
			t.Errorf("the whole leafTree has %d leaves, /proposals alone %d", got, len(all))
		}
	})
}

func TestIntrospectGetRequestForms(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	get := func(t *testing.T, req *gpb.GetRequest) *gpb.GetResponse {
		t.Helper()
		resp, err := r.Client.Get(t.Context(), req)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return resp
	}

	t.Run("prefix with elements: paths relative to it", func(t *testing.T) {
		prefix := sidecartest.IntrospectionPath(t, "/proposals/proposal[index=1]")
		prefix.Target = "dev1"
		resp := get(t, &gpb.GetRequest{Prefix: prefix, Path: []*gpb.Path{sidecartest.Path(t, "state/index")}})
		want := &gpb.Notification{Prefix: prefix, Update: []*gpb.Update{{Path: sidecartest.Path(t, "state/index"), Val: sidecartest.UintVal(1)}}}
		if diff := cmp.Diff([]*gpb.Notification{want}, resp.GetNotification(), protocmp.Transform(),
			protocmp.IgnoreFields(&gpb.Notification{}, "timestamp")); diff != "" {
			t.Errorf("notifications (-want +got):\n%s", diff)
		}
		if ts := resp.GetNotification()[0].GetTimestamp(); time.Since(time.Unix(0, ts)) > time.Minute {
			t.Errorf("notification timestamp %d is not now", ts)
		}
	})
	t.Run("origin on the paths: one notification per path, origin on the updates", func(t *testing.T) {
		resp := get(t, &gpb.GetRequest{Path: []*gpb.Path{
			sidecartest.IntrospectionPath(t, "/configuration/state/last-index"), sidecartest.IntrospectionPath(t, "/device/state/connected")}})
		want := []*gpb.Notification{
			{Update: []*gpb.Update{{Path: sidecartest.IntrospectionPath(t, "/configuration/state/last-index"), Val: sidecartest.UintVal(1)}}},
			{Update: []*gpb.Update{{Path: sidecartest.IntrospectionPath(t, "/device/state/connected"), Val: boolTV(true)}}},
		}
		if diff := cmp.Diff(want, resp.GetNotification(), protocmp.Transform(),
			protocmp.IgnoreFields(&gpb.Notification{}, "timestamp")); diff != "" {
			t.Errorf("notifications (-want +got):\n%s", diff)
		}
	})
	t.Run("prefix only", func(t *testing.T) {
		resp := get(t, &gpb.GetRequest{Prefix: sidecartest.IntrospectionPath(t, "/configuration/state/last-index")})
		wantTree(t, treeOf(resp.GetNotification()...), leafTree{"/configuration/state/last-index": sidecartest.UintVal(1)})
	})
	for _, enc := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_ASCII, gpb.Encoding_PROTO} {
		t.Run("encoding "+enc.String(), func(t *testing.T) {
			resp := get(t, &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Encoding: enc,
				Path: []*gpb.Path{sidecartest.Path(t, "/configuration/state/last-index")}})
			wantTree(t, treeOf(resp.GetNotification()...), leafTree{"/configuration/state/last-index": sidecartest.UintVal(1)})
		})
	}
	for _, dt := range []gpb.GetRequest_DataType{gpb.GetRequest_ALL, gpb.GetRequest_STATE, gpb.GetRequest_OPERATIONAL} {
		t.Run("type "+dt.String(), func(t *testing.T) {
			resp := get(t, &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Type: dt,
				Path: []*gpb.Path{sidecartest.Path(t, "/configuration/state/last-index")}})
			wantTree(t, treeOf(resp.GetNotification()...), leafTree{"/configuration/state/last-index": sidecartest.UintVal(1)})
		})
	}
	t.Run("type CONFIG: empty notifications", func(t *testing.T) {
		resp := get(t, &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Type: gpb.GetRequest_CONFIG,
			Path: []*gpb.Path{sidecartest.Path(t, "/configuration"), sidecartest.Path(t, "/proposals/proposal[index=99]")}})
		if n := resp.GetNotification(); len(n) != 2 || len(n[0].GetUpdate())+len(n[1].GetUpdate()) != 0 {
			t.Errorf("CONFIG Get: %v, want two empty notifications", n)
		}
	})
}

func TestIntrospectGetErrors(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	for range 3 {
		r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("x")))
	}
	path := func(s string) []*gpb.Path { return []*gpb.Path{sidecartest.Path(t, s)} }
	for _, tc := range []struct {
		name string
		req  *gpb.GetRequest
		code codes.Code
		msg  []string
	}{{
		name: "unknown top-level element",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/journal/state")},
		code: codes.NotFound, msg: []string{`no element "journal"`, "configuration, device, commit-confirm, out-of-sync, resolutions, tags, tag-deletions, drift, diff, proposals"},
	}, {
		name: "unknown element deeper",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/proposals/proposal[index=1]/stat")},
		code: codes.NotFound, msg: []string{`no element "stat" under /proposals/proposal[index=1]`},
	}, {
		name: "proposal not kept",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/proposals/proposal[index=99]")},
		code: codes.NotFound, msg: []string{"gnmi-sidecar:/proposals/proposal[index=99]: no such proposal (kept: 1-3)"},
	}, {
		name: "absent leaf",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration/state/rolling-back")},
		code: codes.NotFound, msg: []string{"gnmi-sidecar:/configuration/state/rolling-back: no such element"},
	}, {
		name: "no commit-confirmed outstanding",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/commit-confirm")},
		code: codes.NotFound, msg: []string{"gnmi-sidecar:/commit-confirm: no such element"},
	}, {
		name: "one path of two matches nothing",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: append(path("/configuration"), path("/proposals/proposal[index=7]")...)},
		code: codes.NotFound, msg: []string{"index=7", "kept: 1-3"},
	}, {
		name: "below a leaf",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration/state/last-index/value")},
		code: codes.NotFound, msg: []string{"last-index is a leaf"},
	}, {
		name: "non-numeric index",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/proposals/proposal[index=last]")},
		code: codes.InvalidArgument, msg: []string{`key index="last" is not a number`},
	}, {
		name: "wrong key",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/proposals/proposal[id=1]")},
		code: codes.InvalidArgument, msg: []string{"proposal has one key, index"},
	}, {
		name: "wildcard prefix",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPath(t, "/proposals/proposal[index=*]"), Path: path("state")},
		code: codes.InvalidArgument, msg: []string{"prefix", "wildcard"},
	}, {
		name: "list without its key in the prefix",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPath(t, "/proposals/proposal"), Path: path("state")},
		code: codes.InvalidArgument, msg: []string{"prefix gnmi-sidecar:/proposals/proposal names list proposal without its key"},
	}, {
		name: "encoding BYTES",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"), Encoding: gpb.Encoding_BYTES},
		code: codes.Unimplemented, msg: []string{"BYTES"},
	}, {
		name: "encoding out of range",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"), Encoding: 42},
		code: codes.InvalidArgument, msg: []string{"unknown encoding 42"},
	}, {
		name: "type out of range",
		req:  &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"), Type: 9},
		code: codes.InvalidArgument, msg: []string{"unknown Get data type 9"},
	}, {
		name: "an extension",
		req: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"),
			Extension: []*gnmi_ext.Extension{sidecartest.RegisteredExtension(proxy.ExtensionID, nil)}},
		code: codes.InvalidArgument, msg: []string{"takes no extensions"},
	}, {
		name: "the History extension",
		req: &gpb.GetRequest{Prefix: sidecartest.IntrospectionPrefix(), Path: path("/configuration"),
			Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}}},
		code: codes.InvalidArgument, msg: []string{"History"},
	}, {
		name: "mixed origins",
		req:  &gpb.GetRequest{Path: []*gpb.Path{sidecartest.IntrospectionPath(t, "/configuration"), sidecartest.Path(t, descPath)}},
		code: codes.InvalidArgument, msg: []string{"mixes"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Client.Get(t.Context(), tc.req)
			sidecartest.WantStatus(t, err, tc.code, tc.msg...)
		})
	}
}

func TestIntrospectProposalOutcomes(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("kept"))) // 1
	_, err := r.Set(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.StringVal("jumbo")))
	st := sidecartest.WantStatus(t, err, codes.InvalidArgument)                        // 2: the device rejects it
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("new"))) // 3
	r.MustSet(t, sidecartest.RollbackRequest(t, 0))                                    // of 3

	stateOf := func(i uint64) leafTree {
		tr := leafTree{}
		prefix := leafKey(proposalPath(i, &gpb.PathElem{Name: "state"})) + "/"
		for k, v := range introLeaves(t, r, proposalPath(i, &gpb.PathElem{Name: "state"})) {
			tr[k[len(prefix):]] = v
		}
		return tr
	}
	t.Run("failed", func(t *testing.T) {
		got := stateOf(2)
		for name, want := range map[string]*gpb.TypedValue{
			"apply-status":  sidecartest.StringVal("FAILED"),
			"error-code":    sidecartest.StringVal("INVALID_ARGUMENT"),
			"error-message": sidecartest.StringVal(st.Message()),
		} {
			if !proto.Equal(got[name], want) {
				t.Errorf("proposal 2 %s = %v, want %v", name, got[name], want)
			}
		}
		if _, ok := got["rollback-index"]; ok {
			t.Errorf("proposal 2 has rollback leaves: %v", got)
		}
	})
	t.Run("rolled back", func(t *testing.T) {
		got := stateOf(3)
		rb := r.Proposal(t, 3).GetRollback()
		for name, want := range map[string]*gpb.TypedValue{
			"phase":                  sidecartest.StringVal("ROLLBACK"),
			"apply-status":           sidecartest.StringVal("COMPLETE"),
			"rollback-index":         sidecartest.UintVal(1),
			"rollback-commit-status": sidecartest.StringVal("COMPLETE"),
			"rollback-apply-status":  sidecartest.StringVal("COMPLETE"),
			"rollback-proposed":      nanosTV(rb.GetProposed()),
			"rollback-committed":     nanosTV(rb.GetCommitted()),
			"rollback-apply-started": nanosTV(rb.GetApplyStarted()),
			"rollback-applied":       nanosTV(rb.GetApplied()),
		} {
			if !proto.Equal(got[name], want) {
				t.Errorf("proposal 3 %s = %v, want %v", name, got[name], want)
			}
		}
		wantTree(t, introLeaves(t, r, "/configuration/state/committed-index", "/configuration/state/applied-index"), leafTree{
			"/configuration/state/committed-index": sidecartest.UintVal(1),
			"/configuration/state/applied-index":   sidecartest.UintVal(1),
		})
	})
}

// --- Subscribe ---

func TestIntrospectSubscribeOnce(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two")))
	req := sidecarSubscription(gpb.SubscriptionList_ONCE,
		&gpb.Subscription{Path: sidecartest.Path(t, "/configuration/state/last-index")},
		&gpb.Subscription{Path: sidecartest.Path(t, "/proposals/proposal/state/apply-status")})
	got := sidecartest.SubscribeOnce(t, r.Client, req)
	if n := len(got); n < 2 || !got[n-1].GetSyncResponse() {
		t.Fatalf("ONCE got %v, want updates then sync_response", got)
	}
	var ns []*gpb.Notification
	for _, resp := range got[:len(got)-1] {
		if resp.GetUpdate() == nil {
			t.Fatalf("ONCE got %v before sync_response", resp)
		}
		ns = append(ns, resp.GetUpdate())
	}
	wantTree(t, treeOf(ns...), leafTree{
		"/configuration/state/last-index":                 sidecartest.UintVal(2),
		"/proposals/proposal[index=1]/state/apply-status": sidecartest.StringVal("COMPLETE"),
		"/proposals/proposal[index=2]/state/apply-status": sidecartest.StringVal("COMPLETE"),
	})

	req.GetSubscribe().UpdatesOnly = true
	if got := sidecartest.SubscribeOnce(t, r.Client, req); len(got) != 1 || !got[0].GetSyncResponse() {
		t.Errorf("ONCE updates_only got %v, want only sync_response", got)
	}
}

func TestIntrospectSubscribeOnChange(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	// Connected comes with the session, its term with the journal's
	// transition that follows: the first snapshot should hold both.
	sidecartest.Eventually(t, waitFor, "the agent's session to have a term", func() bool { return r.Agent.Status().Term != 0 })
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_STREAM,
		onChangeSub(t, "/proposals/proposal/state/apply-status"),
		&gpb.Subscription{Path: sidecartest.Path(t, "/device/state"), Mode: gpb.SubscriptionMode_TARGET_DEFINED}))
	tr := untilSyncTree(t, stream)
	if !proto.Equal(tr["/device/state/connected"], boolTV(true)) || tr["/device/state/term"] == nil {
		t.Fatalf("initial leaves %v, want device/state/connected true and a term", tr)
	}
	for k := range tr {
		if !strings.HasPrefix(k, "/device/state/") {
			t.Errorf("initial leaf %s: want only device/state (no proposal yet)", k)
		}
	}

	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	const applyStatus = "/proposals/proposal[index=1]/state/apply-status"
	followStream(t, stream, tr, "proposal 1's apply-status COMPLETE", func(tr leafTree) bool {
		return proto.Equal(tr[applyStatus], sidecartest.StringVal("COMPLETE"))
	})

	r.Dev.Stop()
	followStream(t, stream, tr, "device/state/connected false and term deleted", func(tr leafTree) bool {
		_, term := tr["/device/state/term"]
		return proto.Equal(tr["/device/state/connected"], boolTV(false)) && !term
	})
}

func TestIntrospectSubscribeUpdatesOnly(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	req := sidecarSubscription(gpb.SubscriptionList_STREAM, onChangeSub(t, "/proposals/proposal/state/apply-status"))
	req.GetSubscribe().UpdatesOnly = true
	stream := r.Subscribe(t, ctx, req)
	if tr := untilSyncTree(t, stream); len(tr) != 0 {
		t.Fatalf("updates_only: %v before sync_response, want nothing", tr)
	}
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two")))
	tr := leafTree{}
	followStream(t, stream, tr, "proposal 2 applied", func(tr leafTree) bool {
		return proto.Equal(tr["/proposals/proposal[index=2]/state/apply-status"], sidecartest.StringVal("COMPLETE"))
	})
	if _, ok := tr["/proposals/proposal[index=1]/state/apply-status"]; ok {
		t.Errorf("updates_only sent proposal 1, which did not change: %v", tr)
	}
}

func TestIntrospectSubscribeRetentionDeletes(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Retain: 2})
	for range 3 {
		r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("x")))
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_STREAM, onChangeSub(t, "/proposals/proposal/state/index")))
	tr := untilSyncTree(t, stream)
	if _, err := r.Journal.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Retention does not wake the agent: the subscription's resync finds it.
	followStream(t, stream, tr, "proposal 1 deleted", func(tr leafTree) bool {
		_, ok := tr["/proposals/proposal[index=1]/state/index"]
		return !ok
	})
	wantTree(t, tr, leafTree{
		"/proposals/proposal[index=2]/state/index": sidecartest.UintVal(2),
		"/proposals/proposal[index=3]/state/index": sidecartest.UintVal(3),
	})
}

func TestIntrospectSubscribePoll(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_POLL,
		&gpb.Subscription{Path: sidecartest.Path(t, "/configuration/state/last-index")}))
	wantTree(t, untilSyncTree(t, stream), leafTree{"/configuration/state/last-index": sidecartest.UintVal(0)})

	for i := uint64(1); i <= 2; i++ {
		r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal(fmt.Sprint(i))))
		if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
			t.Fatalf("sending Poll: %v", err)
		}
		wantTree(t, untilSyncTree(t, stream), leafTree{"/configuration/state/last-index": sidecartest.UintVal(i)})
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("after CloseSend, Recv = %v, want EOF", err)
	}
}

func TestIntrospectSubscribeSample(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	const interval = 100 * time.Millisecond
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_STREAM,
		&gpb.Subscription{Path: sidecartest.Path(t, "/configuration/state/last-index"), Mode: gpb.SubscriptionMode_SAMPLE,
			SampleInterval: uint64(interval), SuppressRedundant: true},
		&gpb.Subscription{Path: sidecartest.Path(t, "/device/state/connected"), Mode: gpb.SubscriptionMode_SAMPLE,
			SampleInterval: uint64(interval)}))
	wantTree(t, untilSyncTree(t, stream), leafTree{
		"/configuration/state/last-index": sidecartest.UintVal(0),
		"/device/state/connected":         boolTV(true),
	})

	// Without suppress_redundant, every sample is sent; with it, an
	// unchanged leaf is not (both groups sample at the same interval).
	for samples := 0; samples < 3; {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		tr := treeOf(resp.GetUpdate())
		if _, ok := tr["/configuration/state/last-index"]; ok {
			t.Fatalf("suppress_redundant: last-index sent again unchanged: %v", resp)
		}
		if proto.Equal(tr["/device/state/connected"], boolTV(true)) {
			samples++
		}
	}

	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	followStream(t, stream, leafTree{}, "last-index 1", func(tr leafTree) bool {
		return proto.Equal(tr["/configuration/state/last-index"], sidecartest.UintVal(1))
	})
}

func TestIntrospectSubscribeDrain(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_STREAM, onChangeSub(t, "/configuration")))
	untilSyncTree(t, stream)
	r.Proxy.Drain()
	for {
		if _, err := stream.Recv(); err != nil {
			sidecartest.WantStatus(t, err, codes.Unavailable, "the sidecar is shutting down")
			return
		}
	}
}

func TestIntrospectSubscribeErrors(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	sub := func(p string) *gpb.Subscription { return &gpb.Subscription{Path: sidecartest.Path(t, p)} }
	with := func(req *gpb.SubscribeRequest, edit func(*gpb.SubscriptionList)) *gpb.SubscribeRequest {
		edit(req.GetSubscribe())
		return req
	}
	poll := &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}
	for _, tc := range []struct {
		name string
		reqs []*gpb.SubscribeRequest // the first, then more after sync_response
		code codes.Code
		msg  []string
	}{{
		name: "list mode out of range",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(7, sub("/configuration"))},
		code: codes.InvalidArgument, msg: []string{"unknown subscription list mode 7"},
	}, {
		name: "subscription mode out of range",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_STREAM,
			&gpb.Subscription{Path: sidecartest.Path(t, "/configuration"), Mode: 9})},
		code: codes.InvalidArgument, msg: []string{"unknown subscription mode 9"},
	}, {
		name: "encoding out of range",
		reqs: []*gpb.SubscribeRequest{with(sidecarSubscription(gpb.SubscriptionList_ONCE, sub("/configuration")),
			func(l *gpb.SubscriptionList) { l.Encoding = 42 })},
		code: codes.InvalidArgument, msg: []string{"unknown encoding 42"},
	}, {
		name: "encoding BYTES",
		reqs: []*gpb.SubscribeRequest{with(sidecarSubscription(gpb.SubscriptionList_ONCE, sub("/configuration")),
			func(l *gpb.SubscriptionList) { l.Encoding = gpb.Encoding_BYTES })},
		code: codes.Unimplemented, msg: []string{"BYTES"},
	}, {
		name: "sample interval too short",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_STREAM,
			&gpb.Subscription{Path: sidecartest.Path(t, "/configuration"), Mode: gpb.SubscriptionMode_SAMPLE, SampleInterval: uint64(10 * time.Millisecond)})},
		code: codes.InvalidArgument, msg: []string{"sample_interval 10ms is below the minimum, 100ms"},
	}, {
		name: "no subscriptions",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_ONCE)},
		code: codes.InvalidArgument, msg: []string{"no subscriptions"},
	}, {
		name: "unknown top-level element",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_ONCE, sub("/agent"))},
		code: codes.NotFound, msg: []string{`no element "agent"`},
	}, {
		name: "non-numeric index",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_STREAM, sub("/proposals/proposal[index=x]"))},
		code: codes.InvalidArgument, msg: []string{"not a number"},
	}, {
		name: "an extension",
		reqs: []*gpb.SubscribeRequest{func() *gpb.SubscribeRequest {
			req := sidecarSubscription(gpb.SubscriptionList_ONCE, sub("/configuration"))
			req.Extension = []*gnmi_ext.Extension{sidecartest.RegisteredExtension(proxy.ExtensionID, nil)}
			return req
		}()},
		code: codes.InvalidArgument, msg: []string{"takes no extensions"},
	}, {
		name: "Poll on a STREAM subscription",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_STREAM, sub("/configuration")), poll},
		code: codes.InvalidArgument, msg: []string{"Poll on a STREAM subscription"},
	}, {
		name: "a second SubscriptionList",
		reqs: []*gpb.SubscribeRequest{sidecarSubscription(gpb.SubscriptionList_POLL, sub("/configuration")),
			sidecarSubscription(gpb.SubscriptionList_POLL, sub("/device"))},
		code: codes.InvalidArgument, msg: []string{"one SubscriptionList"},
	}, {
		name: "mixed origins",
		reqs: []*gpb.SubscribeRequest{{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
			Subscription: []*gpb.Subscription{{Path: sidecartest.IntrospectionPath(t, "/configuration")}, sub(descPath)}}}}},
		code: codes.InvalidArgument, msg: []string{"mixes"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), waitFor)
			defer cancel()
			stream := r.Subscribe(t, ctx, tc.reqs[0])
			if len(tc.reqs) > 1 {
				untilSyncTree(t, stream)
				for _, req := range tc.reqs[1:] {
					if err := stream.Send(req); err != nil && err != io.EOF {
						t.Fatal(err)
					}
				}
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					sidecartest.WantStatus(t, err, tc.code, tc.msg...)
					return
				}
				if len(tc.reqs) == 1 {
					t.Fatalf("got %v, want %v", resp, tc.code)
				}
			}
		})
	}
}

func TestIntrospectSubscribeCommitConfirm(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream := r.Subscribe(t, ctx, sidecarSubscription(gpb.SubscriptionList_STREAM, onChangeSub(t, "/commit-confirm")))
	tr := untilSyncTree(t, stream)
	if len(tr) != 0 {
		t.Fatalf("commit-confirm has leaves %v with none outstanding", tr)
	}

	commit := func(action any) *gnmi_ext.Extension {
		c := &gnmi_ext.Commit{Id: "c1"}
		switch a := action.(type) {
		case *gnmi_ext.CommitRequest:
			c.Action = &gnmi_ext.Commit_Commit{Commit: a}
		case *gnmi_ext.CommitConfirm:
			c.Action = &gnmi_ext.Commit_Confirm{Confirm: a}
		}
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
	}
	_, err := r.Set(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("tentative"),
		commit(&gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(10 * time.Minute)})))
	if err != nil {
		t.Fatalf("commit-confirmed Set: %v", err)
	}
	rec, err := r.Journal.CommitConfirm(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := leafTree{
		"/commit-confirm/state/id":        sidecartest.StringVal("c1"),
		"/commit-confirm/state/proposal":  sidecartest.UintVal(1),
		"/commit-confirm/state/started":   nanosTV(rec.GetStarted()),
		"/commit-confirm/state/deadline":  nanosTV(rec.GetDeadline()),
		"/commit-confirm/state/cancelled": boolTV(false),
		"/commit-confirm/state/author":    sidecartest.StringVal(rec.GetAuthor()),
	}
	followStream(t, stream, tr, "the commit-confirmed's leaves", func(tr leafTree) bool {
		return cmp.Equal(want, tr, protocmp.Transform())
	})

	r.MustSet(t, &gpb.SetRequest{Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.CommitConfirm{})}})
	followStream(t, stream, tr, "the commit-confirmed's leaves deleted", func(tr leafTree) bool { return len(tr) == 0 })
}
