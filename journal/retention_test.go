package journal

import (
	"context"
	"fmt"
	"testing"
)

// TestRetentionSlices runs many retention cycles with a small retention
// and checks, slice by slice, the bound on the work a retention
// transaction does while the writer waits for it: no slice steps on an
// entry an earlier slice dropped, and none touches more than
// retentionSlice proposals or history entries. The work is counted, not
// timed, so a loaded machine cannot make it flaky.
func TestRetentionSlices(t *testing.T) {
	for _, tc := range []struct {
		name         string
		retain       int
		proposals    int
		compactEvery int
		reopenAt     int // reopen the journal after this many proposals (0: never)
	}{
		{name: "often", retain: 300, proposals: 3000, compactEvery: 50},
		{name: "rarely, large backlog", retain: 200, proposals: 3000, compactEvery: 1000},
		{name: "reopened", retain: 300, proposals: 2400, compactEvery: 100, reopenAt: 1200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var slices, slow, dropped int
			opts := Options{NoSync: true, Retain: tc.retain, onSlice: func(st sliceStats) {
				slices++
				dropped += st.proposals
				if st.dead > 0 || st.visited > retentionSlice || st.proposals > retentionSlice {
					slow++
					t.Errorf("slice %d: %+v: over the bound", slices, st)
				}
			}}
			j := openTest(t, dir, opts)
			term := synced(t, j)
			ctx := context.Background()
			for n := 1; n <= tc.proposals; n++ {
				leaf := fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", n%16)
				op := update(t, leaf, fmt.Sprint(n))
				if n%7 == 0 {
					op = del(t, leaf) // tombstones for retention to drop
				}
				applyChange(t, j, term, op)
				if n%tc.compactEvery == 0 {
					if _, err := j.Compact(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if n == tc.reopenAt {
					if err := j.Close(); err != nil {
						t.Fatal(err)
					}
					j = openTest(t, dir, opts)
				}
			}
			if _, err := j.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			c, err := j.Configuration(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if kept := c.LastIndex - c.FirstIndex + 1; kept != uint64(tc.retain) {
				t.Errorf("kept %d proposals (%d..%d), want %d", kept, c.FirstIndex, c.LastIndex, tc.retain)
			}
			if want := tc.proposals - tc.retain; dropped != want {
				t.Errorf("dropped %d proposals, want %d", dropped, want)
			}
			if min := dropped / retentionSlice; slices < min {
				t.Errorf("%d slices for %d proposals: not sliced", slices, dropped)
			}
			if slow > 0 {
				t.Errorf("%d of %d slices over the bound", slow, slices)
			}
			checkInvariants(t, j)
		})
	}
}
