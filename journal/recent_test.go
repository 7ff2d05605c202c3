package journal

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
)

// TestWriterKeptValues: the value records the writer keeps (recentValues)
// stay bounded and always equal to what the journal holds
// (valuesAsStored), through commits larger than the bounds, deletes of
// subtrees, rollbacks and the retention that drops tombstones. (Not the
// whole checkInvariants: its history replay starts from the first
// proposal, which this retention drops.)
func TestWriterKeptValues(t *testing.T) {
	j := openTest(t, "", Options{Retain: 5, MemTableSize: 16 << 20}) // no growing (grow.go) while valuesAsStored reads
	term := synced(t, j)
	leaves := func(n int, value string) *Op {
		var kv []string
		for k := range n {
			kv = append(kv, fmt.Sprintf("/interfaces/interface[name=e%d]/config/description", k), value)
		}
		return update(t, kv...)
	}
	bounded := func(step string) {
		t.Helper()
		j.values.mu.Lock()
		n, size := len(j.values.byKey), j.values.size
		j.values.mu.Unlock()
		if n > recentValuesMaxCount || size > recentValuesMaxSize {
			t.Fatalf("%s: the writer keeps %d value records (%d bytes), over its bounds (%d, %d)", step, n, size, recentValuesMaxCount, recentValuesMaxSize)
		}
		if n == 0 {
			t.Fatalf("%s: the writer keeps no value record", step)
		}
		if err := valuesAsStored(j); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	for round := range 2 {
		applyChange(t, j, term, leaves(1200, fmt.Sprintf("round %d", round)))
		bounded(fmt.Sprintf("1,200 leaves, round %d", round))
	}
	for k := range 20 {
		applyChange(t, j, term, update(t, "/interfaces/interface[name=e7]/config/description", fmt.Sprintf("small %d", k)))
		bounded(fmt.Sprintf("one leaf, Set %d", k))
	}
	deleted := applyChange(t, j, term, del(t, "/interfaces/interface[name=e7]"), del(t, "/interfaces/interface[name=e8]"))
	bounded("delete of two entries")
	rollback(t, j, term, deleted)
	bounded("rollback of the delete")
	applyChange(t, j, term, del(t, "/interfaces/interface[name=e9]"))
	bounded("delete of an entry")
	for k := range 10 {
		applyChange(t, j, term, update(t, "/interfaces/interface[name=e1]/config/description", fmt.Sprintf("after %d", k)))
	}
	if _, err := j.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	bounded("retention, its tombstones dropped")
}

// TestForgetHeadsForgetsKeptValues: a value record written behind the
// writer's back (as tests do) is read from Badger
// once forgetHeads has run, not from the writer's older kept copy.
func TestForgetHeadsForgetsKeptValues(t *testing.T) {
	j := openTest(t, "", Options{})
	term := synced(t, j)
	const path = "/interfaces/interface[name=e1]/config/description"
	applyChange(t, j, term, update(t, path, "kept"))
	key := valueKey(nsCommitted, PathKey(mustPath(t, path)))
	if _, ok := j.values.get(key); !ok {
		t.Fatal("the writer keeps no record of the committed value: the test proves nothing")
	}
	behind := &PathValue{Path: mustPath(t, path), Index: 99, Value: &gnmi.TypedValue{Value: &gnmi.TypedValue_StringVal{StringVal: "behind"}}}
	b, err := encodeRecord(behind)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.db.Update(func(txn *badger.Txn) error { return txn.Set(key, b) }); err != nil {
		t.Fatal(err)
	}
	j.forgetHeads()
	if err := valuesAsStored(j); err != nil {
		t.Fatal(err)
	}
}

// TestProposalStatusIs: the predicate sees what ProposalStatus holds,
// whether the writer keeps the record decoded (the predicate reads it
// itself) or not (a status view read from Badger), and the errors are
// ProposalStatus's.
func TestProposalStatusIs(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{Retain: 2})
	term := synced(t, j)
	var applied, pending uint64
	for n := range 4 {
		p, err := j.ProposeChange(ctx, []*Op{leafOp(n, int64(n))})
		if err != nil {
			t.Fatal(err)
		}
		applied = p.GetIndex()
		commitAndApply(t, j, term, applied)
	}
	p, err := j.ProposeChange(ctx, []*Op{leafOp(9, 9)})
	if err != nil {
		t.Fatal(err)
	}
	pending = p.GetIndex()
	if _, err := j.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	isApplied := func(p *Proposal) bool { return p.GetChange().GetApply() == StatusComplete }
	for _, kept := range []bool{true, false} {
		if !kept {
			j.recent.clear() // read from Badger, as after a restart
		}
		if got := j.recent.get(applied) != nil && j.recent.get(pending) != nil; got != kept {
			t.Fatalf("the writer keeps the records decoded: %v, want %v", got, kept)
		}
		for _, tc := range []struct {
			name    string
			i       uint64
			want    bool
			wantErr error
		}{
			{"applied", applied, true, nil},
			{"proposed", pending, false, nil},
			{"dropped by retention", 1, false, ErrCompacted},
			{"never proposed", pending + 1, false, ErrNotFound},
		} {
			got, err := j.ProposalStatusIs(ctx, tc.i, isApplied)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Errorf("kept %v, %s: ProposalStatusIs(%d) = %v, %v; want %v, %v", kept, tc.name, tc.i, got, err, tc.want, tc.wantErr)
			}
			st, err := j.ProposalStatus(ctx, tc.i)
			if tc.wantErr == nil && (err != nil || isApplied(st) != got) {
				t.Errorf("kept %v, %s: ProposalStatus(%d) = %v, %v, against ProposalStatusIs's %v", kept, tc.name, tc.i, st, err, got)
			}
		}
	}
}
