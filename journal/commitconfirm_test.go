package journal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// secretID is the commit id the tests journal: no refusal may repeat it.
const secretID = "secret-commit-id"

// proposeConfirmed journals a commit-confirmed of ops under id and returns
// its proposal index.
func proposeConfirmed(t testing.TB, j *Journal, id string, deadline time.Time, ops ...*Op) uint64 {
	t.Helper()
	if len(ops) == 0 {
		ops = []*Op{update(t, "/cc", "v")}
	}
	p, err := j.ProposeConfirmedChange(context.Background(), Sender{}, ops, id, deadline)
	if err != nil {
		t.Fatalf("ProposeConfirmedChange(%q): %v", id, err)
	}
	return p.Index
}

// commitConfirm returns the outstanding record, failing the test if there
// is none.
func commitConfirm(t testing.TB, j *Journal) *CommitConfirm {
	t.Helper()
	rec, err := j.CommitConfirm(context.Background())
	if err != nil {
		t.Fatalf("CommitConfirm: %v", err)
	}
	return rec
}

func noCommitConfirm(t testing.TB, j *Journal) {
	t.Helper()
	if rec, err := j.CommitConfirm(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CommitConfirm = %v, %v; want ErrNotFound", rec, err)
	}
}

// putCommitConfirm writes a record behind the transitions' back, to reach
// states they never leave (a record of a failed or dropped change).
func putCommitConfirm(t testing.TB, j *Journal, rec *CommitConfirm) {
	t.Helper()
	err := j.submit(context.Background(), func(w *writeTxn) error { return w.put(keyCommitConfirm, rec) })
	if err != nil {
		t.Fatal(err)
	}
}

