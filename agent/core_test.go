package agent

import (
	"errors"
	"reflect"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// Builders for the states the decision tables use.

func cfg(mod ...func(*journal.Configuration)) *journal.Configuration {
	c := &journal.Configuration{
		Committed: &journalpb.Committed{},
		Applied:   &journalpb.Applied{Term: 3},
		Status:    journal.StatusComplete,
	}
	for _, m := range mod {
		m(c)
	}
	return c
}

func change(i uint64, commit, apply journal.Status) *journal.Proposal {
	return &journal.Proposal{Index: i, Phase: journal.PhaseChange,
		Change: &journal.Change{Commit: commit, Apply: apply}, Rollback: &journal.Rollback{}}
}

func rollingBack(i uint64, commit, apply journal.Status) *journal.Proposal {
	return &journal.Proposal{Index: i, Phase: journal.PhaseRollback,
		Change:   &journal.Change{Commit: journal.StatusComplete, Apply: journal.StatusComplete},
		Rollback: &journal.Rollback{Index: i - 1, Commit: commit, Apply: apply}}
}

func adoption(i, term uint64) *journal.Proposal {
	p := change(i, complete, inProgress)
	p.Change.Adopted, p.Change.AdoptedTerm = true, term
	return p
}

// synced is a view whose connection holds term 3, re-pushed.
func synced(c *journal.Configuration) View {
	return View{Config: c, Mastership: &journal.Mastership{Term: 3, Conn: 3}, Link: Link{Up: true, Term: 3}}
}

const (
	pending    = journal.StatusPending
	inProgress = journal.StatusInProgress
	complete   = journal.StatusComplete
	aborted    = journal.StatusAborted
	failed     = journal.StatusFailed
)

func TestReconcileMastership(t *testing.T) {
	tests := []struct {
		name string
		link Link
		term uint64
		want StepKind
	}{
		{"no connection: no master", Link{}, 3, StepWait},
		{"new connection gets a term", Link{Up: true}, 3, StepConnect},
		{"connection holds the current term", Link{Up: true, Term: 3}, 3, StepWait},
		{"connection's term superseded", Link{Up: true, Term: 2}, 3, StepDisconnect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := View{Config: cfg(), Mastership: &journal.Mastership{Term: tt.term}, Link: tt.link}
			if got := ReconcileMastership(v); got.Kind != tt.want {
				t.Errorf("ReconcileMastership = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReconcileConfiguration(t *testing.T) {
	behind := func(c *journal.Configuration) { c.Applied.Term = 2; c.Status = journal.StatusComplete }
	repushing := func(c *journal.Configuration) { c.Applied.Term = 2; c.Status = journal.StatusInProgress }
	tests := []struct {
		name       string
		c          *journal.Configuration
		link       Link
		persistent bool
		want       StepKind
	}{
		{"term moved: start re-push", cfg(behind), Link{Up: true, Term: 3}, false, StepStartRepush},
		{"re-push in progress: push", cfg(repushing), Link{Up: true, Term: 3}, false, StepRepush},
		{"persistent device: adopt term, no push", cfg(behind), Link{Up: true, Term: 3}, true, StepAdoptTerm},
		{"already re-pushed for the term", cfg(), Link{Up: true, Term: 3}, false, StepWait},
		{"disconnected: nothing", cfg(behind), Link{}, false, StepWait},
		{"connection without a term yet", cfg(behind), Link{Up: true}, false, StepWait},
		{"stale connection term", cfg(behind), Link{Up: true, Term: 2}, false, StepWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := View{Config: tt.c, Mastership: &journal.Mastership{Term: 3}, Link: tt.link, Policy: Policy{Persistent: tt.persistent}}
			got := ReconcileConfiguration(v)
			if got.Kind != tt.want {
				t.Fatalf("ReconcileConfiguration = %v, want %v", got, tt.want)
			}
			if got.Kind != StepWait && got.Term != 3 {
				t.Errorf("step term = %d, want the mastership term 3", got.Term)
			}
		})
	}
}

func TestCommitChange(t *testing.T) {
	tests := []struct {
		name    string
		c       *journal.Configuration
		p, prev *journal.Proposal
		want    StepKind
	}{
		{"first proposal", cfg(), change(1, pending, pending), nil, StepCommitChange},
		{"previous commit complete", cfg(), change(2, pending, pending), change(1, complete, pending), StepCommitChange},
		{"previous commit failed counts as finished", cfg(), change(2, pending, pending), change(1, failed, pending), StepCommitChange},
		{"Order: previous commit not finished", cfg(), change(2, pending, pending), change(1, pending, pending), StepWait},
		{"already committed", cfg(), change(2, complete, pending), change(1, complete, complete), StepWait},
		{"rollback under way blocks commits", cfg(func(c *journal.Configuration) { c.RollingBack = 1 }),
			change(2, pending, pending), rollingBack(1, pending, pending), StepWait},
		{"no proposal", cfg(), nil, nil, StepWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CommitChange(synced(tt.c), tt.p, tt.prev); got.Kind != tt.want {
				t.Errorf("CommitChange = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCommitChangeNeedsNoConnection(t *testing.T) {
	v := View{Config: cfg(), Mastership: &journal.Mastership{Term: 3}}
	if got := CommitChange(v, change(1, pending, pending), nil); got.Kind != StepCommitChange {
		t.Errorf("CommitChange while disconnected = %v, want a commit (commits touch only the journal)", got)
	}
}

func TestApplyChange(t *testing.T) {
	appliedProposal := func(i uint64) func(*journal.Configuration) {
		return func(c *journal.Configuration) { c.Applied.Proposal = i }
	}
	disconnected := func(c *journal.Configuration) View {
		return View{Config: c, Mastership: &journal.Mastership{Term: 3}}
	}
	staleLink := func(c *journal.Configuration) View {
		return View{Config: c, Mastership: &journal.Mastership{Term: 4}, Link: Link{Up: true, Term: 3}}
	}
	notRepushed := func(c *journal.Configuration) View {
		c.Applied.Term = 2
		return synced(c)
	}
	tests := []struct {
		name    string
		view    func(*journal.Configuration) View
		c       *journal.Configuration
		p, prev *journal.Proposal
		want    StepKind
	}{
		{"committed, previous applied: start", synced, cfg(), change(2, complete, pending), change(1, complete, complete), StepStartApply},
		{"Order: not committed yet", synced, cfg(), change(2, pending, pending), change(1, complete, complete), StepWait},
		{"Sequential: previous apply in progress", synced, cfg(appliedProposal(1)), change(2, complete, pending), change(1, complete, inProgress), StepWait},
		{"previous apply failed counts as finished", synced, cfg(), change(2, complete, pending), change(1, complete, failed), StepStartApply},
		{"commit failed: abort without I/O", synced, cfg(), change(2, failed, pending), change(1, complete, complete), StepAbortApply},
		{"commit aborted: abort without I/O", disconnected, cfg(), change(2, aborted, pending), nil, StepAbortApply},
		{"in progress: send", synced, cfg(appliedProposal(2)), change(2, complete, inProgress), change(1, complete, complete), StepSendChange},
		{"adoption read under this term: no Set", synced, cfg(appliedProposal(2)), adoption(2, 3), nil, StepCompleteAdopted},
		{"adoption read under an earlier term: send", synced, cfg(appliedProposal(2)), adoption(2, 2), nil, StepSendChange},
		{"disconnected: no apply", disconnected, cfg(), change(1, complete, pending), nil, StepWait},
		{"disconnected: no send", disconnected, cfg(appliedProposal(1)), change(1, complete, inProgress), nil, StepWait},
		{"stale term: no apply", staleLink, cfg(), change(1, complete, pending), nil, StepWait},
		{"stale term: no send", staleLink, cfg(appliedProposal(1)), change(1, complete, inProgress), nil, StepWait},
		{"not re-pushed for the term: no send", notRepushed, cfg(appliedProposal(1)), change(1, complete, inProgress), nil, StepWait},
		{"rollback under way: no apply", synced, cfg(func(c *journal.Configuration) { c.RollingBack = 1 }), change(2, complete, pending), rollingBack(1, pending, pending), StepWait},
		{"finished: nothing", synced, cfg(), change(1, complete, complete), nil, StepWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ApplyChange(tt.view(tt.c), tt.p, tt.prev)
			if got.Kind != tt.want {
				t.Fatalf("ApplyChange = %v, want %v", got, tt.want)
			}
			if (got.Kind == StepSendChange || got.Kind == StepStartApply || got.Kind == StepCompleteAdopted) && got.Term != 3 {
				t.Errorf("step term = %d, want 3", got.Term)
			}
		})
	}
}

func TestRollbackDecisions(t *testing.T) {
	rb := func(i uint64, committed, applied uint64) *journal.Configuration {
		return cfg(func(c *journal.Configuration) {
			c.RollingBack = i
			c.Committed.Index, c.Committed.Proposal = committed, committed
			c.Applied.Index, c.Applied.Proposal = applied, applied
		})
	}
	tests := []struct {
		name   string
		decide func(View, *journal.Proposal) Step
		c      *journal.Configuration
		view   func(*journal.Configuration) View
		p      *journal.Proposal
		want   StepKind
	}{
		{"commit the rollback of the newest change", CommitRollback, rb(5, 5, 5), synced, rollingBack(5, pending, pending), StepCommitRollback},
		{"commit: rollback is not the one under way", CommitRollback, rb(4, 5, 5), synced, rollingBack(5, pending, pending), StepWait},
		{"commit: already committed", CommitRollback, rb(5, 4, 5), synced, rollingBack(5, complete, pending), StepWait},
		{"commit: a change is not a rollback", CommitRollback, rb(5, 5, 5), synced, change(5, complete, complete), StepWait},
		{"apply: start once committed", ApplyRollback, rb(5, 4, 5), synced, rollingBack(5, complete, pending), StepStartApplyRollback},
		{"apply: not before its commit", ApplyRollback, rb(5, 5, 5), synced, rollingBack(5, pending, pending), StepWait},
		// StartApplyRollback moved applied.proposal to the rollback's
		// index; applied.index stays 5 until the rollback finishes.
		{"apply: send when in progress", ApplyRollback, cfg(func(c *journal.Configuration) {
			c.RollingBack, c.Committed.Index, c.Committed.Proposal, c.Applied.Index, c.Applied.Proposal = 5, 4, 4, 5, 4
		}), synced, rollingBack(5, complete, inProgress), StepSendRollback},
		{"apply: not while disconnected", ApplyRollback, rb(5, 4, 5), func(c *journal.Configuration) View {
			return View{Config: c, Mastership: &journal.Mastership{Term: 3}}
		}, rollingBack(5, complete, pending), StepWait},
		{"apply: finished", ApplyRollback, rb(5, 4, 4), synced, rollingBack(5, complete, complete), StepWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.decide(tt.view(tt.c), tt.p); got.Kind != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNextApplyOrder(t *testing.T) {
	// A fresh connection: the term is recorded first, then the re-push,
	// and only then is anything applied.
	next := change(1, complete, pending)
	c := cfg(func(c *journal.Configuration) { c.Applied.Term = 2 })
	v := View{Config: c, Mastership: &journal.Mastership{Term: 2}, Link: Link{Up: true}}
	if got := NextApply(v, nil, next, nil); got.Kind != StepConnect {
		t.Fatalf("fresh connection: %v, want Connect", got)
	}
	v.Mastership.Term, v.Link.Term = 3, 3
	if got := NextApply(v, nil, next, nil); got.Kind != StepStartRepush {
		t.Fatalf("new term: %v, want StartRepush before any apply", got)
	}
	c.Status = journal.StatusInProgress
	if got := NextApply(v, nil, next, nil); got.Kind != StepRepush {
		t.Fatalf("re-push in progress: %v, want Repush", got)
	}
	c.Applied.Term, c.Status = 3, journal.StatusComplete
	if got := NextApply(v, nil, next, nil); got.Kind != StepStartApply {
		t.Fatalf("synced: %v, want StartApply", got)
	}
	c.RollingBack = 7
	if got := NextApply(v, rollingBack(7, complete, pending), next, nil); got.Kind != StepWait {
		t.Fatalf("rollback under way, applied index not at it: %v, want Wait", got)
	}
}

func TestDecideAnswers(t *testing.T) {
	refusal := status.Error(codes.InvalidArgument, "bad value")
	unavailable := status.Error(codes.Unavailable, "conn reset")
	timeout := status.Error(codes.DeadlineExceeded, "slow")
	overload := status.Error(codes.ResourceExhausted, "busy")
	arbitration := status.Error(codes.PermissionDenied, "election_id 3 is lower than the current master's election_id 5")
	refused := []*journal.PathValue{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "mtu"}}}}}
	one := Batch{First: 4, Last: 4}
	tests := []struct {
		name   string
		fenced bool
		ev     Event
		want   Ready
	}{
		{"change accepted: complete the batch", false, Event{Kind: EventChangeAnswer, Batch: Batch{First: 4, Last: 6}},
			Ready{Answer: Accepted, Record: RecordCompleteApply}},
		{"change refused: fail it", false, Event{Kind: EventChangeAnswer, Err: refusal, Batch: one},
			Ready{Answer: Refused, Record: RecordFailApply}},
		{"change refused, an earlier Set may have carried it: restore, then fail", false,
			Event{Kind: EventChangeAnswer, Err: refusal, Batch: Batch{First: 4, Last: 4, MayHaveReached: true}},
			Ready{Answer: Refused, Record: RecordFailApply, Restore: true}},
		{"batch refused: its proposals one at a time", false, Event{Kind: EventChangeAnswer, Err: refusal, Batch: Batch{First: 4, Last: 6}},
			Ready{Answer: Refused, Isolate: 6}},
		{"change in doubt: read the device back", false, Event{Kind: EventChangeAnswer, Err: unavailable, Batch: one},
			Ready{Answer: InDoubt, ReadBack: true}},
		{"connection broke: read back", false, Event{Kind: EventChangeAnswer, Err: errors.New("EOF"), Batch: one},
			Ready{Answer: InDoubt, ReadBack: true}},
		{"in doubt, read back applied: complete", false, Event{Kind: EventChangeAnswer, Err: timeout, Batch: Batch{First: 4, Last: 6}, ReadBack: ReadApplied},
			Ready{Answer: Accepted, Record: RecordCompleteApply}},
		{"in doubt, read back not applied: fail it with the Set's error", false, Event{Kind: EventChangeAnswer, Err: timeout, Batch: one, ReadBack: ReadNotApplied},
			Ready{Answer: Refused, Record: RecordFailApply}},
		{"batch in doubt, not applied: one at a time", false, Event{Kind: EventChangeAnswer, Err: timeout, Batch: Batch{First: 4, Last: 6}, ReadBack: ReadNotApplied},
			Ready{Answer: Refused, Isolate: 6}},
		{"in doubt and unreadable: the connection is lost", false, Event{Kind: EventChangeAnswer, Err: timeout, Batch: one, ReadBack: ReadFailed},
			Ready{Answer: InDoubt, Session: SessionRetry}},
		{"acknowledged change refused with a retry code: send it again", false,
			Event{Kind: EventChangeAnswer, Err: overload, Batch: one, Attempt: 1, Elapsed: time.Second},
			Ready{Answer: Refused, Retry: true}},
		{"a waiting client gets the retry code's answer", false,
			Event{Kind: EventChangeAnswer, Err: overload, Batch: one, Attempt: 1, Waiting: true},
			Ready{Answer: Refused, Record: RecordFailApply}},
		{"retries exhausted: applied, out of sync", false,
			Event{Kind: EventChangeAnswer, Err: overload, Batch: one, Attempt: 3},
			Ready{Answer: Refused, Record: RecordGiveUp}},
		{"retry time exhausted: applied, out of sync", false,
			Event{Kind: EventChangeAnswer, Err: overload, Batch: one, Attempt: 1, Elapsed: time.Minute},
			Ready{Answer: Refused, Record: RecordGiveUp}},
		{"in doubt, not applied, with a retry code: send it again", false,
			Event{Kind: EventChangeAnswer, Err: unavailable, Batch: one, Attempt: 1, ReadBack: ReadNotApplied},
			Ready{Answer: Refused, Retry: true}},
		{"change superseded by another master: fence", true, Event{Kind: EventChangeAnswer, Err: arbitration, Batch: one},
			Ready{Answer: Superseded, Session: SessionFence}},
		{"arbitration's words without fencing: a refusal", false, Event{Kind: EventChangeAnswer, Err: arbitration, Batch: one},
			Ready{Answer: Refused, Record: RecordFailApply}},
		{"claim accepted: go on", true, Event{Kind: EventSetAnswer}, Ready{Answer: Accepted}},
		{"claim refused: go on", true, Event{Kind: EventSetAnswer, Err: refusal}, Ready{Answer: Refused}},
		{"claim unanswered: end the session", true, Event{Kind: EventSetAnswer, Err: unavailable}, Ready{Answer: InDoubt, Session: SessionRetry}},
		{"claim superseded: fence", true, Event{Kind: EventSetAnswer, Err: arbitration}, Ready{Answer: Superseded, Session: SessionFence}},
		{"push Set refused: split it, the session goes on", false, Event{Kind: EventSetAnswer, Err: refusal}, Ready{Answer: Refused}},
		{"push Set unanswered: end the session", false, Event{Kind: EventSetAnswer, Err: timeout}, Ready{Answer: InDoubt, Session: SessionRetry}},
		{"push Set superseded: fence", true, Event{Kind: EventSetAnswer, Err: arbitration}, Ready{Answer: Superseded, Session: SessionFence}},
		{"re-push done: complete it", false, Event{Kind: EventPushDone, Push: PushRepush},
			Ready{Answer: Accepted, Record: RecordCompleteReconcile}},
		{"re-push with refused values: complete it, they are out of sync", false, Event{Kind: EventPushDone, Push: PushRepush, Refused: refused},
			Ready{Answer: Refused, Record: RecordCompleteReconcile}},
		{"rollback accepted: complete it", false, Event{Kind: EventPushDone, Push: PushRollback},
			Ready{Answer: Accepted, Record: RecordCompleteApplyRollback}},
		{"rollback with refused values: fail it", false, Event{Kind: EventPushDone, Push: PushRollback, Refused: refused},
			Ready{Answer: Refused, Record: RecordFailApplyRollback}},
		{"restore accepted: nothing to record", false, Event{Kind: EventPushDone, Push: PushRestore}, Ready{Answer: Accepted}},
		{"restore with refused values: out of sync", false, Event{Kind: EventPushDone, Push: PushRestore, Refused: refused},
			Ready{Answer: Refused, Record: RecordMarkOutOfSync}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := View{Policy: Policy{Fencing: tt.fenced, RetryCodes: []codes.Code{codes.ResourceExhausted, codes.Unavailable},
				RetryAttempts: 3, RetryFor: 30 * time.Second}}
			if got := Decide(v, tt.ev); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecideTicks(t *testing.T) {
	v := synced(cfg(func(c *journal.Configuration) { c.Committed.Index, c.Committed.Proposal = 1, 1 }))
	next, prev := change(2, pending, pending), change(1, complete, complete)
	if got := Decide(v, Event{Kind: EventCommitTick, Next: next, Prev: prev}); got.Step.Kind != StepCommitChange || got.Step.Index != 2 {
		t.Errorf("commit tick: %v, want CommitChange(2)", got.Step)
	}
	next = change(2, complete, pending)
	if got := Decide(v, Event{Kind: EventApplyTick, Next: next, Prev: prev}); got.Step.Kind != StepStartApply || got.Step.Index != 2 {
		t.Errorf("apply tick: %v, want StartApply(2)", got.Step)
	}
	v.Link = Link{}
	if got := Decide(v, Event{Kind: EventApplyTick, Next: next, Prev: prev}); got.Step.Kind != StepWait {
		t.Errorf("apply tick, link down: %v, want Wait", got.Step)
	}
	v.Link = Link{Up: true}
	if got := Decide(v, Event{Kind: EventApplyTick, Next: next, Prev: prev}); got.Step.Kind != StepConnect {
		t.Errorf("apply tick, link up without a term: %v, want Connect", got.Step)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rec := &journal.CommitConfirm{Proposal: 2, Deadline: timestamppb.New(now.Add(-time.Second))}
	if got := Decide(v, Event{Kind: EventExpiryTick, Confirm: rec, Next: change(2, complete, complete), Now: now}); got.Expiry.Kind != ExpiryRollBack {
		t.Errorf("expiry tick past the deadline: %v, want ExpiryRollBack", got.Expiry)
	}
}

// TestGuardsAgree checks that every step the core decides is one the
// journal's guard for it accepts, and that the core waits where the guard
// refuses: both read the same predicate.
func TestGuardsAgree(t *testing.T) {
	m := &journal.Mastership{Term: 3}
	tests := []struct {
		name  string
		step  Step
		guard error
	}{
		{"commit", CommitChange(synced(cfg()), change(2, pending, pending), change(1, pending, pending)),
			journal.CommitChangeGuard(cfg(), change(2, pending, pending), change(1, pending, pending))},
		{"start apply", ApplyChange(synced(cfg()), change(2, complete, pending), change(1, complete, inProgress)),
			journal.StartApplyGuard(cfg(), m, change(2, complete, pending), change(1, complete, inProgress))},
		{"abort apply", ApplyChange(synced(cfg()), change(2, failed, pending), change(1, complete, inProgress)),
			journal.AbortApplyGuard(change(2, failed, pending), change(1, complete, inProgress))},
		{"send change", ApplyChange(synced(cfg()), change(2, complete, inProgress), nil),
			journal.CompleteApplyGuard(cfg(), m, change(2, complete, inProgress), 3)},
		{"commit rollback", CommitRollback(synced(cfg()), rollingBack(2, pending, pending)),
			journal.CommitRollbackGuard(cfg(), rollingBack(2, pending, pending))},
		{"start rollback", ApplyRollback(synced(cfg()), rollingBack(2, complete, pending)),
			journal.StartApplyRollbackGuard(cfg(), m, rollingBack(2, complete, pending))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.guard, journal.ErrGuard) {
				t.Fatalf("guard = %v, want a refusal", tt.guard)
			}
			if tt.step.Kind != StepWait {
				t.Errorf("the journal refuses (%v) but the core decided %v", tt.guard, tt.step)
			}
		})
	}
}
