package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// batchValues packs values, already in the order they must take effect,
// into the requests pushValues sends (valueBatches).
func batchValues(values []*journal.PathValue, limits setLimits) []*gpb.SetRequest {
	var reqs []*gpb.SetRequest
	for _, b := range valueBatches(values, limits) {
		reqs = append(reqs, b.req)
	}
	return reqs
}

// rollbackRequests returns the requests sendRollback sends for a
// proposal's rollback values: each path gets back what it held before the
// change (a tombstone, possibly with index 0 for "absent before", becomes
// a delete), in the order the values were originally written
// (inWriteOrder). values is not modified.
func rollbackRequests(values []*journal.PathValue, limits setLimits) []*gpb.SetRequest {
	return batchValues(inWriteOrder(values), limits)
}

func mustPath(tb testing.TB, s string) *gpb.Path {
	tb.Helper()
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		tb.Fatalf("StringToStructuredPath(%q): %v", s, err)
	}
	return p
}

func jsonVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

func stringVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

func value(tb testing.TB, path string, index uint64, v *gpb.TypedValue) *journal.PathValue {
	tb.Helper()
	return &journal.PathValue{Path: mustPath(tb, path), Index: index, Value: v}
}

func tombstone(tb testing.TB, path string, index uint64) *journal.PathValue {
	tb.Helper()
	return &journal.PathValue{Path: mustPath(tb, path), Index: index, Deleted: true}
}

func update(pv *journal.PathValue) *gpb.Update {
	return &gpb.Update{Path: pv.Path, Val: pv.Value}
}

