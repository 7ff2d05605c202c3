package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	err := r.j.view(context.Background(), func(txn *badger.Txn) error {
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
// for the proposals it keeps, by reader.
func (r *derivedRun) reads() map[string][]*Proposal {
	r.t.Helper()
	ctx := context.Background()
	c, err := r.j.Configuration(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	first, n := c.GetFirstIndex(), c.GetLastIndex()
	out := map[string][]*Proposal{}
	for i := first; i <= n; i++ {
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
		err = r.j.view(context.Background(), func(txn *badger.Txn) error {
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
		{"Proposals ending in the middle", 1, (first + n) / 2, false},
		{"Proposals starting in the middle", (first+n)/2 + 1, 0, false},
		{"ProposalStatuses", 1, 0, true},
		{"ProposalStatuses ending in the middle", 1, (first + n) / 2, true},
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

// derivedPair is the same Sets and device answers driven through two
// journals at the same times: batched completes each device Set's
// proposals in one request, as the agent does; reference in a request per
// proposal, which writes every record.
type derivedPair struct {
	t                  *testing.T
	batched, reference *derivedRun
	proposed, applied  uint64   // the newest proposal; every one up to applied is applied
	started            bool     // applied+1's apply is started
	inEffect           []uint64 // applied changes not rolled back, oldest first
}

func newDerivedPair(t *testing.T) *derivedPair {
	return &derivedPair{t: t, batched: newDerivedRun(t), reference: newDerivedRun(t)}
}

func (d *derivedPair) both(f func(r *derivedRun)) { f(d.batched); f(d.reference) }

// arrive proposes and commits n Sets.
func (d *derivedPair) arrive(n int) {
	d.both(func(r *derivedRun) { r.proposeCommitted(n) })
	d.proposed += uint64(n)
}

// answer completes the device Set that carried applied+1 .. last,
// starting its first proposal's apply first if it was not (in a request
// of its own, as the applier's first step), and the next one's with the
// answer if startNext.
func (d *derivedPair) answer(last uint64, startNext bool) {
	first := d.applied + 1
	if !d.started {
		d.both(func(r *derivedRun) {
			r.update(func(tx *Tx) error { _, _, err := tx.StartApply(first); return err })
		})
	}
	next := uint64(0)
	if startNext && last < d.proposed {
		next = last + 1
	}
	d.batched.complete(first, last, next, false)
	d.reference.complete(first, last, next, true)
	for i := first; i <= last; i++ {
		d.inEffect = append(d.inEffect, i)
	}
	d.applied, d.started = last, next != 0
}

// rollbackNewest rolls back the newest change in effect.
func (d *derivedPair) rollbackNewest() {
	i := d.inEffect[len(d.inEffect)-1]
	d.inEffect = d.inEffect[:len(d.inEffect)-1]
	d.both(func(r *derivedRun) {
		r.tick()
		rollback(d.t, r.j, r.term, i)
	})
}

// compare checks that every reader reads both journals the same.
func (d *derivedPair) compare(when string) {
	t := d.t
	t.Helper()
	got, want := d.batched.reads(), d.reference.reads()
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
	if err := invariants(d.batched.j); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// TestBatchCompletionWritesTheNewestRecordOnly drives two journals through
// the same Sets and device answers, at the same times (derivedPair): the
// one that completes each device Set's proposals in one request must
// store one completed record per device Set, and every reader of
// proposals must read both journals the same after every step, from the
// writer's kept records and from Badger after a reopen, through
// rollbacks of proposals completed by a later record (which rewrite their
// records whole) and retention. One fixed sequence, then random ones.
func TestBatchCompletionWritesTheNewestRecordOnly(t *testing.T) {
	t.Run("fixed", func(t *testing.T) {
		d := newDerivedPair(t)
		// Device Set 1 carries proposal 1 alone; 2 to 6 arrive meanwhile
		// and go in device Set 2, whose answer also starts 7's apply; 7
		// to 9 in device Set 3.
		d.arrive(1)
		d.answer(1, false)
		d.arrive(5)
		d.answer(6, true)
		d.arrive(3)
		d.answer(9, false)
		if got, want := d.batched.completedRecords(), 3; got != want {
			t.Errorf("%d proposal records read complete as stored, want %d (one per device Set)", got, want)
		}
		if got := d.reference.completedRecords(); got != 9 {
			t.Errorf("the reference stores %d completed records, want 9", got)
		}
		c, err := d.batched.j.Configuration(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.GetAppliesCompletedThrough() != 9 || c.GetApplied().GetIndex() != 9 {
			t.Errorf("applies_completed_through %d, applied.index %d, want 9 and 9", c.GetAppliesCompletedThrough(), c.GetApplied().GetIndex())
		}
		d.compare("held by the writer")
		d.both(func(r *derivedRun) { r.reopen() })
		d.compare("after a reopen")
		for range 3 { // 9, then 8 and 7, completed by 9's record
			d.rollbackNewest()
		}
		d.compare("after rollbacks")
		d.both(func(r *derivedRun) { r.reopen() })
		d.compare("after rollbacks and a reopen")
		d.both(func(r *derivedRun) {
			r.j.opts.Retain = 3
			if _, err := r.j.Compact(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
		for _, r := range []*derivedRun{d.batched, d.reference} {
			c, err := r.j.Configuration(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.GetFirstIndex() != 7 {
				t.Fatalf("retention kept from proposal %d, want 7", c.GetFirstIndex())
			}
		}
		d.compare("after retention")
	})
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 36))
			d := newDerivedPair(t)
			for step := range 40 {
				when := fmt.Sprintf("step %d", step)
				switch k := rng.IntN(10); {
				case k < 4:
					d.arrive(1 + rng.IntN(6))
					when += ": Sets arrived"
				case k < 7 && d.applied < d.proposed:
					d.answer(d.applied+1+uint64(rng.IntN(int(d.proposed-d.applied))), rng.IntN(3) > 0)
					when += ": a device Set answered"
				case k == 7 && d.applied == d.proposed && !d.started && len(d.inEffect) > 0:
					d.rollbackNewest()
					when += ": a rollback"
				case k == 8:
					d.both(func(r *derivedRun) { r.reopen() })
					when += ": reopened"
				case k == 9 && d.applied == d.proposed:
					retain := 1 + rng.IntN(10)
					d.both(func(r *derivedRun) {
						r.j.opts.Retain = retain
						if _, err := r.j.Compact(context.Background()); err != nil {
							t.Fatal(err)
						}
						r.j.opts.Retain = -1
					})
					when += fmt.Sprintf(": retention kept %d", retain)
				default:
					continue
				}
				d.compare(when)
			}
			batched, reference := d.batched.completedRecords(), d.reference.completedRecords()
			t.Logf("%d proposals; completed records stored: %d batched, %d by the reference", d.proposed, batched, reference)
			if batched >= reference && d.proposed > 20 {
				t.Errorf("batched stores %d completed records, the reference %d: no completion went without its record", batched, reference)
			}
		})
	}
}