// TestCommitConfirmRefusals drives the journal into a state with proposal 1
// applied and (usually) a commit-confirmed of proposal 2 outstanding,
// attempts a transition that must be refused, and checks the sentinel, the
// message, that the commit id is not revealed and that nothing was written.
func TestCommitConfirmRefusals(t *testing.T) {
	ctx := context.Background()
	deadline := fakeTime(600)
	shown := deadline.Format(time.RFC3339)
	type env struct {
		j    *Journal
		term uint64
	}
	outstanding := func(t *testing.T, e env) { proposeConfirmed(t, e.j, secretID, deadline) }
	applied := func(t *testing.T, e env) {
		outstanding(t, e)
		commitAndApply(t, e.j, e.term, 2)
	}
	cancelled := func(t *testing.T, e env) {
		outstanding(t, e)
		mustDo(t, func() error { _, err := e.j.CancelCommit(ctx, secretID); return err })
	}
	cases := []struct {
		name    string
		setup   func(t *testing.T, e env)
		attempt func(e env) error
		want    error
		msg     []string
	}{
		{"change while outstanding", outstanding,
			func(e env) error { _, err := e.j.ProposeChange(ctx, []*Op{update(t, "/a", "x")}); return err },
			ErrGuard, []string{"a commit-confirmed is outstanding (proposal 2, rolled back at " + shown +
				" unless confirmed): confirm or cancel it first, or wait for its rollback"}},
		{"change while a cancelled one is outstanding", cancelled,
			func(e env) error { _, err := e.j.ProposeChange(ctx, []*Op{update(t, "/a", "x")}); return err },
			ErrGuard, []string{"a commit-confirmed is outstanding (proposal 2, cancelled): wait for its rollback"}},
		{"rollback of the confirmed change", applied,
			func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 2); return err },
			ErrGuard, []string{"a commit-confirmed is outstanding (proposal 2, rolled back at " + shown +
				" unless confirmed): cancel it with the commit extension (or `gnmi-sidecar commit cancel`) instead"}},
		{"rollback of an older change", outstanding,
			func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 1); return err },
			ErrGuard, []string{"(proposal 2, "}},
		{"newest rollbackable", applied,
			func(e env) error { _, err := e.j.NewestRollbackable(ctx); return err },
			ErrGuard, []string{"(proposal 2, ", "gnmi-sidecar commit cancel"}},
		{"second commit-confirmed", outstanding,
			func(e env) error {
				_, err := e.j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(t, "/a", "x")}, "another", deadline)
				return err
			},
			ErrGuard, []string{"a commit-confirmed is already outstanding (proposal 2, rolled back at " + shown +
				" unless confirmed): confirm or cancel it before starting another"}},
		{"second commit-confirmed under the same id", outstanding,
			func(e env) error {
				_, err := e.j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(t, "/a", "x")}, secretID, deadline)
				return err
			},
			ErrGuard, []string{"already outstanding (proposal 2, "}},
		{"commit-confirmed without an id", nil,
			func(e env) error {
				_, err := e.j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(t, "/a", "x")}, "", deadline)
				return err
			},
			ErrInvalid, []string{"commit id is empty"}},
		{"commit-confirmed without a deadline", nil,
			func(e env) error {
				_, err := e.j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(t, "/a", "x")}, "c", time.Time{})
				return err
			},
			ErrInvalid, []string{"no rollback deadline"}},
		{"commit-confirmed without operations", nil,
			func(e env) error {
				_, err := e.j.ProposeConfirmedChange(ctx, Sender{}, nil, "c", deadline)
				return err
			},
			ErrInvalid, []string{"no operations"}},

		{"confirm with none outstanding", nil,
			func(e env) error { _, err := e.j.ConfirmCommit(ctx, secretID); return err },
			ErrNotFound, []string{"no commit-confirmed is outstanding"}},
		{"confirm another id", outstanding,
			func(e env) error { _, err := e.j.ConfirmCommit(ctx, "other"); return err },
			ErrInvalid, []string{`commit id "other" does not match the outstanding commit-confirmed (proposal 2)`}},
		{"confirm a cancelled commit", cancelled,
			func(e env) error { _, err := e.j.ConfirmCommit(ctx, secretID); return err },
			ErrGuard, []string{"commit-confirmed of proposal 2 was cancelled; its rollback is under way"}},

		{"cancel with none outstanding", nil,
			func(e env) error { _, err := e.j.CancelCommit(ctx, secretID); return err },
			ErrNotFound, []string{"no commit-confirmed is outstanding"}},
		{"cancel another id", outstanding,
			func(e env) error { _, err := e.j.CancelCommit(ctx, "other"); return err },
			ErrInvalid, []string{`commit id "other" does not match the outstanding commit-confirmed (proposal 2)`}},
		{"cancel again under another id", cancelled,
			func(e env) error { _, err := e.j.CancelCommit(ctx, "other"); return err },
			ErrInvalid, []string{"(proposal 2)"}},

		{"move the deadline with none outstanding", nil,
			func(e env) error { _, err := e.j.SetCommitDeadline(ctx, secretID, deadline); return err },
			ErrNotFound, []string{"no commit-confirmed is outstanding"}},
		{"move the deadline under another id", outstanding,
			func(e env) error { _, err := e.j.SetCommitDeadline(ctx, "other", deadline); return err },
			ErrInvalid, []string{`commit id "other" does not match the outstanding commit-confirmed (proposal 2)`}},
		{"move the deadline of a cancelled commit", cancelled,
			func(e env) error { _, err := e.j.SetCommitDeadline(ctx, secretID, deadline.Add(time.Hour)); return err },
			ErrGuard, []string{"commit-confirmed of proposal 2 was cancelled; its rollback is under way"}},
		{"move the deadline to nothing", outstanding,
			func(e env) error { _, err := e.j.SetCommitDeadline(ctx, secretID, time.Time{}); return err },
			ErrInvalid, []string{"no rollback deadline"}},

		{"expire with none outstanding", nil,
			func(e env) error { _, _, err := e.j.ExpireCommit(ctx, secretID); return err },
			ErrNotFound, []string{"no commit-confirmed is outstanding"}},
		{"expire another id", applied,
			func(e env) error { _, _, err := e.j.ExpireCommit(ctx, "other"); return err },
			ErrInvalid, []string{`commit id "other" does not match the outstanding commit-confirmed (proposal 2)`}},
		{"expire before the commit", outstanding,
			func(e env) error { _, _, err := e.j.ExpireCommit(ctx, secretID); return err },
			ErrGuard, []string{"the change of proposal 2 is still being applied; it is rolled back once applied"}},
		{"expire a cancelled commit before the apply", func(t *testing.T, e env) {
			cancelled(t, e)
			mustCommit(t, e.j, 2)
		}, func(e env) error { _, _, err := e.j.ExpireCommit(ctx, secretID); return err },
			ErrGuard, []string{"the change of proposal 2 is still being applied"}},
		{"expire during the apply", func(t *testing.T, e env) {
			outstanding(t, e)
			mustCommit(t, e.j, 2)
			mustDo(t, func() error { _, _, err := e.j.StartApply(ctx, 2); return err })
		}, func(e env) error { _, _, err := e.j.ExpireCommit(ctx, secretID); return err },
			ErrGuard, []string{"the change of proposal 2 is still being applied"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			e := env{j: j, term: synced(t, j)}
			applyChange(t, j, e.term, update(t, "/a", "1"))
			if c.setup != nil {
				c.setup(t, e)
			}
			before := dump(t, j)
			err := c.attempt(e)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("err = %q, want it to contain %q", err, m)
				}
			}
			if strings.Contains(err.Error(), secretID) {
				t.Errorf("err = %q reveals the outstanding commit id", err)
			}
			if errors.Is(err, ErrGuard) {
				var g *GuardError
				if !errors.As(err, &g) {
					t.Errorf("err = %v is not a *GuardError", err)
				}
			}
			if after := dump(t, j); !maps.Equal(before, after) {
				t.Fatal("the refused transition wrote to the journal")
			}
			checkInvariants(t, j)
		})
	}
}