func TestChangeRequest(t *testing.T) {
	leaf := func(path, v string) *journal.Leaf {
		return &journal.Leaf{Path: mustPath(t, path), Value: stringVal(v)}
	}
	upd := func(path, v string) *gpb.Update {
		return &gpb.Update{Path: mustPath(t, path), Val: stringVal(v)}
	}
	tests := []struct {
		name string
		ops  []*journal.Op
		want *gpb.SetRequest
	}{
		{
			name: "no ops",
			want: &gpb.SetRequest{},
		},
		{
			name: "mixed kinds keep their kind and order",
			ops: []*journal.Op{
				{Kind: journal.OpUpdate, Path: mustPath(t, "/u"), Values: []*journal.Leaf{leaf("/u/x", "1"), leaf("/u/y", "2")}},
				{Kind: journal.OpDelete, Path: mustPath(t, "/d[name=1]")},
				{Kind: journal.OpReplace, Path: mustPath(t, "/r"), Values: []*journal.Leaf{leaf("/r/z", "3"), leaf("/r/a", "4")}},
				{Kind: journal.OpDelete, Path: mustPath(t, "/c")},
				{Kind: journal.OpUpdate, Path: mustPath(t, "/a"), Values: []*journal.Leaf{leaf("/a", "5")}},
				{Kind: journal.OpReplace, Path: mustPath(t, "/b"), Values: []*journal.Leaf{leaf("/b/c", "6")}},
			},
			want: &gpb.SetRequest{
				Delete:  []*gpb.Path{mustPath(t, "/d[name=1]"), mustPath(t, "/c")},
				Replace: []*gpb.Update{upd("/r/z", "3"), upd("/r/a", "4"), upd("/b/c", "6")},
				Update:  []*gpb.Update{upd("/u/x", "1"), upd("/u/y", "2"), upd("/a", "5")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before []*journal.Op
			for _, op := range tt.ops {
				before = append(before, proto.CloneOf(op))
			}
			got, err := changeRequest(tt.ops)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("changeRequest() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.ops, protocmp.Transform()); diff != "" {
				t.Errorf("changeRequest() modified the ops (-before +after):\n%s", diff)
			}
		})
	}
}

func TestChangeRequestRefusesUnknownKind(t *testing.T) {
	_, err := changeRequest([]*journal.Op{{Path: mustPath(t, "/a")}})
	if err == nil || !strings.Contains(err.Error(), "/a") {
		t.Errorf("changeRequest() of an op without a kind: %v, want an error naming the path", err)
	}
}

// TestReplayOrderMatchesIndexOrder checks the order a re-push reads the
// applied values in (journal.ReplayOrder, as journal.ReplayApplied streams
// them: by path, what is under an opaque value by index): applied one by
// one, or through the batcher, they leave the target as the same values in
// the order they were written do (by index, tombstones first within one),
// over random proposals, with opaque values holding subtrees, markers,
// leaf-lists and deletes.
func TestReplayOrderMatchesIndexOrder(t *testing.T) {
	for seed := range uint64(1000) {
		r := rand.New(rand.NewPCG(seed, 2))
		writes := randomWrites(t, r)
		checkReplayOrder(t, fmt.Sprintf("seed %d", seed), appliedState(t, writes), false)
		// Applied values that went their own way (a tombstone with values
		// written before it under its path): the same, but that such a
		// value, which the delete removed, is not sent, nor the nodes
		// above the delete that only its write made exist.
		newest := map[string]*journal.PathValue{}
		for _, pv := range writes {
			newest[pathString(t, pv.Path)] = pv
		}
		checkReplayOrder(t, fmt.Sprintf("seed %d, any values", seed), slices.Collect(maps.Values(newest)), true)
	}
}

// appliedState returns the applied values a journal holds after values,
// the writes of proposals in the order they took effect: the newest write
// at each path, a tombstone also tombstoning, at its index, every value
// stored under its path (as the journal's expansion of a delete does).
func appliedState(tb testing.TB, values []*journal.PathValue) []*journal.PathValue {
	tb.Helper()
	state := map[string]*journal.PathValue{}
	for _, pv := range values {
		path := pathString(tb, pv.Path)
		if pv.Deleted {
			for n, stored := range state {
				if n != path && modelCovers(path, n) && !stored.Deleted {
					state[n] = tombstone(tb, n, pv.Index)
				}
			}
		}
		state[path] = pv
	}
	out := slices.Collect(maps.Values(state))
	slices.SortFunc(out, func(a, b *journal.PathValue) int {
		return bytes.Compare(journal.PathKey(a.Path), journal.PathKey(b.Path))
	})
	return out
}

// checkReplayOrder checks that applied, a journal's applied values, in the
// order journal.ReplayOrder gives, leave the target as they do in index
// order, tombstones first within one index, applied one by one and through
// the batcher.
func checkReplayOrder(t *testing.T, what string, applied []*journal.PathValue, ignoreExistence bool) {
	t.Helper()
	// Write order: by index, each index's values as its Set took effect.
	byIndex := slices.Clone(applied)
	slices.SortStableFunc(byIndex, func(a, b *journal.PathValue) int {
		if a.Index < b.Index {
			return -1
		}
		if a.Index > b.Index {
			return 1
		}
		return 0
	})
	for from := 0; from < len(byIndex); {
		to := from + 1
		for to < len(byIndex) && byIndex[to].Index == byIndex[from].Index {
			to++
		}
		inSetOrder(byIndex[from:to])
		from = to
	}
	want := newTargetModel(modelNodes())
	want.applyOneByOne(t, byIndex)
	replay, err := journal.ReplayOrder(applied)
	if err != nil {
		t.Fatal(err)
	}
	got := newTargetModel(modelNodes())
	got.applyOneByOne(t, replay)
	if ignoreExistence {
		onlyExists := func(_, v string) bool { return v == "∃" }
		maps.DeleteFunc(want.state, onlyExists)
		maps.DeleteFunc(got.state, onlyExists)
	}
	if diff := cmp.Diff(want.state, got.state); diff != "" {
		t.Fatalf("%s: target state mismatch (-index order +replay order):\n%s\napplied: %v\nreplay order: %v", what, diff, applied, replay)
	}
	if ignoreExistence {
		return
	}
	for _, limits := range []setLimits{{bytes: 1}, {bytes: 200}, {bytes: 1 << 20}} {
		checkRequests(t, what+", replay order", want, replay, batchValues(replay, limits), limits)
	}
}

func TestCoveringKeysMatchesIsUnder(t *testing.T) {
	var paths []*gpb.Path
	for _, s := range []string{
		"/", "/a", "/a/b", "/a/bc", "/a/b[name=x]", "/a/b[name=y]",
		"/a/b[name=x]/c", "/a/b[name=x]/c/d", "/a/b[name=x][id=1]", "/a/b[name=x][id=1]/c",
		"/e[k=v]/f", "/e",
	} {
		paths = append(paths, mustPath(t, s))
		withOrigin := mustPath(t, s)
		withOrigin.Origin = "other"
		paths = append(paths, withOrigin)
	}
	for _, child := range paths {
		var covering [][]byte
		for key := range coveringKeys(child) {
			covering = append(covering, key)
		}
		for _, parent := range paths {
			want := journal.IsUnder(child, parent)
			got := slices.ContainsFunc(covering, func(k []byte) bool { return bytes.Equal(k, journal.PathKey(parent)) })
			if got != want {
				t.Errorf("coveringKeys(%s) has %s: %v, IsUnder: %v",
					gnmipath.String(child), gnmipath.String(parent), got, want)
			}
		}
	}
}

func TestSetBatcher(t *testing.T) {
	// Values are built once so that want and the batcher's output can share
	// them.
	var (
		leafX  = value(t, "/a/b[name=x]/c", 1, stringVal("x"))
		leafY  = value(t, "/a/b[name=y]/c", 1, stringVal("y"))
		leafD  = value(t, "/a/d", 2, stringVal("d"))
		jsonA1 = value(t, "/a", 1, jsonVal(`{"d":"1"}`))
		jsonA3 = value(t, "/a", 3, jsonVal(`{"d":"3"}`))
		valAB1 = value(t, "/a/b", 1, jsonVal(`{"b":[]}`))
		valAB2 = value(t, "/a/b", 2, jsonVal(`{"b":[]}`))
		valAB3 = value(t, "/a/b", 3, jsonVal(`{"b":[]}`))
		valAB5 = value(t, "/a/b", 5, jsonVal(`{"b":[]}`))
		valBC1 = value(t, "/a/bc", 1, stringVal("bc"))
		orig1  = &journal.PathValue{Path: &gpb.Path{Origin: "one", Elem: []*gpb.PathElem{{Name: "a"}}}, Index: 1, Value: stringVal("1")}
		orig2  = &journal.PathValue{Path: &gpb.Path{Origin: "two", Elem: []*gpb.PathElem{{Name: "a"}}}, Index: 2, Deleted: true}

		delA1  = tombstone(t, "/a", 1)
		delA2  = tombstone(t, "/a", 2)
		delA3  = tombstone(t, "/a", 3)
		delAB2 = tombstone(t, "/a/b", 2)
		delAB3 = tombstone(t, "/a/b", 3)
		delX2  = tombstone(t, "/a/b[name=x]", 2)
		delY2  = tombstone(t, "/a/b[name=y]", 2)
		delE2  = tombstone(t, "/e", 2)
		delRt2 = tombstone(t, "/", 2)
	)
	req := func(deletes []*journal.PathValue, updates ...*journal.PathValue) *gpb.SetRequest {
		r := &gpb.SetRequest{}
		for _, pv := range deletes {
			r.Delete = append(r.Delete, pv.Path)
		}
		for _, pv := range updates {
			r.Update = append(r.Update, update(pv))
		}
		return r
	}
	dels := func(pvs ...*journal.PathValue) []*journal.PathValue { return pvs }

	tests := []struct {
		name   string
		values []*journal.PathValue
		want   []*gpb.SetRequest
	}{
		{
			name: "nothing",
		},
		{
			name:   "values and unrelated tombstones merge",
			values: []*journal.PathValue{leafX, leafY, delE2, leafD},
			want:   []*gpb.SetRequest{req(dels(delE2), leafX, leafY, leafD)},
		},
		{
			name:   "tombstone below an earlier value",
			values: []*journal.PathValue{jsonA1, delAB2},
			want:   []*gpb.SetRequest{req(nil, jsonA1), req(dels(delAB2))},
		},
		{
			name:   "tombstone above an earlier value",
			values: []*journal.PathValue{valAB1, delA2},
			want:   []*gpb.SetRequest{req(nil, valAB1), req(dels(delA2))},
		},
		{
			name:   "tombstone at an earlier value",
			values: []*journal.PathValue{valAB1, delAB2},
			want:   []*gpb.SetRequest{req(nil, valAB1), req(dels(delAB2))},
		},
		{
			name:   "root tombstone above an earlier value",
			values: []*journal.PathValue{leafX, delRt2},
			want:   []*gpb.SetRequest{req(nil, leafX), req(dels(delRt2))},
		},
		{
			name:   "keyless list tombstone above an earlier list entry",
			values: []*journal.PathValue{leafX, delAB2},
			want:   []*gpb.SetRequest{req(nil, leafX), req(dels(delAB2))},
		},
		{
			name:   "list entry tombstone below an earlier keyless list value",
			values: []*journal.PathValue{valAB1, delX2},
			want:   []*gpb.SetRequest{req(nil, valAB1), req(dels(delX2))},
		},
		{
			name:   "tombstone beside an earlier list entry",
			values: []*journal.PathValue{leafX, delY2},
			want:   []*gpb.SetRequest{req(dels(delY2), leafX)},
		},
		{
			name:   "tombstone beside an earlier value with a longer name",
			values: []*journal.PathValue{valBC1, delAB2},
			want:   []*gpb.SetRequest{req(dels(delAB2), valBC1)},
		},
		{
			name:   "same path in another origin",
			values: []*journal.PathValue{orig1, orig2},
			want:   []*gpb.SetRequest{req(dels(orig2), orig1)},
		},
		{
			name:   "tombstone overlapping a value of the same index",
			values: []*journal.PathValue{jsonA3, delAB3},
			want:   []*gpb.SetRequest{req(dels(delAB3), jsonA3)},
		},
		{
			name:   "tombstone above a value of the same index",
			values: []*journal.PathValue{valAB3, delA3},
			want:   []*gpb.SetRequest{req(dels(delA3), valAB3)},
		},
		{
			name:   "tombstone overlapping a value of the same index and an earlier one",
			values: []*journal.PathValue{valAB1, jsonA3, delAB3},
			want:   []*gpb.SetRequest{req(nil, valAB1, jsonA3), req(dels(delAB3))},
		},
		{
			name:   "tombstone overlapping a value of a later index",
			values: []*journal.PathValue{valAB5, delA3},
			want:   []*gpb.SetRequest{req(nil, valAB5), req(dels(delA3))},
		},
		{
			name:   "tombstone overlapping values of its own and an earlier index fed later",
			values: []*journal.PathValue{jsonA3, valAB1, delA3},
			want:   []*gpb.SetRequest{req(nil, jsonA3, valAB1), req(dels(delA3))},
		},
		{
			name:   "values after an overlapping tombstone",
			values: []*journal.PathValue{delA1, valAB2, jsonA3},
			want:   []*gpb.SetRequest{req(dels(delA1), valAB2, jsonA3)},
		},
		{
			name:   "a split forgets the values sent",
			values: []*journal.PathValue{valAB1, delA2, delAB2, valAB2, delA3},
			want:   []*gpb.SetRequest{req(nil, valAB1), req(dels(delA2, delAB2), valAB2), req(dels(delA3))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := batchValues(tt.values, setLimits{bytes: 1 << 20})
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetBatcherSizeLimit(t *testing.T) {
	const maxBytes = 4096
	var values []*journal.PathValue
	for n := range 1000 {
		path := fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", n)
		if n%7 == 3 {
			values = append(values, tombstone(t, path, uint64(n)))
		} else {
			values = append(values, value(t, path, uint64(n), stringVal(strings.Repeat("d", n%50))))
		}
	}
	reqs := batchValues(values, setLimits{bytes: maxBytes})
	if len(reqs) < 2 {
		t.Fatalf("got %d requests, want several", len(reqs))
	}
	var gotDeletes, wantDeletes []*gpb.Path
	var gotUpdates, wantUpdates []*gpb.Update
	for _, pv := range values {
		if pv.Deleted {
			wantDeletes = append(wantDeletes, pv.Path)
		} else {
			wantUpdates = append(wantUpdates, update(pv))
		}
	}
	next := 0 // index in values of the first value after reqs[n]
	for n, req := range reqs {
		if size := proto.Size(req); size > maxBytes {
			t.Errorf("request %d has %d bytes, more than %d", n, size, maxBytes)
		}
		next += len(req.Delete) + len(req.Update)
		if n < len(reqs)-1 {
			// Requests are full: the next value did not fit.
			withNext := proto.CloneOf(req)
			if pv := values[next]; pv.Deleted {
				withNext.Delete = append(withNext.Delete, pv.Path)
			} else {
				withNext.Update = append(withNext.Update, update(pv))
			}
			if size := proto.Size(withNext); size <= maxBytes {
				t.Errorf("request %d has %d bytes, but the next value, which would make %d, went into another", n, proto.Size(req), size)
			}
		}
		gotDeletes = append(gotDeletes, req.Delete...)
		gotUpdates = append(gotUpdates, req.Update...)
	}
	if diff := cmp.Diff(wantDeletes, gotDeletes, protocmp.Transform()); diff != "" {
		t.Errorf("deletes mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantUpdates, gotUpdates, protocmp.Transform()); diff != "" {
		t.Errorf("updates mismatch (-want +got):\n%s", diff)
	}
}

func TestSetBatcherSizeIsExact(t *testing.T) {
	values := []*journal.PathValue{
		value(t, "/a/b[name=x]/c", 1, stringVal("1")),
		tombstone(t, "/d", 2),
		value(t, "/e", 3, jsonVal(strings.Repeat("x", 300))), // a length of two varint bytes
		value(t, "/f", 4, stringVal("4")),
	}
	exact := proto.Size(batchValues(values[:3], setLimits{bytes: 1 << 20})[0])
	for _, tt := range []struct {
		maxBytes int
		want     []int // entries per request
	}{
		{maxBytes: exact, want: []int{3, 1}},
		{maxBytes: exact - 1, want: []int{2, 2}},
	} {
		var got []int
		for _, req := range batchValues(values, setLimits{bytes: tt.maxBytes}) {
			got = append(got, len(req.Delete)+len(req.Update))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("maxBytes %d: entries per request %v, want %v", tt.maxBytes, got, tt.want)
		}
	}
}

func TestSetBatcherOversizeValueGoesAlone(t *testing.T) {
	small1 := value(t, "/a", 1, stringVal("a"))
	big := value(t, "/b", 2, jsonVal(strings.Repeat("x", 1000)))
	small2 := value(t, "/c", 3, stringVal("c"))
	small3 := value(t, "/d", 4, stringVal("d"))
	tests := []struct {
		name   string
		values []*journal.PathValue
		want   [][]*journal.PathValue
	}{
		{
			name:   "in the middle",
			values: []*journal.PathValue{small1, big, small2, small3},
			want:   [][]*journal.PathValue{{small1}, {big}, {small2, small3}},
		},
		{
			name:   "first",
			values: []*journal.PathValue{big, small1},
			want:   [][]*journal.PathValue{{big}, {small1}},
		},
		{
			name:   "only",
			values: []*journal.PathValue{big},
			want:   [][]*journal.PathValue{{big}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []*gpb.SetRequest
			for _, group := range tt.want {
				req := &gpb.SetRequest{}
				for _, pv := range group {
					req.Update = append(req.Update, update(pv))
				}
				want = append(want, req)
			}
			got := batchValues(tt.values, setLimits{bytes: 100})
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRollbackRequests(t *testing.T) {
	var (
		absentX = tombstone(t, "/a/b[name=x]", 0)
		absentE = tombstone(t, "/e", 0)
		valA2   = value(t, "/a", 2, jsonVal(`{"b":[]}`))
		delAB2  = tombstone(t, "/a/b", 2)
		valZ2   = value(t, "/z", 2, stringVal("z"))
		delA5   = tombstone(t, "/a", 5)
		valC3   = value(t, "/c", 3, stringVal("c"))
		valB3   = value(t, "/b", 3, stringVal("b"))
	)
	values := []*journal.PathValue{delA5, valC3, valZ2, absentE, valB3, valA2, delAB2, absentX}
	before := slices.Clone(values)

	got := rollbackRequests(values, setLimits{bytes: 1 << 20})
	want := []*gpb.SetRequest{
		{
			// Index 0, then index 2 with its tombstone first, then index 3,
			// each by path.
			Delete: []*gpb.Path{absentX.Path, absentE.Path, delAB2.Path},
			Update: []*gpb.Update{update(valA2), update(valZ2), update(valB3), update(valC3)},
		},
		// The tombstone of index 5 is at the path of the value of index 2.
		{Delete: []*gpb.Path{delA5.Path}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("rollbackRequests() mismatch (-want +got):\n%s", diff)
	}
	if !slices.Equal(before, values) {
		t.Error("rollbackRequests() reordered its argument")
	}
	if got := rollbackRequests(nil, setLimits{bytes: 1 << 20}); got != nil {
		t.Errorf("rollbackRequests(nil) = %v, want nil", got)
	}
}

// targetModel is a tiny model of a gNMI target over a fixed tree of paths
// (ygot path strings), with the kinds of values a setBatcher sends:
//
//   - an opaque value (ASCII) holds its whole subtree: an update sets every
//     node at or under its path;
//   - a JSON object merges: each member is written at the member's path (a
//     JSON leaf), and {} only makes the node exist;
//   - any other value (JSON text of a leaf or leaf-list, a scalar or
//     leaflist TypedValue) sets its node alone;
//
// and every write makes the nodes above it exist ("∃" where they hold no
// value). A delete removes every node at or under its path, a replace
// deletes then writes.
type targetModel struct {
	nodes []string
	state map[string]string
}

func newTargetModel(nodes []string) *targetModel {
	return &targetModel{nodes: nodes, state: make(map[string]string)}
}

// modelCovers reports whether a delete of parent deletes child: child is
// parent or below it, and a list path without keys covers all entries. It is
// written on path strings, independently of journal.IsUnder.
func modelCovers(parent, child string) bool {
	return parent == "/" || child == parent ||
		strings.HasPrefix(child, parent+"/") || strings.HasPrefix(child, parent+"[")
}

func (m *targetModel) delete(path string) {
	for _, n := range m.nodes {
		if modelCovers(path, n) {
			delete(m.state, n)
		}
	}
}

// exists makes the nodes above path (the root aside) exist.
func (m *targetModel) exists(path string) {
	for _, n := range m.nodes {
		if n != "/" && n != path && modelCovers(n, path) && !strings.HasPrefix(path, n+"[") {
			if _, ok := m.state[n]; !ok {
				m.state[n] = "∃"
			}
		}
	}
}

func (m *targetModel) set(path, value string) {
	m.exists(path)
	m.state[path] = value
}

// update writes v at path as the model's target does.
func (m *targetModel) update(tb testing.TB, path string, v *gpb.TypedValue) {
	tb.Helper()
	if a, ok := v.GetValue().(*gpb.TypedValue_AsciiVal); ok {
		m.exists(path)
		for _, n := range m.nodes {
			if modelCovers(path, n) {
				m.state[n] = "ascii:" + a.AsciiVal
			}
		}
		return
	}
	text := v.GetJsonIetfVal()
	if text == nil {
		text = v.GetJsonVal()
	}
	if bytes.HasPrefix(bytes.TrimSpace(text), []byte("{")) {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(text, &members); err != nil {
			tb.Fatalf("JSON object at %s: %v", path, err)
		}
		if path != "/" {
			if _, ok := m.state[path]; !ok {
				m.set(path, "∃")
			}
		}
		for name, member := range members {
			child := strings.TrimSuffix(path, "/") + "/" + name
			if !slices.Contains(m.nodes, child) {
				tb.Fatalf("JSON object at %s has a member %q outside the model's tree", path, name)
			}
			m.set(child, string(member))
		}
		return
	}
	if text != nil {
		m.set(path, string(text))
		return
	}
	m.set(path, prototext.Format(v))
}

func pathString(tb testing.TB, p *gpb.Path) string {
	tb.Helper()
	s, err := ygot.PathToString(p)
	if err != nil {
		tb.Fatalf("PathToString(%v): %v", p, err)
	}
	return s
}

// applySet applies req the way a gNMI target does: deletes first, then
// replaces (a delete and a write of the path), then updates, each in list
// order.
func (m *targetModel) applySet(tb testing.TB, req *gpb.SetRequest) {
	tb.Helper()
	if req.Prefix != nil {
		tb.Fatalf("request has a prefix: %v", req)
	}
	for _, p := range req.Delete {
		m.delete(pathString(tb, p))
	}
	for _, u := range req.Replace {
		m.delete(pathString(tb, u.Path))
		m.update(tb, pathString(tb, u.Path), u.Val)
	}
	for _, u := range req.Update {
		m.update(tb, pathString(tb, u.Path), u.Val)
	}
}

// applyOneByOne applies values one at a time, in order: a whole leaf-list
// replaces what its node held.
func (m *targetModel) applyOneByOne(tb testing.TB, values []*journal.PathValue) {
	tb.Helper()
	for _, pv := range values {
		path := pathString(tb, pv.Path)
		switch {
		case pv.Deleted:
			m.delete(path)
		case leaves.IsLeafList(pv.Value):
			m.delete(path)
			m.update(tb, path, pv.Value)
		default:
			m.update(tb, path, pv.Value)
		}
	}
}

// modelNodes returns the path tree of the semantic tests, with a keyless
// list path and its entries.
func modelNodes() []string {
	return []string{
		"/", "/a", "/a/b", "/a/b[name=x]", "/a/b[name=y]", "/a/b[name=x]/c",
		"/a/b[name=y]/c", "/a/b[name=y]/c/d", "/a/bc", "/e", "/e/f",
	}
}

// modelValue returns a value of proposal index for node n, of a kind pick
// chooses among those a journal holds at such a node (package leaves): at
// a leaf (a node without children in modelNodes) a JSON leaf (mostly), a
// whole leaf-list (as JSON or a leaflist TypedValue) or an opaque value;
// above, an opaque value holding the subtree or a marker.
func modelValue(n string, index uint64, pick int) *gpb.TypedValue {
	text := fmt.Sprintf("%d%s", index, n)
	ascii := &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: text}}
	if !slices.ContainsFunc(modelNodes(), func(c string) bool { return c != n && modelCovers(n, c) }) {
		switch pick % 8 {
		case 0:
			return ascii
		case 1:
			return jsonVal(fmt.Sprintf("[%q]", text))
		case 2:
			return &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{Element: []*gpb.TypedValue{stringVal(text)}}}}
		case 3:
			return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(fmt.Sprintf("%q", text))}}
		}
		return jsonVal(fmt.Sprintf("%q", text))
	}
	list := slices.ContainsFunc(modelNodes(), func(c string) bool { return strings.HasPrefix(c, n+"[") })
	if pick%2 == 0 && n != "/" && !list {
		return jsonVal("{}") // a list entry or a (presence) container
	}
	return ascii
}

// randomWrites returns the per-path values of up to 8 random proposals over
// modelNodes() (each path at most once per proposal, a tombstone or a value
// unique to the proposal and path), in index order and, within an index,
// tombstones first, each group by path key: the order in which the original
// Sets took effect.
func randomWrites(tb testing.TB, r *rand.Rand) []*journal.PathValue {
	tb.Helper()
	var values []*journal.PathValue
	proposals := 1 + r.Uint64N(8)
	for index := uint64(1); index <= proposals; index++ {
		var writes []*journal.PathValue
		for _, n := range modelNodes() {
			if r.IntN(4) != 0 {
				continue
			}
			if r.IntN(3) == 0 {
				writes = append(writes, tombstone(tb, n, index))
			} else {
				writes = append(writes, value(tb, n, index, modelValue(n, index, r.IntN(8))))
			}
		}
		values = append(values, inSetOrder(writes)...)
	}
	return values
}

// inSetOrder sorts one proposal's writes in the order its Set took effect:
// tombstones first, each group by path key.
func inSetOrder(writes []*journal.PathValue) []*journal.PathValue {
	slices.SortFunc(writes, func(a, b *journal.PathValue) int {
		if a.Deleted != b.Deleted {
			if a.Deleted {
				return -1
			}
			return 1
		}
		return bytes.Compare(journal.PathKey(a.Path), journal.PathKey(b.Path))
	})
	return writes
}

// requestValues counts the values a request carries: its deletes and
// replaces, its updates' (an object's members each), a leaf-list's delete
// and member counting once.
func requestValues(req *gpb.SetRequest) int {
	n := len(req.Delete) + len(req.Replace)
	for _, u := range req.Update {
		text := u.GetVal().GetJsonIetfVal()
		if text == nil {
			text = u.GetVal().GetJsonVal()
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(text, &members) != nil || len(members) == 0 {
			n++
			continue
		}
		for _, m := range members {
			n++
			if bytes.HasPrefix(m, []byte("[")) {
				n-- // its delete counted it
			}
		}
	}
	return n
}

// checkSizes checks that every request holding more than one entry is within
// maxBytes.
func checkSizes(t *testing.T, reqs []*gpb.SetRequest, maxBytes int) {
	t.Helper()
	for n, req := range reqs {
		if size := proto.Size(req); size > maxBytes && requestValues(req) > 1 {
			t.Errorf("request %d of %d values has %d bytes, more than %d", n, requestValues(req), size, maxBytes)
		}
	}
}

// checkRequests applies reqs, made from values within limits, to an empty
// target and fails unless the target ends as want (values applied one by
// one) and every request keeps within limits.
func checkRequests(t *testing.T, what string, want *targetModel, values []*journal.PathValue, reqs []*gpb.SetRequest, limits setLimits) {
	t.Helper()
	got := newTargetModel(modelNodes())
	for _, req := range reqs {
		got.applySet(t, req)
	}
	if diff := cmp.Diff(want.state, got.state); diff != "" {
		t.Fatalf("%s, limits %+v: target state mismatch (-one by one +requests):\n%s\nvalues: %v\nrequests: %v",
			what, limits, diff, values, reqs)
	}
	checkSizes(t, reqs, limits.bytes)
	for n, req := range reqs {
		if v := requestValues(req); limits.values > 0 && v > limits.values {
			t.Fatalf("%s, limits %+v: request %d holds %d values", what, limits, n, v)
		}
	}
}

// TestSetBatcherMatchesOneByOne checks the batcher's ordering guarantee: fed
// values in the order the original Sets took effect, its requests leave the
// target as the values applied one by one do, whatever the size limit.
func TestSetBatcherMatchesOneByOne(t *testing.T) {
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 1))
		values := randomWrites(t, r)
		for _, limits := range []setLimits{{bytes: 1}, {bytes: 80}, {bytes: 200}, {bytes: 1 << 20}, {bytes: 1 << 20, values: 1}, {bytes: 1 << 20, values: 3}} {
			want := newTargetModel(modelNodes())
			want.applyOneByOne(t, values)

			checkRequests(t, fmt.Sprintf("seed %d", seed), want, values, batchValues(values, limits), limits)
		}
	}
}

// TestRollbackRequestsMatchesOneByOne checks that rollbackRequests restores,
// from values in any order, what applying them in the order they were
// written does.
func TestRollbackRequestsMatchesOneByOne(t *testing.T) {
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 3))
		values := randomWrites(t, r)
		want := newTargetModel(modelNodes())
		want.applyOneByOne(t, values)

		shuffled := slices.Clone(values)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for _, maxBytes := range []int{80, 1 << 20} {
			reqs := rollbackRequests(shuffled, setLimits{bytes: maxBytes})
			got := newTargetModel(modelNodes())
			for _, req := range reqs {
				got.applySet(t, req)
			}
			if diff := cmp.Diff(want.state, got.state); diff != "" {
				t.Fatalf("seed %d, maxBytes %d: target state mismatch (-one by one +rollback):\n%s", seed, maxBytes, diff)
			}
			checkSizes(t, reqs, maxBytes)
		}
	}
}

