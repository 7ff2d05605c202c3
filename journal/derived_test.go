package journal

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
)

// derivedRun is one journal driven through a device Set's batch, its
// clock set by the test so that two journals record the same times.
type derivedRun struct {
	t     *testing.T
	dir   string
	j     *Journal
	clock atomic.Int64 // Unix nanoseconds
	term  uint64
}

func newDerivedRun(t *testing.T) *derivedRun {
	r := &derivedRun{t: t, dir: t.TempDir()}
	r.clock.Store(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixNano())
	r.open()
	r.term = synced(t, r.j)
	return r
}

func (r *derivedRun) open() {
	r.j = openTest(r.t, r.dir, Options{NoSync: true, Retain: -1, Clock: func() time.Time { return time.Unix(0, r.clock.Load()).UTC() }})
}

func (r *derivedRun) reopen() {
	r.t.Helper()
	if err := r.j.Close(); err != nil {
		r.t.Fatal(err)
	}
	r.open()
}

func (r *derivedRun) tick() { r.clock.Add(int64(time.Millisecond)) }

func (r *derivedRun) update(fn func(*Tx) error) {
	r.t.Helper()
	r.tick()
	if err := r.j.Update(context.Background(), fn); err != nil {
		r.t.Fatal(err)
	}
}

// proposeCommitted proposes and commits n one-leaf changes, each in a
// request of its own, as clients' Sets arrive while the device is busy.
func (r *derivedRun) proposeCommitted(n int) {
	r.t.Helper()
	for k := 0; k < n; k++ {
		r.tick()
		p, err := r.j.ProposeChange(context.Background(), []*Op{update(r.t, fmt.Sprintf("/leaf%d", k%3), fmt.Sprint(k))})
		if err != nil {
			r.t.Fatal(err)
		}
		r.update(func(tx *Tx) error { _, _, err := tx.CommitChange(p.GetIndex()); return err })
	}
}

