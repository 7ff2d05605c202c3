package journal

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Badger runs without compactors of its own (tables.go): the journal's
// writes are what compacts its tables. Writes that fill level 0 past
// Badger's trigger are followed by a compaction that empties it into the
// tree, and they never stall on a full level 0.
func TestWritesCompactTheTables(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20})
	term := synced(t, j)
	value := incompressible(4096)
	sawFull, compacted := false, false
	deadline := time.Now().Add(2 * time.Minute)
	for n := 0; !(sawFull && compacted); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d changes: level 0 held %d tables or more: %v; compacted into the tree: %v (levels %+v)",
				n, numLevelZeroTables+1, sawFull, compacted, j.db.Levels())
		}
		applyChange(t, j, term, update(t, fmt.Sprintf("/a/b%d", n%500), value))
		l0, below := 0, 0
		for _, l := range j.db.Levels() {
			if l.Level == 0 {
				l0 = l.NumTables
			} else {
				below += l.NumTables
			}
		}
		sawFull = sawFull || l0 > numLevelZeroTables
		compacted = compacted || (sawFull && l0 < numLevelZeroTables && below > 0)
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
// records, valueLogUnflushed and files less than half garbage.
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