// TestSetBatcherKeepsEntriesWhole: a replayed Set never deletes an
// OpenConfig entry's key mirror or its config container alone (that breaks
// an entry that exists); other tombstones, the entry's own included, go out.
func TestSetBatcherKeepsEntriesWhole(t *testing.T) {
	entry := "/interfaces/interface[name=eth0]"
	values := []*journal.PathValue{
		tombstone(t, entry+"/config", 1),
		tombstone(t, entry+"/config/name", 1),
		tombstone(t, entry+"/config/mtu", 1),
		tombstone(t, entry+"/subinterfaces/subinterface[index=0]/config/index", 1),
		tombstone(t, entry+"/config/description", 1),
		tombstone(t, "/interfaces/interface[name=eth1]", 1),
		tombstone(t, "/system/config", 1), // not a list entry's
	}
	want := &gpb.SetRequest{Delete: []*gpb.Path{
		mustPath(t, entry+"/config/mtu"), mustPath(t, entry+"/config/description"),
		mustPath(t, "/interfaces/interface[name=eth1]"), mustPath(t, "/system/config"),
	}}
	got := batchValues(values, setLimits{bytes: 1 << 20})
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	if diff := cmp.Diff(want, got[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

// TestClientRequest: a change goes to the device with the client's prefix
// and its paths relative to it; paths the prefix was not joined into go
// whole, under the prefix's target alone.
func TestClientRequest(t *testing.T) {
	op := func(path string) *journal.Op {
		return &journal.Op{Kind: journal.OpUpdate, Path: mustPath(t, path), Values: []*journal.Leaf{{Path: mustPath(t, path), Value: stringVal("v")}}}
	}
	del := func(path string) *journal.Op { return &journal.Op{Kind: journal.OpDelete, Path: mustPath(t, path)} }
	upd := func(path string) *gpb.Update { return &gpb.Update{Path: mustPath(t, path), Val: stringVal("v")} }
	withOrigin := func(p *gpb.Path, origin string) *gpb.Path { p.Origin = origin; return p }
	for _, tt := range []struct {
		name   string
		prefix *gpb.Path
		ops    []*journal.Op
		want   *gpb.SetRequest
	}{
		{"no prefix", nil, []*journal.Op{op("/a/b")}, &gpb.SetRequest{Update: []*gpb.Update{upd("/a/b")}}},
		{"target only", &gpb.Path{Target: "dev"}, []*journal.Op{op("/a/b")},
			&gpb.SetRequest{Prefix: &gpb.Path{Target: "dev"}, Update: []*gpb.Update{upd("/a/b")}}},
		{"joined: relative paths", &gpb.Path{Target: "dev", Elem: mustPath(t, "/a[k=1]").Elem},
			[]*journal.Op{op("/a[k=1]/b"), del("/a[k=1]/c")},
			&gpb.SetRequest{Prefix: &gpb.Path{Target: "dev", Elem: mustPath(t, "/a[k=1]").Elem}, Delete: []*gpb.Path{mustPath(t, "/c")}, Update: []*gpb.Update{upd("/b")}}},
		{"joined with an origin", &gpb.Path{Origin: "oc", Elem: mustPath(t, "/a").Elem},
			[]*journal.Op{{Kind: journal.OpDelete, Path: withOrigin(mustPath(t, "/a/b"), "oc")}},
			&gpb.SetRequest{Prefix: &gpb.Path{Origin: "oc", Elem: mustPath(t, "/a").Elem}, Delete: []*gpb.Path{mustPath(t, "/b")}}},
		{"an origin on the prefix and on the path, kept on both", &gpb.Path{Origin: "oc", Elem: mustPath(t, "/a").Elem},
			[]*journal.Op{
				{Kind: journal.OpDelete, Path: withOrigin(mustPath(t, "/a/b"), "oc"), OriginOnPath: true},
				{Kind: journal.OpDelete, Path: withOrigin(mustPath(t, "/a/c"), "oc")},
				{Kind: journal.OpUpdate, Path: withOrigin(mustPath(t, "/a/d"), "oc"), OriginOnPath: true,
					Values: []*journal.Leaf{{Path: withOrigin(mustPath(t, "/a/d"), "oc"), Value: stringVal("v")}}},
				{Kind: journal.OpUpdate, Path: withOrigin(mustPath(t, "/a/e"), "oc"),
					Values: []*journal.Leaf{{Path: withOrigin(mustPath(t, "/a/e"), "oc"), Value: stringVal("v")}}},
				{Kind: journal.OpReplace, Path: withOrigin(mustPath(t, "/a/f"), "oc"), OriginOnPath: true,
					Values: []*journal.Leaf{{Path: withOrigin(mustPath(t, "/a/f"), "oc"), Value: stringVal("v")}}},
			},
			&gpb.SetRequest{Prefix: &gpb.Path{Origin: "oc", Elem: mustPath(t, "/a").Elem},
				Delete:  []*gpb.Path{withOrigin(mustPath(t, "/b"), "oc"), mustPath(t, "/c")},
				Replace: []*gpb.Update{{Path: withOrigin(mustPath(t, "/f"), "oc"), Val: stringVal("v")}},
				Update:  []*gpb.Update{{Path: withOrigin(mustPath(t, "/d"), "oc"), Val: stringVal("v")}, upd("/e")}}},
		{"other elements: whole paths", &gpb.Path{Target: "dev", Elem: mustPath(t, "/system").Elem},
			[]*journal.Op{op("/interfaces/interface[name=e]/config/description")},
			&gpb.SetRequest{Prefix: &gpb.Path{Target: "dev"}, Update: []*gpb.Update{upd("/interfaces/interface[name=e]/config/description")}}},
		{"another key: whole paths", &gpb.Path{Elem: mustPath(t, "/a[k=1]").Elem},
			[]*journal.Op{op("/a[k=1]/b"), op("/a[k=2]/b")},
			&gpb.SetRequest{Update: []*gpb.Update{upd("/a[k=1]/b"), upd("/a[k=2]/b")}}},
		{"another origin: whole paths", &gpb.Path{Origin: "oc"}, []*journal.Op{op("/a/b")},
			&gpb.SetRequest{Update: []*gpb.Update{upd("/a/b")}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clientRequest(&journal.Change{Prefix: tt.prefix, Ops: tt.ops})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("clientRequest() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
