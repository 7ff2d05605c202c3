package journal

import (
	"fmt"
	"strings"
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
	value := strings.Repeat("v", 4096)
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
