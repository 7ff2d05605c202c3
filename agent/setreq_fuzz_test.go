package agent

import (
	"bytes"
	"slices"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// FuzzChangeRequest checks changeRequest on a Change's operations decoded
// from the fuzzer's bytes: it refuses exactly the operations of an unknown
// kind; otherwise the deletes' paths, the replaces' leaves and the updates'
// leaves each keep their order in their part of the request, and the
// operations are left as they were.
func FuzzChangeRequest(f *testing.F) {
	leaf := func(p, v string) *journal.Leaf { return &journal.Leaf{Path: mustPath(f, p), Value: stringVal(v)} }
	for _, ops := range [][]*journal.Op{
		{{Kind: journal.OpDelete, Path: mustPath(f, "/a[k=1]")}, {Kind: journal.OpUpdate, Path: mustPath(f, "/b"), Values: []*journal.Leaf{leaf("/b/c", "1"), leaf("/b/d", "2")}}},
		{{Kind: journal.OpReplace, Path: mustPath(f, "/r"), Values: []*journal.Leaf{{Path: mustPath(f, "/r"), Value: jsonVal(`{"x":1}`)}}}, {Kind: journal.OpDelete}},
		{{Kind: journal.OpUpdate}, {Kind: 9, Path: mustPath(f, "/x")}},
	} {
		f.Add(marshal(f, &journal.Change{Ops: ops}))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		change := &journal.Change{}
		if proto.Unmarshal(data, change) != nil {
			return
		}
		ops := change.GetOps()
		sent := proto.CloneOf(change)
		req, err := changeRequest(ops)
		if !proto.Equal(change, sent) {
			t.Fatalf("changeRequest modified its operations: %v, sent %v", change, sent)
		}
		unknown := slices.ContainsFunc(ops, func(op *journal.Op) bool {
			k := op.GetKind()
			return k != journal.OpDelete && k != journal.OpReplace && k != journal.OpUpdate && k != journal.OpUnionReplace
		})
		if unknown != (err != nil) {
			t.Fatalf("changeRequest(%v): %v; an operation of an unknown kind: %v", ops, err, unknown)
		}
		if err != nil {
			return
		}
		deletes, replaces, updates := req.GetDelete(), req.GetReplace(), req.GetUpdate()
		for _, op := range ops {
			switch op.GetKind() {
			case journal.OpDelete:
				if len(deletes) == 0 || deletes[0] != op.GetPath() {
					t.Fatalf("request %v does not delete %v next", req, op.GetPath())
				}
				deletes = deletes[1:]
			case journal.OpReplace:
				replaces = takeLeaves(t, replaces, op.GetValues())
			case journal.OpUpdate:
				updates = takeLeaves(t, updates, op.GetValues())
			}
		}
		if len(deletes)+len(replaces)+len(updates) > 0 || req.GetPrefix() != nil || len(req.GetExtension()) > 0 {
			t.Fatalf("request %v holds more than the operations %v", req, ops)
		}
	})
}

// takeLeaves checks that ups starts with leaves, in order, and returns the
// rest.
func takeLeaves(t *testing.T, ups []*gpb.Update, leaves []*journal.Leaf) []*gpb.Update {
	t.Helper()
	for _, l := range leaves {
		if len(ups) == 0 || ups[0].GetPath() != l.GetPath() || ups[0].GetVal() != l.GetValue() {
			t.Fatalf("the request's next update is not the leaf %v", l)
		}
		ups = ups[1:]
	}
	return ups
}

// FuzzSetBatcher checks the southbound requests built from per-path values
// over the tree of the model tests (modelNodes), the writes of one or more
// proposals decoded from the fuzzer's bytes (see fuzzWrites), with limits
// on a request's size and values from the fuzzer:
//
//   - batchValues' requests, and rollbackRequests' from the values in
//     reverse, leave the target as the values applied one by one, within
//     the limits (see TestSetBatcherMatchesOneByOne);
//   - the order a re-push reads the applied values in (journal.ReplayOrder)
//     leaves the target as they do in the order they were written
//     (checkReplayOrder);
//   - topTombstones of one proposal's values covers every value, with
//     tombstones at values' paths, none under another.
func FuzzSetBatcher(f *testing.F) {
	f.Add([]byte{0x00, 0x13, 0x25, 0x06, 0x31}, uint16(80), uint8(0))
	f.Add([]byte{0x01, 0x12, 0x23, 0x10, 0x04, 0x2a, 0x1a, 0x05}, uint16(1), uint8(0))
	f.Add([]byte{0x13, 0x14, 0x05, 0x27, 0x16, 0x08, 0x3a, 0x10}, uint16(200), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, maxBytes uint16, maxValues uint8) {
		values := fuzzWrites(t, data)
		limits := setLimits{bytes: max(1, int(maxBytes)), values: int(maxValues)}
		want := newTargetModel(modelNodes())
		want.applyOneByOne(t, values)
		reversed := slices.Clone(values)
		slices.Reverse(reversed)
		for name, reqs := range map[string][]*gpb.SetRequest{
			"batchValues":      batchValues(values, limits),
			"rollbackRequests": rollbackRequests(reversed, limits),
		} {
			checkRequests(t, name, want, values, reqs, limits)
		}

		checkReplayOrder(t, "fuzzed writes", appliedState(t, values), false)

		scanned := slices.Clone(values)
		slices.SortFunc(scanned, func(a, b *journal.PathValue) int {
			switch {
			case a.Index < b.Index:
				return -1
			case a.Index > b.Index:
				return 1
			}
			return bytes.Compare(journal.PathKey(a.Path), journal.PathKey(b.Path))
		})
		first := slices.DeleteFunc(slices.Clone(scanned), func(pv *journal.PathValue) bool { return pv.Index != 1 })
		checkTopTombstones(t, first, topTombstones(first))
	})
}

