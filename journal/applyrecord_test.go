package journal

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestApplyStepWritesOnlyItsRecord: StartApply and CompleteApply, run
// apart from the transitions before them, leave the proposal's record as
// it was and write only its apply record, a few bytes; every read (the
// writer's kept records, Badger's, a scan, after a reopen) sees the apply
// step they wrote; a later transition that rewrites the proposal keeps the
// two in step; retention drops both.
func TestApplyStepWritesOnlyItsRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j := openTest(t, dir, Options{Retain: 1})
	term := synced(t, j)
	p, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1"), update(t, "/b", incompressible(300))})
	if err != nil {
		t.Fatal(err)
	}
	i := p.GetIndex()
	record := func() (body, apply []byte) {
		t.Helper()
		recs, err := j.Records(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return recs[string(proposalKey(i))], recs[string(applyKey(i))]
	}
	if proposed, apply := record(); proposed == nil || apply != nil {
		t.Fatalf("a new proposal: record %d bytes, apply record %v; want a record and no apply record", len(proposed), apply)
	}
	if _, _, err := j.CommitChange(ctx, i); err != nil {
		t.Fatal(err)
	}
	committed, _ := record()

	for _, step := range []struct {
		name string
		run  func() error
		want Status
	}{
		{"StartApply", func() error { _, _, err := j.StartApply(ctx, i); return err }, StatusInProgress},
		{"CompleteApply", func() error { _, _, err := j.CompleteApply(ctx, i, term); return err }, StatusComplete},
	} {
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		body, apply := record()
		if !bytes.Equal(body, committed) {
			t.Errorf("%s rewrote the proposal's record", step.name)
		}
		if apply == nil || len(apply)*4 > len(body) {
			t.Errorf("%s: apply record of %d bytes beside a record of %d", step.name, len(apply), len(body))
		}
		for _, read := range readsOfProposal(j, i) {
			got, err := read.fn(ctx)
			if err != nil {
				t.Fatalf("%s, %s: %v", step.name, read.name, err)
			}
			if got.GetChange().GetApply() != step.want {
				t.Errorf("%s, %s: apply %v, want %v", step.name, read.name, got.GetChange().GetApply(), step.want)
			}
		}
		checkInvariants(t, j)
	}
	applied, err := j.Proposal(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	if applied.GetChange().GetApplyStarted() == nil || applied.GetChange().GetApplied() == nil {
		t.Fatalf("applied proposal without its apply times: %v", applied.GetChange())
	}

	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openTest(t, dir, Options{Retain: 1})
	reopened, err := j.Proposal(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(reopened.GetChange(), applied.GetChange()) {
		t.Fatalf("after a reopen:\n got %v\nwant %v", reopened.GetChange(), applied.GetChange())
	}

	// A rollback rewrites the proposal's record (its phase, its rollback):
	// the apply record written with it keeps the change's apply step.
	rollback(t, j, term, i)
	j.forgetHeads()
	rolled, err := j.Proposal(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	if rolled.GetPhase() != PhaseRollback || !proto.Equal(rolled.GetChange(), applied.GetChange()) {
		t.Fatalf("after the rollback: phase %v, change %v; want the change as applied", rolled.GetPhase(), rolled.GetChange())
	}
	checkInvariants(t, j)

	applyChange(t, j, term, update(t, "/a", "2"))
	applyChange(t, j, term, update(t, "/a", "3"))
	if _, err := j.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if body, apply := record(); body != nil || apply != nil {
		t.Fatalf("retention left proposal %d's record (%d bytes) or its apply record (%d bytes)", i, len(body), len(apply))
	}
	checkInvariants(t, j)
}

type proposalRead struct {
	name string
	fn   func(context.Context) (*Proposal, error)
}

// readsOfProposal are the ways to read proposal i: the writer's kept
// record and Badger's (its heads forgotten), whole or its statuses, by
// index or in a scan.
func readsOfProposal(j *Journal, i uint64) []proposalRead {
	scan := func(statuses bool) func(context.Context) (*Proposal, error) {
		return func(ctx context.Context) (*Proposal, error) {
			var got *Proposal
			each := func(p *Proposal) error {
				if p.GetIndex() == i {
					got = p
				}
				return nil
			}
			var err error
			if statuses {
				err = j.ProposalStatuses(ctx, 1, 0, each)
			} else {
				err = j.Proposals(ctx, i, i, each)
			}
			return got, err
		}
	}
	forgotten := func(read func(context.Context) (*Proposal, error)) func(context.Context) (*Proposal, error) {
		return func(ctx context.Context) (*Proposal, error) {
			j.forgetHeads()
			return read(ctx)
		}
	}
	byIndex := func(ctx context.Context) (*Proposal, error) { return j.Proposal(ctx, i) }
	status := func(ctx context.Context) (*Proposal, error) { return j.ProposalStatus(ctx, i) }
	return []proposalRead{
		{"Proposal", byIndex},
		{"ProposalStatus", status},
		{"Proposals", scan(false)},
		{"Proposal from Badger", forgotten(byIndex)},
		{"ProposalStatus from Badger", forgotten(status)},
		{"Proposals from Badger", forgotten(scan(false))},
		{"ProposalStatuses from Badger", forgotten(scan(true))},
	}
}
