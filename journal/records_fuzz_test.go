package journal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
)

// fuzzedRecord is a record FuzzRecordDecoding overwrites: its key (built
// from the fuzzer's key suffix for the namespaces), the message it must
// hold, and the reads that decode it, which must fail when it does not
// decode.
type fuzzedRecord struct {
	name    string
	key     func(suffix []byte) []byte
	msg     func() proto.Message // nil: the value is not decoded
	mustErr []string             // names of reads in journalReads
}

// FuzzRecordDecoding overwrites one record of a journal holding every kind
// of record (or adds one under a namespace, its key from the fuzzer) with
// the fuzzer's bytes, then runs every read and retention. Nothing may
// panic, and a read of a record that does not decode, or of an applied
// index entry that is malformed, must fail. The journal is put back as it
// was after each input.
func FuzzRecordDecoding(f *testing.F) {
	j := openTest(f, "", Options{NoSync: true, Retain: 2})
	c := recordFixture(f, j)
	records := []fuzzedRecord{
		{"configuration", fixedKey(keyConfiguration), func() proto.Message { return &Configuration{} },
			[]string{"Configuration", "Proposal", "NewestRollbackable", "CommittedAt", "History"}},
		{"mastership", fixedKey(keyMastership), func() proto.Message { return &Mastership{} }, []string{"Mastership"}},
		{"commit-confirm", fixedKey(keyCommitConfirm), func() proto.Message { return &CommitConfirm{} }, []string{"CommitConfirm"}},
		{"newest proposal", fixedKey(proposalKey(c.GetLastIndex())), func() proto.Message { return &Proposal{} },
			[]string{"Proposal", "Proposals"}},
		{"committed value", firstKey(f, j, nsCommitted), func() proto.Message { return &PathValue{} }, []string{"Committed"}},
		{"applied value", firstKey(f, j, nsApplied), func() proto.Message { return &PathValue{} },
			[]string{"Applied", "ReplayApplied"}},
		{"newest history delta", fixedKey(historyKey(c.GetHistorySeq())), func() proto.Message { return &HistoryDelta{} },
			[]string{"History", "CommittedAt"}},
		{"committed key", namespaced(nsCommitted), func() proto.Message { return &PathValue{} }, []string{"Committed"}},
		{"history key", namespaced(nsHistory), func() proto.Message { return &HistoryDelta{} }, []string{"History"}},
		{"applied tombstone key", namespaced(nsAppliedDeleted), nil, nil},
	}
	pristine := dump(f, j)
	for n, r := range records {
		f.Add(uint8(n), []byte{0, 0, 0, 0, 0, 0, 0, 9, sepElem, 'a'}, []byte(pristine[string(r.key(nil))]))
		f.Add(uint8(n), []byte{1}, []byte{0xff})
	}
	f.Add(uint8(0), []byte(nil), mustMarshal(f, &Configuration{LastIndex: 1 << 63, FirstIndex: 3}))
	f.Add(uint8(3), []byte(nil), mustMarshal(f, &Proposal{Index: 7, Change: &Change{Values: []*PathValue{{}}}}))

	f.Fuzz(func(t *testing.T, which uint8, suffix, value []byte) {
		r := records[int(which)%len(records)]
		key := r.key(suffix)
		if err := j.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) }); err != nil {
			return // a key or value Badger refuses
		}
		j.forgetHeads() // written behind the writer's back
		defer restore(t, j, pristine)
		errs := journalReads(j, c)
		var malformed bool
		if r.msg != nil {
			malformed = decodeRecord(value, r.msg()) != nil
		} else {
			// An index entry is malformed unless it names an applied value.
			_, applied := pristine[string(nsApplied)+string(suffix[min(8, len(suffix)):])]
			malformed = len(suffix) < 8 || !applied
		}
		if !malformed {
			return
		}
		for _, read := range r.mustErr {
			if errs[read] == nil {
				t.Errorf("%s with %s %q = %q: nil error, want one", read, r.name, key, value)
			}
		}
	})
}

