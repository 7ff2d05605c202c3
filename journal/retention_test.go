package journal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
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

// TestRetentionRunsWhenTheJournalOutgrowsIt: with an interval that never
// comes, retention still runs once the journal holds retentionSlack more
// proposals than Retain, and brings it back to Retain; and a proposal that
// is not finished holds it back without making every later commit call it
// in vain (it waits for the interval).
func TestRetentionRunsWhenTheJournalOutgrowsIt(t *testing.T) {
	const retain = 100
	slices := make(chan sliceStats, 1024)
	j := openTest(t, "", Options{NoSync: true, Retain: retain, RetentionInterval: time.Hour,
		onSlice: func(st sliceStats) {
			select {
			case slices <- st:
			default:
			}
		}})
	ctx := context.Background()
	term := synced(t, j)
	slack := int(retentionSlack(retain))
	for n := range retain + slack - 1 {
		applyChange(t, j, term, update(t, "/a", fmt.Sprint(n)))
	}
	configuration := func() *Configuration {
		c, err := j.Configuration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := configuration(); c.FirstIndex != 1 {
		t.Fatalf("retention ran with %d proposals, below Retain + slack %d", c.LastIndex, retain+slack)
	}
	applyChange(t, j, term, update(t, "/a", "last"))
	deadline := time.Now().Add(time.Minute)
	for c := configuration(); c.LastIndex-c.FirstIndex+1 > retain; c = configuration() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute the journal still holds proposals %d…%d, want the newest %d", c.FirstIndex, c.LastIndex, retain)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// An unfinished proposal (proposed, never committed) holds retention
	// back: the journal grows past Retain + slack; retention drops the
	// finished proposals before it as the journal grows, and then, called
	// in vain once, is not called again by every commit.
	held, err := j.ProposeChange(ctx, []*Op{update(t, "/held", "x")})
	if err != nil {
		t.Fatal(err)
	}
	propose := func(n int) {
		if _, err := j.ProposeChange(ctx, []*Op{update(t, "/b", fmt.Sprint(n))}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; configuration().FirstIndex < held.Index; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("retention did not drop the finished proposals before the unfinished %d: first %d", held.Index, configuration().FirstIndex)
		}
		propose(n)
	}
	for len(slices) > 0 {
		<-slices
	}
	for n := range 2 * slack {
		propose(n)
	}
	if err := j.Update(ctx, func(*Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if c := configuration(); c.FirstIndex > held.Index {
		t.Fatalf("retention dropped past the unfinished proposal %d: first %d", held.Index, c.FirstIndex)
	}
	// The first call finds nothing to drop (one empty slice; the run that
	// reached the unfinished proposal may still be ending its slices as
	// the drain ended), and the calls after it wait for the interval;
	// called by every commit, retention would run 2 × slack (128) times.
	if n := len(slices); n > 8 {
		t.Fatalf("%d retention slices ran while an unfinished proposal held retention back, want a handful", n)
	}
}

// TestRetentionFloorIsTheNewestDroppedDelta: retention reads of each
// history delta it passes only its time and proposal (decodeDeltaHead,
// which must agree with the whole decoding on every stored delta, small
// and plain or compressed), drops exactly the deltas of the proposals it
// drops, and sets the history floor to the time of the newest of them.
func TestRetentionFloorIsTheNewestDroppedDelta(t *testing.T) {
	clock := &fakeClock{}
	j := openTest(t, "", Options{NoSync: true, Retain: 3, Clock: clock.now})
	term := synced(t, j)
	ctx := context.Background()
	for n := range 9 {
		clock.sec.Add(10)
		ops := []*Op{update(t, "/a", fmt.Sprint(n))} // a small delta, stored plain
		if n%2 == 1 {                                // a larger one, compressed
			ops = []*Op{update(t, "/interfaces/interface[name=eth0]/config/description", strings.Repeat("uplink ", 8),
				"/interfaces/interface[name=eth0]/config/mtu", fmt.Sprint(1500+n))}
		}
		applyChange(t, j, term, ops...)
	}
	type head struct {
		seq, proposal uint64
		at            time.Time
	}
	compressed := map[bool]bool{}
	deltas := func() (out []head) {
		t.Helper()
		err := j.view(context.Background(), func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: nsHistory})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				seq, d, err := decodeDelta(it.Item())
				if err != nil {
					return err
				}
				hseq, h, err := decodeDeltaHead(it.Item())
				if err != nil {
					return err
				}
				if hseq != seq || h.GetProposal() != d.GetProposal() || !proto.Equal(h.GetTime(), d.GetTime()) {
					t.Errorf("delta %d: head %d %v, whole %d %v", seq, h.GetProposal(), h.GetTime(), d.GetProposal(), d.GetTime())
				}
				if err := readValue(it.Item(), func(v []byte) error {
					compressed[v[0] == compressedRecord] = true
					return nil
				}); err != nil {
					return err
				}
				out = append(out, head{seq, d.GetProposal(), d.GetTime().AsTime()})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := deltas()
	if !compressed[true] || !compressed[false] {
		t.Fatalf("stored deltas compressed: %v; want both kinds", compressed)
	}
	if _, err := j.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := j.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstIndex != c.LastIndex-2 {
		t.Fatalf("kept proposals %d..%d, want 3", c.FirstIndex, c.LastIndex)
	}
	var kept []head
	var floor time.Time
	for _, d := range before {
		if d.proposal < c.FirstIndex {
			floor = d.at
		} else {
			kept = append(kept, d)
		}
	}
	if floor.IsZero() {
		t.Fatal("no delta was old enough to drop: the test proves nothing")
	}
	if got := deltas(); !slices.Equal(got, kept) {
		t.Errorf("deltas after retention %v, want %v", got, kept)
	}
	if got := c.GetHistoryFloor().AsTime(); !got.Equal(floor) {
		t.Errorf("history floor %v, want the newest dropped delta's time %v", got, floor)
	}
	checkInvariants(t, j)
}

// TestRetentionDropsStaleTombstoneEntries: the tombstone index entry of a
// tombstone a later value replaced (the writer leaves it) is removed once
// retention passes its proposal, and the tombstone of a kept delete stays
// indexed.
func TestRetentionDropsStaleTombstoneEntries(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, Retain: 1})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/x", "1"))
	applyChange(t, j, term, del(t, "/x")) // 2: /x=deleted@2, indexed
	applyChange(t, j, term, update(t, "/x", "3"))
	applyChange(t, j, term, del(t, "/y")) // 4: kept
	if entries := keyCount(t, j, nsAppliedDeleted); entries != 2 {
		t.Fatalf("%d tombstone index entries before retention, want 2 (one stale)", entries)
	}
	if _, err := j.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if entries := keyCount(t, j, nsAppliedDeleted); entries != 1 {
		t.Errorf("%d tombstone index entries after retention, want 1 (/y's)", entries)
	}
	checkInvariants(t, j)
}

func keyCount(t *testing.T, j *Journal, ns []byte) int {
	t.Helper()
	keys, err := keySet(j, ns)
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// TestRetentionReadsHeldStatuses: retention decides from the statuses the
// writer holds (statuses.go) without reading the records, and a record
// written again since (a finished proposal being rolled back) is decided
// by its new status: retention never drops a proposal whose rollback is
// not finished, and drops it once it is.
func TestRetentionReadsHeldStatuses(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, t.TempDir(), Options{NoSync: true, Retain: 1, RetentionInterval: time.Hour})
	term := synced(t, j)
	for n := 1; n <= 3; n++ {
		applyChange(t, j, term, update(t, "/interfaces/interface[name=eth0]/config/description", fmt.Sprint(n)))
	}
	rollback(t, j, term, 3)
	if _, _, err := j.ProposeRollback(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		if _, ok := j.statuses.get(i); !ok {
			t.Fatalf("the writer holds no status of proposal %d", i)
		}
	}
	compact := func(want int, first uint64) {
		t.Helper()
		j.recent.clear() // decide from the held statuses, not the records kept
		dropped, err := j.Compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := j.Configuration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if dropped != want || c.FirstIndex != first {
			t.Errorf("retention dropped %d proposals, kept from %d; want %d, from %d", dropped, c.FirstIndex, want, first)
		}
		checkInvariants(t, j)
	}
	compact(1, 2) // proposal 2's rollback is pending: kept
	if _, err := j.Proposal(ctx, 2); err != nil {
		t.Fatalf("proposal 2, being rolled back: %v", err)
	}
	for _, step := range []func() error{
		func() error { _, _, err := j.CommitRollback(ctx, 2); return err },
		func() error { _, _, err := j.StartApplyRollback(ctx, 2); return err },
		func() error { _, _, err := j.CompleteApplyRollback(ctx, 2, term); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	compact(1, 3) // rolled back: finished
	if _, ok := j.statuses.get(2); ok {
		t.Errorf("the writer still holds a status of proposal 2, which retention dropped")
	}
}
