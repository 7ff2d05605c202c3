package proxy

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

// FuzzSetRequest decodes a SetRequest from the fuzzer's bytes and runs
// what Set checks before it journals anything: the extension decoder, the
// commit-confirmed rollback_duration and the operations. Every refusal is
// a gRPC status: InvalidArgument, or Unimplemented for union_replace.
// What is accepted is what the request says: the sidecar extension's mode
// is a known one, the commit-confirmed extension is the request's only
// one, a rollback_duration is positive, and there is one operation per
// delete, replace and update, at the prefix and path joined, with the
// value as sent, which the journal then accepts.
func FuzzSetRequest(f *testing.F) {
	j := fixture.OpenJournal(f)
	desc := fixture.Path(f, "/interfaces/interface[name=eth0]/config/description")
	val := &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "x"}}
	sidecar := func(m *sidecarpb.Request) *gnmi_ext.Extension {
		msg, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: ExtensionID, Msg: msg}}}
	}
	commit := func(c *gnmi_ext.Commit) *gnmi_ext.Extension {
		return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
	}
	for _, req := range []*gpb.SetRequest{
		{Update: []*gpb.Update{{Path: desc, Val: val}}},
		{Prefix: fixture.Path(f, "/interfaces/interface[name=eth0]"), Delete: []*gpb.Path{fixture.Path(f, "/config/mtu")},
			Replace: []*gpb.Update{{Path: fixture.Path(f, "/config"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"mtu":1500}`)}}}}},
		{Update: []*gpb.Update{{Path: desc, Val: val}}, Extension: []*gnmi_ext.Extension{sidecar(&sidecarpb.Request{Mode: sidecarpb.SetMode_SET_MODE_ASYNC})}},
		{Extension: []*gnmi_ext.Extension{sidecar(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: 3}})}},
		{Update: []*gpb.Update{{Path: desc, Val: val}}, Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "c",
			Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(time.Minute)}}})}},
		{Extension: []*gnmi_ext.Extension{commit(&gnmi_ext.Commit{Id: "c", Action: &gnmi_ext.Commit_SetRollbackDuration{
			SetRollbackDuration: &gnmi_ext.CommitSetRollbackDuration{RollbackDuration: &durationpb.Duration{Seconds: -1}}}})}},
		{Prefix: &gpb.Path{Origin: IntrospectionOrigin}, Update: []*gpb.Update{{Path: desc, Val: val}},
			Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}}},
		{UnionReplace: []*gpb.Update{{Path: desc, Val: val}}},
	} {
		f.Add(fixture.Marshal(f, req))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &gpb.SetRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		ext, commit, err := RequestExtensions(req.GetExtension())
		if err != nil {
			wantCode(t, "requestExtension", err, codes.InvalidArgument)
			return
		}
		checkExtensions(t, req.GetExtension(), ext, commit)
		switch action := commit.GetAction().(type) {
		case *gnmi_ext.Commit_Commit:
			checkRollbackDuration(t, action.Commit.GetRollbackDuration(), true)
		case *gnmi_ext.Commit_SetRollbackDuration:
			checkRollbackDuration(t, action.SetRollbackDuration.GetRollbackDuration(), false)
		}
		ops, err := requestOps(req)
		if err != nil {
			wantCode(t, "requestOps", err, codes.InvalidArgument)
			return
		}
		checkOps(t, req, ops)
		if _, err := j.ProposeChange(context.Background(), ops); err != nil {
			t.Fatalf("the journal refuses the operations %v of %v: %v", ops, req, err)
		}
	})
}

// checkExtensions checks what requestExtension made of exts.
func checkExtensions(t *testing.T, exts []*gnmi_ext.Extension, ext *sidecarpb.Request, commit *gnmi_ext.Commit) {
	t.Helper()
	if _, ok := sidecarpb.SetMode_name[int32(ext.GetMode())]; !ok {
		t.Fatalf("RequestExtensions(%v) accepts set mode %d", exts, ext.GetMode())
	}
	var commits []*gnmi_ext.Commit
	for _, e := range exts {
		if c := e.GetCommit(); c != nil {
			commits = append(commits, c)
		}
	}
	if len(commits) > 1 || (len(commits) == 1) != (commit != nil) || commit != nil && commit != commits[0] {
		t.Fatalf("RequestExtensions(%v) returns commit-confirmed %v", exts, commit)
	}
}

// checkRollbackDuration checks rollbackDuration on d.
func checkRollbackDuration(t *testing.T, d *durationpb.Duration, defaultIfMissing bool) {
	t.Helper()
	got, err := (&Server{}).rollbackDuration(d, defaultIfMissing)
	switch {
	case err != nil:
		wantCode(t, "rollbackDuration", err, codes.InvalidArgument)
	case got <= 0 || got > DefaultMaxRollbackDuration || d == nil && got != DefaultRollbackDuration || d != nil && got != d.AsDuration():
		t.Fatalf("rollbackDuration(%v, %v) = %v", d, defaultIfMissing, got)
	}
}

// checkOps checks the operations requestOps made of req.
func checkOps(t *testing.T, req *gpb.SetRequest, ops []*journal.Op) {
	t.Helper()
	want := make([]*gpb.Update, 0, len(ops))
	for _, p := range req.GetDelete() {
		want = append(want, &gpb.Update{Path: p})
	}
	want = append(append(append(want, req.GetReplace()...), req.GetUnionReplace()...), req.GetUpdate()...)
	if len(ops) != len(want) {
		t.Fatalf("%d operations from %v", len(ops), req)
	}
	prefix := req.GetPrefix()
	for n, op := range ops {
		u, path := want[n], op.GetPath()
		origin := prefix.GetOrigin()
		if origin == "" {
			origin = u.GetPath().GetOrigin()
		}
		switch {
		case journal.ValidatePath(path) != nil, path.GetOrigin() == IntrospectionOrigin, path.GetTarget() != "":
			t.Fatalf("operation %d of %v has path %v", n, req, path)
		case path.GetOrigin() != origin || !slices.Equal(path.GetElem(), gnmipath.Concat(prefix.GetElem(), u.GetPath().GetElem())):
			t.Fatalf("operation %d of %v is at %v, not at its prefix and path joined", n, req, path)
		case u.GetVal() == nil && (op.GetKind() != journal.OpDelete || len(op.GetValues()) > 0):
			t.Fatalf("operation %d of %v is %v, want a delete", n, req, op)
		case u.GetVal() != nil && (len(op.GetValues()) != 1 || op.GetValues()[0].GetPath() != path || op.GetValues()[0].GetValue() != u.GetVal()):
			t.Fatalf("operation %d of %v is %v, want the value as sent at its path", n, req, op)
		}
	}
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if st, ok := status.FromError(err); !ok || st.Code() != want || st.Message() == "" {
		t.Fatalf("%s: %v, want a gRPC status with code %v and a message", what, err, want)
	}
}

// FuzzGetRequest decodes a GetRequest from the fuzzer's bytes and sends it
// to a Server over a journal with changes, a rollback and history, whose
// device is unreachable. Nothing panics; an error is a gRPC status with a
// code a client can act on (Unavailable only from the passthrough to the
// device). A request of origin gnmi-sidecar is answered by the
// Introspection (introspection.FuzzGet fuzzes that one), unless the
// Server refuses it first with InvalidArgument; a History Get answers
// values at and under each path, timestamped with the snapshot time.
func FuzzGetRequest(f *testing.F) {
	s, between := fuzzServer(f)
	history := func(ns int64) []*gnmi_ext.Extension {
		return []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{
			Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: ns}}}}}
	}
	own := &gpb.Path{Origin: IntrospectionOrigin}
	for _, req := range []*gpb.GetRequest{
		{Prefix: own},
		{Prefix: own, Path: []*gpb.Path{fixture.Path(f, "/proposals/proposal[index=02]/state"), fixture.Path(f, "/.../apply-status")}},
		{Path: []*gpb.Path{{Origin: IntrospectionOrigin, Elem: fixture.Path(f, "/proposals/*/changes/change[path=*]").GetElem()}}},
		{Path: []*gpb.Path{{Origin: IntrospectionOrigin}, fixture.Path(f, "/a")}},
		{Path: []*gpb.Path{{Origin: IntrospectionOrigin, Target: "t"}}},
		{Path: []*gpb.Path{fixture.Path(f, "/a")}, Extension: history(between.UnixNano())},
		{Prefix: fixture.Path(f, "/a"), Path: []*gpb.Path{fixture.Path(f, "/*")}, Extension: history(between.UnixNano())},
		{Path: []*gpb.Path{fixture.Path(f, "/a")}, Extension: append(history(1), history(2)...)},
		{Path: []*gpb.Path{fixture.Path(f, "/a")}, Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{
			Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{Start: 1, End: 2}}}}}}},
		{Prefix: own, Extension: history(between.UnixNano())},
		{Path: []*gpb.Path{fixture.Path(f, "/a")}},
	} {
		f.Add(fixture.Marshal(f, req))
	}
	tree := s.opts.Introspection.(*stubIntrospection)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &gpb.GetRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		before := tree.gets.Load()
		resp, err := s.Get(ctx, req)
		if introspection, _ := isIntrospection(req.GetPrefix(), req.GetPath()); introspection {
			called := tree.gets.Load() != before
			switch {
			case err == nil && !called:
				t.Fatalf("Get(%v) of origin %s answered %v without the Introspection", req, IntrospectionOrigin, resp)
			case err != nil && (called || status.Code(err) != codes.InvalidArgument):
				t.Fatalf("Get(%v) of origin %s: %v (Introspection called: %v), want its answer or InvalidArgument", req, IntrospectionOrigin, err, called)
			}
			return
		}
		if err != nil {
			checkReadError(t, err)
			return
		}
		hist, _ := historyExtension(req.GetExtension())
		if hist == nil {
			t.Fatalf("Get(%v) of the unreachable device answered %v", req, resp)
		}
		checkHistoryGet(t, req, resp, hist)
	})
}

// checkReadError checks that err is a status a client can act on.
func checkReadError(t *testing.T, err error) {
	t.Helper()
	fixture.WantStatusIn(t, err, codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.OutOfRange, codes.Unavailable)
	if st := status.Convert(err); st.Code() == codes.Unavailable && !strings.HasPrefix(st.Message(), "device ") {
		t.Fatalf("%v: Unavailable, but not from the device", err)
	}
}

// stubIntrospection stands for the introspection tree: it counts the
// requests routed to it, answers Get with an empty response and
// Subscribe with Unimplemented.
type stubIntrospection struct {
	gets atomic.Int64
}

func (x *stubIntrospection) Get(context.Context, *gpb.GetRequest) (*gpb.GetResponse, error) {
	x.gets.Add(1)
	return &gpb.GetResponse{}, nil
}

func (x *stubIntrospection) Subscribe(context.Context, gpb.GNMI_SubscribeServer, *gpb.SubscribeRequest) error {
	return status.Error(codes.Unimplemented, "stub introspection")
}

// checkHistoryGet checks that each notification of resp is at the snapshot
// time and holds values at or under its request path.
func checkHistoryGet(t *testing.T, req *gpb.GetRequest, resp *gpb.GetResponse, hist *gnmi_ext.History) {
	t.Helper()
	paths := req.GetPath()
	if len(paths) == 0 {
		paths = []*gpb.Path{{}}
	}
	if len(resp.GetNotification()) != len(paths) {
		t.Fatalf("Get(%v) answered %d notifications", req, len(resp.GetNotification()))
	}
	for n, notif := range resp.GetNotification() {
		pattern := gnmipath.Join(req.GetPrefix(), paths[n])
		if notif.GetTimestamp() != hist.GetSnapshotTime() || len(notif.GetUpdate()) == 0 {
			t.Fatalf("Get(%v) answered %v", req, notif)
		}
		for _, u := range notif.GetUpdate() {
			full := gnmipath.Concat(req.GetPrefix().GetElem(), u.GetPath().GetElem())
			if u.GetVal() == nil || !gnmipath.MatchesOrUnder(pattern.GetElem(), full) {
				t.Fatalf("Get(%v) answered %v, not a value under %v", req, u, pattern)
			}
		}
	}
}

// FuzzSubscribeRequest decodes a first SubscribeRequest from the fuzzer's
// bytes and subscribes with it, for at most 20 ms, to fuzzServer's Server.
// Nothing panics; an error is a gRPC status a client can act on (or the
// end of the 20 ms); the History extension's answers are updates and
// deletes under the subscribed paths, at the snapshot time or within the
// range.
func FuzzSubscribeRequest(f *testing.F) {
	s, between := fuzzServer(f)
	history := func(h *gnmi_ext.History) []*gnmi_ext.Extension {
		return []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: h}}}
	}
	snapshot := history(&gnmi_ext.History{Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: between.UnixNano()}})
	since := history(&gnmi_ext.History{Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{Start: between.UnixNano(), End: between.Add(time.Hour).UnixNano()}}})
	subscribe := func(list *gpb.SubscriptionList, exts []*gnmi_ext.Extension) *gpb.SubscribeRequest {
		return &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}, Extension: exts}
	}
	paths := func(mode gpb.SubscriptionList_Mode, ps ...string) *gpb.SubscriptionList {
		list := &gpb.SubscriptionList{Mode: mode}
		for _, p := range ps {
			list.Subscription = append(list.Subscription, &gpb.Subscription{Path: fixture.Path(f, p)})
		}
		return list
	}
	own := paths(gpb.SubscriptionList_ONCE, "/proposals/proposal[index=1]/state")
	own.Prefix = &gpb.Path{Origin: IntrospectionOrigin}
	for _, req := range []*gpb.SubscribeRequest{
		subscribe(paths(gpb.SubscriptionList_ONCE, "/a"), snapshot),
		subscribe(paths(gpb.SubscriptionList_STREAM, "/a/b", "/a/d"), since),
		subscribe(paths(gpb.SubscriptionList_ONCE, "/.../c"), since),
		subscribe(paths(gpb.SubscriptionList_POLL, "/a"), since),
		subscribe(paths(gpb.SubscriptionList_STREAM, "/a"), snapshot),
		subscribe(paths(gpb.SubscriptionList_ONCE, "/a"), history(&gnmi_ext.History{Request: &gnmi_ext.History_Range{Range: &gnmi_ext.TimeRange{Start: 2, End: 1}}})),
		subscribe(own, nil),
		subscribe(own, snapshot),
		{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}},
	} {
		f.Add(fixture.Marshal(f, req))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &gpb.SubscribeRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		stream := &fixture.SubscribeStream{Ctx: ctx, First: req}
		if err := s.Subscribe(stream); err != nil && status.Code(err) != codes.DeadlineExceeded {
			checkReadError(t, err)
		}
		hist, _ := historyExtension(req.GetExtension())
		if hist == nil {
			return
		}
		list := req.GetSubscribe()
		var patterns []*gpb.Path
		for _, sub := range list.GetSubscription() {
			patterns = append(patterns, gnmipath.Join(list.GetPrefix(), sub.GetPath()))
		}
		if len(patterns) == 0 {
			patterns = append(patterns, gnmipath.Join(list.GetPrefix(), &gpb.Path{}))
		}
		for _, resp := range stream.Sent {
			n := resp.GetUpdate()
			if n == nil {
				continue
			}
			if r := hist.GetRange(); r == nil && n.GetTimestamp() != hist.GetSnapshotTime() ||
				r != nil && (n.GetTimestamp() < r.GetStart() || n.GetTimestamp() >= r.GetEnd()) {
				t.Fatalf("Subscribe(%v) sent %v, not at the History time", req, n)
			}
			for _, u := range n.GetUpdate() {
				checkUnder(t, req, patterns, n.GetPrefix(), u.GetPath())
			}
			for _, d := range n.GetDelete() {
				checkUnder(t, req, patterns, n.GetPrefix(), d)
			}
		}
	})
}

// checkUnder checks that the path prefix + p lies under one of patterns.
func checkUnder(t *testing.T, req *gpb.SubscribeRequest, patterns []*gpb.Path, prefix, p *gpb.Path) {
	t.Helper()
	full := gnmipath.Concat(prefix.GetElem(), p.GetElem())
	if !slices.ContainsFunc(patterns, func(pattern *gpb.Path) bool { return gnmipath.MatchesOrUnder(pattern.GetElem(), full) }) {
		t.Fatalf("Subscribe(%v) sent %v, under none of %v", req, gnmipath.String(&gpb.Path{Elem: full}), patterns)
	}
}

// fuzzServer returns a Server over a journal holding three applied
// changes, the rollback of the last one and an outstanding
// commit-confirmed, with an agent that does not run and an unreachable
// device, and the time between the first two changes.
func fuzzServer(f *testing.F) (*Server, time.Time) {
	h := fixture.NewHistory(f)
	s, err := New(Options{Target: h.Target, Journal: h.Journal, Agent: h.Agent, Introspection: &stubIntrospection{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	return s, h.Between
}
