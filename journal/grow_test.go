package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestLargeTransitionGrowsTheMemtable: a proposal of many more paths than
// one transaction of the steady memtable holds is proposed, committed and
// applied (the writer grows the memtable for it), while other writers and
// readers carry on; afterwards the journal is back at its steady memtable,
// and everything is durable across a reopen.
func TestLargeTransitionGrowsTheMemtable(t *testing.T) {
	dir := t.TempDir()
	opts := Options{NoSync: true, MemTableSize: 1 << 20}
	j := openTest(t, dir, opts)
	ctx := context.Background()
	term := synced(t, j)
	const paths = 2000 // about 5 times what a 1 MiB memtable's transaction holds
	var kv []string
	for n := range paths {
		kv = append(kv, fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", n), fmt.Sprintf("d%d", n))
	}
	big, err := j.ProposeChange(ctx, []*Op{update(t, kv...)})
	if err != nil {
		t.Fatal(err)
	}

	// Small proposals and streaming reads run alongside the large commit.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	wg.Go(func() {
		if _, _, err := j.CommitChange(ctx, big.Index); err != nil {
			errs <- fmt.Errorf("commit of the large proposal: %w", err)
		}
	})
	for n := range 8 {
		wg.Go(func() {
			if _, err := j.ProposeChange(ctx, []*Op{update(t, fmt.Sprintf("/small%d", n), "1")}); err != nil {
				errs <- fmt.Errorf("small proposal %d: %w", n, err)
			}
		})
		wg.Go(func() {
			if err := j.Committed(ctx, nil, func(*PathValue) error { return nil }); err != nil {
				errs <- fmt.Errorf("read %d: %w", n, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if _, _, err := j.StartApply(ctx, big.Index); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.CompleteApply(ctx, big.Index, term); err != nil {
		t.Fatal(err)
	}
	const values = 2 * paths // each entry's description and its key leaf, name
	if got := len(committedList(t, j, nil)); got != values {
		t.Fatalf("%d committed values, want %d", got, values)
	}
	// The writer shrinks the memtable once nothing waits for it.
	deadline := time.Now().Add(time.Minute)
	for j.memTable.Load() != opts.MemTableSize {
		if time.Now().After(deadline) {
			t.Fatalf("memtable %d bytes a minute after the large transitions, want the steady %d", j.memTable.Load(), opts.MemTableSize)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openTest(t, dir, opts)
	if got := len(committedList(t, j, nil)); got != values {
		t.Fatalf("after reopening: %d committed values, want %d", got, values)
	}
	var applied int
	if err := j.Applied(ctx, nil, func(*PathValue) error { applied++; return nil }); err != nil || applied != values {
		t.Fatalf("after reopening: %d applied values (%v), want %d", applied, err, values)
	}
}

// TestGrowWaitsForReadsABoundedTime: a read that holds the database (a
// stream to a slow client) makes a transition that must grow the memtable
// fail after Options.growWait with ErrTooLarge, writing nothing, rather
// than stall the writer; small writes go on meanwhile, and once the read
// ends the same transition succeeds.
func TestGrowWaitsForReadsABoundedTime(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, growWait: 200 * time.Millisecond})
	ctx := context.Background()
	synced(t, j)
	var kv []string
	for n := range 2000 {
		kv = append(kv, fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", n), "d")
	}
	big, err := j.ProposeChange(ctx, []*Op{update(t, kv...)}) // its record goes to the value log: proposing fits
	if err != nil {
		t.Fatal(err)
	}
	reading, release := make(chan struct{}), make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		first := true
		readDone <- j.Proposals(ctx, 1, 1, func(*Proposal) error {
			if first {
				first = false
				close(reading)
				<-release
			}
			return nil
		})
	}()
	<-reading
	if _, _, err := j.CommitChange(ctx, big.Index); !errors.Is(err, ErrTooLarge) {
		close(release)
		t.Fatalf("committing a large proposal while a read holds the journal: %v, want ErrTooLarge", err)
	}
	if _, err := j.ProposeChange(ctx, []*Op{update(t, "/small", "1")}); err != nil {
		close(release)
		t.Fatalf("a small proposal while the read goes on: %v", err)
	}
	close(release)
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	if p, err := j.Proposal(ctx, big.Index); err != nil || p.GetChange().GetCommit() != StatusPending {
		t.Fatalf("after the refused commit: %v (%v), want it still pending", p.GetChange().GetCommit(), err)
	}
	if _, _, err := j.CommitChange(ctx, big.Index); err != nil {
		t.Fatalf("committing the large proposal once the read ended: %v", err)
	}
}

// TestOpensAfterAKillBetweenCreatingAndSizingAFile: an empty memtable log
// or value-log file, as a process killed between Badger's creating and
// sizing one leaves, does not stop the journal from opening, and nothing
// durable is lost.
func TestOpensAfterAKillBetweenCreatingAndSizingAFile(t *testing.T) {
	for _, name := range []string{"00099.mem", "000099.vlog"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j := openTest(t, dir, Options{NoSync: true})
			term := synced(t, j)
			applyChange(t, j, term, update(t, "/a", "1"))
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			empty := filepath.Join(dir, name)
			if err := os.WriteFile(empty, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			j = openTest(t, dir, Options{NoSync: true})
			if got := committedList(t, j, nil); len(got) != 1 {
				t.Fatalf("committed after reopening: %v, want /a", got)
			}
			applyChange(t, j, term, update(t, "/a", "2"))
		})
	}
}
