package agent

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// withOps is a proposal with the given operations, for batch tests.
func withOps(index uint64, ops ...*journal.Op) *journal.Proposal {
	return &journal.Proposal{Index: index, Phase: journal.PhaseChange, Change: &journal.Change{Ops: ops}}
}

func opOf(tb testing.TB, kind journal.OpKind, path, val string) *journal.Op {
	tb.Helper()
	p := mustPath(tb, path)
	op := &journal.Op{Kind: kind, Path: p}
	if kind != journal.OpDelete {
		// Opaque values hold their subtree in the target model: the
		// strictest test of what a batch may reorder.
		op.Values = []*journal.Leaf{{Path: p, Value: &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: val}}}}
	}
	return op
}

// TestBatchChangesStopsAtReorderingConflicts names the overlaps that end a
// batch (a later delete or replace would take effect before an earlier
// write) and those that do not.
func TestBatchChangesStopsAtReorderingConflicts(t *testing.T) {
	del := func(p string) *journal.Op { return opOf(t, journal.OpDelete, p, "") }
	rep := func(p string) *journal.Op { return opOf(t, journal.OpReplace, p, `"r"`) }
	upd := func(p string) *journal.Op { return opOf(t, journal.OpUpdate, p, `"u"`) }
	for _, tc := range []struct {
		name        string
		first, then *journal.Op
		together    bool
	}{
		{"update then update of the same path", upd("/a/b"), upd("/a/b"), true},
		{"update then delete of the same path", upd("/a/b"), del("/a/b"), false},
		{"update then delete of an ancestor", upd("/a/b[name=x]/c"), del("/a"), false},
		{"update then delete of a descendant", upd("/a"), del("/a/b[name=x]"), false},
		{"update then delete of the keyless list", upd("/a/b[name=x]/c"), del("/a/b"), false},
		{"update then delete of a sibling", upd("/a/b[name=x]"), del("/a/b[name=y]"), true},
		{"update then delete of a path sharing a name prefix", upd("/a/b"), del("/a/bc"), true},
		{"update then replace overlapping", upd("/a/b[name=x]/c"), rep("/a/b[name=x]"), false},
		{"replace then delete overlapping", rep("/a"), del("/a/b[name=x]"), false},
		{"replace then replace overlapping", rep("/a"), rep("/a/b[name=x]"), true},
		{"replace then update overlapping", rep("/a"), upd("/a/b[name=x]"), true},
		{"delete then delete overlapping", del("/a"), del("/a/b"), true},
		{"delete then replace overlapping", del("/a/b"), rep("/a"), true},
		{"delete then update overlapping", del("/a"), upd("/a/b[name=x]/c"), true},
		{"union_replace then an unrelated update", opOf(t, journal.OpUnionReplace, "/a", `"x"`), upd("/z"), false},
		{"an update then an unrelated union_replace", upd("/z"), opOf(t, journal.OpUnionReplace, "/a", `"x"`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := batchChanges([]*journal.Proposal{withOps(1, tc.first), withOps(2, tc.then)}, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.size() == 2; got != tc.together {
				t.Errorf("proposals sent together = %v, want %v", got, tc.together)
			}
			if b.first != 1 || b.last != uint64(b.size()) {
				t.Errorf("batch spans %d..%d for %d proposals", b.first, b.last, b.size())
			}
		})
	}
}

// TestBatchChangesAlone: a proposal with union_replaces or extensions to
// relay goes to the device in a Set of its own, carrying them.
func TestBatchChangesAlone(t *testing.T) {
	ext := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: 1000, Msg: []byte("vendor")}}}
	raw, err := proto.Marshal(ext)
	if err != nil {
		t.Fatal(err)
	}
	withExt := withOps(2, opOf(t, journal.OpUpdate, "/b", `"b"`))
	withExt.Change.Extensions = [][]byte{raw}
	union := withOps(3, opOf(t, journal.OpUnionReplace, "/c", `"c"`), opOf(t, journal.OpUnionReplace, "/d", `"d"`))
	ps := []*journal.Proposal{withOps(1, opOf(t, journal.OpUpdate, "/a", `"a"`)), withExt, union, withOps(4, opOf(t, journal.OpUpdate, "/e", `"e"`))}
	var sets []*gpb.SetRequest
	for len(ps) > 0 {
		b, err := batchChanges(ps, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, b.req)
		ps = ps[b.size():]
	}
	if len(sets) != 4 {
		t.Fatalf("%d device Sets, want one per proposal: %v", len(sets), sets)
	}
	if got := sets[1].GetExtension(); len(got) != 1 || !proto.Equal(got[0], ext) {
		t.Errorf("the relayed extension: %v, want %v", got, ext)
	}
	if got := sets[2].GetUnionReplace(); len(got) != 2 || len(sets[2].GetUpdate()) != 0 {
		t.Errorf("the union_replace proposal's Set: %v", sets[2])
	}
	if len(sets[0].GetExtension())+len(sets[3].GetExtension()) != 0 {
		t.Error("an extension went with another proposal's Set")
	}
}

