package proxy_test

import (
	"errors"
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

// commitExt is a commit-confirmed extension.
func commitExt(id string, action any) *gnmi_ext.Extension {
	c := &gnmi_ext.Commit{Id: id}
	switch a := action.(type) {
	case *gnmi_ext.CommitRequest:
		c.Action = &gnmi_ext.Commit_Commit{Commit: a}
	case *gnmi_ext.CommitConfirm:
		c.Action = &gnmi_ext.Commit_Confirm{Confirm: a}
	case *gnmi_ext.CommitCancel:
		c.Action = &gnmi_ext.Commit_Cancel{Cancel: a}
	case *gnmi_ext.CommitSetRollbackDuration:
		c.Action = &gnmi_ext.Commit_SetRollbackDuration{SetRollbackDuration: a}
	}
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: c}}
}

func commitFor(d time.Duration) *gnmi_ext.CommitRequest {
	return &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(d)}
}

func extendTo(d time.Duration) *gnmi_ext.CommitSetRollbackDuration {
	return &gnmi_ext.CommitSetRollbackDuration{RollbackDuration: durationpb.New(d)}
}

// bare is a Set without operations carrying exts.
func bare(exts ...*gnmi_ext.Extension) *gpb.SetRequest {
	return &gpb.SetRequest{Extension: exts}
}

