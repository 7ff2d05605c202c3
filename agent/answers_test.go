package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// An answer is an answer (docs/agent.md, "Answers"): whatever code the
// device answers a change's Set with, the Set is not sent again, the
// session goes on, and the change fails with the device's code; the next
// change is applied at once.
func TestAnswerIsAnAnswer(t *testing.T) {
	for _, code := range []codes.Code{codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded,
		codes.Canceled, codes.Unauthenticated, codes.Aborted, codes.InvalidArgument} {
		t.Run(code.String(), func(t *testing.T) {
			r := newRig(t, testbed.Options{}, agent.Options{})
			r.waitQuiescent()
			term, sets := r.a.Status().Term, r.dev.SetCount()
			r.dev.RejectNextSets(1, code)
			i := r.propose(updateOp(t, descPath("eth0"), str("refused")))
			wantFailedOnceSessionGoesOn(t, r, i, code, sets, term)
		})
	}
}

// wantFailedOnceSessionGoesOn checks that proposal i failed with code,
// its Set sent to the device once (sets: the device's Set count before
// it), and that the next change is applied on the same session (term).
func wantFailedOnceSessionGoesOn(t *testing.T, r *rig, i uint64, code codes.Code, sets int64, term uint64) {
	t.Helper()
	p := r.waitApplied(i)
	if got := p.GetChange().GetApply(); got != journal.StatusFailed {
		t.Fatalf("apply = %v, want FAILED with %v", got, code)
	}
	if got := codes.Code(p.GetChange().GetError().GetCode()); got != code {
		t.Errorf("recorded code %v, want %v", got, code)
	}
	if n := r.dev.SetCount() - sets; n != 1 {
		t.Errorf("the device received the Set %d times, want once", n)
	}
	next := r.propose(updateOp(t, descPath("eth0"), str("next")))
	if got := r.waitApplied(next).GetChange().GetApply(); got != journal.StatusComplete {
		t.Fatalf("the next change: apply %v, want COMPLETE", got)
	}
	if now := r.a.Status().Term; now != term {
		t.Errorf("term %d, want the same session's %d (no reconnect)", now, term)
	}
	wantLeaf(t, r, descPath("eth0"), str("next"))
	r.waitQuiescent()
	r.verify()
}

// An acknowledged change the device answers with a code the operator
// configured to retry is sent again on the same session, within bounds;
// past them it is recorded applied with its paths out of sync.
func TestRetryCodesForAcknowledgedChanges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		refusals  int
		want      journal.Status
		outOfSync bool
	}{
		{"succeeds within the attempts", 2, journal.StatusComplete, false},
		{"attempts exhausted: out of sync", 10, journal.StatusComplete, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testbed.Options{}, agent.Options{RetryCodes: []codes.Code{codes.ResourceExhausted}, RetryAttempts: 3})
			r.waitQuiescent()
			term, sets := r.a.Status().Term, r.dev.SetCount()
			r.dev.RejectNextSets(tc.refusals, codes.ResourceExhausted)
			i := r.propose(updateOp(t, descPath("eth0"), str("busy")))
			p := r.waitApplied(i)
			if got := p.GetChange().GetApply(); got != tc.want {
				t.Fatalf("apply = %v, want %v", got, tc.want)
			}
			sent := r.dev.SetCount() - sets
			if want := int64(min(tc.refusals+1, 3)); sent != want {
				t.Errorf("the device received the change %d times, want %d", sent, want)
			}
			if got := r.a.Status().SetRetries; got != uint64(sent-1) {
				t.Errorf("status counts %d retries, want %d", got, sent-1)
			}
			recs := r.outOfSync()
			if (len(recs) > 0) != tc.outOfSync {
				t.Fatalf("out of sync: %v, want some: %v", recs, tc.outOfSync)
			}
			if tc.outOfSync {
				paths := outOfSyncPaths(r)
				if !slices.Contains(paths, descPath("eth0")) {
					t.Errorf("out of sync: %v, want %s among them", paths, descPath("eth0"))
				}
				for _, rec := range recs {
					if rec.GetCause() != journal.CauseChange || rec.GetProposal() != i {
						t.Errorf("out-of-sync record %v, want cause CHANGE of proposal %d", rec, i)
					}
				}
				r.dev.ClearFaults()
				if _, ok := r.deviceLeaf(descPath("eth0")); ok {
					t.Error("the refused value is on the device")
				}
			} else {
				wantLeaf(t, r, descPath("eth0"), str("busy"))
			}
			if now := r.a.Status().Term; now != term {
				t.Errorf("term %d, want the same session's %d", now, term)
			}
			if r.a.Status().Retrying != nil {
				t.Errorf("status still reports a retry: %+v", r.a.Status().Retrying)
			}
		})
	}
}

