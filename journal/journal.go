package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// formatVersion is the version of the key layout and records (Meta.format).
//
// Format 3 adds what format-2 code would misread: proposals applied
// without a device Set (Change.adopted) or aborted in their turn
// (Change.aborted_by), and the out-of-sync, resolution and election
// records. Format 4 adds union_replace operations and the client's
// relayed extensions, which format-3 code would drop. Format 5 keys a
// path without origin and the same path with origin "openconfig" as one
// leaf (PathKey), which format-4 code would read as two (and later
// additions). A format-2, -3 or -4 journal is format-5 data once the
// records of such paths are re-keyed: opening it does so and flips the
// format (see upgrade and upgradeOrigins). Format 6 stores records
// compressed (codec.go), which format-5 code would read as damaged; a
// format-5 journal is format-6 data as it is, so opening it only flips
// the format. Format 7 no longer keeps the applied values' write-order
// index (li/: a re-push reads the applied values in path order,
// ReplayApplied), which format-6 code would read as stale; opening a
// format-5 or -6 journal flips the format and drops that index. Format 8
// completes the proposals a device Set carried with one record, the
// newest's (Configuration.applies_completed_through, derived.go), which
// format-7 code would read as still applying; a format-5, -6 or -7
// journal is format-8 data as it is (its index is 0), so opening it only
// flips the format.
const formatVersion = 8

// Errors callers branch on. Returned errors wrap them; use errors.Is.
var (
	// ErrGuard: the spec (or a product rule) forbids the transition in the
	// current state. Nothing was written.
	ErrGuard = errors.New("transition not allowed")
	// ErrNotFound: the proposal (or record) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrCompacted: the proposal or the point in time is older than what
	// retention keeps.
	ErrCompacted = errors.New("compacted away by retention")
	// ErrInvalid: the caller's input is malformed. Nothing was written.
	ErrInvalid = errors.New("invalid input")
	// ErrLocked: another process has the journal's directory open.
	ErrLocked = errors.New("journal directory is locked")
	// ErrClosed: the journal is closed.
	ErrClosed = errors.New("journal is closed")
	// ErrFormat: the directory holds data this version cannot read.
	ErrFormat = errors.New("unsupported journal format")
	// ErrTooLarge: the transition writes more than one transaction holds
	// (see Options.MemTableSize). Nothing was written; retrying cannot
	// succeed.
	ErrTooLarge = errors.New("transition too large for one journal transaction")
)

// Options configures a journal. The zero value is a production set-up.
type Options struct {
	// NoSync turns off fsync on commit. For tests and benchmark data
	// preparation only: with it a crash can lose acknowledged transitions.
	NoSync bool
	// Retain is the number of newest proposal records kept (default
	// 10,000); negative keeps all.
	Retain int
	// RetentionInterval is how often retention runs in the background
	// (default 1 min); it also runs as soon as the journal holds a tenth
	// more proposals than Retain (retentionSlack). Compact runs it on
	// demand.
	RetentionInterval time.Duration
	// GCInterval is how often Badger's value-log GC runs besides after
	// every compaction of its tables (default 5 min).
	GCInterval time.Duration
	// MemTableSize is Badger's memtable size in steady state (default
	// and least 1 MiB). Badger allocates it up front as a Go heap arena
	// and bounds one transaction to 15 % of it: a few hundred paths of one
	// proposal at 1 MiB. A transition larger than that is not refused:
	// the writer reopens the database with a memtable large enough for it
	// (up to MaxMemTableSize), commits it, and reopens at this size again
	// (grow.go).
	MemTableSize int64
	// MaxMemTableSize is the largest memtable a transition may grow it to
	// (default 1 GiB: a proposal of about 400,000 paths); a transition
	// that does not fit in it fails with ErrTooLarge. At most
	// MemTableSize: no growth.
	MaxMemTableSize int64
	// Logger receives Badger's warnings and errors and the journal's own
	// background errors (default slog.Default()).
	Logger *slog.Logger
	// Clock returns the time recorded in timestamps and history (default
	// time.Now).
	Clock func() time.Time
	// MinFreeBytes is the free space the journal's filesystem must keep:
	// below it every write is refused with ErrNoSpace (default 4 ×
	// MemTableSize, 4 MiB; negative: no reserve; serve sets 64 MiB). See disk.go.
	MinFreeBytes int64
	// Schema is the device's YANG schema, for decomposing the values of
	// proposals leaf by leaf (package leaves) and for upgrading a format-1
	// journal; nil: none (list keys are learned from keyed paths).
	Schema *leaves.Schema
	// Observer, if set, is called with every transition once it is durable,
	// in the order the transitions took effect, before the caller of the
	// transition gets its result. It runs on the writer goroutine: it must
	// be quick, must not modify the event's records, and must not call the
	// Journal. The agent's trace is an Observer.
	Observer func(Event)

	// onSlice, if set (by tests), gets the stats of every durable
	// retention slice.
	onSlice func(sliceStats)
	// growWait is how long a transition that grows the memtable waits for
	// the reads in flight (default defaultGrowWait; tests shorten it).
	growWait time.Duration
}

