package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger runs without compactors of its own (tables.go): the journal's
// writes are what compacts its tables. Writes that fill level 0 to
// compactFrom tables are followed by a compaction that empties it into
// the tree, and they never stall on a full level 0.
func TestWritesCompactTheTables(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20})
	term := synced(t, j)
	// Small records, so that the tree fills and Badger flushes full
	// memtables of its own: large ones go to the value log, and the
	// flushes they bring (flushForValueLog) are compacted alone at once.
	value := incompressible(100)
	sawFull, compacted := false, false
	deadline := time.Now().Add(2 * time.Minute)
	for n := 0; !(sawFull && compacted); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d changes: level 0 held %d tables or more: %v; compacted into the tree: %v (levels %+v)",
				n, compactFrom, sawFull, compacted, j.db.Levels())
		}
		applyChange(t, j, term, update(t, fmt.Sprintf("/a/b%d", n%500), value))
		l0, below := openLevelTables(j)
		sawFull = sawFull || l0 >= compactFrom
		compacted = compacted || (sawFull && l0 < compactFrom && below > 0)
	}
	checkInvariants(t, j)
}

// openLevelTables is levelTables of j's database, read under dbMu: the
// writer may reopen the database.
func openLevelTables(j *Journal) (zero, below int) {
	j.dbMu.RLock()
	defer j.dbMu.RUnlock()
	return levelTables(j.db)
}

// While it is written, the journal compacts from compactFrom level-0
// tables; once the writes stop, it compacts whatever level 0 holds, so
// that what those tables superseded is dropped and counted as garbage for
// the value log's GC at rest, not only at the next burst of writes.
func TestLevelZeroCompactedAtRest(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, GCInterval: time.Hour})
	term := synced(t, j)
	value := incompressible(100) // small records: the tree fills, not the value log
	// Writes until a compaction took level 0 into the tree and a later
	// flush left level 0 with fewer tables than compactFrom.
	deadline := time.Now().Add(2 * time.Minute)
	compacted := false
	for n := 0; ; n++ {
		if time.Now().After(deadline) {
			zero, below := openLevelTables(j)
			t.Fatalf("after %d changes: no compaction followed by a flush (level 0: %d tables, below: %d)", n, zero, below)
		}
		applyChange(t, j, term, update(t, fmt.Sprintf("/a/b%d", n%500), value))
		zero, below := openLevelTables(j)
		compacted = compacted || (below > 0 && zero == 0)
		if compacted && zero > 0 && zero < compactFrom {
			break
		}
	}
	deadline = time.Now().Add(time.Minute)
	for zero, _ := openLevelTables(j); zero > 0; zero, _ = openLevelTables(j) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the writes stopped level 0 still holds %d tables (fewer than compactFrom, %d): nothing compacted them at rest", zero, compactFrom)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkInvariants(t, j)
}

// Records of valueThreshold bytes or more live in Badger's value log, and
// every version written stays there until the log's GC rewrites or
// removes its file; retention drops whole proposals. The GC runs after
// the compactions writes bring (GCInterval is an hour here), and a
// memtable of pointers to large records is flushed for it
// (flushForValueLog), so a journal written far past its retention keeps
// a value log near its live size, not one growing with the writes: here
// 3,000 changes of 2 KiB write about 60 MB of records (each version of a
// proposal holds the value three times: the Set's, the effective and the
// before-image), and the log settles under a bound that holds the live
// records, valueLogUnflushed and files less than half garbage. Once the
// writes stopped, the flush at rest (restFlushDue) lets the log come down
// to about its live size (about 1 MB here) without waiting for more writes.
func TestValueLogStaysNearItsLiveSize(t *testing.T) {
	dir := t.TempDir()
	j := openTest(t, dir, Options{NoSync: true, MemTableSize: 1 << 20, Retain: 100, GCInterval: time.Hour})
	term := synced(t, j)
	value := incompressible(2 << 10)
	const (
		writes = 3000
		bound  = 32 << 20
	)
	var peak int64
	for n := range writes {
		applyChange(t, j, term, update(t, fmt.Sprintf("/a/b%d", n%50), value))
		peak = max(peak, valueLogBytes(t, dir))
	}
	deadline := time.Now().Add(time.Minute)
	for size := valueLogBytes(t, dir); size > bound; size = valueLogBytes(t, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after %d changes of %d bytes the value log holds %d MB, want at most %d MB", writes, len(value), size>>20, bound>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("value log: at most %d MB while written, %d MB after", peak>>20, valueLogBytes(t, dir)>>20)
	const atRest = 8 << 20
	for size := valueLogBytes(t, dir); size > atRest; size = valueLogBytes(t, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the writes stopped the value log holds %d MB, want at most %d MB at rest", size>>20, atRest>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkInvariants(t, j)
}

// valueLogBytes is the size of dir's value-log files, as written (Badger
// preallocates each file sparse, at twice its size).
func valueLogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(name, &st); err != nil {
			continue // removed by the GC meanwhile
		}
		n += st.Blocks * 512
	}
	return n
}