// TestBatchChangesIdentities: without a device account, proposals of
// different clients' identities (request metadata) never share a Set, and
// the Set carries its proposals' identity; the same identity batches.
func TestBatchChangesIdentities(t *testing.T) {
	alice := metadata.Pairs("username", "alice", "password", "a")
	bob := metadata.Pairs("username", "bob", "password", "b")
	creds := map[uint64]metadata.MD{1: alice, 2: alice, 3: bob, 4: nil}
	var ps []*journal.Proposal
	for i := uint64(1); i <= 4; i++ {
		ps = append(ps, withOps(i, opOf(t, journal.OpUpdate, fmt.Sprintf("/a%d", i), `"v"`)))
	}
	var got []string
	for len(ps) > 0 {
		b, err := batchChanges(ps, 1<<20, func(i uint64) metadata.MD { return creds[i] })
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d-%d %v", b.first, b.last, b.creds.Get("username")))
		ps = ps[b.size():]
	}
	want := []string{"1-2 [alice]", "3-3 [bob]", "4-4 []"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
}

func TestBatchChangesLimits(t *testing.T) {
	var ps []*journal.Proposal
	for i := uint64(1); i <= maxBatchProposals+10; i++ {
		ps = append(ps, withOps(i, opOf(t, journal.OpUpdate, fmt.Sprintf("/a/b[name=n%d]/c", i), `"value"`)))
	}
	b, err := batchChanges(ps, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.size() != maxBatchProposals {
		t.Errorf("batch of %d proposals, want the cap %d", b.size(), maxBatchProposals)
	}
	one, err := changeRequest(ps[0].GetChange().GetOps())
	if err != nil {
		t.Fatal(err)
	}
	limit := 3*proto.Size(one) + 2
	b, err = batchChanges(ps, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.size() != 3 || proto.Size(b.req) > limit {
		t.Errorf("batch within %d bytes: %d proposals, %d bytes; want 3 proposals", limit, b.size(), proto.Size(b.req))
	}
	b, err = batchChanges(ps, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.size() != 1 {
		t.Errorf("a first proposal over the limit goes alone, got %d proposals", b.size())
	}
}

// TestBatchChangesMatchesOneByOne checks the batching guarantee: sending
// random proposals in the batches batchChanges forms leaves the target as
// sending each proposal's own Set in turn does.
func TestBatchChangesMatchesOneByOne(t *testing.T) {
	kinds := []journal.OpKind{journal.OpDelete, journal.OpReplace, journal.OpUpdate, journal.OpUpdate}
	merged := 0
	for seed := range uint64(1000) {
		r := rand.New(rand.NewPCG(seed, 5))
		nodes := modelNodes()[1:]
		var ps []*journal.Proposal
		for i := uint64(1); i <= 1+r.Uint64N(10); i++ {
			var ops []*journal.Op
			for range 1 + r.IntN(3) {
				ops = append(ops, opOf(t, kinds[r.IntN(len(kinds))], nodes[r.IntN(len(nodes))], fmt.Sprintf(`"%d-%d"`, i, r.IntN(100))))
			}
			ps = append(ps, withOps(i, ops...))
		}
		want := newTargetModel(modelNodes())
		for _, p := range ps {
			req, err := changeRequest(p.GetChange().GetOps())
			if err != nil {
				t.Fatal(err)
			}
			want.applySet(t, req)
		}
		got := newTargetModel(modelNodes())
		var batches []string
		for rest := ps; len(rest) > 0; {
			b, err := batchChanges(rest, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			got.applySet(t, b.req)
			batches = append(batches, fmt.Sprintf("%d..%d", b.first, b.last))
			merged += b.size() - 1
			rest = rest[b.size():]
		}
		if diff := cmp.Diff(want.state, got.state); diff != "" {
			t.Fatalf("seed %d: target state mismatch (-one by one +batched):\n%s\nproposals: %v\nbatches: %v", seed, diff, ps, batches)
		}
	}
	if merged == 0 {
		t.Fatal("no proposals were ever batched together")
	}
}

func TestChangeBatchSplitsTheResponse(t *testing.T) {
	ps := []*journal.Proposal{
		withOps(4, opOf(t, journal.OpDelete, "/e", ""), opOf(t, journal.OpUpdate, "/a/b[name=x]/c", `"1"`)),
		withOps(5, opOf(t, journal.OpReplace, "/e/f", `"2"`)),
		withOps(6, opOf(t, journal.OpDelete, "/a/bc", ""), opOf(t, journal.OpUpdate, "/a/b[name=y]/c", `"3"`)),
	}
	b, err := batchChanges(ps, 1<<20, nil)
	if err != nil || b.size() != 3 {
		t.Fatalf("batchChanges: %d proposals, %v", b.size(), err)
	}
	result := func(op gpb.UpdateResult_Operation, p string) *gpb.UpdateResult {
		return &gpb.UpdateResult{Op: op, Path: mustPath(t, p)}
	}
	resp := &gpb.SetResponse{Timestamp: 42, Response: []*gpb.UpdateResult{
		result(gpb.UpdateResult_DELETE, "/e"), result(gpb.UpdateResult_DELETE, "/a/bc"),
		result(gpb.UpdateResult_REPLACE, "/e/f"),
		result(gpb.UpdateResult_UPDATE, "/a/b[name=x]/c"), result(gpb.UpdateResult_UPDATE, "/a/b[name=y]/c"),
	}}
	want := []*gpb.SetResponse{
		{Timestamp: 42, Response: []*gpb.UpdateResult{result(gpb.UpdateResult_DELETE, "/e"), result(gpb.UpdateResult_UPDATE, "/a/b[name=x]/c")}},
		{Timestamp: 42, Response: []*gpb.UpdateResult{result(gpb.UpdateResult_REPLACE, "/e/f")}},
		{Timestamp: 42, Response: []*gpb.UpdateResult{result(gpb.UpdateResult_DELETE, "/a/bc"), result(gpb.UpdateResult_UPDATE, "/a/b[name=y]/c")}},
	}
	if diff := cmp.Diff(want, b.split(resp), protocmp.Transform()); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
	// A device may echo the request's prefix (the batch's proposals share
	// it) and answer with paths relative to it: each proposal gets the
	// prefix, the timestamp and its own results.
	resp.Prefix = &gpb.Path{Target: "dev1"}
	for _, w := range want {
		w.Prefix = resp.Prefix
	}
	if diff := cmp.Diff(want, b.split(resp), protocmp.Transform()); diff != "" {
		t.Errorf("split of an answer with a prefix (-want +got):\n%s", diff)
	}
	// An answer that is not one result per operation in request order
	// cannot be cut: each proposal gets the device's timestamp and prefix,
	// and results describing its own operations.
	resp.Response = resp.Response[1:]
	for k, r := range b.split(resp) {
		if r.GetTimestamp() != 42 || !proto.Equal(r.GetPrefix(), resp.Prefix) {
			t.Errorf("proposal %d got timestamp %d, prefix %v, want the device's 42, %v", k, r.GetTimestamp(), r.GetPrefix(), resp.Prefix)
		}
		if diff := cmp.Diff(want[k].GetResponse(), r.GetResponse(), protocmp.Transform()); diff != "" {
			t.Errorf("proposal %d: results (-want +got):\n%s", k, diff)
		}
	}
	// No results at all: none for each either, as the device answered.
	resp.Response = nil
	for k, r := range b.split(resp) {
		if r.GetTimestamp() != 42 || len(r.GetResponse()) != 0 {
			t.Errorf("proposal %d got %v from an answer without results, want timestamp 42 and no results", k, r)
		}
	}
}
