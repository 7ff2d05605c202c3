package journal

import (
	"context"
	"path/filepath"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Badger's own compactors each wake every 50 ms for as long as the
// database is open, busy or not: 40 wake-ups a second (each a timer, a
// thread woken and put back to sleep), nearly all of an idle sidecar's CPU
// (docs/bench.md, "At rest"). The journal opens Badger without them
// (NumCompactors 0) and has Badger compact after writes only: every write
// transaction pokes compactTables, which waits tablesSettle for more writes
// and then, if level 0 holds NumLevelZeroTables tables or more, runs
// Badger's compaction (DB.Flatten: level 0 into the tree, and each level
// into the next, until one level holds every table). At rest nothing wakes.
//
// Badger stalls flushes, and the writes behind them, while level 0 holds
// NumLevelZeroTablesStall tables, until a compaction takes some: with no
// compactors of its own, until compactTables does. In steady traffic level
// 0 never gets near it (compactTables compacts from numLevelZeroTables).
// A sidecar killed before its first compaction (openSettle after Open),
// again and again, does get there: each Open flushes the memtables the
// last process left to tables of their own. With a stall at 8, such a
// backlog hung the sidecar for good: DB.Close waits for its last flush,
// and compactTables has stopped by then (DB.Open, too, waits for the
// replayed memtables to be queued). So the stall is levelZeroStall,
// far past the compaction triggers below: a level 0 that large costs
// reads only a bloom filter check per table, until the first compaction.
const levelZeroStall = 64

// The value log's GC and compactions. A GC step (collectValueLog) writes
// the live records of the file it rewrites back into the memtable, with
// their own, old versions; a record the journal deleted since (retention
// dropping a proposal, a value removed) counts as live for it as long as
// that older version is still in the tree, and is written back too. The
// delete's tombstone shadows the copy only while both exist: a compaction
// that merges the tombstone and the older versions into the last level
// drops them all, and a copy still in a memtable then outlives them and
// the deleted record comes back (Badger v4.9.6 keeps tombstones only while
// the GC step itself runs). So a compaction that a GC step came before
// waits until what that step wrote is in a table: until a table holds a
// version newer than every version committed before the step (flushes go
// in order), or the writer flushed the memtables for it (flushDue, a
// reopen) once level 0 holds levelZeroFlushAt tables. The GC and
// compactions never overlap (tablesMu). The same holds after an Open that
// replayed memtable logs a crash left, which may hold such copies.
//
// tablesSettle is how long compactTables lets writes go on after a poke
// before it looks at level 0: a burst of writes makes one check, not one
// per transaction.
const tablesSettle = 100 * time.Millisecond

// openSettle is how long after Open compactTables first looks at level 0
// (which Badger's replay of its memtable logs may have filled), poked or
// not: a sidecar starting up re-pushes and serves first, as it did with
// Badger's compactors, which start after a random delay of up to a second.
const openSettle = time.Second

// numLevelZeroTables is the level-0 table count from which the journal
// compacts (Badger's NumLevelZeroTables, the same trigger its compactors
// use).
const numLevelZeroTables = 2

// levelZeroFlushAt is the level-0 table count from which a compaction
// waiting for a GC step's writes to reach a table has the writer flush the
// memtables rather than wait for more flushes: a flush adds a table per
// memtable (3 at most).
// From levelZeroForce the compaction runs anyway and the writer does not
// flush: the flushes did not keep level 0 down, and a Badger stalled at
// levelZeroStall would flush nothing and never be compacted. Only a
// backlog many crashes left gets there.
const (
	levelZeroFlushAt = numLevelZeroTables + 2
	levelZeroForce   = 16
)

// memtableLogsLeft reports whether dir holds memtable logs (*.mem), which
// Badger replays at Open: only a process that did not close the journal
// leaves them (Close flushes the memtables and removes their logs).
func memtableLogsLeft(dir string) bool {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	return len(logs) > 0
}

// wroteTables tells compactTables that a write transaction committed. Cheap
// on the writer's path: a send that does not block, and wakes compactTables
// at most once per tablesSettle.
func (j *Journal) wroteTables() {
	select {
	case j.tablesWritten <- struct{}{}:
	default:
	}
}

// update is db.Update followed by wroteTables, for the journal's writes
// outside the writer (initialization, upgrades).
func (j *Journal) update(fn func(txn *badger.Txn) error) error {
	err := j.db.Update(fn)
	j.wroteTables()
	return err
}

// dropPrefix is DB.DropPrefix, which stops Badger's compactions while it
// runs and so must not run during compactTables' (tablesMu).
func (j *Journal) dropPrefix(prefixes ...[]byte) error {
	j.tablesMu.Lock()
	defer j.tablesMu.Unlock()
	err := j.db.DropPrefix(prefixes...)
	j.wroteTables()
	return err
}

// compactTables compacts Badger's tables after writes (see above) until
// ctx ends. It looks first openSettle after Open, poked or not. When the
// writes stop while the memtable stands for much of the value log
// (restFlushDue), it has the writer flush it once they stayed stopped for
// restSettle, so that the compaction and the value log's GC that follow
// take the log down to its live size at rest, not only at the next writes.
func (j *Journal) compactTables(ctx context.Context) {
	defer j.bgDone.Done()
	t := time.NewTimer(openSettle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if j.compactLevelZero() {
			// The compaction dropped versions and deleted records and
			// counted their bytes against their value-log files: the
			// writer rewrites or removes the files now half garbage.
			j.valueLogDue.Store(true)
			_ = j.wakeWriter(ctx)
		} else if j.flushDue.Load() {
			_ = j.wakeWriter(ctx)
		}
		var rest <-chan time.Time
		if j.restFlushDue() {
			rest = time.After(restSettle)
		}
		select {
		case <-ctx.Done():
			return
		case <-j.tablesWritten:
			t.Reset(tablesSettle)
		case <-rest:
			j.flushDue.Store(true) // the writer flushes; its reopen pokes tablesWritten
			t.Reset(0)
		}
	}
}

// restSettle is how long the journal stays without writes before
// compactTables has the writer flush for the value log's GC at rest.
const restSettle = time.Second

// restFlushDue reports whether a flush at rest is worth its reopen of the
// database: the memtable holds pointers to a quarter of valueLogUnflushed
// or more of the value log, whose older versions a compaction of it would
// count as garbage for the GC. Smaller bursts leave the log at most that
// much above its live size until the next writes. A failed journal
// flushes nothing.
func (j *Journal) restFlushDue() bool {
	return j.valueLogWritten.Load() >= valueLogUnflushed/4 && j.failure() == nil
}

// compactLevelZero has Badger compact its tables if level 0 holds
// numLevelZeroTables or more (or the table flushForValueLog made), and
// reports whether it did.
func (j *Journal) compactLevelZero() bool {
	j.dbMu.RLock() // the writer may reopen the database (grow.go)
	defer j.dbMu.RUnlock()
	if j.failure() != nil || j.db == nil {
		return false
	}
	j.noteFlushes()
	n := levelZeroTables(j.db)
	if n < numLevelZeroTables && (n == 0 || !j.compactFlushed.Load()) {
		return false
	}
	began := time.Now()
	j.tablesMu.Lock()
	defer j.tablesMu.Unlock()
	if mark := j.gcUnflushed.Load(); mark != 0 {
		switch {
		case newestVersion(j.db) > mark:
			j.gcUnflushed.CompareAndSwap(mark, 0)
		case n >= levelZeroForce:
			j.log.Warn("compacting a crash backlog in level 0 while what the value log's GC wrote back may still be in a memtable",
				"level0_tables", n)
		case n >= levelZeroFlushAt:
			j.flushDue.Store(true) // compactTables wakes the writer for it
			return false
		default:
			return false // what a GC step wrote back is still in a memtable (above)
		}
	}
	j.compactFlushed.Store(false)
	if err := j.db.Flatten(1); err != nil {
		j.log.Warn("compacting the database's tables failed", "err", err)
		return false
	}
	j.log.Debug("compacted the database's tables", "took", time.Since(began).Round(time.Millisecond))
	return true
}

// noteFlushes restarts the count of value-log bytes not yet flushed
// (valueLogWritten) when Badger flushed a full memtable of its own since
// the last look (level 0 holds a table newer than any seen), so that
// flushForValueLog does not reopen the database for what Badger flushed
// (in steady traffic of small records, never). If that memtable stood for
// a quarter of valueLogUnflushed or more, its table is compacted at once,
// alone, as flushForValueLog's is. Only while a level below 0 holds
// tables: Flatten leaves a lone level-0 table where it is when no other
// level holds any, and what it superseded would go uncounted.
// compactTables' alone.
func (j *Journal) noteFlushes() {
	newest, below := j.seenLevelZero, false
	for _, t := range j.db.Tables() {
		if t.Level == 0 {
			newest = max(newest, t.ID)
		} else {
			below = true
		}
	}
	if newest <= j.seenLevelZero || !below {
		return
	}
	j.seenLevelZero = newest
	if j.valueLogWritten.Swap(0) >= valueLogUnflushed/4 {
		j.compactFlushed.Store(true)
	}
}

// newestVersion is the newest version any of Badger's tables holds.
func newestVersion(db *badger.DB) uint64 {
	var v uint64
	for _, t := range db.Tables() {
		v = max(v, t.MaxVersion)
	}
	return v
}

// levelZeroTables is the number of tables in Badger's level 0.
func levelZeroTables(db *badger.DB) int {
	for _, l := range db.Levels() {
		if l.Level == 0 {
			return l.NumTables
		}
	}
	return 0
}
