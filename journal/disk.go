package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Disk faults. Badger cannot survive a write its filesystem refuses: it
// writes its write-ahead log and its tables through memory maps of sparse
// files, so on a full disk the process dies of SIGBUS; and a failed
// rotation of its memtable leaves it without one, so that its next read or
// write crashes the process. The journal therefore refuses every write
// before Badger sees it while its filesystem is read-only or has less than
// Options.MinFreeBytes free: nothing is written, and writes succeed again
// once the condition is gone. A write that fails inside Badger all the same
// fails the journal for good (ErrFailed): it then neither reads nor writes
// through Badger, and the process is meant to exit and reopen it, which
// replays what Badger made durable.

var (
	// ErrNoSpace: the journal's filesystem has less free space than
	// Options.MinFreeBytes. Nothing was written; the same write succeeds
	// once there is room.
	ErrNoSpace = errors.New("not enough free disk space")
	// ErrUnwritable: the journal's filesystem is read-only, or its state
	// cannot be read. Nothing was written; the same write succeeds once it
	// is writable again.
	ErrUnwritable = errors.New("filesystem not writable")
	// ErrFailed: a write failed inside the database, whose state in memory
	// can no longer be trusted. The journal takes no more reads or writes;
	// reopening it (a new process) recovers what was durable.
	ErrFailed = errors.New("journal failed")
)

// defaultMinFree is Options.MinFreeBytes' default in memtables: room for
// the memtable being written, its flush to a table, and a compaction.
const defaultMinFree = 4

// usable returns why the journal cannot take a write now, nil if it can.
func (j *Journal) usable() error {
	if err := j.failure(); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(j.dir, &st); err != nil {
		return fmt.Errorf("journal: %s: cannot check its filesystem (%w): %w", j.dir, err, ErrUnwritable)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("journal: %s: the filesystem is read-only: %w", j.dir, ErrUnwritable)
	}
	// Bavail: what an unprivileged process may use, which is what Badger
	// gets unless it runs as root.
	if free := st.Bavail * uint64(st.Bsize); free < uint64(j.opts.MinFreeBytes) {
		return fmt.Errorf("journal: %s: %s free on its filesystem, below the %s the journal keeps in reserve: %w",
			j.dir, mib(free), mib(uint64(j.opts.MinFreeBytes)), ErrNoSpace)
	}
	return nil
}

// Writable returns why the journal refuses writes now (ErrNoSpace,
// ErrUnwritable, ErrFailed), nil if it takes them. A statfs of its
// directory: cheap enough for every metrics scrape.
func (j *Journal) Writable() error { return j.usable() }

// fail records that a write failed inside Badger, and returns the error
// every later call gets.
func (j *Journal) fail(cause error) error {
	err := fmt.Errorf("journal: %s: a write failed (%s); the journal takes no more reads or writes until it is reopened: %w",
		j.dir, rootCause(cause), ErrFailed)
	if j.failed.CompareAndSwap(nil, &err) {
		j.log.Error("journal failed: it takes no more reads or writes", "err", cause)
		close(j.failedCh)
	}
	return *j.failed.Load()
}

// Failed is closed once the journal has failed (ErrFailed): a write
// failed inside the database, and the process must stop and reopen it.
// A sidecar stops on it at once, not when its next transition finds out.
func (j *Journal) Failed() <-chan struct{} { return j.failedCh }

// Failure returns the error of a failed journal (wrapping ErrFailed), nil
// if it has not failed.
func (j *Journal) Failure() error { return j.failure() }

// failure returns the error of a failed journal, nil if it has not failed.
func (j *Journal) failure() error {
	if err := j.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// rootCause is err's innermost file error (such as "open /j/00002.mem:
// operation not permitted") if it wraps one, else the first line of err:
// Badger's messages wrap theirs as text and repeat it on a second line.
func rootCause(err error) string {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Error()
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}

// mib renders a size in MiB.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// closeWait bounds how long Close waits for a failed journal's database,
// which retries a failed flush every second for as long as the fault
// lasts.
const closeWait = 2 * time.Second

// waitBackground waits for the background goroutines to end; those of a
// failed journal only for closeWait.
func (j *Journal) waitBackground() {
	if j.failure() == nil {
		j.bgDone.Wait()
		return
	}
	done := make(chan struct{})
	go func() { j.bgDone.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		j.log.Warn("background work of the failed journal did not end; abandoned", "waited", closeWait)
	}
}

// closeDB closes the database; that of a failed journal only if it closes
// within closeWait, else it is abandoned to the process's exit.
func (j *Journal) closeDB() error {
	if j.db == nil {
		return nil
	}
	if j.failure() == nil {
		return j.db.Close()
	}
	closed := make(chan error, 1)
	go func() { closed <- j.db.Close() }()
	select {
	case err := <-closed:
		return err
	case <-time.After(closeWait):
		return fmt.Errorf("the database did not close within %v of its failure; abandoned", closeWait)
	}
}