// TestValueLogGCNeverBringsBackADeletedRecord: a GC step of the value
// log writes back the records of the file it rewrites that are still in
// the tree, deleted ones included while their tombstones and older
// versions sit in different tables; a compaction that then merged the
// tombstones into the last level while the copies were in a memtable
// would drop the tombstones, and the deleted records would come back
// (tables.go, "The value log's GC and compactions"). Here a value-log
// file holds records since deleted (their tombstones in level 0, the
// records in the last level) and records overwritten since (half the
// file garbage, so the GC rewrites it); the compaction that follows the GC
// waits until the copies are in a table, and the deleted records stay
// deleted.
func TestValueLogGCNeverBringsBackADeletedRecord(t *testing.T) {
	const attempts = 20
	var j *Journal
	for attempt := 1; j == nil; attempt++ {
		if attempt > attempts {
			t.Fatalf("in %d attempts, Badger's compaction never dropped the overwritten versions: the test cannot set up what it tests", attempts)
		}
		j = fileHalfGarbage(t)
	}
	j.valueLogDue.Store(true)
	j.collectValueLog()
	if j.gcUnflushed.Load() == 0 {
		t.Fatal("the value log's GC rewrote no file: the test did not set up what it tests")
	}
	j.compactLevelZero(false) // the GC's copies are in a memtable: it waits
	flushMemTable(t, j)
	j.compactLevelZero(false)

	back := 0
	err := j.view(context.Background(), func(txn *badger.Txn) error {
		for k := range 160 {
			if _, err := txn.Get([]byte(fmt.Sprintf("%s%04d", deletedPrefix, k))); err == nil {
				back++
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if back > 0 {
		t.Fatalf("%d of 160 deleted records are back after the value log's GC and a compaction", back)
	}
}

// deletedPrefix holds fileHalfGarbage's deleted records.
const deletedPrefix = "t/deleted/"

// fileHalfGarbage sets up TestValueLogGCNeverBringsBackADeletedRecord's
// journal: a first value-log file whose records are half overwritten
// since (garbage, its versions dropped by a compaction) and half deleted
// since (the tombstones in level 0, the records in the last level). It
// returns nil when the compaction kept the overwritten versions: Badger
// drops a version only at or below its read watermark, which a goroutine
// of its own advances after each transaction, so on a loaded machine a
// compaction right after the writes may see it behind them.
func fileHalfGarbage(t *testing.T) *Journal {
	t.Helper()
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, Retain: -1, GCInterval: time.Hour})
	stopBackground(j) // the test compacts and collects, in its order
	value := []byte(incompressible(2 << 10))
	put := func(prefix string, n int) {
		t.Helper()
		for k := range n {
			if err := j.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(fmt.Sprintf("%s%04d", prefix, k)), value) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	deleted, overwritten := deletedPrefix, "t/overwritten/"
	put(deleted, 160)     // about 330 KB of the first value-log file
	put(overwritten, 300) // and about 620 KB
	put("t/later/", 200)  // the next files
	flushMemTable(t, j)
	for _, pad := range []string{"t/pad1/", "t/pad2/"} { // Badger moves a level 0 alone into the tree from 3 tables
		put(pad, 1)
		flushMemTable(t, j)
	}
	j.compactLevelZero(false)
	put(overwritten, 300) // the first file's older versions, garbage once compacted
	flushMemTable(t, j)
	j.compactLevelZero(false)
	if versions := countVersions(t, j, overwritten); versions != 300 {
		t.Logf("the compaction kept %d versions of 300 overwritten records (Badger's read watermark behind the writes): setting up again", versions)
		return nil
	}
	for k := range 160 {
		if err := j.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(fmt.Sprintf("%s%04d", deleted, k))) }); err != nil {
			t.Fatal(err)
		}
	}
	flushMemTable(t, j) // the tombstones in level 0, the records they delete in the last level
	return j
}