func (o Options) withDefaults() Options {
	if o.Retain == 0 {
		o.Retain = 10_000
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = time.Minute
	}
	if o.GCInterval <= 0 {
		o.GCInterval = 5 * time.Minute
	}
	if o.MemTableSize <= 0 {
		o.MemTableSize = 1 << 20
	}
	o.MemTableSize = max(o.MemTableSize, 1<<20)
	if o.growWait <= 0 {
		o.growWait = defaultGrowWait
	}
	if o.MaxMemTableSize == 0 {
		o.MaxMemTableSize = 1 << 30
	}
	o.MaxMemTableSize = max(o.MaxMemTableSize, o.MemTableSize)
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = defaultMinFree * o.MemTableSize
	}
	o.MinFreeBytes = max(o.MinFreeBytes, 0)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// valueThreshold is the size from which Badger keeps a record in its value
// log (see badgerOptions).
const valueThreshold = 128

// badgerOptions sizes Badger for a sidecar, with memtables of memTable
// bytes: a few MiB of memtables and caches instead of Badger's server
// defaults (64 MiB memtables ×5, 256 MiB block cache). The memtable is the
// largest item left: Badger allocates each one as a Go heap arena of about
// 1.3 × its size up front (2.7 MB at the default 2 MiB); see "Memory" in
// docs/bench.md.
func (o Options) badgerOptions(dir string, memTable int64) badger.Options {
	bopts := badger.DefaultOptions(dir).
		WithSyncWrites(!o.NoSync).
		// Sized for one device's steady traffic; a larger transition grows it
		// for itself (grow.go).
		WithMemTableSize(memTable).
		// At most two full memtables queued for flush behind the mutable one, not five.
		WithNumMemtables(2).
		// Stall writes only where no crash backlog gets (tables.go).
		WithNumLevelZeroTablesStall(levelZeroStall).
		// Small tables at every level: a compaction's table builders buffer
		// their table on the heap (about twice its size), Badger runs several
		// at once, and its pool of builders keeps up to 8 of them grown to
		// the largest table they built. With Badger's defaults (2 MiB tables,
		// twice as large a level down) the pool held 84 MB after 60,000 Sets.
		WithBaseTableSize(1 << 20).
		// L1 of 8 MiB: 100,000 leaves fit in a few levels.
		WithBaseLevelSize(8 << 20).
		// No compactors of Badger's own, which tick every 50 ms even at
		// rest: the journal compacts after writes (tables.go).
		WithNumCompactors(0).
		WithNumLevelZeroTables(numLevelZeroTables).
		// No compression, so no block cache: a table's blocks are read in
		// place from its mapped file. Compression made Badger's table
		// builders keep a compressed copy of every block, and its pool
		// keeps the builders: 165 MB of heap after 60,000 Sets against 45
		// without ("Soak" in docs/bench.md). The journal takes more disk
		// (about 4×; it holds the newest Options.Retain proposals) and less
		// CPU. Tables written compressed before stay readable (each table's
		// compression is in Badger's manifest).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		// Table indexes and blooms, capped (0 would keep every index on the heap).
		WithIndexCacheSize(8 << 20).
		// Records of valueThreshold bytes or more (encoded: proposals and
		// history deltas) go to the value log, so that the tree holds
		// their keys and small records only: retention deletes at the
		// head of the proposals and history while new records go at
		// their tails, so every compaction rewrites the whole tree, and
		// with the records in it that made each compaction's buffers and
		// new tables (and so the RSS) scale with the journal ("The
		// peaks" in docs/bench.md). The value log's GC runs after
		// compactions (collectValueLog). Large records count against a
		// transaction's size only as pointers.
		WithValueThreshold(valueThreshold).
		// Value-log files of 1 MiB, Badger's least (mmapped, preallocated
		// at twice that, sparse): a GC step rewrites or removes one file
		// and holds the writer meanwhile (collectValueLog), so small files
		// bound that wait and keep the log near its live size. Badger
		// reads the newest file whole at every open to find where its
		// valid entries end.
		WithValueLogFileSize(1 << 20).
		// A damaged block or value is an error, not garbage (verify.go).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithDetectConflicts(false). // one writer goroutine: no conflicts to detect
		WithMetricsEnabled(false).  // the sidecar exports its own metrics
		WithLogger(badgerLogger{o.Logger.With("component", "badger")})
	bopts.TableSizeMultiplier = 1 // every level's tables as small (see WithBaseTableSize)
	return bopts
}

