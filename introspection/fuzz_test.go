package introspection

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

// FuzzGet decodes a GetRequest from the fuzzer's bytes and, when the
// proxy would route it to the tree (origin gnmi-sidecar, no path target),
// sends it to a Tree over a journal with changes, a rollback and an
// outstanding commit-confirmed. Nothing panics; an error is a gRPC status
// with a code a client can act on; the answer holds, for each path,
// exactly the leaves of the whole tree the path selects.
func FuzzGet(f *testing.F) {
	tr := fuzzTree(f)
	all, err := tr.Get(context.Background(), &gpb.GetRequest{Prefix: &gpb.Path{Origin: Origin}})
	if err != nil {
		f.Fatal(err)
	}
	tree := map[string][]*gpb.PathElem{} // the whole tree's leaves by elemsString
	for _, u := range all.GetNotification()[0].GetUpdate() {
		tree[elemsString(u.GetPath().GetElem())] = u.GetPath().GetElem()
	}
	own := &gpb.Path{Origin: Origin}
	for _, req := range []*gpb.GetRequest{
		{Prefix: own},
		{Prefix: own, Path: []*gpb.Path{fixture.Path(f, "/proposals/proposal[index=02]/state"), fixture.Path(f, "/.../apply-status")}},
		{Path: []*gpb.Path{{Origin: Origin, Elem: fixture.Path(f, "/proposals/*/changes/change[path=*]").GetElem()}}},
		{Prefix: &gpb.Path{Origin: Origin, Elem: proposalElems(1)}, Path: []*gpb.Path{fixture.Path(f, "/operations")}, Type: gpb.GetRequest_STATE},
		{Prefix: own, Path: []*gpb.Path{fixture.Path(f, "/configuration/state/nosuch")}},
		{Prefix: own, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF},
		{Prefix: own, Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}}},
	} {
		f.Add(fixture.Marshal(f, req))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &gpb.GetRequest{}
		if proto.Unmarshal(data, req) != nil || !routedHere(req.GetPrefix(), req.GetPath()) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := tr.Get(ctx, req)
		checkIntrospectionGet(t, req, resp, err, tree)
	})
}

// routedHere reports whether the proxy hands a request with prefix and
// paths to the tree: origin gnmi-sidecar on the prefix, or on every path,
// and no path with a target.
func routedHere(prefix *gpb.Path, paths []*gpb.Path) bool {
	for _, p := range paths {
		if p.GetTarget() != "" {
			return false
		}
	}
	if prefix.GetOrigin() == Origin {
		return !slices.ContainsFunc(paths, func(p *gpb.Path) bool { return p.GetOrigin() != "" && p.GetOrigin() != Origin })
	}
	return len(paths) > 0 && !slices.ContainsFunc(paths, func(p *gpb.Path) bool { return p.GetOrigin() != Origin })
}

// checkReadError checks that err is a status a client can act on.
func checkReadError(t *testing.T, err error) {
	t.Helper()
	fixture.WantStatusIn(t, err, codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.OutOfRange)
}

// checkIntrospectionGet checks the answer (resp or err) to a Get: each
// notification holds exactly the leaves of tree its request path selects,
// and a path that is valid is NotFound only if it selects none.
func checkIntrospectionGet(t *testing.T, req *gpb.GetRequest, resp *gpb.GetResponse, err error, tree map[string][]*gpb.PathElem) {
	t.Helper()
	patterns, patternErr := requestPatterns(req.GetPrefix(), req.GetPath())
	selected := func(p treePattern) map[string]bool {
		out := map[string]bool{}
		for key, elems := range tree {
			if req.GetType() != gpb.GetRequest_CONFIG && p.matches(elems) {
				out[key] = true
			}
		}
		return out
	}
	if err != nil {
		checkReadError(t, err)
		if status.Code(err) == codes.NotFound && patternErr == nil &&
			!slices.ContainsFunc(patterns, func(p treePattern) bool { return len(selected(p)) == 0 }) {
			t.Fatalf("Get(%v): %v, but every path selects leaves", req, err)
		}
		return
	}
	if patternErr != nil || len(patterns) != len(resp.GetNotification()) {
		t.Fatalf("Get(%v) answered %d notifications for patterns %v (%v)", req, len(resp.GetNotification()), patterns, patternErr)
	}
	for n, p := range patterns {
		got := map[string]bool{}
		for _, u := range resp.GetNotification()[n].GetUpdate() {
			got[elemsString(gnmipath.Concat(req.GetPrefix().GetElem(), u.GetPath().GetElem()))] = true
		}
		want := selected(p)
		for key := range want {
			if !got[key] {
				t.Fatalf("Get(%v): pattern %s selects %s, which the answer lacks", req, p, key)
			}
		}
		for key := range got {
			if !want[key] {
				t.Fatalf("Get(%v): pattern %s does not select %s, which the answer holds", req, p, key)
			}
		}
	}
}

// FuzzSubscribe decodes a first SubscribeRequest from the fuzzer's bytes
// and, when the proxy would route it to the tree, subscribes with it for
// at most 20 ms. Nothing panics; an error is a gRPC status a client can
// act on (or the end of the 20 ms).
func FuzzSubscribe(f *testing.F) {
	tr := fuzzTree(f)
	subscribe := func(mode gpb.SubscriptionList_Mode, paths ...string) *gpb.SubscribeRequest {
		list := &gpb.SubscriptionList{Prefix: &gpb.Path{Origin: Origin}, Mode: mode}
		for _, p := range paths {
			list.Subscription = append(list.Subscription, &gpb.Subscription{Path: fixture.Path(f, p)})
		}
		return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}}
	}
	sample := subscribe(gpb.SubscriptionList_STREAM, "/configuration")
	sample.GetSubscribe().Subscription[0].Mode = gpb.SubscriptionMode_SAMPLE
	sample.GetSubscribe().Subscription[0].SampleInterval = uint64(minSampleInterval)
	for _, req := range []*gpb.SubscribeRequest{
		subscribe(gpb.SubscriptionList_ONCE, "/proposals/proposal[index=1]/state"),
		subscribe(gpb.SubscriptionList_POLL, "/.../apply-status"),
		subscribe(gpb.SubscriptionList_STREAM, "/proposals/*/changes"),
		sample,
	} {
		f.Add(fixture.Marshal(f, req))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &gpb.SubscribeRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		list := req.GetSubscribe()
		paths := make([]*gpb.Path, 0, len(list.GetSubscription()))
		for _, sub := range list.GetSubscription() {
			paths = append(paths, sub.GetPath())
		}
		if list == nil || !routedHere(list.GetPrefix(), paths) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		stream := &fixture.SubscribeStream{Ctx: ctx, First: req}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Subscribe(ctx, stream, req); err != nil && status.Code(err) != codes.DeadlineExceeded {
			checkReadError(t, err)
		}
	})
}

// fuzzTree returns a Tree over a journal holding three applied changes,
// the rollback of the last one and an outstanding commit-confirmed, with
// an agent that does not run.
func fuzzTree(f *testing.F) *Tree {
	h := fixture.NewHistory(f)
	tr, err := New(Options{Journal: h.Journal, Agent: h.Agent, Address: h.Target, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	return tr
}
