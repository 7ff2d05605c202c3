package proxy_test

import (
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// TestCommitConfirmed walks one sidecar through every commit-confirmed
// action and error of gnmi-commit-confirmed.md, in order.
func TestCommitConfirmed(t *testing.T) {
	// Extends to 2h: above the default limit (TestCommitConfirmedMaxRollbackDuration).
	r := sidecartest.Start(t, sidecartest.Options{MaxRollbackDuration: 3 * time.Hour})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))) // proposal 1

	hour := time.Hour
	steps := []struct {
		name string
		req  *gpb.SetRequest
		code codes.Code
		msg  []string
		want *sidecarpb.Response // the reply's extension when code is OK
		desc string              // the device's description afterwards
		// outstanding is the id of the outstanding commit afterwards ("": none).
		outstanding string
	}{
		{name: "confirm with nothing outstanding", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "one"},
		{name: "cancel with nothing outstanding", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitCancel{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "one"},
		{name: "set_rollback_duration with nothing outstanding", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.ExtendTo(hour))),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "one"},
		{name: "commit without an id", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("", sidecartest.CommitFor(hour))),
			code: codes.InvalidArgument, msg: []string{"id is required"}, desc: "one"},
		{name: "confirm without an id", req: sidecartest.BareRequest(sidecartest.CommitExtension("", &gnmi_ext.CommitConfirm{})),
			code: codes.InvalidArgument, msg: []string{"id is required"}, desc: "one"},
		{name: "no action", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", nil)),
			code: codes.InvalidArgument, msg: []string{"no action"}, desc: "one"},
		{name: "commit without configuration", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.CommitFor(hour))),
			code: codes.InvalidArgument, msg: []string{"no operations"}, desc: "one"},
		{name: "commit with a zero rollback_duration", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(0))),
			code: codes.InvalidArgument, msg: []string{"greater than 0"}, desc: "one"},
		{name: "commit with an invalid rollback_duration",
			req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", &gnmi_ext.CommitRequest{
				RollbackDuration: &durationpb.Duration{Seconds: 1, Nanos: -5}})),
			code: codes.InvalidArgument, msg: []string{"rollback_duration"}, desc: "one"},
		{name: "commit and rollback in one Set",
			req:  sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(hour)), sidecartest.RollbackRequest(t, 0).GetExtension()[0]),
			code: codes.InvalidArgument, msg: []string{"both"}, desc: "one"},
		{name: "two commit extensions",
			req:  sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(hour)), sidecartest.CommitExtension("c1", sidecartest.CommitFor(hour))),
			code: codes.InvalidArgument, msg: []string{"more than one commit-confirmed"}, desc: "one"},

		{name: "commit", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(hour))),
			want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "two", outstanding: "c1"},
		{name: "a plain Set while outstanding", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three")),
			code: codes.FailedPrecondition, msg: []string{"commit-confirmed is outstanding", "proposal 2"}, desc: "two", outstanding: "c1"},
		{name: "an ASYNC Set while outstanding", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three"), sidecartest.SidecarExtension(t, sidecartest.AsyncMode())),
			code: codes.FailedPrecondition, msg: []string{"commit-confirmed is outstanding"}, desc: "two", outstanding: "c1"},
		{name: "a second commit while outstanding", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three"), sidecartest.CommitExtension("c2", sidecartest.CommitFor(hour))),
			code: codes.FailedPrecondition, msg: []string{"already outstanding"}, desc: "two", outstanding: "c1"},
		{name: "a sidecar rollback while outstanding", req: sidecartest.RollbackRequest(t, 0),
			code: codes.FailedPrecondition, msg: []string{"cancel"}, desc: "two", outstanding: "c1"},
		{name: "confirm with a wrong id", req: sidecartest.BareRequest(sidecartest.CommitExtension("c9", &gnmi_ext.CommitConfirm{})),
			code: codes.InvalidArgument, msg: []string{"does not match"}, desc: "two", outstanding: "c1"},
		{name: "cancel with a wrong id", req: sidecartest.BareRequest(sidecartest.CommitExtension("c9", &gnmi_ext.CommitCancel{})),
			code: codes.InvalidArgument, msg: []string{"does not match"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration with a wrong id", req: sidecartest.BareRequest(sidecartest.CommitExtension("c9", sidecartest.ExtendTo(hour))),
			code: codes.InvalidArgument, msg: []string{"does not match"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration without a duration", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitSetRollbackDuration{})),
			code: codes.InvalidArgument, msg: []string{"rollback_duration is required"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration of zero", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.ExtendTo(0))),
			code: codes.InvalidArgument, msg: []string{"greater than 0"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration negative", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.ExtendTo(-time.Second))),
			code: codes.InvalidArgument, msg: []string{"greater than 0"}, desc: "two", outstanding: "c1"},
		{name: "confirm carrying configuration", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three"), sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})),
			code: codes.InvalidArgument, msg: []string{"no operations"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.ExtendTo(2*hour))),
			want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "two", outstanding: "c1"},
		{name: "confirm", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})),
			want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "two"},
		{name: "confirm again", req: sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "two"},
		{name: "a plain Set after the confirm", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three")),
			want: &sidecarpb.Response{Index: 3, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "three"},

		{name: "commit again", req: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("four"), sidecartest.CommitExtension("c3", sidecartest.CommitFor(hour))),
			want: &sidecarpb.Response{Index: 4, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "four", outstanding: "c3"},
		{name: "cancel", req: sidecartest.BareRequest(sidecartest.CommitExtension("c3", &gnmi_ext.CommitCancel{})),
			want: &sidecarpb.Response{Index: 4, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "three"},
		{name: "cancel again", req: sidecartest.BareRequest(sidecartest.CommitExtension("c3", &gnmi_ext.CommitCancel{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "three"},
	}
	for _, step := range steps {
		// Steps share the sidecar and run in order: stop at the first
		// failure.
		if !t.Run(step.name, func(t *testing.T) {
			resp, err := r.Set(t, step.req)
			if step.code != codes.OK {
				sidecartest.WantStatus(t, err, step.code, step.msg...)
			} else if err != nil {
				t.Fatalf("Set: %v", err)
			} else {
				wantResponse(t, sidecartest.ResponseExtension(t, resp), step.want)
			}
			r.WantDeviceLeaf(t, descPath, sidecartest.StringVal(step.desc))
			rec := r.OutstandingCommit(t)
			if rec.GetId() != step.outstanding {
				t.Errorf("outstanding commit-confirmed %v, want id %q", rec, step.outstanding)
			}
		}) {
			return
		}
	}
}

func TestCommitConfirmedRecord(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	before := time.Now()
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", &gnmi_ext.CommitRequest{})))
	rec := r.OutstandingCommit(t)
	if rec.GetProposal() != 1 || rec.GetCancelled() {
		t.Errorf("record %v, want proposal 1, not cancelled", rec)
	}
	// No rollback_duration: the default, 10 minutes.
	if d := rec.GetDeadline().AsTime().Sub(before); d < 10*time.Minute || d > 10*time.Minute+time.Minute {
		t.Errorf("deadline %v after the commit, want the default 10m", d)
	}
	extended := time.Now()
	r.MustSet(t, sidecartest.BareRequest(sidecartest.CommitExtension("c1", sidecartest.ExtendTo(time.Hour))))
	if d := r.OutstandingCommit(t).GetDeadline().AsTime().Sub(extended); d < time.Hour || d > time.Hour+time.Minute {
		t.Errorf("deadline %v after set_rollback_duration 1h", d)
	}
}

func TestCommitConfirmedExpires(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))) // proposal 1

	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(300*time.Millisecond))))
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("two"))
	p := waitProposal(t, r, 2, func(p *journal.Proposal) bool { return p.GetRollback().GetApply() == journal.StatusComplete })
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))
	if rec := r.OutstandingCommit(t); rec != nil {
		t.Errorf("commit-confirmed still outstanding after its rollback: %v", rec)
	}
	if p.GetRollback().GetIndex() != 1 {
		t.Errorf("rollback restores index %d, want 1", p.GetRollback().GetIndex())
	}
	// A confirm after the deadline is too late.
	_, err := r.Set(t, sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})))
	sidecartest.WantStatus(t, err, codes.FailedPrecondition, "no commit-confirmed is outstanding")

	// set_rollback_duration shortens the wait.
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("three"), sidecartest.CommitExtension("c2", sidecartest.CommitFor(time.Hour))))
	r.MustSet(t, sidecartest.BareRequest(sidecartest.CommitExtension("c2", sidecartest.ExtendTo(200*time.Millisecond))))
	waitProposal(t, r, 3, func(p *journal.Proposal) bool { return p.GetRollback().GetApply() == journal.StatusComplete })
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))
}