// Journal is an open journal. All methods are safe for concurrent use.
type Journal struct {
	dir  string
	db   *badger.DB
	lock *os.File
	opts Options
	log  *slog.Logger

	mu     sync.RWMutex // guards closed against submit
	closed bool
	dbMu   sync.RWMutex // held by reads, so Close and a reopen (grow.go) wait for them
	// memTable is the open database's memtable size: Options.MemTableSize
	// but while large transitions run (grow.go). Written by the writer only.
	memTable atomic.Int64
	queue    chan *request

	closing  atomic.Bool
	failed   atomic.Pointer[error] // set once by fail (disk.go)
	failedCh chan struct{}         // closed by fail
	commits  atomic.Uint64         // write transactions committed, for benchmarks
	heads    atomic.Pointer[heads] // the singleton records as of the newest durable transaction (heads.go)
	recent   recentProposals       // the proposal records the newest durable transactions wrote (recent.go)
	statuses heldStatuses          // the statuses of the proposal records the writer wrote, for retention (statuses.go)
	values   recentValues          // the committed and applied value records they wrote (recent.go)
	// keptLists are the list-keys records known to be stored, by key: the
	// number of keys each holds. The writer's alone (recordLists).
	keptLists map[string]int
	// writerMaps is the writer's: maps its transactions use again (runBatch).
	writerMaps writerMaps
	// coverage is the read scopes as of the newest durable transaction
	// (beforeimages.go).
	coverage *coverage

	// keys are the list keys learned from journaled paths (persisted under
	// nsListKeys) and from whatever else the sidecar sees; decomposer uses
	// them and Options.Schema.
	keys       *leaves.Keys
	decomposer *leaves.Decomposer

	// historyHead is retention's history cursor: every history delta
	// before this seq is deleted (retention.go).
	historyHead atomic.Uint64
	// tombstonesFrom is retention's tombstone cursor: the applied
	// tombstones of writers before this index were checked (retention.go).
	tombstonesFrom atomic.Uint64

	// tablesWritten wakes compactTables after a write (tables.go).
	tablesWritten chan struct{}
	tablesMu      sync.Mutex // held while Badger compacts or drops (tables.go)
	// valueLogWritten counts the bytes of records written to the value
	// log since the memtable was last flushed, by flushForValueLog or by
	// Badger (noteFlushes). compactFlushed asks compactTables to compact
	// a single level-0 table, the one such a flush made. seenLevelZero
	// is the newest level-0 table noteFlushes has seen (compactTables').
	valueLogWritten atomic.Int64
	compactFlushed  atomic.Bool
	seenLevelZero   uint64
	// valueLogDue asks the writer to run the value log's GC
	// (collectValueLog).
	valueLogDue atomic.Bool
	// gcUnflushed is, while what a step of the value log's GC wrote back
	// may still be in a memtable, the newest version committed before
	// that step (0: nothing pending); flushDue asks the writer to flush it
	// (tables.go, "The value log's GC and compactions").
	gcUnflushed atomic.Uint64
	flushDue    atomic.Bool

	writerDone chan struct{}
	// retentionDue calls the background retention (callRetention).
	retentionDue chan struct{}
	stopBg       context.CancelFunc
	bgDone       sync.WaitGroup
}

// Open opens (creating if needed) the journal in dir. A directory another
// process has open yields an error wrapping ErrLocked.
func Open(dir string, opts Options) (*Journal, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("journal: create directory %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	bopts := opts.badgerOptions(dir, opts.MemTableSize)
	valueLog := hasValueLog(dir) // before Badger preallocates its next file
	if err := removeEmptyLogFiles(dir, opts.Logger.With("component", "journal", "dir", dir)); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if err := verifyTables(dir, bopts); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	replays := memtableLogsLeft(dir)
	db, err := badger.Open(bopts)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, namingFile(dir, err))
	}
	j := &Journal{
		dir:          dir,
		db:           db,
		lock:         lock,
		opts:         opts,
		log:          opts.Logger.With("component", "journal", "dir", dir),
		queue:        make(chan *request, 1024),
		writerDone:   make(chan struct{}),
		keptLists:    make(map[string]int),
		retentionDue: make(chan struct{}, 1),
		failedCh:     make(chan struct{}),

		tablesWritten: make(chan struct{}, 1),
	}
	if replays {
		// Badger replayed memtable logs a crash left, which may hold what
		// a GC step wrote back (tables.go).
		j.gcUnflushed.Store(db.MaxVersion())
	}
	// Compaction runs from the start: an upgrade may write a lot.
	ctx, cancel := context.WithCancel(context.Background())
	j.stopBg = cancel
	j.bgDone.Add(1)
	go j.compactTables(ctx)
	j.memTable.Store(opts.MemTableSize)
	err = j.initialize()
	if err == nil {
		err = verifyRecords(db, dir, valueLog, bopts.ValueThreshold)
	}
	if err == nil {
		err = j.upgrade()
	}
	if err == nil {
		j.coverage, err = loadCoverage(db)
	}
	if err == nil {
		var head uint64
		head, err = firstHistorySeq(db)
		j.historyHead.Store(head)
	}
	if err == nil {
		j.keys, err = loadListKeys(db)
		j.decomposer = leaves.NewDecomposer(opts.Schema, j.keys)
	}
	if err != nil {
		cancel()
		j.bgDone.Wait()
		_ = db.Close()
		_ = lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	go j.writer()
	j.bgDone.Add(2)
	go j.every(ctx, opts.GCInterval, j.runValueLogGC)
	go j.retention(ctx)
	return j, nil
}

// retention runs Compact every RetentionInterval, and whenever the writer
// calls for it (callRetention) unless the last called run dropped nothing
// (an unfinished proposal holds retention back): then calls wait for the
// next interval.
func (j *Journal) retention(ctx context.Context) {
	defer j.bgDone.Done()
	t := time.NewTicker(j.opts.RetentionInterval)
	defer t.Stop()
	held := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			held = false
		case <-j.retentionDue:
			if held {
				continue
			}
		}
		n, err := j.Compact(ctx)
		if err != nil && ctx.Err() == nil {
			j.log.Error("retention failed", "err", err)
		}
		// Held back: nothing dropped, and still outgrown. (A call made
		// before a run that dropped enough finds nothing to drop either.)
		if c, cerr := j.Configuration(ctx); cerr == nil {
			held = n == 0 && j.outgrown(c)
		}
	}
}

// retentionSlack is how many proposals beyond Options.Retain the journal
// may hold before the writer calls for retention rather than waiting for
// its interval: a tenth of Retain, so that under sustained Sets the
// journal (and the file pages of it the process maps) stays within 10 %
// of its retained size, and each run drops a bounded amount.
func retentionSlack(retain int) uint64 { return uint64(max(retain/10, retentionSlice)) }