// flushMemTable has j's memtable written to a level-0 table, to be
// compacted by the next compactLevelZero.
func flushMemTable(t *testing.T, j *Journal) {
	t.Helper()
	j.dbMu.Lock()
	defer j.dbMu.Unlock()
	if err := j.reopen(j.memTable.Load()); err != nil {
		t.Fatal(err)
	}
	j.compactFlushed.Store(true)
}

// countVersions is the number of versions Badger holds of the keys under
// prefix.
func countVersions(t *testing.T, j *Journal, prefix string) int {
	t.Helper()
	n := 0
	err := j.view(context.Background(), func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), AllVersions: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCompactionWaitingForTheGCFlushesFirst: a compaction waiting for
// what a GC step wrote back to reach a table (see above) does not let
// level 0 fill towards Badger's write stall: from levelZeroFlushAt tables
// it has the writer flush the memtables, and compacts after that.
func TestCompactionWaitingForTheGCFlushesFirst(t *testing.T) {
	j, term := levelZeroOf(t, levelZeroFlushAt)
	j.gcUnflushed.Store(newestVersion(j.db)) // as if a GC step had just run: its copies in a memtable
	if j.compactLevelZero(false) {
		t.Fatal("compacted while a GC step's copies were in a memtable")
	}
	if !j.flushDue.Load() {
		t.Fatalf("level 0 at %d tables and no flush asked of the writer", levelZeroTables(j.db))
	}
	applyChange(t, j, term, update(t, "/a/c", "v"))            // the writer flushes after its next batch
	if err := j.wakeWriter(context.Background()); err != nil { // that batch's work is done
		t.Fatal(err)
	}
	if j.gcUnflushed.Load() != 0 || j.flushDue.Load() {
		t.Fatalf("after the writer's next batch: GC copies pending %v, flush due %v; want both cleared by a flush", j.gcUnflushed.Load() != 0, j.flushDue.Load())
	}
	if !j.compactLevelZero(false) {
		t.Fatal("no compaction once the memtables were flushed")
	}
	checkInvariants(t, j)
}

// stopBackground stops j's background work (compactions after writes,
// retention) before Close does, for a test that runs it itself.
func stopBackground(j *Journal) {
	j.stopBg()
	j.bgDone.Wait()
}

// TestOpenAfterACrashWaitsForTheReplayedMemtables: the memtable logs a
// crash leaves may hold what a GC step wrote back, so a journal opened on
// them compacts only once they are in a table (see above); one closed
// cleanly has none and compacts as usual.
func TestOpenAfterACrashWaitsForTheReplayedMemtables(t *testing.T) {
	dir, crashed := t.TempDir(), t.TempDir()
	j := openTest(t, dir, Options{NoSync: true, GCInterval: time.Hour})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/a/b", "v"))
	copyDir(t, dir, crashed) // the files as a kill -9 would leave them
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	after := openTest(t, crashed, Options{NoSync: true, GCInterval: time.Hour})
	if after.gcUnflushed.Load() == 0 {
		t.Error("opened on memtable logs a crash left, the journal does not wait for them before compacting")
	}
	clean := openTest(t, dir, Options{NoSync: true, GCInterval: time.Hour})
	if clean.gcUnflushed.Load() != 0 {
		t.Error("opened after a clean close, the journal waits before compacting")
	}
}

// TestCompactionNearTheStallDoesNotWait: with level 0 at levelZeroForce
// tables (only a backlog a crash left gets there) a compaction does not
// wait for a GC step's copies: Badger would soon stall the writes and the
// flushes they wait for, for good.
func TestCompactionNearTheStallDoesNotWait(t *testing.T) {
	j, _ := levelZeroOf(t, levelZeroForce)
	j.gcUnflushed.Store(newestVersion(j.db))
	if !j.compactLevelZero(false) {
		t.Fatalf("level 0 at %d tables, and no compaction", levelZeroTables(j.db))
	}
	if n := levelZeroTables(j.db); n >= levelZeroFlushAt {
		t.Fatalf("level 0 holds %d tables after the compaction", n)
	}
	checkInvariants(t, j)
}

// TestCrashBacklogInLevelZeroNeverHangs: a sidecar killed again and again
// before its first compaction (openSettle) leaves level 0 a table per
// memtable each time. With level 0 at 8 tables, and compactTables not
// running (as before its first look, and during Close), changes that fill
// memtables, Close, an Open of the files a crash left then and that
// journal's Close each return, and every change is kept. With Badger's
// stall at 8 tables (before levelZeroStall) the flushes stalled, the
// writes behind them, and Close waited on its last flush for good (the
// differential test's seed 2573807007216180903: twelve starts, eleven of
// them killed).
func TestCrashBacklogInLevelZeroNeverHangs(t *testing.T) {
	j, term := levelZeroOf(t, 8)
	var last uint64
	returns(t, "changes filling three memtables, level 0 at 8 tables", func() error {
		for n := 0; levelZeroTables(j.db) < 8+3; n++ {
			if n == 5000 {
				return fmt.Errorf("level 0 at %d tables after %d changes: the memtables did not fill", levelZeroTables(j.db), n)
			}
			kv := make([]string, 0, 64)
			for k := range 32 {
				kv = append(kv, fmt.Sprintf("/c%d/leaf%d", n, k), "v")
			}
			last = applyChange(t, j, term, update(t, kv...))
		}
		return nil
	})
	// Badger flushes the filled memtables in the background: copied while
	// a flush removes a memtable log, the files would be no crash's.
	flushesDone(t, j.dir)
	crashed := t.TempDir()
	copyDir(t, j.dir, crashed) // the files as a kill -9 would leave them
	want := appliedList(t, j)
	returns(t, "Close, level 0 past 8 tables", j.Close)

	var after *Journal
	returns(t, "Open on the files a kill -9 left then", func() (err error) {
		after, err = Open(crashed, Options{NoSync: true, GCInterval: time.Hour})
		return err
	})
	stopBackground(after) // killed again before its first compaction
	if got := appliedList(t, after); !slices.Equal(got, want) {
		t.Errorf("after the crash %d applied values, want %d (up to proposal %d)", len(got), len(want), last)
	}
	returns(t, "Close of the journal opened after the crash", after.Close)
}

// flushesDone waits (up to a minute) until dir holds one memtable log,
// the mutable memtable's: Badger has flushed every memtable that filled,
// and removed its log. The writer must be idle, and the journal's
// compactions stopped (stopBackground), for the files to stay as they are.
func flushesDone(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		logs, err := filepath.Glob(filepath.Join(dir, "*.mem"))
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) <= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d memtable logs a minute on: Badger's flushes did not finish", len(logs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// returns fails the test unless fn returns within a minute, and without an
// error.
func returns(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Minute):
		// Said on stderr too: the journal's Close in the test's cleanup
		// may hang the same way, and then only the package's timeout ends
		// the test, with what it wrote to stderr.
		fmt.Fprintf(os.Stderr, "%s: %s did not return within a minute\n", t.Name(), what)
		t.Fatalf("%s did not return within a minute", what)
	}
}

// levelZeroOf opens a journal, its background work stopped (the test
// compacts, in its order), whose level 0 holds tables changes each
// flushed to a table of their own, and returns it with its term.
func levelZeroOf(t *testing.T, tables int) (*Journal, uint64) {
	t.Helper()
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, GCInterval: time.Hour})
	stopBackground(j)
	term := synced(t, j)
	for n := range tables {
		applyChange(t, j, term, update(t, fmt.Sprintf("/a/b%d", n), "v"))
		j.dbMu.Lock()
		if err := j.reopen(j.memTable.Load()); err != nil {
			t.Fatal(err)
		}
		j.dbMu.Unlock()
	}
	if n := levelZeroTables(j.db); n < tables {
		t.Fatalf("level 0 holds %d tables, want %d or more", n, tables)
	}
	return j, term
}
