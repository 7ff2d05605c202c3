package journal

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A Badger transaction must fit in one memtable (15 % of it), and Badger
// allocates its memtables up front, on the Go heap, at the size it was
// opened with. The sidecar's steady traffic is small transitions, so the
// journal keeps the memtable small (Options.MemTableSize) and lets a
// transition larger than that — a Set of thousands of paths, a root
// Replace, a large baseline part — grow it for itself: the writer closes
// the database (flushing the memtable), reopens it with a memtable four
// times larger, until the transition fits or MaxMemTableSize is reached,
// commits the transition, and reopens at the steady size (shrink) once
// nothing is waiting for the writer, so that a burst of large transitions
// (a baseline, a bulk load) grows it once. The memory a large Set costs
// is thus held while such Sets are written, not for the life of the
// process. Reads in flight finish first (dbMu; at most defaultGrowWait), new ones
// wait for the reopen. Nothing durable changes: Close flushes, Open
// replays.

// defaultGrowWait bounds how long grow waits for the reads in flight
// (Options.growWait): a read streaming to a slow client holds the
// database, and the writer (every write) waits while grow does.
const defaultGrowWait = 10 * time.Second

// grow reopens the database with a memtable four times larger (at most
// MaxMemTableSize). The writer's alone. If reads hold the database for
// defaultGrowWait, the transition fails with ErrTooLarge (nothing is written; the
// same transition can be tried again).
func (j *Journal) grow() error {
	from := j.memTable.Load()
	size := min(from*4, j.opts.MaxMemTableSize)
	j.log.Info("growing the memtable for a large transition", "from_bytes", from, "to_bytes", size)
	if !j.lockWithin(j.opts.growWait) {
		return fmt.Errorf("the journal could not grow its memtable for this transition: reads in progress held it for %v; try again: %w", j.opts.growWait, ErrTooLarge)
	}
	defer j.dbMu.Unlock()
	return j.reopen(size)
}

// shrink reopens the database at the steady memtable size if a large
// transition grew it and no read is in progress (else a later batch
// does). The writer's alone, when its queue is empty.
func (j *Journal) shrink() {
	if j.memTable.Load() == j.opts.MemTableSize || j.failure() != nil || !j.dbMu.TryLock() {
		return
	}
	defer j.dbMu.Unlock()
	if err := j.reopen(j.opts.MemTableSize); err != nil {
		j.log.Error("reopening the journal at its steady memtable size failed", "err", err)
	}
}

// valueLogUnflushed bounds the bytes written to the value log between two
// flushes of the memtable (flushForValueLog, noteFlushes).
const valueLogUnflushed = 16 << 20

// flushForValueLog flushes the memtable (by reopening the database at the
// same size: Badger has no other way) once valueLogUnflushed bytes of
// records went to the value log since the last flush, and has the
// compaction that follows run on the one table it makes. The writer's
// alone; if reads are in progress, a later batch does it.
//
// The value log's GC can reclaim a record's old version only once a
// compaction dropped it, and a compaction sees only what was flushed. A
// memtable holds pointers into the value log, so one full of pointers to
// large records (Sets of large values) stands for far more of the log
// than its own size, and Badger would flush it only when full: the log
// would grow with the size of the values written, not with what the
// journal keeps.
func (j *Journal) flushForValueLog() {
	if j.failure() != nil || !j.dbMu.TryLock() {
		return
	}
	defer j.dbMu.Unlock()
	if levelZeroTables(j.db) >= levelZeroForce {
		return // closing would flush into a level 0 near the stall: compactTables compacts it first
	}
	written := j.valueLogWritten.Load()
	if err := j.reopen(j.memTable.Load()); err != nil {
		j.log.Error("flushing the memtable for the value log's GC failed", "err", err)
		return
	}
	j.valueLogWritten.Add(-written)
	j.compactFlushed.Store(true)
	j.wroteTables()
}

// lockWithin takes dbMu exclusively, waiting at most d for the reads in
// flight. It polls rather than calling Lock, which cannot be abandoned and
// would hold every new read back while it waits.
func (j *Journal) lockWithin(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !j.dbMu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// reopen closes the database and opens it again with memtables of size
// bytes; the caller holds dbMu. A failure fails the journal (ErrFailed):
// the database may be closed, and a new process recovers what was
// durable.
func (j *Journal) reopen(size int64) error {
	if err := j.db.Close(); err != nil {
		return j.fail(fmt.Errorf("closing the database to resize its memtable: %w", err))
	}
	db, err := badger.Open(j.opts.badgerOptions(j.dir, size))
	if err != nil {
		j.db = nil // closed: closeDB has nothing left to close
		return j.fail(fmt.Errorf("reopening the database with a memtable of %s: %w", mib(uint64(size)), namingFile(j.dir, err)))
	}
	j.db = db
	j.memTable.Store(size)
	// Closing flushed every memtable: what the value log's GC wrote back is
	// in a table (tables.go).
	j.gcUnflushed.Store(0)
	j.flushDue.Store(false)
	return nil
}