func TestProposeConfirmedChange(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Clock: clock.now, Observer: rec.observe})
	term := synced(t, j)
	clock.sec.Store(10)
	i := proposeConfirmed(t, j, "c1", fakeTime(600), update(t, "/a", "1"))
	if i != 1 {
		t.Fatalf("proposal %d, want 1", i)
	}
	want := &CommitConfirm{Id: "c1", Proposal: 1, Deadline: timestamppb.New(fakeTime(600)), Started: timestamppb.New(fakeTime(10))}
	if got := commitConfirm(t, j); !proto.Equal(got, want) {
		t.Fatalf("record %v, want %v", got, want)
	}
	p, err := j.Proposal(ctx, i)
	if err != nil || p.Phase != PhaseChange || p.Change.Commit != StatusPending || p.Change.Apply != StatusPending {
		t.Fatalf("proposal %v, %v; want a pending change", p, err)
	}
	rec.take()

	// The change is committed and applied like any other.
	commitAndApply(t, j, term, i)
	checkInvariants(t, j)
	if got := commitConfirm(t, j); !proto.Equal(got, want) {
		t.Fatalf("applying changed the record: %v", got)
	}

	// Confirm: the record goes, the change stays, changes and rollbacks are
	// allowed again.
	rec.take()
	got, err := j.ConfirmCommit(ctx, "c1")
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("ConfirmCommit = %v, %v; want %v", got, err, want)
	}
	noCommitConfirm(t, j)
	if lines := rec.take(); !slices.Equal(lines, []string{"ClearCommitConfirm(1)"}) {
		t.Fatalf("events %v", lines)
	}
	if got := committedList(t, j, nil); !slices.Equal(got, []string{"/a=1@1"}) {
		t.Fatalf("committed after confirm: %v", got)
	}
	checkInvariants(t, j)
	if _, err := j.ConfirmCommit(ctx, "c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second ConfirmCommit: %v, want ErrNotFound", err)
	}
	if i, err := j.NewestRollbackable(ctx); err != nil || i != 1 {
		t.Fatalf("NewestRollbackable = %d, %v", i, err)
	}
	rollback(t, j, term, 1)
	applyChange(t, j, term, update(t, "/a", "2"))
	checkInvariants(t, j)
}