func TestCommitConfirmedRejectedByDevice(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	// mtu is a uint16 on the device: the commit's change is rejected, and
	// nothing stays outstanding, so the client can commit again at once.
	_, err := r.Set(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.StringVal("jumbo"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Hour))))
	sidecartest.WantStatus(t, err, codes.InvalidArgument)
	if rec := r.OutstandingCommit(t); rec != nil {
		t.Fatalf("a rejected commit left %v outstanding", rec)
	}
	r.MustSet(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(9000), sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Hour))))
	r.MustSet(t, sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})))
	r.WantDeviceLeaf(t, mtuPath, sidecartest.UintVal(9000))
}

func TestCommitConfirmedCancelBeforeApplied(t *testing.T) {
	// An ASYNC commit while the device is unreachable, cancelled at once:
	// the rollback waits for the change to be applied, then undoes it.
	r := sidecartest.Start(t, sidecartest.Options{QueueWhenDisconnected: true})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	r.Dev.Stop()
	r.WaitConnected(t, false)
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"), sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Hour)), sidecartest.SidecarExtension(t, sidecartest.AsyncMode())))
	cancelled := make(chan error, 1)
	go func() {
		_, err := r.Set(t, sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitCancel{})))
		cancelled <- err
	}()
	sidecartest.Eventually(t, waitFor, "the commit to be marked cancelled", func() bool {
		return r.OutstandingCommit(t).GetCancelled()
	})
	if err := r.Dev.Start(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	if err := <-cancelled; err != nil {
		t.Fatalf("cancel: %v", err)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))
	if p := r.Proposal(t, 2); p.GetChange().GetApply() != journal.StatusComplete || p.GetRollback().GetApply() != journal.StatusComplete {
		t.Errorf("proposal 2 %v: want its change applied, then rolled back", p)
	}
}
