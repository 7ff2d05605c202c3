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

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
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
		{Prefix: own, Path: []*gpb.Path{parsePath(f, "/proposals/proposal[index=02]/state"), parsePath(f, "/.../apply-status")}},
		{Path: []*gpb.Path{{Origin: Origin, Elem: parsePath(f, "/proposals/*/changes/change[path=*]").GetElem()}}},
		{Prefix: &gpb.Path{Origin: Origin, Elem: proposalElems(1)}, Path: []*gpb.Path{parsePath(f, "/operations")}, Type: gpb.GetRequest_STATE},
		{Prefix: own, Path: []*gpb.Path{parsePath(f, "/configuration/state/nosuch")}},
		{Prefix: own, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF},
		{Prefix: own, Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}}},
	} {
		f.Add(marshalMsg(f, req))
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
	st, ok := status.FromError(err)
	switch {
	case !ok || st.Message() == "":
		t.Fatalf("%v: not a gRPC status with a message", err)
	case !slices.Contains([]codes.Code{codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.OutOfRange}, st.Code()):
		t.Fatalf("%v: unexpected code %v", err, st.Code())
	}
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
			list.Subscription = append(list.Subscription, &gpb.Subscription{Path: parsePath(f, p)})
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
		f.Add(marshalMsg(f, req))
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
		stream := &fuzzStream{ctx: ctx, first: req}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Subscribe(ctx, stream, req); err != nil && status.Code(err) != codes.DeadlineExceeded {
			checkReadError(t, err)
		}
	})
}

// fuzzStream is a Subscribe stream whose client sends first and then
// waits until ctx ends; it keeps what the server sends.
type fuzzStream struct {
	gpb.GNMI_SubscribeServer
	ctx   context.Context
	first *gpb.SubscribeRequest
	sent  []*gpb.SubscribeResponse
}

func (s *fuzzStream) Context() context.Context { return s.ctx }

func (s *fuzzStream) Recv() (*gpb.SubscribeRequest, error) {
	if req := s.first; req != nil {
		s.first = nil
		return req, nil
	}
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

func (s *fuzzStream) Send(resp *gpb.SubscribeResponse) error {
	s.sent = append(s.sent, resp)
	return s.ctx.Err()
}

func marshalMsg(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fuzzTree returns a Tree over a journal holding three applied changes,
// the rollback of the last one and an outstanding commit-confirmed, with
// an agent that does not run.
func fuzzTree(f *testing.F) *Tree {
	ctx := context.Background()
	discard := slog.New(slog.DiscardHandler)
	j, err := journal.Open(f.TempDir(), journal.Options{NoSync: true, MemTableSize: 1 << 20, Logger: discard})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		if err := j.Close(); err != nil {
			f.Error(err)
		}
	})
	m, err := j.Connect(ctx)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := j.StartReconcile(ctx, m.Term); err != nil {
		f.Fatal(err)
	}
	if _, err := j.CompleteReconcile(ctx, m.Term, 0); err != nil {
		f.Fatal(err)
	}
	must := func(_ *journal.Proposal, _ *journal.Configuration, err error) {
		f.Helper()
		if err != nil {
			f.Fatal(err)
		}
	}
	for _, ops := range [][]*journal.Op{
		{{Kind: journal.OpUpdate, Path: parsePath(f, "/a/b[k=1]/c"), Values: []*journal.Leaf{{Path: parsePath(f, "/a/b[k=1]/c"), Value: strLeaf("one")}}}},
		{{Kind: journal.OpDelete, Path: parsePath(f, "/a/b[k=1]")}, {Kind: journal.OpUpdate, Path: parsePath(f, "/a/d"),
			Values: []*journal.Leaf{{Path: parsePath(f, "/a/d"), Value: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"e":1}`)}}}}}},
		{{Kind: journal.OpUpdate, Path: parsePath(f, "/a/b[k=2]/c"), Values: []*journal.Leaf{{Path: parsePath(f, "/a/b[k=2]/c"), Value: strLeaf("two")}}}},
	} {
		p, err := j.ProposeChange(ctx, ops)
		if err != nil {
			f.Fatal(err)
		}
		must(j.CommitChange(ctx, p.GetIndex()))
		must(j.StartApply(ctx, p.GetIndex()))
		must(j.CompleteApply(ctx, p.GetIndex(), m.Term))
	}
	must(j.ProposeRollback(ctx, 3))
	must(j.CommitRollback(ctx, 3))
	must(j.StartApplyRollback(ctx, 3))
	must(j.CompleteApplyRollback(ctx, 3, m.Term))
	if _, err := j.ProposeConfirmedChange(ctx, []*journal.Op{{Kind: journal.OpDelete, Path: parsePath(f, "/a/d")}}, "cc", time.Now().Add(time.Hour)); err != nil {
		f.Fatal(err)
	}
	const unreachable = "127.0.0.1:1"
	a, err := agent.New(j, agent.Options{Target: unreachable, Logger: discard})
	if err != nil {
		f.Fatal(err)
	}
	tr, err := New(Options{Journal: j, Agent: a, Address: unreachable, Logger: discard})
	if err != nil {
		f.Fatal(err)
	}
	return tr
}