// The events of ProposeConfirmedChange and ExpireCommit include exactly the
// ones ProposeChange and ProposeRollback emit: two journals driven through
// the same steps at the same times see equal events.
func TestCommitConfirmEventsMatchThePlainTransitions(t *testing.T) {
	ctx := context.Background()
	type run struct {
		j     *Journal
		clock *fakeClock
		rec   *recorder
		term  uint64
	}
	start := func() *run {
		r := &run{clock: &fakeClock{}, rec: &recorder{}}
		r.j = openTest(t, "", Options{NoSync: true, Clock: r.clock.now, Observer: r.rec.observe})
		r.term = synced(t, r.j)
		r.rec.take()
		return r
	}
	plain, confirmed := start(), start()
	ops := []*Op{update(t, "/a", "1")}
	plain.clock.sec.Store(10)
	confirmed.clock.sec.Store(10)
	if _, err := plain.j.ProposeChange(ctx, ops); err != nil {
		t.Fatal(err)
	}
	proposeConfirmed(t, confirmed.j, "c1", fakeTime(600), ops...)
	if got := plain.rec.take(); !slices.Equal(got, []string{"ProposeChange(1)"}) {
		t.Fatalf("ProposeChange events %v", got)
	}
	if got := confirmed.rec.take(); !slices.Equal(got, []string{"ProposeChange(1)", "SetCommitConfirm(1)"}) {
		t.Fatalf("ProposeConfirmedChange events %v", got)
	}
	sameEvent(t, plain.rec.events[len(plain.rec.events)-1], confirmed.rec.events[len(confirmed.rec.events)-2])
	if e := confirmed.rec.events[len(confirmed.rec.events)-1]; e.CommitConfirm.GetId() != "c1" || e.Proposal != nil || e.Configuration != nil {
		t.Errorf("SetCommitConfirm event %+v", e)
	}

	for _, r := range []*run{plain, confirmed} {
		r.clock.sec.Store(20)
		commitAndApply(t, r.j, r.term, 1)
		r.rec.take()
		r.clock.sec.Store(700) // past the deadline
	}
	if _, _, err := plain.j.ProposeRollback(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p, c, err := confirmed.j.ExpireCommit(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.rec.take(); !slices.Equal(got, []string{"ProposeRollback(1)"}) {
		t.Fatalf("ProposeRollback events %v", got)
	}
	if got := confirmed.rec.take(); !slices.Equal(got, []string{"ProposeRollback(1)", "ClearCommitConfirm(1)"}) {
		t.Fatalf("ExpireCommit events %v", got)
	}
	e := confirmed.rec.events[len(confirmed.rec.events)-2]
	sameEvent(t, plain.rec.events[len(plain.rec.events)-1], e)
	if !proto.Equal(p, e.Proposal) || !proto.Equal(c, e.Configuration) {
		t.Errorf("ExpireCommit returned %v, %v; its event has %v, %v", p, c, e.Proposal, e.Configuration)
	}
	if e := confirmed.rec.events[len(confirmed.rec.events)-1]; e.CommitConfirm.GetId() != "c1" || e.Proposal != nil {
		t.Errorf("ClearCommitConfirm event %+v", e)
	}
}

func sameEvent(t *testing.T, want, got Event) {
	t.Helper()
	if got.Action != want.Action || got.Index != want.Index || !got.Time.Equal(want.Time) ||
		!proto.Equal(got.Proposal, want.Proposal) || !proto.Equal(got.Configuration, want.Configuration) ||
		got.CommitConfirm != nil {
		t.Errorf("event\n got %+v\nwant %+v", got, want)
	}
}

func TestExpireCommitRollsBackTheAppliedChange(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		name := "deadline"
		if cancel {
			name = "cancelled"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rec := &recorder{}
			j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
			term := synced(t, j)
			applyChange(t, j, term, update(t, "/a", "1"))
			deadline := time.Now().Add(time.Minute)
			if !cancel {
				deadline = time.Now() // passed by the time it expires
			}
			i := proposeConfirmed(t, j, "c1", deadline, update(t, "/a", "2"))
			if cancel {
				mustDo(t, func() error { _, err := j.CancelCommit(ctx, "c1"); return err })
			}
			commitAndApply(t, j, term, i)
			rec.take()

			p, c, err := j.ExpireCommit(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			noCommitConfirm(t, j)
			if p.Index != i || p.Phase != PhaseRollback || p.Rollback.Commit != StatusPending || p.Rollback.Apply != StatusPending {
				t.Fatalf("proposal after ExpireCommit: %v", p)
			}
			if c.RollingBack != i {
				t.Fatalf("configuration rolling back %d, want %d", c.RollingBack, i)
			}
			if got, _ := j.Proposal(ctx, i); !proto.Equal(got, p) {
				t.Fatalf("stored proposal %v, returned %v", got, p)
			}
			if got, _ := j.Configuration(ctx); !proto.Equal(got, c) {
				t.Fatalf("stored configuration %v, returned %v", got, c)
			}
			want := []string{"ProposeRollback(2)", "ClearCommitConfirm(2)"}
			if got := rec.take(); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			checkInvariants(t, j)
			if _, _, err := j.ExpireCommit(ctx, "c1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("second ExpireCommit: %v, want ErrNotFound", err)
			}

			// The rollback runs its course; then changes are allowed again.
			if _, _, err := j.CommitRollback(ctx, i); err != nil {
				t.Fatal(err)
			}
			if _, _, err := j.StartApplyRollback(ctx, i); err != nil {
				t.Fatal(err)
			}
			if _, _, err := j.CompleteApplyRollback(ctx, i, term); err != nil {
				t.Fatal(err)
			}
			if got := appliedList(t, j); !slices.Equal(got, []string{"/a=1@1"}) {
				t.Fatalf("applied after the rollback: %v", got)
			}
			applyChange(t, j, term, update(t, "/a", "3"))
			checkInvariants(t, j)
		})
	}
}

func TestExpireCommitWaitsForTheApplyAndFailuresClearTheRecord(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
	synced(t, j)
	i := proposeConfirmed(t, j, "c1", fakeTime(600))
	mustCommit(t, j, i)
	if _, _, err := j.StartApply(ctx, i); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.ExpireCommit(ctx, "c1"); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "proposal 1") {
		t.Fatalf("ExpireCommit during the apply: %v, want ErrGuard naming proposal 1", err)
	}
	if got := commitConfirm(t, j); got.Id != "c1" || got.Proposal != i {
		t.Fatalf("record after the refused ExpireCommit: %v", got)
	}
	rec.take()
	if _, _, err := j.FailApply(ctx, i, 3, "device said no"); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.take(), []string{"FailApply(1)", "ClearCommitConfirm(1)"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	noCommitConfirm(t, j)
	if _, _, err := j.ExpireCommit(ctx, "c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ExpireCommit after the failure: %v, want ErrNotFound", err)
	}
	checkInvariants(t, j)
	// The client may commit again at once.
	proposeConfirmed(t, j, "c2", fakeTime(600))
	checkInvariants(t, j)
}

