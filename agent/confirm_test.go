package agent

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

func TestDecideExpiry(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	record := func(deadline time.Time, cancelled bool) *journal.CommitConfirm {
		return &journal.CommitConfirm{Id: "c1", Proposal: 7, Deadline: timestamppb.New(deadline), Cancelled: cancelled}
	}
	change := func(commit, apply journal.Status) *journal.Proposal {
		return &journal.Proposal{Index: 7, Phase: journal.PhaseChange, Change: &journal.Change{Commit: commit, Apply: apply}}
	}
	applied := change(journal.StatusComplete, journal.StatusComplete)
	later, earlier := now.Add(time.Minute), now.Add(-time.Second)
	for _, c := range []struct {
		name string
		rec  *journal.CommitConfirm
		p    *journal.Proposal
		want Expiry
	}{
		{"nothing outstanding", nil, nil, Expiry{Kind: ExpiryIdle}},
		{"before the deadline", record(later, false), applied, Expiry{Kind: ExpiryWait, Until: later}},
		{"at the deadline", record(now, false), applied, Expiry{Kind: ExpiryRollBack}},
		{"after the deadline", record(earlier, false), applied, Expiry{Kind: ExpiryRollBack}},
		{"cancelled before the deadline", record(later, true), applied, Expiry{Kind: ExpiryRollBack}},
		{"expired, still being committed", record(earlier, false), change(journal.StatusPending, journal.StatusPending), Expiry{Kind: ExpiryIdle}},
		{"expired, still being applied", record(earlier, false), change(journal.StatusComplete, journal.StatusInProgress), Expiry{Kind: ExpiryIdle}},
		{"cancelled, still being applied", record(later, true), change(journal.StatusComplete, journal.StatusPending), Expiry{Kind: ExpiryIdle}},
		{"expired, commit failed", record(earlier, false), change(journal.StatusFailed, journal.StatusAborted), Expiry{Kind: ExpiryRollBack}},
		{"expired, apply failed", record(earlier, false), change(journal.StatusComplete, journal.StatusFailed), Expiry{Kind: ExpiryRollBack}},
		{"expired, apply aborted", record(earlier, false), change(journal.StatusComplete, journal.StatusAborted), Expiry{Kind: ExpiryRollBack}},
		{"expired, already rolling back", record(earlier, false),
			&journal.Proposal{Index: 7, Phase: journal.PhaseRollback, Change: &journal.Change{Commit: journal.StatusComplete, Apply: journal.StatusComplete}},
			Expiry{Kind: ExpiryRollBack}},
		{"expired, proposal compacted away", record(earlier, false), nil, Expiry{Kind: ExpiryRollBack}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DecideExpiry(c.rec, c.p, now)
			if got.Kind != c.want.Kind || !got.Until.Equal(c.want.Until) {
				t.Errorf("DecideExpiry = %+v, want %+v", got, c.want)
			}
		})
	}
}
