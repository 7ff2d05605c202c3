package journal

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// recorder is an Options.Observer that keeps "Action(index)" lines.
type recorder struct {
	mu     sync.Mutex
	lines  []string
	events []Event
}

func (r *recorder) observe(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf("%s(%d)", e.Action, e.Index))
	r.events = append(r.events, e)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

func TestObserverSeesEveryDurableTransitionInOrder(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})

	term := synced(t, j)
	first := applyChange(t, j, term, update(t, "/a", "1"))
	rollback(t, j, term, first)
	want := []string{
		"Connect(0)", "StartReconcile(0)", "CompleteReconcile(0)",
		"ProposeChange(1)", "CommitChange(1)", "StartApply(1)", "CompleteApply(1)",
		"ProposeRollback(1)", "CommitRollback(1)", "StartApplyRollback(1)", "CompleteApplyRollback(1)",
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}

	// Refused transitions and re-entries that write nothing are not events.
	if _, _, err := j.CommitChange(ctx, first); err == nil {
		t.Fatal("CommitChange of a finished proposal was allowed")
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("refused transition was observed: %v", got)
	}

	// FailApply names the proposals it aborted.
	var idx []uint64
	for _, v := range []string{"2", "3", "4"} {
		p, err := j.ProposeChange(ctx, []*Op{update(t, "/b", v)})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := j.CommitChange(ctx, p.Index); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, p.Index)
	}
	if _, _, err := j.StartApply(ctx, idx[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.StartApply(ctx, idx[0]); err != nil { // re-entry: no event
		t.Fatal(err)
	}
	if _, _, err := j.FailApply(ctx, idx[0], 3, "bad value"); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	n := len(rec.events)
	last := rec.events[n-1-len(idx[1:])]
	var rebased []uint64
	for _, e := range rec.events[n-len(idx[1:]):] {
		if e.Action == ActionRebase {
			rebased = append(rebased, e.Index)
		}
	}
	starts := 0
	for _, l := range rec.lines {
		if l == fmt.Sprintf("StartApply(%d)", idx[0]) {
			starts++
		}
	}
	rec.mu.Unlock()
	if starts != 1 {
		t.Errorf("StartApply(%d) observed %d times, want 1 (re-entry writes nothing)", idx[0], starts)
	}
	if last.Action != ActionFailApply || !slices.Equal(rebased, idx[1:]) {
		t.Errorf("event %s then Rebase of %v, want FailApply then Rebase of %v", last.Action, rebased, idx[1:])
	}
	c := last.Configuration
	if last.Proposal.GetChange().GetApply() != StatusFailed || c.GetCommitted().GetIndex() != c.GetApplied().GetIndex() {
		t.Errorf("FailApply event records apply %v, committed index %d, applied index %d; want Failed and the committed index back at the applied one",
			last.Proposal.GetChange().GetApply(), c.GetCommitted().GetIndex(), c.GetApplied().GetIndex())
	}
}

func TestObserverOrderUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 50; n++ {
				if _, err := j.ProposeChange(ctx, []*Op{update(t, "/x", "1")}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := rec.take()
	if len(got) != 400 {
		t.Fatalf("observed %d proposals, want 400", len(got))
	}
	for n, l := range got {
		if want := fmt.Sprintf("ProposeChange(%d)", n+1); l != want {
			t.Fatalf("event %d is %s, want %s (events must come in commit order)", n, l, want)
		}
	}
}

// A failed apply re-bases the later committed proposals, in index order,
// past one whose commit failed in between, which is aborted in its turn
// (its own error kept) between their new commits and applies.
func TestFailApplyRebasesPastFailedCommitInOrder(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
	term := synced(t, j)
	var idx []uint64
	for _, v := range []string{"1", "2", "3", "4"} {
		p, err := j.ProposeChange(ctx, []*Op{update(t, "/a", v)})
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, p.Index)
	}
	if _, _, err := j.CommitChange(ctx, idx[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.StartApply(ctx, idx[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.CommitChange(ctx, idx[1]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.FailCommit(ctx, idx[2], 3, "invalid"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.CommitChange(ctx, idx[3]); err != nil {
		t.Fatal(err)
	}
	rec.take()
	if _, _, err := j.FailApply(ctx, idx[0], 3, "device said no"); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("FailApply(%d)", idx[0]), fmt.Sprintf("Rebase(%d)", idx[1]), fmt.Sprintf("Rebase(%d)", idx[3])}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	checkInvariants(t, j)
	for _, i := range []uint64{idx[1], idx[3]} {
		if _, _, err := j.CommitChange(ctx, i); err != nil {
			t.Fatalf("CommitChange(%d) again: %v", i, err)
		}
	}
	commitAndApplyCommitted(t, j, term, idx[1])
	if p, _, err := j.AbortApply(ctx, idx[2]); err != nil || p.GetChange().GetApply() != StatusAborted {
		t.Fatalf("AbortApply(%d) = %v, %v", idx[2], p.GetChange().GetApply(), err)
	}
	commitAndApplyCommitted(t, j, term, idx[3])
	if p, _ := j.Proposal(ctx, idx[2]); p.GetChange().GetError().GetMessage() != "invalid" {
		t.Errorf("the failed commit's own error was replaced: %v", p.GetChange().GetError())
	}
	if got := appliedList(t, j); !slices.Equal(got, []string{fmt.Sprintf("/a=4@%d", idx[3])}) {
		t.Errorf("applied %v", got)
	}
	checkInvariants(t, j)
}