func TestFailuresClearTheCommitConfirm(t *testing.T) {
	ctx := context.Background()
	t.Run("FailCommit", func(t *testing.T) {
		rec := &recorder{}
		j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
		synced(t, j)
		i := proposeConfirmed(t, j, "c1", fakeTime(600))
		rec.take()
		if _, _, err := j.FailCommit(ctx, i, 3, "invalid"); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.take(), []string{"FailCommit(1)", "ClearCommitConfirm(1)"}; !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		noCommitConfirm(t, j)
		if _, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")}); err != nil {
			t.Fatalf("ProposeChange after the failed commit: %v", err)
		}
		checkInvariants(t, j)
	})
	t.Run("FailApply of an earlier proposal re-bases it and keeps it", func(t *testing.T) {
		rec := &recorder{}
		j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
		term := synced(t, j)
		first, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")})
		if err != nil {
			t.Fatal(err)
		}
		mustCommit(t, j, first.Index)
		if _, _, err := j.StartApply(ctx, first.Index); err != nil {
			t.Fatal(err)
		}
		// The commit-confirmed change writes /a too, on top of the
		// failed proposal: it is re-based, and its change still takes
		// effect, so its commit-confirmed stays.
		i := proposeConfirmed(t, j, "c1", fakeTime(600), update(t, "/a", "2"))
		mustCommit(t, j, i)
		rec.take()
		_, _, err = j.FailApply(ctx, first.Index, 3, "device said no")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rec.take(), []string{"FailApply(1)", "Rebase(2)"}; !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		if cc, err := j.CommitConfirm(ctx); err != nil || cc.GetProposal() != i {
			t.Fatalf("commit-confirmed after FailApply of 1: %v, %v; want the one of %d kept", cc, err, i)
		}
		checkInvariants(t, j)
		commitAndApply(t, j, term, i)
		if cc, err := j.CommitConfirm(ctx); err != nil || cc.GetProposal() != i {
			t.Fatalf("commit-confirmed once applied: %v, %v", cc, err)
		}
		checkInvariants(t, j)
	})
	t.Run("FailApply leaves a later commit-confirmed not yet committed", func(t *testing.T) {
		j := openTest(t, "", Options{NoSync: true})
		synced(t, j)
		first, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")})
		if err != nil {
			t.Fatal(err)
		}
		mustCommit(t, j, first.Index)
		if _, _, err := j.StartApply(ctx, first.Index); err != nil {
			t.Fatal(err)
		}
		i := proposeConfirmed(t, j, "c1", fakeTime(600))
		if _, _, err := j.FailApply(ctx, first.Index, 3, "device said no"); err != nil {
			t.Fatal(err)
		}
		if got := commitConfirm(t, j); got.Proposal != i {
			t.Fatalf("record %v, want it kept for proposal %d", got, i)
		}
		checkInvariants(t, j)
	})
	t.Run("AbortApply", func(t *testing.T) {
		// FailCommit clears the record already; put it back to check that
		// AbortApply clears it too.
		rec := &recorder{}
		j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
		synced(t, j)
		i := proposeConfirmed(t, j, "c1", fakeTime(600))
		if _, _, err := j.FailCommit(ctx, i, 3, "invalid"); err != nil {
			t.Fatal(err)
		}
		putCommitConfirm(t, j, &CommitConfirm{Id: "c1", Proposal: i, Deadline: timestamppb.New(fakeTime(600))})
		rec.take()
		if _, _, err := j.AbortApply(ctx, i); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.take(), []string{"AbortApply(1)", "ClearCommitConfirm(1)"}; !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		noCommitConfirm(t, j)
		checkInvariants(t, j)
	})
}

