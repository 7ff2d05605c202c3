package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed/diskfault"
)

// While its filesystem is short of MinFreeBytes or read-only, every write
// is refused before Badger sees it, with ErrNoSpace or ErrUnwritable and a
// message saying why; nothing is written, reads go on, and writes succeed
// again once the fault is gone.
func TestWritesRefusedWhileTheDiskCannotTakeThem(t *testing.T) {
	mnt := diskfault.Tmpfs(t, 32<<20)
	dir := filepath.Join(mnt, "journal")
	// The reserve: 4 memtables of 1 MiB.
	j := openTest(t, dir, Options{MemTableSize: 1 << 20})
	ctx := t.Context()
	term := synced(t, j)
	i := applyChange(t, j, term, update(t, "/a", "0"))

	for n, fault := range []struct {
		name string
		make func(t *testing.T) (undo func())
		want error
		msg  string
	}{
		{"short of space", func(t *testing.T) func() { return diskfault.Fill(t, mnt, 2<<20) }, ErrNoSpace,
			"free on its filesystem, below the 4.0 MiB the journal keeps in reserve"},
		{"read-only", func(t *testing.T) func() { return diskfault.ReadOnly(t, dir) }, ErrUnwritable,
			"the filesystem is read-only"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			before := dump(t, j)
			undo := fault.make(t)
			writes := []struct {
				name string
				do   func() error
			}{
				{"ProposeChange", func() error { _, err := j.ProposeChange(ctx, []*Op{update(t, "/b", "1")}); return err }},
				{"ProposeRollback", func() error { _, _, err := j.ProposeRollback(ctx, i); return err }},
				{"Connect", func() error { _, err := j.Connect(ctx); return err }},
				{"Compact", func() error { _, err := j.Compact(ctx); return err }},
			}
			for _, w := range writes {
				err := w.do()
				if !errors.Is(err, fault.want) || !strings.Contains(err.Error(), fault.msg) || !strings.Contains(err.Error(), dir) {
					t.Errorf("%s: %v; want %v naming %s and saying %q", w.name, err, fault.want, dir, fault.msg)
				}
			}
			if diff := cmp.Diff(before, dump(t, j)); diff != "" {
				t.Errorf("refused writes changed the database (-before +after):\n%s", diff)
			}
			if _, err := j.Proposal(ctx, i); err != nil {
				t.Errorf("reading proposal %d: %v", i, err)
			}

			undo()
			i = applyChange(t, j, term, update(t, "/a", fmt.Sprint(n+1)))
		})
	}
	checkInvariants(t, j)
	if got := committedList(t, j, nil); !cmp.Equal(got, []string{"/a=2@3"}) {
		t.Errorf("committed %v, want /a=2@3", got)
	}
}

// A write that fails inside Badger (here: creating its next memtable or
// value-log file in a directory made immutable) fails the journal: that write and every later
// read and write get ErrFailed, naming the file, rather than crash on
// Badger's broken state; Close returns; reopened, the journal holds every
// acknowledged write.
func TestFailsOnceAWriteFails(t *testing.T) {
	dir := filepath.Join(diskfault.Tmpfs(t, 64<<20), "journal")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil)) // Badger's flusher retries, with an error a second
	j, err := Open(dir, Options{MemTableSize: 1 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	term := synced(t, j)
	acked := []uint64{applyChange(t, j, term, update(t, "/a", "before"))}

	restore := diskfault.Immutable(t, dir)
	value := incompressible(10 << 10)
	var failed error
	for k := 0; failed == nil; k++ {
		if k == 10_000 {
			t.Fatal("10,000 proposals of 10 KiB and no new memtable or value-log file")
		}
		p, err := j.ProposeChange(ctx, []*Op{update(t, fmt.Sprintf("/b/k%d", k), value)})
		if err != nil {
			failed = err
			break
		}
		acked = append(acked, p.GetIndex())
	}
	t.Logf("after %d proposals: %v", len(acked), failed)
	if !errors.Is(failed, ErrFailed) || !regexp.MustCompile(`\.(mem|vlog): operation not permitted`).MatchString(failed.Error()) {
		t.Errorf("the write Badger failed: %v; want ErrFailed naming the memtable or value-log file", failed)
	}
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"Configuration", func() error { _, err := j.Configuration(ctx); return err }},
		{"Proposal", func() error { _, err := j.Proposal(ctx, 1); return err }},
		{"Proposals", func() error { return j.Proposals(ctx, 1, 0, func(*Proposal) error { return nil }) }},
		{"ProposeChange", func() error { _, err := j.ProposeChange(ctx, []*Op{update(t, "/c", "x")}); return err }},
		{"CommitChange", func() error { _, _, err := j.CommitChange(ctx, acked[1]); return err }},
	} {
		if err := call.do(); !errors.Is(err, ErrFailed) {
			t.Errorf("%s after the failure: %v; want ErrFailed", call.name, err)
		}
	}

	restore()
	closed := time.Now()
	if err := j.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
	t.Logf("closed in %v", time.Since(closed).Round(time.Millisecond))

	j2 := openTest(t, dir, Options{MemTableSize: 1 << 20})
	for _, i := range acked {
		if _, err := j2.Proposal(ctx, i); err != nil {
			t.Errorf("acknowledged proposal %d after reopening: %v", i, err)
		}
	}
	c, err := j2.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last := acked[len(acked)-1]; c.GetLastIndex() != last {
		t.Errorf("reopened: last index %d, want %d, the last acknowledged", c.GetLastIndex(), last)
	}
	checkInvariants(t, j2)
}

// TestReadPanicFailsTheJournal: a read that panics inside the database (as
// Badger does when a failed write left it without a memtable) fails the
// journal, as a failed write does, instead of the process.
func TestReadPanicFailsTheJournal(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	err := j.view(context.Background(), func(*badger.Txn) error { panic("no memtable") })
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("a read that panicked: %v, want ErrFailed", err)
	}
	if _, err := j.Configuration(context.Background()); !errors.Is(err, ErrFailed) {
		t.Fatalf("the next read: %v, want ErrFailed", err)
	}
}
