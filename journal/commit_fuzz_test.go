package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// FuzzCommitChange journals and commits two Sets, each a Change's
// operations decoded from the fuzzer's bytes, the second on top of the
// first, and checks what a commit turns TypedValues and deletes into:
//
//   - operations the journal refuses are refused with ErrInvalid (or, for
//     a value it could not record exactly, leaves.ErrNeedSchema), and the
//     caller's operations are never modified;
//   - the proposal keeps the operations exactly as sent (targets dropped),
//     with the units their values decompose into;
//   - the change's values are sorted and unique by path key, each one at a
//     path a delete or replace covers or a unit's;
//   - a unit's path holds the value of the last unit written there (a
//     marker may be left out where values are stored already), a deleted
//     path a tombstone or a value written at exactly that path;
//   - the rollback values are what the committed values held before, and
//     the committed values are the change's values afterwards, with no
//     older value left under a delete or replace.
//
// Every input runs under an origin of its own (prefixed to the fuzzer's),
// so inputs do not see each other's values and the journal, opened once,
// stays small where an input looks.
func FuzzCommitChange(f *testing.F) {
	j := openTest(f, "", Options{NoSync: true})
	for _, seed := range [][2][]*Op{
		{{update(f, "/a/b[k=1]/c", "x")}, {del(f, "/a/b[k=1]"), update(f, "/a/b[k=1]/c", "y")}},
		{{update(f, "/a", `{"b":1}`), update(f, "/a/b", "2")}, {replace(f, "/a", "/a/c", "3"), del(f, "/a/b")}},
		{{update(f, "/l[k=1]", "1"), update(f, "/l[k=2]/x", "2")}, {del(f, "/l")}},
		{{del(f, "/")}, {update(f, "/a/b", "1", "/a/b", "2")}},
		{{{Kind: OpUpdate, Path: &gnmi.Path{Target: "t"}, Values: []*Leaf{{Path: mustPath(f, "/x")}}}}, {{Kind: 7}}},
	} {
		f.Add(mustMarshal(f, &Change{Ops: seed[0]}), mustMarshal(f, &Change{Ops: seed[1]}))
	}
	inputs := 0
	f.Fuzz(func(t *testing.T, first, second []byte) {
		inputs++
		origin := fmt.Sprintf("fuzz%d:", inputs)
		for _, b := range [][]byte{first, second} {
			change := &Change{}
			if proto.Unmarshal(b, change) != nil {
				return
			}
			ops := change.GetOps()
			for _, op := range ops {
				prefixOrigin(op.GetPath(), origin)
				for _, leaf := range op.GetValues() {
					prefixOrigin(leaf.GetPath(), origin)
				}
			}
			checkCommit(t, j, ops)
		}
	})
}

func prefixOrigin(p *gnmi.Path, origin string) {
	if p != nil {
		p.Origin = origin + p.Origin
	}
}

// checkCommit journals and commits ops and checks the outcome (see
// FuzzCommitChange).
func checkCommit(t *testing.T, j *Journal, ops []*Op) {
	t.Helper()
	ctx := context.Background()
	sent := cloneOps(ops)
	p, err := j.ProposeChange(ctx, ops)
	if !slices.EqualFunc(ops, sent, func(a, b *Op) bool { return proto.Equal(a, b) }) {
		t.Fatalf("ProposeChange modified its operations: %v, sent %v", ops, sent)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, leaves.ErrNeedSchema) {
			t.Fatalf("ProposeChange(%v): %v, want an error wrapping ErrInvalid or leaves.ErrNeedSchema", ops, err)
		}
		return
	}
	want := cloneOps(ops)
	for _, op := range want {
		op.Path.Target = ""
		for _, leaf := range op.Values {
			leaf.Path.Target = ""
		}
	}
	asSent := func(a, b *Op) bool {
		a = proto.CloneOf(a)
		a.Units, a.ImpliedDeletes, a.UnitsAreValues = nil, nil, false
		return proto.Equal(a, b)
	}
	if !slices.EqualFunc(p.GetChange().GetOps(), want, asSent) {
		t.Fatalf("proposal %d holds %v, sent %v", p.GetIndex(), p.GetChange().GetOps(), ops)
	}
	for _, op := range p.GetChange().GetOps() {
		if op.GetKind() != OpDelete && len(Units(op)) == 0 && len(op.GetValues()) > 0 && !emptyJSON(op) {
			t.Fatalf("proposal %d: %v has no units", p.GetIndex(), op)
		}
	}
	ops = p.GetChange().GetOps() // with their units

	before := committedAt(t, j, ops)
	i := p.GetIndex()
	if p, _, err = j.CommitChange(ctx, i); err != nil {
		t.Fatalf("CommitChange(%d) of %v: %v", i, ops, err)
	}
	values, rollback := p.GetChange().GetValues(), p.GetRollback().GetValues()
	if len(rollback) != len(values) {
		t.Fatalf("%d change values, %d rollback values", len(values), len(rollback))
	}
	changed := make(map[string]*PathValue, len(values))
	var lastKey []byte
	for n, pv := range values {
		key := PathKey(pv.GetPath())
		if n > 0 && bytes.Compare(lastKey, key) >= 0 {
			t.Fatalf("change values not sorted and unique by path key: %v", values)
		}
		lastKey = key
		changed[string(key)] = pv
		if pv.GetIndex() != p.GetIndex() || pv.GetDeleted() == (pv.GetValue() != nil) {
			t.Fatalf("change value %v of proposal %d", pv, p.GetIndex())
		}
		if !written(ops, pv.GetPath()) {
			t.Fatalf("change value %v is at no path the operations %v write", pv, ops)
		}
		if rb := rollback[n]; !bytes.Equal(PathKey(rb.GetPath()), key) || !sameValue(rb, before[string(key)]) {
			t.Fatalf("rollback value %v for %v, the committed value was %v", rb, pv, before[string(key)])
		}
	}
	for _, op := range ops {
		switch op.GetKind() {
		case OpDelete:
			if pv := changed[string(PathKey(op.GetPath()))]; pv == nil || !pv.GetDeleted() && !leafAt(ops, op.GetPath()) {
				t.Fatalf("delete of %s left %v", gnmipath.String(op.GetPath()), pv)
			}
		case OpUpdate:
			for _, unit := range Units(op) {
				last := lastUpdate(ops, unit.GetPath())
				pv := changed[string(PathKey(unit.GetPath()))]
				if pv == nil && leaves.IsMarker(last.GetValue()) {
					continue // the node held values already
				}
				if !proto.Equal(pv.GetValue(), last.GetValue()) {
					t.Fatalf("update of %s left %v, the last unit written there was %v", gnmipath.String(unit.GetPath()), pv, last.GetValue())
				}
			}
		}
	}
	after := committedAt(t, j, ops)
	for key, pv := range changed {
		if !proto.Equal(after[key], pv) {
			t.Fatalf("committed value %v after the commit, the change wrote %v", after[key], pv)
		}
	}
	for _, pv := range after {
		if !pv.GetDeleted() && pv.GetIndex() != i && deleted(ops, pv.GetPath()) {
			t.Fatalf("committed value %v is under a delete or replace of proposal %d", pv, i)
		}
	}
}