// outgrown reports whether c holds Retain + retentionSlack proposals or
// more.
func (j *Journal) outgrown(c *Configuration) bool {
	kept := c.GetLastIndex() + 1 - c.GetFirstIndex()
	return j.opts.Retain >= 0 && kept >= uint64(j.opts.Retain)+retentionSlack(j.opts.Retain)
}

// callRetention asks the background retention to run now if the
// configuration c holds Retain + retentionSlack proposals or more.
func (j *Journal) callRetention(c *Configuration) {
	if !j.outgrown(c) {
		return
	}
	select {
	case j.retentionDue <- struct{}{}:
	default: // already called
	}
}

// lockDir takes an exclusive flock on dir/journal.lock, held until Close
// (and released by the kernel if the process dies).
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, "journal.lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: open lock file %s: %w", name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal: directory %s is in use by another process: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", name, err)
	}
	return f, nil
}

// initialize writes the initial records of a new journal, or checks the
// format of an existing one.
func (j *Journal) initialize() error {
	return j.update(func(txn *badger.Txn) error {
		var meta journalpb.Meta
		found, err := getRecord(txn, keyMeta, &meta)
		if err != nil {
			return err
		}
		if found {
			if f := meta.GetFormat(); f < 1 || f > formatVersion {
				return fmt.Errorf("format %d, this build reads %d (and upgrades 1 to %d): %w", f, formatVersion, formatVersion-1, ErrFormat)
			}
			return nil
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		it.Rewind()
		nonEmpty := it.Valid()
		it.Close()
		if nonEmpty {
			return fmt.Errorf("database has data but no journal format record: %w", ErrFormat)
		}
		init := []struct {
			key []byte
			msg proto.Message
		}{
			{keyMeta, &journalpb.Meta{Format: formatVersion}},
			{keyConfiguration, &Configuration{
				Committed:  &journalpb.Committed{},
				Applied:    &journalpb.Applied{},
				Status:     StatusPending,
				FirstIndex: 1,
			}},
			{keyMastership, &Mastership{}},
		}
		for _, r := range init {
			b, err := encodeRecord(r.msg)
			if err != nil {
				return err
			}
			if err := txn.Set(r.key, b); err != nil {
				return err
			}
		}
		return nil
	})
}

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Transactions is how many write transactions (each one fsync, unless
// Options.NoSync) the journal committed since it was opened.
func (j *Journal) Transactions() uint64 { return j.commits.Load() }

// Close stops the background work and the writer (answering every queued
// request first) and closes the database. Further calls fail with ErrClosed.
func (j *Journal) Close() error {
	if !j.closing.CompareAndSwap(false, true) {
		return ErrClosed
	}

	// Background work may still submit, so stop it before the writer. A
	// failed journal's may be stuck in Badger (a compaction on a disk that
	// refuses writes): it is waited for at most closeWait, then abandoned
	// to the process's exit, like the database (closeDB).
	j.stopBg()
	j.waitBackground()
	j.mu.Lock()
	j.closed = true
	close(j.queue)
	j.mu.Unlock()
	<-j.writerDone
	var err error
	if j.failure() == nil {
		j.dbMu.Lock()
		defer j.dbMu.Unlock()
		err = j.closeDB()
	} else if j.lockWithin(closeWait) {
		defer j.dbMu.Unlock()
		err = j.closeDB()
	} else {
		err = fmt.Errorf("reads or background work of the failed journal still held the database after %v; abandoned", closeWait)
	}
	if lerr := j.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("journal: close %s: %w", j.dir, err)
	}
	return nil
}

func (j *Journal) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	defer j.bgDone.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// runValueLogGC has the writer run Badger's value-log GC
// (collectValueLog), also when nothing is written (then no compaction
// calls for it).
func (j *Journal) runValueLogGC(ctx context.Context) {
	j.valueLogDue.Store(true)
	_ = j.wakeWriter(ctx)
}

// wakeWriter has the writer go round its loop with nothing to write, for
// the work it does between transactions (collectValueLog).
func (j *Journal) wakeWriter(ctx context.Context) error {
	return j.submitRequest(ctx, &request{done: make(chan struct{})})
}

// collectValueLog runs Badger's value-log GC while it is due
// (valueLogDue, set after compactions and every GCInterval), a step at a
// time: each rewrites the live records of one value-log file half
// garbage or more to the log's head and removes the file. The writer runs
// it between its transactions, one step after a batch while requests
// wait (they wait for that step) and every step due while none does.
//
// It runs in the writer because Badger's GC must not overlap a write: it
// reads the memtable's newest version (DB.MaxVersion) while Badger's
// write goroutine sets it without a lock (Badger v4.9.6, a data race the
// race detector reports), and no write is in flight between the
// writer's transactions.
func (j *Journal) collectValueLog() {
	for j.valueLogDue.Load() && j.failure() == nil {
		if !j.tablesMu.TryLock() {
			return // a compaction runs: the GC never overlaps one (tables.go)
		}
		began := time.Now()
		before := j.db.MaxVersion()
		err := j.db.RunValueLogGC(0.5)
		if err == nil {
			j.gcUnflushed.Store(max(j.gcUnflushed.Load(), before))
		}
		j.tablesMu.Unlock()
		if err != nil {
			j.valueLogDue.Store(false)
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				j.log.Warn("value-log GC failed", "err", err)
			}
			return
		}
		j.log.Debug("rewrote a value-log file", "took", time.Since(began).Round(time.Microsecond))
		if len(j.queue) > 0 {
			return
		}
	}
}

