package journal

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

func TestGuardPredicates(t *testing.T) {
	synced := func(mod ...func(*Configuration)) *Configuration {
		c := &Configuration{Committed: &journalpb.Committed{}, Applied: &journalpb.Applied{Term: 3}, Status: StatusComplete}
		for _, m := range mod {
			m(c)
		}
		return c
	}
	m := &Mastership{Term: 3}
	change := func(i uint64, commit, apply Status) *Proposal {
		return &Proposal{Index: i, Phase: PhaseChange, Change: &Change{Commit: commit, Apply: apply}}
	}
	rollback := func(i uint64, commit, apply Status) *Proposal {
		return &Proposal{Index: i, Phase: PhaseRollback, Change: &Change{Commit: StatusComplete, Apply: StatusComplete},
			Rollback: &Rollback{Index: i - 1, Commit: commit, Apply: apply}}
	}
	applying := func(i uint64) func(*Configuration) { return func(c *Configuration) { c.Applied.Proposal = i } }
	rollingBack := func(i uint64) func(*Configuration) {
		return func(c *Configuration) { c.RollingBack, c.Committed.Index, c.Applied.Index = i, i, i }
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	due := &CommitConfirm{Proposal: 2, Deadline: timestamppb.New(now.Add(-time.Second))}
	notDue := &CommitConfirm{Proposal: 2, Deadline: timestamppb.New(now.Add(time.Minute))}
	tests := []struct {
		name   string
		err    error
		refuse string // "" if enabled
	}{
		{"commit", CommitChangeGuard(synced(), change(2, StatusPending, StatusPending), change(1, StatusFailed, StatusPending)), ""},
		{"commit: previous pending", CommitChangeGuard(synced(), change(2, StatusPending, StatusPending), change(1, StatusPending, StatusPending)), "commit of proposal 1 is STATUS_PENDING"},
		{"commit: rolling back", CommitChangeGuard(synced(rollingBack(1)), change(2, StatusPending, StatusPending), nil), "rollback of proposal 1 is in progress"},
		{"commit: done", CommitChangeGuard(synced(), change(2, StatusComplete, StatusPending), nil), "not pending"},
		{"start apply", StartApplyGuard(synced(), m, change(2, StatusComplete, StatusPending), change(1, StatusComplete, StatusAborted)), ""},
		{"start apply: re-entry", StartApplyGuard(synced(applying(2)), m, change(2, StatusComplete, StatusInProgress), nil), ""},
		{"start apply: not synced", StartApplyGuard(synced(), &Mastership{Term: 4}, change(2, StatusComplete, StatusPending), nil), "not re-pushed for term 4"},
		{"start apply: previous in progress", StartApplyGuard(synced(), m, change(2, StatusComplete, StatusPending), change(1, StatusComplete, StatusInProgress)), "apply of proposal 1 is STATUS_IN_PROGRESS"},
		{"start apply: not committed", StartApplyGuard(synced(), m, change(2, StatusPending, StatusPending), nil), "not complete"},
		{"complete apply", CompleteApplyGuard(synced(applying(2)), m, change(2, StatusComplete, StatusInProgress), 3), ""},
		{"complete apply: term moved", CompleteApplyGuard(synced(applying(2)), m, change(2, StatusComplete, StatusInProgress), 2), "applied under term 2"},
		{"complete apply: not in progress", CompleteApplyGuard(synced(), m, change(2, StatusComplete, StatusPending), 3), "not in progress"},
		{"fail apply", FailApplyGuard(synced(applying(2)), change(2, StatusComplete, StatusInProgress)), ""},
		{"fail apply: not in progress", FailApplyGuard(synced(), change(2, StatusComplete, StatusComplete)), "not in progress"},
		{"abort apply", AbortApplyGuard(change(2, StatusFailed, StatusPending), nil), ""},
		{"abort apply: committed", AbortApplyGuard(change(2, StatusComplete, StatusPending), nil), "not failed or aborted"},
		{"commit rollback", CommitRollbackGuard(synced(rollingBack(2)), rollback(2, StatusPending, StatusPending)), ""},
		{"commit rollback: not the newest", CommitRollbackGuard(synced(rollingBack(3)), rollback(2, StatusPending, StatusPending)), "committed index is 3"},
		{"start rollback apply", StartApplyRollbackGuard(synced(rollingBack(2)), m, rollback(2, StatusComplete, StatusPending)), ""},
		{"start rollback apply: not committed", StartApplyRollbackGuard(synced(rollingBack(2)), m, rollback(2, StatusPending, StatusPending)), "not complete"},
		{"finish rollback apply", FinishApplyRollbackGuard(synced(rollingBack(2)), m, rollback(2, StatusComplete, StatusInProgress), 3), ""},
		{"finish rollback apply: term moved", FinishApplyRollbackGuard(synced(rollingBack(2)), m, rollback(2, StatusComplete, StatusInProgress), 2), "applied under term 2"},
		{"re-push", ReconcileGuard(synced(), &Mastership{Term: 4}, 4), ""},
		{"re-push: term not newer", ReconcileGuard(synced(), m, 3), "applied term 3"},
		{"complete re-push", CompleteReconcileGuard(synced(func(c *Configuration) { c.Status = StatusInProgress }), &Mastership{Term: 4}, 4), ""},
		{"complete re-push: not started", CompleteReconcileGuard(synced(), &Mastership{Term: 4}, 4), "not in progress"},
		{"expire: due", ExpireDueGuard(due, now), ""},
		{"expire: cancelled", ExpireDueGuard(&CommitConfirm{Proposal: 2, Deadline: notDue.Deadline, Cancelled: true}, now), ""},
		{"expire: not due", ExpireDueGuard(notDue, now), "not due until"},
		{"expire: applied", ExpireAppliedGuard(change(2, StatusComplete, StatusComplete)), ""},
		{"expire: failed", ExpireAppliedGuard(change(2, StatusComplete, StatusFailed)), ""},
		{"expire: still applying", ExpireAppliedGuard(change(2, StatusComplete, StatusInProgress)), "still being applied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.refuse == "" && tt.err != nil:
				t.Errorf("refused: %v", tt.err)
			case tt.refuse != "" && (!errors.Is(tt.err, ErrGuard) || !strings.Contains(tt.err.Error(), tt.refuse)):
				t.Errorf("err = %v, want a guard refusal saying %q", tt.err, tt.refuse)
			}
		})
	}
}
