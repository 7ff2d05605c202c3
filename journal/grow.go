package journal

import (
	"fmt"

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
// process. Reads in flight finish first (dbMu); new ones wait
// for the reopen. Nothing durable changes: Close flushes, Open replays.

// grow reopens the database with a memtable four times larger (at most
// MaxMemTableSize). The writer's alone.
func (j *Journal) grow() error {
	from := j.memTable.Load()
	size := min(from*4, j.opts.MaxMemTableSize)
	j.log.Info("growing the memtable for a large transition", "from_bytes", from, "to_bytes", size)
	return j.reopen(size)
}

// shrink reopens the database at the steady memtable size if a large
// transition grew it. The writer's alone, when its queue is empty.
func (j *Journal) shrink() {
	if j.memTable.Load() == j.opts.MemTableSize || j.failure() != nil {
		return
	}
	if err := j.reopen(j.opts.MemTableSize); err != nil {
		j.log.Error("reopening the journal at its steady memtable size failed", "err", err)
	}
}

// reopen closes the database and opens it again with memtables of size
// bytes. A failure fails the journal (ErrFailed): the database may be
// closed, and a new process recovers what was durable.
func (j *Journal) reopen(size int64) error {
	j.dbMu.Lock()
	defer j.dbMu.Unlock()
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
	return nil
}