// badgerLogger adapts slog to badger.Logger: Badger's errors and warnings
// at their level, except its periodic cache statistics (badgerStats),
// which are facts for tuning, not problems, and go at debug level with
// its info and debug lines.
type badgerLogger struct{ log *slog.Logger }

// badgerStats are the prefixes of the warnings Badger's cache monitor
// logs every minute while a cache's hit ratio is low ("Block cache might
// be too small. Metrics: ...", then the life-expectancy histogram).
var badgerStats = []string{"Block cache might be too small", "Index cache might be too small", "Cache life expectancy"}

func (l badgerLogger) Errorf(f string, args ...any)   { l.write(slog.LevelError, f, args) }
func (l badgerLogger) Warningf(f string, args ...any) { l.write(slog.LevelWarn, f, args) }
func (l badgerLogger) Infof(f string, args ...any)    { l.write(slog.LevelDebug, f, args) }
func (l badgerLogger) Debugf(f string, args ...any)   { l.write(slog.LevelDebug, f, args) }

func (l badgerLogger) write(level slog.Level, f string, args []any) {
	ctx := context.Background()
	if level < slog.LevelWarn && !l.log.Enabled(ctx, level) {
		return // most of Badger's chatter: not even formatted
	}
	msg := strings.TrimSpace(fmt.Sprintf(f, args...))
	if level == slog.LevelWarn && slices.ContainsFunc(badgerStats, func(p string) bool { return strings.HasPrefix(msg, p) }) {
		level = slog.LevelDebug
	}
	l.log.Log(ctx, level, msg)
}

// --- the writer: one goroutine owns every write transaction ---

// A request is one transition: fn checks its guards and then writes, inside
// a transaction shared with the other requests of the batch.
type request struct {
	fn func(w *writeTxn) error // nil: a wake-up (wakeWriter), nothing to write
	// linger: the request may wait this long for other requests to share
	// its transaction (see UpdateLingering); 0 for every other request.
	linger time.Duration
	// queued, if not nil, is called once the request is queued.
	queued func()
	state  atomic.Int32 // requestQueued → requestTaken | requestCancelled
	err    error
	done   chan struct{}
}

const (
	requestQueued int32 = iota
	requestTaken
	requestCancelled
)

// maxBatch bounds the requests that share one transaction and fsync.
const maxBatch = 512

// submit runs fn in the writer and returns once its transaction is durable
// (or fn refused). If ctx ends before the writer took the request, nothing is
// written and ctx's error is returned; once taken, the request is carried out
// and its outcome returned regardless of ctx.
func (j *Journal) submit(ctx context.Context, fn func(w *writeTxn) error) error {
	return j.submitRequest(ctx, &request{fn: fn, done: make(chan struct{})})
}

func (j *Journal) submitRequest(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return ErrClosed
	}
	select {
	case j.queue <- r:
		j.mu.RUnlock()
		if r.queued != nil {
			r.queued()
		}
	case <-ctx.Done():
		j.mu.RUnlock()
		return ctx.Err()
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(requestQueued, requestCancelled) {
			return ctx.Err()
		}
		<-r.done
		return r.err
	}
}

func (j *Journal) writer() {
	defer close(j.writerDone)
	batch := make([]*request, 0, maxBatch)
	for r := range j.queue {
		batch = j.drain(append(batch[:0], r))
		if linger := lingering(batch); linger > 0 {
			// Every request may wait: give the next one (a client's
			// proposal, typically) the chance to share the fsync.
			region := trace.StartRegion(context.Background(), "journal.linger")
			t := time.NewTimer(linger)
			select {
			case r, ok := <-j.queue:
				if ok {
					batch = j.drain(append(batch, r))
				}
			case <-t.C:
			}
			t.Stop()
			region.End()
		}
		taken := batch[:0]
		for _, r := range batch {
			if r.state.CompareAndSwap(requestQueued, requestTaken) {
				if r.fn == nil { // wakeWriter's: nothing to write
					r.finish(nil)
					continue
				}
				taken = append(taken, r)
			}
		}
		for len(taken) > 0 {
			taken = taken[j.runBatch(taken):]
		}
		if len(j.queue) == 0 {
			j.shrink() // nothing waiting: a burst of large transitions grows the memtable once
		}
		if j.valueLogWritten.Load() >= valueLogUnflushed || j.flushDue.Load() {
			j.flushForValueLog()
		}
		j.collectValueLog()
	}
}