// deleted reports whether a delete or replace of ops covers p.
func deleted(ops []*Op, p *gnmi.Path) bool {
	return slices.ContainsFunc(ops, func(op *Op) bool { return op.GetKind() != OpUpdate && IsUnder(p, op.GetPath()) })
}

func cloneOps(ops []*Op) []*Op {
	out := make([]*Op, len(ops))
	for n, op := range ops {
		out[n] = proto.CloneOf(op)
	}
	return out
}

// committedAt returns the committed values at and under the paths of ops
// and of their units (a marker is above its operation's path), by path key.
func committedAt(t *testing.T, j *Journal, ops []*Op) map[string]*PathValue {
	t.Helper()
	out := map[string]*PathValue{}
	for _, op := range ops {
		paths := []*gnmi.Path{op.GetPath()}
		for _, u := range Units(op) {
			paths = append(paths, u.GetPath())
		}
		for _, p := range paths {
			err := j.Committed(context.Background(), p, func(pv *PathValue) error {
				out[string(PathKey(pv.GetPath()))] = pv
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// sameValue reports whether rollback value rb restores committed value
// was: was itself, or a tombstone (index 0) when there was none.
func sameValue(rb, was *PathValue) bool {
	if was == nil {
		return rb.GetDeleted() && rb.GetIndex() == 0 && rb.GetValue() == nil
	}
	return proto.Equal(rb, was)
}

// written reports whether ops write at p: a delete or replace covers it,
// or an update's leaf is at p.
func written(ops []*Op, p *gnmi.Path) bool {
	for _, op := range ops {
		if leafAt([]*Op{op}, p) {
			return true
		}
	}
	return deleted(ops, p)
}

// emptyJSON reports whether op's values are all JSON objects or arrays
// with nothing in them, which decompose into nothing.
func emptyJSON(op *Op) bool {
	for _, leaf := range op.GetValues() {
		if !leaves.IsMarker(leaf.GetValue()) && string(leaf.GetValue().GetJsonIetfVal()) != "[]" && string(leaf.GetValue().GetJsonVal()) != "[]" {
			return false
		}
	}
	return true
}

// leafAt reports whether a replace or an update of ops has a unit at p.
func leafAt(ops []*Op, p *gnmi.Path) bool {
	for _, op := range ops {
		for _, leaf := range Units(op) {
			if bytes.Equal(PathKey(leaf.GetPath()), PathKey(p)) {
				return true
			}
		}
	}
	return false
}

// lastUpdate returns the last unit of an update at p (updates take effect
// after replaces).
func lastUpdate(ops []*Op, p *gnmi.Path) *Leaf {
	var last *Leaf
	for _, op := range ops {
		if op.GetKind() != OpUpdate {
			continue
		}
		for _, leaf := range Units(op) {
			if bytes.Equal(PathKey(leaf.GetPath()), PathKey(p)) {
				last = leaf
			}
		}
	}
	return last
}