// recordFixture fills j with a record of every kind: applied changes (a
// value, a JSON value, a delete), a rollback, retention's history floor
// and an outstanding commit-confirmed. It returns the configuration.
func recordFixture(tb testing.TB, j *Journal) *Configuration {
	tb.Helper()
	ctx := context.Background()
	term := synced(tb, j)
	applyChange(tb, j, term, update(tb, "/a/b[k=1]/c", "x"))
	applyChange(tb, j, term, del(tb, "/a/b[k=1]"))
	applyChange(tb, j, term, update(tb, "/d", `{"e":1}`))
	i := applyChange(tb, j, term, update(tb, "/a/b[k=2]/c", "y"))
	rollback(tb, j, term, i)
	if _, err := j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(tb, "/f", "z")}, "cc", time.Now().Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
	if _, err := j.Compact(ctx); err != nil {
		tb.Fatal(err)
	}
	c, err := j.Configuration(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// journalReads runs every read of j (and retention) and returns their
// errors by name.
func journalReads(j *Journal, c *Configuration) map[string]error {
	ctx := context.Background()
	ignore := func(*PathValue) error { return nil }
	mid := c.GetHistoryTime().AsTime().Add(-time.Nanosecond)
	errs := map[string]error{}
	_, errs["Configuration"] = j.Configuration(ctx)
	_, errs["Mastership"] = j.Mastership(ctx)
	if _, err := j.CommitConfirm(ctx); !errors.Is(err, ErrNotFound) {
		errs["CommitConfirm"] = err
	}
	for i := c.GetFirstIndex(); i <= c.GetLastIndex(); i++ {
		if _, err := j.Proposal(ctx, i); err != nil {
			errs["Proposal"] = fmt.Errorf("proposal %d: %w", i, err)
		}
	}
	errs["Proposals"] = j.Proposals(ctx, 0, 0, func(*Proposal) error { return nil })
	if _, err := j.NewestRollbackable(ctx); !errors.Is(err, ErrGuard) {
		errs["NewestRollbackable"] = err
	}
	errs["Committed"] = j.Committed(ctx, nil, ignore)
	errs["Applied"] = j.Applied(ctx, nil, ignore)
	errs["ReplayApplied"] = j.ReplayApplied(ctx, ignore)
	errs["CommittedAt"] = errors.Join(j.CommittedAt(ctx, time.Now(), nil, ignore), j.CommittedAt(ctx, mid, nil, ignore))
	errs["History"] = j.History(ctx, c.GetHistoryFloor().AsTime().Add(time.Nanosecond), time.Time{}, func(*HistoryDelta) error { return nil })
	_, errs["Compact"] = j.Compact(ctx)
	return errs
}

// restore puts j's database back to the dump pristine.
func restore(t *testing.T, j *Journal, pristine map[string]string) {
	t.Helper()
	defer j.forgetHeads()
	err := j.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		changed := map[string]bool{}
		for key := range pristine {
			changed[key] = true // until seen unchanged
		}
		for it.Rewind(); it.Valid(); it.Next() {
			key := string(it.Item().Key())
			want, ok := pristine[key]
			if !ok {
				changed[key] = true
				continue
			}
			got, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			changed[key] = string(got) != want
		}
		it.Close()
		for key, c := range changed {
			want, ok := pristine[key]
			switch {
			case !c:
			case !ok:
				if err := txn.Delete([]byte(key)); err != nil {
					return err
				}
			default:
				if err := txn.Set([]byte(key), []byte(want)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("restoring the journal: %v", err)
	}
}

func fixedKey(key []byte) func([]byte) []byte { return func([]byte) []byte { return key } }

func namespaced(ns []byte) func([]byte) []byte {
	return func(suffix []byte) []byte { return append(append([]byte(nil), ns...), suffix...) }
}

// firstKey returns the first key in namespace ns of j.
func firstKey(tb testing.TB, j *Journal, ns []byte) func([]byte) []byte {
	tb.Helper()
	var key []byte
	err := j.view(context.Background(), func(txn *badger.Txn) error {
		return iteratePrefix(txn, ns, func(k, _ []byte) error {
			if key == nil {
				key = k
			}
			return nil
		})
	})
	if err != nil || key == nil {
		tb.Fatalf("no key in namespace %q: %v", ns, err)
	}
	return fixedKey(key)
}

func mustMarshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
