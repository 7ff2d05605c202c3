package journal

import (
	"fmt"
	"testing"
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