// ExpireCommit of a change that has nothing to roll back only removes the
// record.
func TestExpireCommitWithNothingToRollBack(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// setup returns the record's proposal and whether it is still kept.
		setup func(t *testing.T, j *Journal, term uint64) (uint64, bool)
	}{
		{"commit failed", func(t *testing.T, j *Journal, term uint64) (uint64, bool) {
			i := proposeConfirmed(t, j, "c1", fakeTime(600))
			mustDo(t, func() error { _, _, err := j.FailCommit(ctx, i, 3, "invalid"); return err })
			return i, true
		}},
		{"apply failed", func(t *testing.T, j *Journal, term uint64) (uint64, bool) {
			i := proposeConfirmed(t, j, "c1", fakeTime(600))
			mustCommit(t, j, i)
			mustDo(t, func() error { _, _, err := j.StartApply(ctx, i); return err })
			mustDo(t, func() error { _, _, err := j.FailApply(ctx, i, 3, "no"); return err })
			return i, true
		}},
		{"already rolled back", func(t *testing.T, j *Journal, term uint64) (uint64, bool) {
			i := applyChange(t, j, term, update(t, "/a", "1"))
			mustDo(t, func() error { _, _, err := j.ProposeRollback(ctx, i); return err })
			return i, true
		}},
		{"compacted", func(t *testing.T, j *Journal, term uint64) (uint64, bool) {
			applyChange(t, j, term, update(t, "/a", "1"))
			applyChange(t, j, term, update(t, "/a", "2"))
			if n, err := j.Compact(ctx); err != nil || n != 1 {
				t.Fatalf("Compact = %d, %v", n, err)
			}
			return 1, false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			j := openTest(t, "", Options{NoSync: true, Retain: 1, Observer: rec.observe})
			term := synced(t, j)
			i, kept := c.setup(t, j, term)
			putCommitConfirm(t, j, &CommitConfirm{Id: "c1", Proposal: i, Deadline: timestamppb.New(fakeTime(600))})
			before, _ := j.Configuration(ctx)
			rec.take()
			p, cfg, err := j.ExpireCommit(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			if cfg != nil || (p != nil) != kept || (kept && p.Index != i) {
				t.Fatalf("ExpireCommit = %v, %v; want proposal %d (kept %v) and no configuration", p, cfg, i, kept)
			}
			if got := rec.take(); !slices.Equal(got, []string{fmt.Sprintf("ClearCommitConfirm(%d)", i)}) {
				t.Fatalf("events %v", got)
			}
			noCommitConfirm(t, j)
			if after, _ := j.Configuration(ctx); !proto.Equal(before, after) {
				t.Fatalf("configuration changed: %v -> %v", before, after)
			}
			checkInvariants(t, j)
		})
	}
}

