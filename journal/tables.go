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
// and then, if level 0 holds compactFrom tables or more, runs Badger's
// compaction (DB.Flatten: level 0 into the tree, and each level into the
// next, until one level holds every table); restSettle after the last
// write, it compacts whatever level 0 holds, once. At rest nothing wakes.
//
// Badger stalls flushes, and the writes behind them, while level 0 holds
// NumLevelZeroTablesStall tables, until a compaction takes some: with no
// compactors of its own, until compactTables does. In steady traffic level
// 0 never gets near it (compactTables compacts from compactFrom).
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

// numLevelZeroTables is Badger's NumLevelZeroTables: the level-0 table
// count from which its compaction (DB.Flatten here) moves level 0 into
// the tree when no other level holds tables yet.
const numLevelZeroTables = 2

// compactFrom is the level-0 table count from which the journal compacts
// while it is written. Every compaction rewrites the whole tree
// (retention deletes at the head of the proposals and history while new
// records go at their tails, and the values are spread over the whole
// key space), so it costs the tree's size however few tables level 0
// holds: from four rather than two, the writes pay for half as many
// ("What a Set writes, compactions, and the row's spread" in
// docs/bench.md). What a compaction drops is what the value log's GC
// counts as garbage, so level 0 is also compacted, whatever it holds,
// once the writes stop (restCompactDue).
const compactFrom = 4

// levelZeroFlushAt is the level-0 table count from which a compaction
// waiting for a GC step's writes to reach a table has the writer flush the
// memtables rather than wait for more flushes: a flush adds a table per
// memtable (3 at most).
// From levelZeroForce the compaction runs anyway and the writer does not
// flush: the flushes did not keep level 0 down, and a Badger stalled at
// levelZeroStall would flush nothing and never be compacted. Only a
// backlog many crashes left gets there.
const (
	levelZeroFlushAt = compactFrom + 2
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
	// atRest: the timer fired restSettle after the last write;
	// restCompacted: a compaction at rest was asked for since the last
	// write (one per burst of writes).
	atRest, restCompacted := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if j.compactLevelZero(atRest) {
			// The compaction dropped versions and deleted records and
			// counted their bytes against their value-log files: the
			// writer rewrites or removes the files now half garbage.
			j.valueLogDue.Store(true)
			_ = j.wakeWriter(ctx)
		} else if j.flushDue.Load() {
			_ = j.wakeWriter(ctx)
		}
		var rest <-chan time.Time
		flush := j.restFlushDue()
		if flush || (!restCompacted && j.restCompactDue()) {
			rest = time.After(restSettle)
		}
		select {
		case <-ctx.Done():
			return
		case <-j.tablesWritten:
			atRest, restCompacted = false, false
			t.Reset(tablesSettle)
		case <-rest:
			if flush {
				j.flushDue.Store(true) // the writer flushes; its reopen pokes tablesWritten
			} else {
				// Whatever level 0 holds, once (a compaction that must
				// wait for a GC step's writes has the writer flush them,
				// and that flush's poke starts over).
				j.compactFlushed.Store(true)
				atRest, restCompacted = true, true
			}
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

// restCompactDue reports whether level 0 holds tables that a compaction
// at rest should take into the tree (compactFrom): some level below holds
// tables too (Flatten leaves a lone level 0 where it is, see noteFlushes).
// A failed journal compacts nothing.
func (j *Journal) restCompactDue() bool {
	j.dbMu.RLock() // the writer may reopen the database (grow.go)
	defer j.dbMu.RUnlock()
	if j.failure() != nil || j.db == nil {
		return false
	}
	zero, below := levelTables(j.db)
	return zero > 0 && below > 0
}

// compactLevelZero has Badger compact its tables if level 0 holds
// compactFrom or more (or compactFlushed asks for it: the table
// flushForValueLog made, or level 0 at rest), and reports whether it did.
// atRest: the writes stopped, so a compaction that waits for a GC step's
// writes to reach a table has the writer flush them rather than wait for
// more writes.
func (j *Journal) compactLevelZero(atRest bool) bool {
	j.dbMu.RLock() // the writer may reopen the database (grow.go)
	defer j.dbMu.RUnlock()
	if j.failure() != nil || j.db == nil {
		return false
	}
	j.noteFlushes()
	n := levelZeroTables(j.db)
	if n < compactFrom && (n == 0 || !j.compactFlushed.Load()) {
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
		case n >= levelZeroFlushAt || atRest:
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
	zero, _ := levelTables(db)
	return zero
}

// levelTables is the number of tables in Badger's level 0, and in the
// levels below it.
func levelTables(db *badger.DB) (zero, below int) {
	for _, l := range db.Levels() {
		if l.Level == 0 {
			zero = l.NumTables
		} else {
			below += l.NumTables
		}
	}
	return zero, below
}