// outstanding returns the journal's outstanding commit-confirmed (nil if
// none).
func (r *rig) outstanding() *journal.CommitConfirm {
	r.t.Helper()
	r.settle()
	rec, err := r.Journal.CommitConfirm(r.t.Context())
	if errors.Is(err, journal.ErrNotFound) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// TestCommitConfirmed walks one sidecar through every commit-confirmed
// action and error of gnmi-commit-confirmed.md, in order.
func TestCommitConfirmed(t *testing.T) {
	r := newRig(t, sidecartest.Options{})
	r.mustSet(updateReq(t, descPath, strVal("one"))) // proposal 1

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
		{name: "confirm with nothing outstanding", req: bare(commitExt("c1", &gnmi_ext.CommitConfirm{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "one"},
		{name: "cancel with nothing outstanding", req: bare(commitExt("c1", &gnmi_ext.CommitCancel{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "one"},
		{name: "set_rollback_duration with nothing outstanding", req: bare(commitExt("c1", extendTo(hour))),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "one"},
		{name: "commit without an id", req: updateReq(t, descPath, strVal("two"), commitExt("", commitFor(hour))),
			code: codes.InvalidArgument, msg: []string{"id is required"}, desc: "one"},
		{name: "confirm without an id", req: bare(commitExt("", &gnmi_ext.CommitConfirm{})),
			code: codes.InvalidArgument, msg: []string{"id is required"}, desc: "one"},
		{name: "no action", req: updateReq(t, descPath, strVal("two"), commitExt("c1", nil)),
			code: codes.InvalidArgument, msg: []string{"no action"}, desc: "one"},
		{name: "commit without configuration", req: bare(commitExt("c1", commitFor(hour))),
			code: codes.InvalidArgument, msg: []string{"no operations"}, desc: "one"},
		{name: "commit with a zero rollback_duration", req: updateReq(t, descPath, strVal("two"), commitExt("c1", commitFor(0))),
			code: codes.InvalidArgument, msg: []string{"greater than 0"}, desc: "one"},
		{name: "commit with an invalid rollback_duration",
			req: updateReq(t, descPath, strVal("two"), commitExt("c1", &gnmi_ext.CommitRequest{
				RollbackDuration: &durationpb.Duration{Seconds: 1, Nanos: -5}})),
			code: codes.InvalidArgument, msg: []string{"rollback_duration"}, desc: "one"},
		{name: "commit and rollback in one Set",
			req:  updateReq(t, descPath, strVal("two"), commitExt("c1", commitFor(hour)), rollbackReq(t, 0).GetExtension()[0]),
			code: codes.InvalidArgument, msg: []string{"both"}, desc: "one"},
		{name: "two commit extensions",
			req:  updateReq(t, descPath, strVal("two"), commitExt("c1", commitFor(hour)), commitExt("c1", commitFor(hour))),
			code: codes.InvalidArgument, msg: []string{"more than one commit-confirmed"}, desc: "one"},

		{name: "commit", req: updateReq(t, descPath, strVal("two"), commitExt("c1", commitFor(hour))),
			want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "two", outstanding: "c1"},
		{name: "a plain Set while outstanding", req: updateReq(t, descPath, strVal("three")),
			code: codes.FailedPrecondition, msg: []string{"commit-confirmed is outstanding", "proposal 2"}, desc: "two", outstanding: "c1"},
		{name: "an ASYNC Set while outstanding", req: updateReq(t, descPath, strVal("three"), sidecarExt(t, asyncExt)),
			code: codes.FailedPrecondition, msg: []string{"commit-confirmed is outstanding"}, desc: "two", outstanding: "c1"},
		{name: "a second commit while outstanding", req: updateReq(t, descPath, strVal("three"), commitExt("c2", commitFor(hour))),
			code: codes.FailedPrecondition, msg: []string{"already outstanding"}, desc: "two", outstanding: "c1"},
		{name: "a sidecar rollback while outstanding", req: rollbackReq(t, 0),
			code: codes.FailedPrecondition, msg: []string{"cancel"}, desc: "two", outstanding: "c1"},
		{name: "confirm with a wrong id", req: bare(commitExt("c9", &gnmi_ext.CommitConfirm{})),
			code: codes.InvalidArgument, msg: []string{"does not match"}, desc: "two", outstanding: "c1"},
		{name: "cancel with a wrong id", req: bare(commitExt("c9", &gnmi_ext.CommitCancel{})),
			code: codes.InvalidArgument, msg: []string{"does not match"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration with a wrong id", req: bare(commitExt("c9", extendTo(hour))),
			code: codes.InvalidArgument, msg: []string{"does not match"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration without a duration", req: bare(commitExt("c1", &gnmi_ext.CommitSetRollbackDuration{})),
			code: codes.InvalidArgument, msg: []string{"rollback_duration is required"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration of zero", req: bare(commitExt("c1", extendTo(0))),
			code: codes.InvalidArgument, msg: []string{"greater than 0"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration negative", req: bare(commitExt("c1", extendTo(-time.Second))),
			code: codes.InvalidArgument, msg: []string{"greater than 0"}, desc: "two", outstanding: "c1"},
		{name: "confirm carrying configuration", req: updateReq(t, descPath, strVal("three"), commitExt("c1", &gnmi_ext.CommitConfirm{})),
			code: codes.InvalidArgument, msg: []string{"no operations"}, desc: "two", outstanding: "c1"},
		{name: "set_rollback_duration", req: bare(commitExt("c1", extendTo(2*hour))),
			want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "two", outstanding: "c1"},
		{name: "confirm", req: bare(commitExt("c1", &gnmi_ext.CommitConfirm{})),
			want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "two"},
		{name: "confirm again", req: bare(commitExt("c1", &gnmi_ext.CommitConfirm{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "two"},
		{name: "a plain Set after the confirm", req: updateReq(t, descPath, strVal("three")),
			want: &sidecarpb.Response{Index: 3, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "three"},

		{name: "commit again", req: updateReq(t, descPath, strVal("four"), commitExt("c3", commitFor(hour))),
			want: &sidecarpb.Response{Index: 4, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "four", outstanding: "c3"},
		{name: "cancel", req: bare(commitExt("c3", &gnmi_ext.CommitCancel{})),
			want: &sidecarpb.Response{Index: 4, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
			desc: "three"},
		{name: "cancel again", req: bare(commitExt("c3", &gnmi_ext.CommitCancel{})),
			code: codes.FailedPrecondition, msg: []string{"no commit-confirmed is outstanding"}, desc: "three"},
	}
	for _, step := range steps {
		// Steps share the sidecar and run in order: stop at the first
		// failure.
		if !t.Run(step.name, func(t *testing.T) {
			r := r.with(t)
			resp, err := r.set(step.req)
			if step.code != codes.OK {
				wantStatus(t, err, step.code, step.msg...)
			} else if err != nil {
				t.Fatalf("Set: %v", err)
			} else {
				wantResponse(t, responseExt(t, resp), step.want)
			}
			r.wantDeviceLeaf(descPath, strVal(step.desc))
			rec := r.outstanding()
			if rec.GetId() != step.outstanding {
				t.Errorf("outstanding commit-confirmed %v, want id %q", rec, step.outstanding)
			}
		}) {
			return
		}
	}
}

func TestCommitConfirmedRecord(t *testing.T) {
	r := newRig(t, sidecartest.Options{})
	before := time.Now()
	r.mustSet(updateReq(t, descPath, strVal("two"), commitExt("c1", &gnmi_ext.CommitRequest{})))
	rec := r.outstanding()
	if rec.GetProposal() != 1 || rec.GetCancelled() {
		t.Errorf("record %v, want proposal 1, not cancelled", rec)
	}
	// No rollback_duration: the default, 10 minutes.
	if d := rec.GetDeadline().AsTime().Sub(before); d < 10*time.Minute || d > 10*time.Minute+time.Minute {
		t.Errorf("deadline %v after the commit, want the default 10m", d)
	}
	extended := time.Now()
	r.mustSet(bare(commitExt("c1", extendTo(time.Hour))))
	if d := r.outstanding().GetDeadline().AsTime().Sub(extended); d < time.Hour || d > time.Hour+time.Minute {
		t.Errorf("deadline %v after set_rollback_duration 1h", d)
	}
}

func TestCommitConfirmedExpires(t *testing.T) {
	r := newRig(t, sidecartest.Options{})
	r.mustSet(updateReq(t, descPath, strVal("one"))) // proposal 1

	r.mustSet(updateReq(t, descPath, strVal("two"), commitExt("c1", commitFor(300*time.Millisecond))))
	r.wantDeviceLeaf(descPath, strVal("two"))
	p := r.waitProposal(2, func(p *journal.Proposal) bool { return p.GetRollback().GetApply() == journal.StatusComplete })
	r.wantDeviceLeaf(descPath, strVal("one"))
	if rec := r.outstanding(); rec != nil {
		t.Errorf("commit-confirmed still outstanding after its rollback: %v", rec)
	}
	if p.GetRollback().GetIndex() != 1 {
		t.Errorf("rollback restores index %d, want 1", p.GetRollback().GetIndex())
	}
	// A confirm after the deadline is too late.
	_, err := r.set(bare(commitExt("c1", &gnmi_ext.CommitConfirm{})))
	wantStatus(t, err, codes.FailedPrecondition, "no commit-confirmed is outstanding")

	// set_rollback_duration shortens the wait.
	r.mustSet(updateReq(t, descPath, strVal("three"), commitExt("c2", commitFor(time.Hour))))
	r.mustSet(bare(commitExt("c2", extendTo(200*time.Millisecond))))
	r.waitProposal(3, func(p *journal.Proposal) bool { return p.GetRollback().GetApply() == journal.StatusComplete })
	r.wantDeviceLeaf(descPath, strVal("one"))
}

func TestCommitConfirmedRejectedByDevice(t *testing.T) {
	r := newRig(t, sidecartest.Options{})
	// mtu is a uint16 on the device: the commit's change is rejected, and
	// nothing stays outstanding, so the client can commit again at once.
	_, err := r.set(updateReq(t, mtuPath, strVal("jumbo"), commitExt("c1", commitFor(time.Hour))))
	wantStatus(t, err, codes.InvalidArgument)
	if rec := r.outstanding(); rec != nil {
		t.Fatalf("a rejected commit left %v outstanding", rec)
	}
	r.mustSet(updateReq(t, mtuPath, uintVal(9000), commitExt("c1", commitFor(time.Hour))))
	r.mustSet(bare(commitExt("c1", &gnmi_ext.CommitConfirm{})))
	r.wantDeviceLeaf(mtuPath, uintVal(9000))
}

func TestCommitConfirmedCancelBeforeApplied(t *testing.T) {
	// An ASYNC commit while the device is unreachable, cancelled at once:
	// the rollback waits for the change to be applied, then undoes it.
	r := newRig(t, sidecartest.Options{QueueWhenDisconnected: true})
	r.mustSet(updateReq(t, descPath, strVal("one")))
	r.Dev.Stop()
	r.WaitConnected(t, false)
	r.mustSet(updateReq(t, descPath, strVal("two"), commitExt("c1", commitFor(time.Hour)), sidecarExt(t, asyncExt)))
	cancelled := make(chan error, 1)
	go func() {
		_, err := r.set(bare(commitExt("c1", &gnmi_ext.CommitCancel{})))
		cancelled <- err
	}()
	sidecartest.Eventually(t, waitFor, "the commit to be marked cancelled", func() bool {
		return r.outstanding().GetCancelled()
	})
	if err := r.Dev.Start(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	if err := <-cancelled; err != nil {
		t.Fatalf("cancel: %v", err)
	}
	r.wantDeviceLeaf(descPath, strVal("one"))
	if p := r.proposal(2); p.GetChange().GetApply() != journal.StatusComplete || p.GetRollback().GetApply() != journal.StatusComplete {
		t.Errorf("proposal 2 %v: want its change applied, then rolled back", p)
	}
}