// complete records the device's answer to a Set that carried first..last
// the way the agent does (completeBatch): in one request, or (oneByOne)
// in a request per proposal, which writes every record; then it starts
// next's apply, if next is not 0.
func (r *derivedRun) complete(first, last, next uint64, oneByOne bool) {
	r.t.Helper()
	r.tick()
	at := r.clock.Load()
	step := func(tx *Tx, i uint64) error {
		if i != first {
			if _, _, err := tx.StartApply(i); err != nil {
				return err
			}
		}
		_, _, err := tx.CompleteApply(i, r.term)
		return err
	}
	startNext := func(tx *Tx) error {
		if next == 0 {
			return nil
		}
		_, _, err := tx.StartApply(next)
		return err
	}
	if oneByOne {
		for i := first; i <= last; i++ {
			r.clock.Store(at)
			if err := r.j.Update(context.Background(), func(tx *Tx) error { return step(tx, i) }); err != nil {
				r.t.Fatal(err)
			}
		}
		r.clock.Store(at)
		if err := r.j.Update(context.Background(), startNext); err != nil {
			r.t.Fatal(err)
		}
		return
	}
	err := r.j.Update(context.Background(), func(tx *Tx) error {
		for i := first; i <= last; i++ {
			if err := step(tx, i); err != nil {
				return err
			}
		}
		return startNext(tx)
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// completedRecords counts the proposal records stored that say their
// change's apply is complete, read as they are (without derived.go).
func (r *derivedRun) completedRecords() int {
	r.t.Helper()
	n := 0
	err := r.j.db.View(func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsProposal, func(_, val []byte) error {
			p := &Proposal{}
			if err := decodeRecord(val, p); err != nil {
				return err
			}
			if p.GetChange().GetApply() == StatusComplete {
				n++
			}
			return nil
		})
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// reads returns what each of the journal's readers of proposals gives
// for proposals 1..n, by reader.
func (r *derivedRun) reads(n uint64) map[string][]*Proposal {
	r.t.Helper()
	ctx := context.Background()
	out := map[string][]*Proposal{}
	for i := uint64(1); i <= n; i++ {
		p, err := r.j.Proposal(ctx, i)
		if err != nil {
			r.t.Fatal(err)
		}
		out["Proposal"] = append(out["Proposal"], p)
		st, err := r.j.ProposalStatus(ctx, i)
		if err != nil {
			r.t.Fatal(err)
		}
		out["ProposalStatus"] = append(out["ProposalStatus"], st)
		err = r.j.db.View(func(txn *badger.Txn) error {
			c, err := loadConfiguration(txn)
			if err != nil {
				return err
			}
			if p, err = loadProposal(txn, c, i); err != nil {
				return err
			}
			out["loadProposal"] = append(out["loadProposal"], p)
			if st, err = loadProposalStatus(txn, c, i); err != nil {
				return err
			}
			out["loadProposalStatus"] = append(out["loadProposalStatus"], st)
			return nil
		})
		if err != nil {
			r.t.Fatal(err)
		}
	}
	scans := []struct {
		name     string
		from, to uint64
		statuses bool
	}{
		{"Proposals", 1, 0, false},
		{"Proposals ending inside a batch", 1, n / 2, false},
		{"Proposals starting inside a batch", n/2 + 1, 0, false},
		{"ProposalStatuses", 1, 0, true},
		{"ProposalStatuses ending inside a batch", 1, n / 2, true},
	}
	for _, s := range scans {
		read := r.j.Proposals
		if s.statuses {
			read = r.j.ProposalStatuses
		}
		err := read(ctx, s.from, s.to, func(p *Proposal) error {
			out[s.name] = append(out[s.name], p)
			return nil
		})
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return out
}

// TestBatchCompletionWritesTheNewestRecordOnly drives two journals through
// the same Sets and device answers, at the same times: one completes each
// device Set's proposals in one request, as the agent does, the other in a
// request per proposal, which writes every record. The first must store
// one completed record per device Set, and every reader of proposals must
// read both journals the same, from the writer's kept records and from
// Badger after a reopen, through rollbacks of proposals completed without
// a record of their own, and retention.
func TestBatchCompletionWritesTheNewestRecordOnly(t *testing.T) {
	batched, reference := newDerivedRun(t), newDerivedRun(t)
	both := func(f func(r *derivedRun)) { f(batched); f(reference) }
	compare := func(when string, n uint64) {
		t.Helper()
		got, want := batched.reads(n), reference.reads(n)
		for reader, w := range want {
			g := got[reader]
			if len(g) != len(w) {
				t.Fatalf("%s, %s: %d proposals, want %d", when, reader, len(g), len(w))
			}
			for k := range w {
				if !proto.Equal(g[k], w[k]) {
					t.Fatalf("%s, %s: proposal %d reads\n%v\nwant (every record written)\n%v", when, reader, w[k].GetIndex(), g[k], w[k])
				}
			}
		}
		if err := invariants(batched.j); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}

	// Device Set 1 carries proposal 1 alone; 2 to 6 arrive meanwhile and
	// go in device Set 2, whose answer also starts 7's apply; 8 to 9 in
	// device Set 3.
	both(func(r *derivedRun) {
		r.proposeCommitted(1)
		r.update(func(tx *Tx) error { _, _, err := tx.StartApply(1); return err })
		r.proposeCommitted(5)
	})
	batched.complete(1, 1, 2, false)
	reference.complete(1, 1, 2, true)
	both(func(r *derivedRun) { r.proposeCommitted(3) })
	batched.complete(2, 6, 7, false)
	reference.complete(2, 6, 7, true)
	batched.complete(7, 9, 0, false)
	reference.complete(7, 9, 0, true)

	if got, want := batched.completedRecords(), 3; got != want {
		t.Errorf("%d proposal records read complete as stored, want %d (one per device Set)", got, want)
	}
	if got := reference.completedRecords(); got != 9 {
		t.Errorf("the reference stores %d completed records, want 9", got)
	}
	c, err := batched.j.Configuration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.GetAppliesCompletedThrough() != 9 || c.GetApplied().GetIndex() != 9 {
		t.Errorf("applies_completed_through %d, applied.index %d, want 9 and 9", c.GetAppliesCompletedThrough(), c.GetApplied().GetIndex())
	}
	compare("held by the writer", 9)
	both(func(r *derivedRun) { r.reopen() })
	compare("after a reopen", 9)

	// Rolling back 9, 8 (completed by 9's record) and 7 rewrites 8's and
	// 7's records with what they read.
	for _, i := range []uint64{9, 8, 7} {
		both(func(r *derivedRun) {
			r.tick()
			rollback(t, r.j, r.term, i)
		})
	}
	compare("after rollbacks", 9)
	both(func(r *derivedRun) { r.reopen() })
	compare("after rollbacks and a reopen", 9)

	// Retention drops what is finished alike, completed by a later
	// record or not.
	both(func(r *derivedRun) {
		r.j.opts.Retain = 3
		if _, err := r.j.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	for _, r := range []*derivedRun{batched, reference} {
		c, err := r.j.Configuration(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.GetFirstIndex() != 7 {
			t.Fatalf("retention kept from proposal %d, want 7", c.GetFirstIndex())
		}
	}
	if err := invariants(batched.j); err != nil {
		t.Fatal(err)
	}
}