// drain adds the requests already queued to batch, up to maxBatch.
func (j *Journal) drain(batch []*request) []*request {
	for len(batch) < maxBatch {
		select {
		case r, ok := <-j.queue:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// lingering is how long batch may wait for company: the shortest linger
// of its requests, 0 if one of them may not wait or the batch is full.
func lingering(batch []*request) time.Duration {
	if len(batch) >= maxBatch {
		return 0
	}
	d := batch[0].linger
	for _, r := range batch[1:] {
		d = min(d, r.linger)
	}
	return d
}

// runBatch carries out a prefix of batch in one transaction and answers its
// requests; it returns how many it consumed. A request refused by its
// guards wrote nothing, so it does not disturb the others. A request that
// fails after it started writing (or does not fit in the transaction) ends
// the transaction early: the requests before it are committed without it,
// and it is retried alone.
func (j *Journal) runBatch(batch []*request) int {
	if err := j.usable(); err != nil {
		for _, r := range batch {
			r.finish(err)
		}
		return len(batch)
	}
	defer trace.StartRegion(context.Background(), "journal.txn").End()
	txn := j.db.NewTransaction(true)
	defer txn.Discard()
	w := &writeTxn{txn: txn, now: j.opts.Clock(), observed: j.opts.Observer != nil}
	w.startHeads(j.heads.Load())
	w.keptLists = j.keptLists
	w.deferProposals = true
	w.recent = &j.recent
	w.statuses = &j.statuses
	w.values = &j.values
	w.written, w.valuesWritten, w.plains, w.events = j.writerMaps.take()
	defer j.writerMaps.keep(w)
	results := make([]error, len(batch))
	for k, r := range batch {
		w.wrote = false
		clear(w.pending)
		emitted := len(w.events)
		err := r.fn(w)
		if err == nil {
			err = w.flushPending()
		}
		if err != nil {
			w.events = w.events[:emitted]
		}
		if err != nil && (w.wrote || errors.Is(err, badger.ErrTxnTooBig)) {
			txn.Discard()
			return j.runBefore(batch, k, err)
		}
		results[k] = err
	}
	if err := w.flushConfiguration(); err != nil {
		// Only Badger's size limit refuses the last record: the batch's
		// last request is the one that did not fit.
		txn.Discard()
		return j.runBefore(batch, len(batch)-1, err)
	}
	j.recent.drop(w.written)
	region := trace.StartRegion(context.Background(), "journal.commit")
	err := txn.Commit()
	region.End()
	j.wroteTables()
	if err != nil {
		err = j.fail(err) // from now on every read is refused: the heads are never read again
		for _, r := range batch {
			r.finish(err)
		}
		return len(batch)
	}
	j.commits.Add(1)
	if w.historyNext > 0 {
		j.advanceHistoryHead(w.historyNext)
	}
	j.valueLogWritten.Add(w.valueLog)
	j.values.add(w.valuesWritten)
	if w.hasHeads {
		h := w.heads
		j.heads.Store(&h)
		j.callRetention(h.config)
		j.recent.add(w.written)
		j.statuses.add(w.written)
	} else {
		j.forgetHeads() // this transaction worked without them: readers read Badger
	}
	for key, n := range w.listsKept {
		j.keptLists[key] = n
	}
	j.coverage.add(w.scopesAdded)
	if j.opts.Observer != nil {
		for _, e := range w.events {
			j.opts.Observer(e)
		}
	}
	// A lingering request (the record of a device's answer) is answered
	// last: the goroutine made ready last runs next on this processor,
	// and its waiter, the agent's applier, has the next device Set to
	// send, while the others (a client's Set, proposed) only go on
	// waiting.
	for k, r := range batch {
		if r.linger == 0 {
			r.finish(results[k])
		}
	}
	for k, r := range batch {
		if r.linger > 0 {
			r.finish(results[k])
		}
	}
	return len(batch)
}

// runBefore ends a transaction that failed at batch[k] with err (it wrote,
// or did not fit): the requests before k run again without it, in as many
// transactions as they take, and their count is returned; k = 0 answers
// batch[0] alone, after growing the memtable if that is what it needs.
func (j *Journal) runBefore(batch []*request, k int, err error) int {
	if k > 0 {
		for done := 0; done < k; {
			done += j.runBatch(batch[done:k])
		}
		return k
	}
	r := batch[0]
	if errors.Is(err, badger.ErrTxnTooBig) && j.memTable.Load() < j.opts.MaxMemTableSize {
		// Alone and too large for this memtable: grow it and try again.
		if gerr := j.grow(); gerr != nil {
			r.finish(fmt.Errorf("journal: %w", gerr))
			return 1
		}
		return j.runBatch(batch[:1])
	}
	if errors.Is(err, badger.ErrTxnTooBig) {
		err = fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	r.finish(fmt.Errorf("journal: %w", err))
	return 1
}

// writerMaps holds the maps of what a writer's transaction wrote
// (writeTxn.written, valuesWritten and plains) and its events between
// transactions: emptied and used again rather than grown anew by every one
// (their entries are copied out once it is durable: recentProposals.add,
// recentValues.add; the observer takes the events by value). Those a large
// transaction grew are let go of, so that one large Set does not keep
// their memory for good.
type writerMaps struct {
	written       map[uint64]recentProposal
	valuesWritten map[string]recentValue
	plains        plainValues
	events        []Event
}

// writerMapsMaxEntries is the most entries a map may have held for the writer
// to keep it: a Set of a few hundred leaves.
const writerMapsMaxEntries = 1024

// take returns the maps and the events, empty, for a new transaction (a
// transaction given up, runBefore, leaves them as it had them).
func (s *writerMaps) take() (map[uint64]recentProposal, map[string]recentValue, plainValues, []Event) {
	if s.written == nil {
		s.written = make(map[uint64]recentProposal)
		s.valuesWritten = make(map[string]recentValue)
		s.plains = make(plainValues)
	}
	clear(s.written)
	clear(s.valuesWritten)
	clear(s.plains)
	return s.written, s.valuesWritten, s.plains, s.events[:0]
}

// keep takes back w's events, grown as they may be, without the records
// they point to, and lets everything go if w, done, grew it large.
func (s *writerMaps) keep(w *writeTxn) {
	// The whole capacity, not only len: past it lie a failed request's
	// events (runBatch drops them by length) and those of a batch run
	// again inside this one (runBefore's runBatch takes this same array).
	clear(w.events[:cap(w.events)])
	s.events = w.events[:0]
	if len(w.written) > writerMapsMaxEntries || len(w.valuesWritten) > writerMapsMaxEntries || len(w.plains) > writerMapsMaxEntries ||
		cap(w.events) > writerMapsMaxEntries {
		*s = writerMaps{}
	}
}

func (r *request) finish(err error) {
	r.err = err
	close(r.done)
}

// writeTxn is the write transaction a request runs in. It records whether
// the request has written, which tells a refusal from a failure half-way.
type writeTxn struct {
	txn      *badger.Txn
	now      time.Time
	nowStamp *timestamppb.Timestamp // now, made once (stamp)
	wrote    bool
	events   []Event // for Options.Observer, once the transaction is durable
	observed bool    // an Observer is set: collect events
	// read collects the device's values CommitChange took, for its event.
	read []*PathValue
	// followUps are events a proposal transition queues to be emitted
	// after its own (see proposalTransition).
	followUps []Event
	// heads are the singleton records as this transaction left them so
	// far, if hasHeads (heads.go).
	heads    heads
	hasHeads bool
	// keptLists is Journal.keptLists; listsKept, the list-keys records
	// this transaction read or wrote, for it once the transaction is
	// durable.
	keptLists, listsKept map[string]int
	// scopesAdded are the read scopes this transaction recorded, for
	// Journal.coverage once it is durable.
	scopesAdded []string
	// If deferProposals (the writer's transactions), the proposal records
	// a request writes are kept decoded in pending, by index, and encoded
	// once at the request's end (flushPending): the several transitions
	// of one Set in one request (propose, commit, start apply; or a
	// batch's completions) encode its record once, and read it back
	// without decoding it. A pending proposal is never changed: a
	// transition reads a copy of it (proposal). So is the configuration
	// record when w has the heads (which hold it decoded): every
	// transition writes it, and configPending says the last one,
	// w.heads.config, is still to be encoded: once, at the transaction's
	// end (flushConfiguration).
	deferProposals bool
	pending        map[uint64]*Proposal
	configPending  bool
	// recent is Journal.recent in the writer's transactions (nil in
	// others); written, the proposal records this transaction wrote
	// (flushPending) or deleted, for it once the transaction is
	// durable, and for the transaction's later reads, which must not read
	// recent's older records of them.
	recent  *recentProposals
	written map[uint64]recentProposal
	// statuses is Journal.statuses in the writer's transactions (nil in
	// others), for retention; written updates it once durable.
	statuses *heldStatuses
	// values is Journal.values in the writer's transactions (nil in
	// others); valuesWritten, the value records this transaction wrote or
	// deleted, for it once the transaction is durable, and for the
	// transaction's later reads.
	values        *recentValues
	valuesWritten map[string]recentValue
	// plains are the encodings of the PathValues this transaction wrote
	// or read from recentValues, which its history deltas and proposal
	// records embed.
	plains plainValues
	// valueLog counts the bytes of the records this transaction wrote
	// that go to the value log (valueThreshold or more).
	valueLog int64
	// historyNext is where retention's history cursor goes once this
	// transaction is durable (Compact), 0 if it ran no retention slice.
	historyNext uint64
}

// stamp is w.now as a Timestamp, one per transaction: the records it
// writes share it, as records share their other parts (nothing changes a
// record's timestamps).
func (w *writeTxn) stamp() *timestamppb.Timestamp {
	if w.nowStamp == nil {
		w.nowStamp = timestamppb.New(w.now)
	}
	return w.nowStamp
}

// emit records a transition for Options.Observer.
func (w *writeTxn) emit(e Event) {
	if !w.observed {
		return
	}
	e.Time = w.now
	w.events = append(w.events, e)
}

func (w *writeTxn) put(key []byte, m proto.Message) error {
	if p, ok := m.(*Proposal); ok && w.deferProposals && string(key) == string(proposalKey(p.GetIndex())) {
		if w.pending == nil {
			w.pending = make(map[uint64]*Proposal)
		}
		w.pending[p.GetIndex()] = p
		w.wrote = true
		return nil
	}
	if w.deferProposals && w.hasHeads && string(key) == string(keyConfiguration) {
		w.noteWrite(key, m)
		w.configPending = true
		w.wrote = true
		return nil
	}
	plain, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %q: %w", key, err)
	}
	return w.putRecord(key, m, compressRecord(plain), plain)
}

// putRecord is put of m encoded plain as plain and stored as b
// (compressRecord(plain)), for a record not deferred (w.pending,
// w.configPending).
func (w *writeTxn) putRecord(key []byte, m proto.Message, b, plain []byte) error {
	w.wrote = true
	if err := w.set(key, b); err != nil {
		return err
	}
	w.noteWrite(key, m)
	v := recentValue{b: b}
	if pv, ok := m.(*PathValue); ok {
		w.notePlain(pv, plain)
		v.pv, v.plain, v.tombstone = pv, plain, pv.GetDeleted()
	}
	w.noteValue(key, v)
	return nil
}

// set is txn.Set, counting what goes to the value log.
func (w *writeTxn) set(key, value []byte) error {
	if len(value) >= valueThreshold {
		w.valueLog += int64(len(value))
	}
	return w.txn.Set(key, value)
}

func (w *writeTxn) putEmpty(key []byte) error {
	w.wrote = true
	return w.txn.Set(key, nil)
}

func (w *writeTxn) delete(key []byte) error {
	if bytes.HasPrefix(key, nsProposal) && len(key) == len(nsProposal)+8 {
		i := binary.BigEndian.Uint64(key[len(nsProposal):])
		delete(w.pending, i)
		w.noteWritten(i, recentProposal{})
	}
	w.wrote = true
	if err := w.txn.Delete(key); err != nil {
		return err
	}
	w.noteWrite(key, nil)
	w.noteValue(key, recentValue{deleted: true})
	return nil
}

// notePlain records that plain is pv's encoding (w.plains).
func (w *writeTxn) notePlain(pv *PathValue, plain []byte) {
	if w.plains == nil {
		w.plains = make(plainValues)
	}
	w.plains[pv] = plain
}

// noteValue records in w.valuesWritten what this transaction wrote at key
// if it is a committed or applied value record.
func (w *writeTxn) noteValue(key []byte, v recentValue) {
	if w.values == nil || !(bytes.HasPrefix(key, nsCommitted) || bytes.HasPrefix(key, nsApplied)) {
		return
	}
	if w.valuesWritten == nil {
		w.valuesWritten = make(map[string]recentValue)
	}
	w.valuesWritten[string(key)] = v
}

// flushPending encodes and writes the pending proposals, in index order;
// of the proposals a device Set's answer completed, it writes the newest
// only (derived.go).
func (w *writeTxn) flushPending() error {
	indices := slices.Sorted(maps.Keys(w.pending))
	unwritten := w.completedWithoutRecords(indices)
	for _, i := range indices {
		if rec, ok := unwritten[i]; ok {
			w.noteWritten(i, rec) // held decoded, completed; no encoding to extend
			continue
		}
		key := proposalKey(i)
		rec, err := w.encodeProposal(w.pending[i])
		if err != nil {
			return fmt.Errorf("encode %q: %w", key, err)
		}
		if err := w.set(key, compressRecord(rec.plain)); err != nil {
			return err
		}
		if rec.size > recentMaxRecordSize {
			rec.plain = nil // never kept (recentProposals.add): not held to the commit either
		}
		w.noteWritten(i, rec)
	}
	clear(w.pending)
	return nil
}

// flushConfiguration encodes and writes the pending configuration record
// (w.configPending), once per transaction: every transition of every
// request in it changes the same record, and only its last state is
// committed.
func (w *writeTxn) flushConfiguration() error {
	if !w.configPending {
		return nil
	}
	b, err := encodeRecord(w.heads.config)
	if err != nil {
		return fmt.Errorf("encode %q: %w", keyConfiguration, err)
	}
	if err := w.set(keyConfiguration, b); err != nil {
		return err
	}
	w.configPending = false
	return nil
}

// encodeProposal encodes p, the new record of a proposal, plain: as the
// record w last wrote of it with an apply step appended
// (applyStepSuffix) when that is all p changed of it, else whole.
func (w *writeTxn) encodeProposal(p *Proposal) (recentProposal, error) {
	if was, ok := w.writtenRecord(p.GetIndex()); ok && was.plain != nil && was.rewrites < maxApplyStepRewrites {
		if suffix, ok := applyStepSuffix(was.p, p); ok {
			plain := slices.Concat(was.plain, suffix) // a new array: was.plain may still be Badger's to write
			return recentProposal{p: p, plain: plain, size: len(plain), rewrites: was.rewrites + 1}, nil
		}
	}
	plain, err := w.plains.marshalProposal(p)
	if err != nil {
		return recentProposal{}, err
	}
	if checkSharedValues {
		mustDecodeAs(proposalKey(p.GetIndex()), plain, p)
	}
	return recentProposal{p: p, plain: plain, size: len(plain)}, nil
}

// writtenRecord returns the record of proposal i that w or the journal
// wrote last, if the writer holds it (not w.pending's).
func (w *writeTxn) writtenRecord(i uint64) (recentProposal, bool) {
	if e, ok := w.written[i]; ok {
		return e, e.p != nil
	}
	if w.recent == nil {
		return recentProposal{}, false
	}
	return w.recent.entry(i)
}

// noteWritten records in w.written that this transaction wrote proposal
// i's record rec (rec.p nil: deleted it).
func (w *writeTxn) noteWritten(i uint64, rec recentProposal) {
	if w.recent == nil {
		return
	}
	if w.written == nil {
		w.written = make(map[uint64]recentProposal)
	}
	w.written[i] = rec
}

// recentProposal returns the newest record of proposal i if the writer
// holds it decoded (this request's pending one, this transaction's
// written one, the recent durable ones), else nil. It is not a copy.
func (w *writeTxn) recentProposal(i uint64) *Proposal {
	if p, ok := w.pending[i]; ok {
		return p
	}
	e, _ := w.writtenRecord(i)
	return e.p
}

func (w *writeTxn) get(key []byte, m proto.Message) (bool, error) {
	return getRecord(w.txn, key, m)
}

func getRecord(txn *badger.Txn, key []byte, m proto.Message) (bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %q: %w", key, err)
	}
	err = readValue(item, func(v []byte) error { return decodeRecord(v, m) })
	if err != nil {
		return false, fmt.Errorf("decode %q: %w", key, err)
	}
	return true, nil
}