// A Set the device hangs on is in doubt once its time is up: the device is
// read back, not sent the Set again; not applied, it fails, and the next
// change goes on the same session. The read back takes the device's way of
// being read: a device that refuses Get of CONFIG, every Get, or
// JSON_IETF is read otherwise (devread's fallbacks).
func TestHungSetIsReadBackNotResent(t *testing.T) {
	for _, tc := range []struct {
		name string
		dev  testbed.Options
	}{
		{"reads answered", testbed.Options{}},
		{"Get CONFIG refused", testbed.Options{RefuseGetConfig: true}},
		{"every Get refused", testbed.Options{RefuseGet: true}},
		{"JSON_IETF refused", testbed.Options{RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.dev, agent.Options{ApplyTimeout: 500 * time.Millisecond})
			r.waitQuiescent()
			term, sets := r.a.Status().Term, r.dev.SetCount()
			r.dev.HangNextSet()
			i := r.propose(updateOp(t, descPath("eth0"), str("hung")))
			wantFailedOnceSessionGoesOn(t, r, i, codes.DeadlineExceeded, sets, term) // read back: not applied
		})
	}
}

// A Set whose answer is in doubt but that the device applied (the answer
// was lost after the commit) is recorded applied from the read back, and
// not sent again.
func TestInDoubtSetAppliedIsRecordedApplied(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			r := newRig(t, testbed.Options{}, agent.Options{})
			r.waitQuiescent()
			sets := r.dev.SetCount()
			if err := r.dev.ArmSetFault(testbed.SetFault{Path: descPath("eth0"), Times: 1, AnswerLost: code}); err != nil {
				t.Fatal(err)
			}
			i := r.propose(updateOp(t, descPath("eth0"), str("applied")))
			p := r.waitApplied(i)
			if got := p.GetChange().GetApply(); got != journal.StatusComplete {
				t.Fatalf("apply = %v (%v), want COMPLETE (read back: applied)", got, p.GetChange().GetError())
			}
			if n := r.dev.SetCount() - sets; n != 1 {
				t.Errorf("the device received the Set %d times, want once", n)
			}
			wantLeaf(t, r, descPath("eth0"), str("applied"))
			r.waitQuiescent()
			r.verify()
		})
	}
}

// A lost connection is not an answer: the device cannot be read back on
// it, the session ends, and the next one re-pushes and sends the change.
func TestLostConnectionResendsOnNextSession(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitQuiescent()
	term, sets := r.a.Status().Term, r.dev.SetCount()
	r.dev.HangNextSet()
	i := r.propose(updateOp(t, descPath("eth0"), str("resent")))
	r.eventually("the device holds the Set", func() bool { return r.dev.SetCount() > sets })
	r.dev.DropConnections()
	p := r.waitApplied(i)
	if got := p.GetChange().GetApply(); got != journal.StatusComplete {
		t.Fatalf("apply = %v, want COMPLETE on the next session", got)
	}
	if now := r.config().GetApplied().GetTerm(); now <= term {
		t.Errorf("applied under term %d, want a new term after %d", now, term)
	}
	wantLeaf(t, r, descPath("eth0"), str("resent"))
	r.waitQuiescent()
	r.verify()
}

// A waiting client's deadline goes with its change's Set, less the
// margin; its cancel cancels the Set at the device, and a change whose
// client gave up before its turn is withdrawn, never sent.
func TestWaitingClientDeadlineAndCancel(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{ApplyTimeout: time.Minute})
	r.waitQuiescent()
	sets := r.dev.SetCount()
	r.dev.HangNextSet()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hung, err := r.a.ProposeChange(agent.WithWaitingClient(ctx), journal.Sender{}, []*journal.Op{updateOp(t, descPath("eth0"), str("hung"))})
	if err != nil {
		t.Fatal(err)
	}
	// Queued behind the hung Set: its client cancels before its turn.
	qctx, qcancel := context.WithCancel(context.Background())
	queued, err := r.a.ProposeChange(agent.WithWaitingClient(qctx), journal.Sender{}, []*journal.Op{updateOp(t, descPath("eth1"), str("queued"))})
	if err != nil {
		t.Fatal(err)
	}
	qcancel()
	r.a.ClientGone(queued.GetIndex(), qctx.Err())
	start := time.Now()
	p := r.waitApplied(hung.GetIndex())
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the hung Set held the queue for %v, past its client's 1 s deadline (ApplyTimeout 1 min)", took)
	}
	if got := codes.Code(p.GetChange().GetError().GetCode()); p.GetChange().GetApply() != journal.StatusFailed || got != codes.DeadlineExceeded {
		t.Errorf("hung change: apply %v code %v, want FAILED DeadlineExceeded", p.GetChange().GetApply(), got)
	}
	q := r.waitApplied(queued.GetIndex())
	if got := codes.Code(q.GetChange().GetError().GetCode()); q.GetChange().GetApply() != journal.StatusFailed || got != codes.Canceled {
		t.Errorf("withdrawn change: apply %v code %v, want FAILED Canceled", q.GetChange().GetApply(), got)
	}
	if n := r.dev.SetCount() - sets; n != 1 {
		t.Errorf("the device received %d Sets, want 1 (the withdrawn change is never sent)", n)
	}
	if _, ok := r.deviceLeaf(descPath("eth1")); ok {
		t.Error("the withdrawn change reached the device")
	}
	if !errors.Is(qctx.Err(), context.Canceled) {
		t.Fatal("unreachable")
	}
	r.waitQuiescent()
	r.verify()
}