func TestCancelAndSetCommitDeadline(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Clock: clock.now, Observer: rec.observe})
	synced(t, j)
	clock.sec.Store(10)
	i := proposeConfirmed(t, j, "c1", fakeTime(600))
	rec.take()

	clock.sec.Store(20)
	got, err := j.SetCommitDeadline(WithActor(ctx, Sender{Author: "boss"}), "c1", fakeTime(900))
	want := &CommitConfirm{Id: "c1", Proposal: i, Deadline: timestamppb.New(fakeTime(900)), Started: timestamppb.New(fakeTime(10)),
		ExtendedBy: "boss", Extended: timestamppb.New(fakeTime(20))}
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("SetCommitDeadline = %v, %v; want %v", got, err, want)
	}
	if stored := commitConfirm(t, j); !proto.Equal(stored, want) {
		t.Fatalf("stored %v, want %v", stored, want)
	}
	if lines := rec.take(); !slices.Equal(lines, []string{"SetCommitConfirm(1)"}) {
		t.Fatalf("events %v", lines)
	}

	clock.sec.Store(30)
	got, err = j.CancelCommit(WithActor(ctx, Sender{Author: "admin", Comment: "bad change"}), "c1")
	want = &CommitConfirm{Id: "c1", Proposal: i, Deadline: timestamppb.New(fakeTime(30)), Started: timestamppb.New(fakeTime(10)), Cancelled: true,
		ExtendedBy: "boss", Extended: timestamppb.New(fakeTime(20)), CancelledBy: "admin"}
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("CancelCommit = %v, %v; want %v", got, err, want)
	}
	// Who extended and who cancelled, on the proposal too.
	p, err := j.Proposal(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	wantActions := []*CommitAction{
		{Action: CommitActionExtend, Author: "boss", Time: timestamppb.New(fakeTime(20)), Deadline: timestamppb.New(fakeTime(900))},
		{Action: CommitActionCancel, Author: "admin", Comment: "bad change", Time: timestamppb.New(fakeTime(30)), Deadline: timestamppb.New(fakeTime(30))},
	}
	if got := p.GetChange().GetCommitActions(); !slices.EqualFunc(got, wantActions, func(a, b *CommitAction) bool { return proto.Equal(a, b) }) {
		t.Fatalf("commit actions %v, want %v", got, wantActions)
	}
	if stored := commitConfirm(t, j); !proto.Equal(stored, want) {
		t.Fatalf("stored %v, want %v", stored, want)
	}
	if lines := rec.take(); !slices.Equal(lines, []string{"SetCommitConfirm(1)"}) {
		t.Fatalf("events %v", lines)
	}

	// Cancelling again is idempotent: same record, nothing written.
	clock.sec.Store(40)
	before := dump(t, j)
	got, err = j.CancelCommit(ctx, "c1")
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("second CancelCommit = %v, %v; want %v", got, err, want)
	}
	if after := dump(t, j); !maps.Equal(before, after) {
		t.Fatal("the second cancel wrote to the journal")
	}
	if lines := rec.take(); len(lines) != 0 {
		t.Fatalf("the second cancel was observed: %v", lines)
	}
	checkInvariants(t, j)
}