// checkTopTombstones checks topTombstones(values) = tops.
func checkTopTombstones(t *testing.T, values, tops []*journal.PathValue) {
	t.Helper()
	for _, pv := range values {
		if !slices.ContainsFunc(tops, func(top *journal.PathValue) bool { return journal.IsUnder(pv.Path, top.Path) }) {
			t.Fatalf("topTombstones(%v) = %v: nothing covers %v", values, tops, pv)
		}
	}
	for n, top := range tops {
		if !top.Deleted || !slices.ContainsFunc(values, func(pv *journal.PathValue) bool { return pv.Path == top.Path }) {
			t.Fatalf("topTombstones(%v) = %v: %v is not a tombstone at a value's path", values, tops, top)
		}
		for _, other := range tops[n+1:] {
			if journal.IsUnder(top.Path, other.Path) || journal.IsUnder(other.Path, top.Path) {
				t.Fatalf("topTombstones(%v) = %v: %v and %v overlap", values, tops, top, other)
			}
		}
	}
}

// fuzzWrites decodes the per-path values of proposals over modelNodes()
// from data, one byte a value: the low nibble picks the node, 0x10 makes
// it a tombstone, 0x20 starts the next proposal, the top two bits pick the
// kind of value (modelValue). Like randomWrites, each
// path is written at most once per proposal, and the values come in the
// order the original Sets took effect.
func fuzzWrites(tb testing.TB, data []byte) []*journal.PathValue {
	tb.Helper()
	nodes := modelNodes()
	var values, writes []*journal.PathValue
	index := uint64(1)
	for _, b := range data {
		if b&0x20 != 0 && len(writes) > 0 {
			values = append(values, inSetOrder(writes)...)
			writes = nil
			index++
		}
		n := nodes[int(b&0x0f)%len(nodes)]
		if slices.ContainsFunc(writes, func(pv *journal.PathValue) bool { return pathString(tb, pv.Path) == n }) {
			continue
		}
		if b&0x10 != 0 {
			writes = append(writes, tombstone(tb, n, index))
		} else {
			writes = append(writes, value(tb, n, index, modelValue(n, index, int(b>>6)*2+int(index%2))))
		}
	}
	return append(values, inSetOrder(writes)...)
}

// FuzzCoveringKeys checks coveringKeys against journal.IsUnder on two paths
// decoded from the fuzzer's bytes (gnmi.Path in wire format): q's key is
// among p's covering keys exactly when p is under q, and p is left as it
// was.
func FuzzCoveringKeys(f *testing.F) {
	for _, pair := range [][2]string{
		{"/a/b[name=x]/c", "/a/b"},
		{"/a/b[name=x][id=1]/c", "/a/b[name=x]"},
		{"/a/bc", "/a/b"},
		{"/e[k=v]/f", "/"},
	} {
		f.Add(marshal(f, mustPath(f, pair[0])), marshal(f, mustPath(f, pair[1])))
	}
	f.Add(marshal(f, &gpb.Path{Origin: "o", Elem: []*gpb.PathElem{{Name: "a", Key: map[string]string{"k": "v"}}}}), marshal(f, &gpb.Path{Origin: "o"}))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		p, q := &gpb.Path{}, &gpb.Path{}
		if proto.Unmarshal(a, p) != nil || proto.Unmarshal(b, q) != nil {
			return
		}
		before := proto.CloneOf(p)
		covered := false
		for key := range coveringKeys(p) {
			covered = covered || bytes.Equal(key, journal.PathKey(q))
		}
		if want := journal.IsUnder(p, q); covered != want {
			t.Fatalf("coveringKeys(%v) has the key of %v: %v, IsUnder: %v", p, q, covered, want)
		}
		if !proto.Equal(p, before) {
			t.Fatalf("coveringKeys modified its path: %v, was %v", p, before)
		}
	})
}

func marshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
