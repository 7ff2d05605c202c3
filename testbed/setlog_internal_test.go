package testbed

import "testing"

// TestSetLogRing: the Set log keeps the newest SetLogSize records, oldest
// first, their seqs consecutive.
func TestSetLogRing(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, SetLogSize - 1, SetLogSize, SetLogSize + 1, 2*SetLogSize + 7} {
		d.ClearSetLog()
		first := d.sets.next + 1
		for range n {
			d.mu.Lock()
			d.sets.add(&SetRecord{})
			d.mu.Unlock()
		}
		log := d.SetLog()
		want := min(n, SetLogSize)
		if len(log) != want {
			t.Fatalf("%d Sets: %d records, want %d", n, len(log), want)
		}
		for k, r := range log {
			if wantSeq := first + uint64(n-want+k); r.Seq != wantSeq {
				t.Fatalf("%d Sets: record %d has seq %d, want %d", n, k, r.Seq, wantSeq)
			}
		}
	}
}