// The record, cancelled flag and deadline included, survives a restart.
func TestCommitConfirmSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	clock := &fakeClock{}
	reopen := func(j *Journal) *Journal {
		t.Helper()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j, err := Open(dir, Options{NoSync: true, Clock: clock.now})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	j, err := Open(dir, Options{NoSync: true, Clock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	clock.sec.Store(10)
	i := proposeConfirmed(t, j, "c1", fakeTime(600))
	if _, err := j.SetCommitDeadline(ctx, "c1", fakeTime(700)); err != nil {
		t.Fatal(err)
	}
	j = reopen(j)
	want := &CommitConfirm{Id: "c1", Proposal: i, Deadline: timestamppb.New(fakeTime(700)), Started: timestamppb.New(fakeTime(10)),
		Extended: timestamppb.New(fakeTime(10))}
	if got := commitConfirm(t, j); !proto.Equal(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	clock.sec.Store(20)
	if _, err := j.CancelCommit(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	j = reopen(j)
	want.Cancelled, want.Deadline = true, timestamppb.New(fakeTime(20))
	if got := commitConfirm(t, j); !proto.Equal(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	if _, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")}); !errors.Is(err, ErrGuard) {
		t.Fatalf("ProposeChange after reopen: %v, want ErrGuard", err)
	}
	checkInvariants(t, j)
}

func TestHistory(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	j := openTest(t, "", Options{NoSync: true, Clock: clock.now, Retain: 2})
	term := synced(t, j)
	clock.sec.Store(10)
	applyChange(t, j, term, update(t, "/a", "1"))
	clock.sec.Store(20)
	applyChange(t, j, term, update(t, "/a", "2"))
	clock.sec.Store(30)
	applyChange(t, j, term, update(t, "/b", "3"))
	clock.sec.Store(40)
	rollback(t, j, term, 3)

	type delta struct {
		at       int64
		proposal uint64
		kind     HistoryKind
		entries  []string // "before -> after"
	}
	history := func(from, to time.Time) ([]delta, error) {
		var out []delta
		err := j.History(ctx, from, to, func(d *HistoryDelta) error {
			var entries []string
			for _, e := range d.Entries {
				b, a := "none", "none"
				if e.Before != nil {
					b = render(e.Before)
				}
				if e.After != nil {
					a = render(e.After)
				}
				entries = append(entries, b+" -> "+a)
			}
			out = append(out, delta{d.Time.AsTime().Unix() - fakeTime(0).Unix(), d.Proposal, d.Kind, entries})
			return nil
		})
		return out, err
	}
	sameDelta := func(a, b delta) bool {
		return a.at == b.at && a.proposal == b.proposal && a.kind == b.kind && slices.Equal(a.entries, b.entries)
	}
	d1 := delta{10, 1, HistoryKindCommitChange, []string{"none -> /a=1@1"}}
	d2 := delta{20, 2, HistoryKindCommitChange, []string{"/a=1@1 -> /a=2@2"}}
	d3 := delta{30, 3, HistoryKindCommitChange, []string{"none -> /b=3@3"}}
	d4 := delta{40, 3, HistoryKindCommitRollback, []string{"/b=3@3 -> /b=deleted@0"}}
	cases := []struct {
		name     string
		from, to time.Time
		want     []delta
	}{
		{"everything", fakeTime(0), time.Time{}, []delta{d1, d2, d3, d4}},
		{"a window", fakeTime(15), fakeTime(35), []delta{d2, d3}},
		{"bounds are inclusive", fakeTime(20), fakeTime(30), []delta{d2, d3}},
		{"one instant", fakeTime(30), fakeTime(30), []delta{d3}},
		{"open end", fakeTime(25), time.Time{}, []delta{d3, d4}},
		{"after the last", fakeTime(41), time.Time{}, nil},
		{"before the first", fakeTime(0), fakeTime(5), nil},
	}
	for _, c := range cases {
		got, err := history(c.from, c.to)
		if err != nil || !slices.EqualFunc(got, c.want, sameDelta) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if _, err := history(fakeTime(30), fakeTime(20)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a range ending before it starts: %v, want ErrInvalid", err)
	}
	stop := errors.New("stop")
	n := 0
	if err := j.History(ctx, fakeTime(0), time.Time{}, func(*HistoryDelta) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: %v after %d deltas, want stop after 1", err, n)
	}

	// Retention (newest 2 of 3) drops proposal 1 and its delta at 10: the
	// floor is 10.
	if n, err := j.Compact(ctx); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v", n, err)
	}
	floor := fakeTime(10).Format(time.RFC3339Nano)
	for _, from := range []int64{5, 10} {
		_, err := history(fakeTime(from), time.Time{})
		if !errors.Is(err, ErrCompacted) || !strings.Contains(err.Error(), "history up to "+floor+" is no longer kept") {
			t.Errorf("from %d, before or at the floor: %v, want ErrCompacted naming %s", from, err, floor)
		}
	}
	// Retention also dropped the tombstone the rollback of 3 left at /b
	// (index 0: nothing needs it), which is a change of the committed
	// values too.
	d5 := delta{40, 3, HistoryKindDropTombstones, []string{"/b=deleted@0 -> none"}}
	got, err := history(fakeTime(11), time.Time{})
	if err != nil || !slices.EqualFunc(got, []delta{d2, d3, d4, d5}, sameDelta) {
		t.Errorf("after the floor: %v, %v; want %v", got, err, []delta{d2, d3, d4, d5})
	}
	_, err = committedAtList(t, j, 5, nil)
	if !errors.Is(err, ErrCompacted) || !strings.Contains(err.Error(), "history before "+floor+" is no longer kept") {
		t.Errorf("CommittedAt before the floor: %v, want ErrCompacted naming %s", err, floor)
	}
}

func TestExpireCommitRefusedBeforeTheDeadline(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{NoSync: true})
	term := synced(t, j)
	i := proposeConfirmed(t, j, "c1", time.Now().Add(time.Hour), update(t, "/a", "1"))
	commitAndApply(t, j, term, i)
	// The agent decided on an older deadline; a set_rollback_duration
	// moved it since: the expiry is refused and the change stays.
	_, _, err := j.ExpireCommit(ctx, "c1")
	if !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "not due") {
		t.Fatalf("ExpireCommit before the deadline: %v, want a guard error saying it is not due", err)
	}
	rec, err := j.CommitConfirm(ctx)
	if err != nil || rec.GetId() != "c1" {
		t.Fatalf("record after the refused expiry: %v, %v", rec, err)
	}
	if p, _ := j.Proposal(ctx, i); p.GetPhase() != PhaseChange {
		t.Fatalf("proposal %d in phase %v after a refused expiry", i, p.GetPhase())
	}
}
