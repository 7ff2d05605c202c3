package proxy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

func TestRollback(t *testing.T) {
	t.Run("nothing to roll back", func(t *testing.T) {
		r := sidecartest.Start(t, sidecartest.Options{})
		_, err := r.Set(t, sidecartest.RollbackRequest(t, 0))
		sidecartest.WantStatus(t, err, codes.NotFound, "nothing to roll back")
		if got := r.LastIndex(t); got != 0 {
			t.Errorf("journal's last index is %d after a refused rollback", got)
		}
	})

	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))) // proposal 1
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"))) // proposal 2

	// Steps run in order on the same sidecar.
	for _, step := range []struct {
		name string
		req  *gpb.SetRequest
		code codes.Code
		msg  []string            // substrings of the error message
		want *sidecarpb.Response // the reply's extension when code is OK
		desc *gpb.TypedValue     // the device's description afterwards; nil: absent
	}{{
		name: "an older change first",
		req:  sidecartest.RollbackRequest(t, 1),
		code: codes.FailedPrecondition, msg: []string{"roll back proposal 2 first"},
		desc: sidecartest.StringVal("two"),
	}, {
		name: "a proposal that does not exist",
		req:  sidecartest.RollbackRequest(t, 99),
		code: codes.NotFound, msg: []string{"99", "does not exist"},
		desc: sidecartest.StringVal("two"),
	}, {
		name: "with operations",
		req: &gpb.SetRequest{
			Update:    []*gpb.Update{{Path: sidecartest.Path(t, mtuPath), Val: sidecartest.UintVal(1500)}},
			Extension: sidecartest.RollbackRequest(t, 0).GetExtension(),
		},
		code: codes.InvalidArgument, msg: []string{"no operations"},
		desc: sidecartest.StringVal("two"),
	}, {
		name: "the newest change",
		req:  sidecartest.RollbackRequest(t, 0),
		want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
			Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
		desc: sidecartest.StringVal("one"),
	}, {
		name: "a rollback",
		req:  sidecartest.RollbackRequest(t, 2),
		code: codes.FailedPrecondition, msg: []string{"proposal 2", "already rolled back"},
		desc: sidecartest.StringVal("one"),
	}, {
		name: "the first change by index",
		req:  sidecartest.RollbackRequest(t, 1),
		want: &sidecarpb.Response{Index: 1, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
			Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
		desc: nil, // absent before proposal 1
	}, {
		name: "with every change rolled back",
		req:  sidecartest.RollbackRequest(t, 0),
		code: codes.NotFound, msg: []string{"nothing to roll back"},
	}} {
		t.Run(step.name, func(t *testing.T) {
			lastIndex, setCount := r.LastIndex(t), r.Dev.SetCount()
			resp, err := r.Set(t, step.req)
			if step.code != codes.OK {
				sidecartest.WantStatus(t, err, step.code, step.msg...)
				if got := r.Dev.SetCount(); got != setCount {
					t.Errorf("a refused rollback sent %d Sets to the device", got-setCount)
				}
			} else {
				if err != nil {
					t.Fatalf("rollback: %v", err)
				}
				wantResponse(t, sidecartest.ResponseExtension(t, resp), step.want)
			}
			if got := r.LastIndex(t); got != lastIndex {
				t.Errorf("journal's last index moved from %d to %d: a rollback is not a new proposal", lastIndex, got)
			}
			r.WantDeviceLeaf(t, descPath, step.desc)
		})
	}
}

// TestRollbackWaitsForChangesInProgress: a rollback sent while a change is
// still being applied (an ASYNC Set, here; a change re-sent after a sidecar
// restart is another) waits for it and rolls it back, rather than being
// refused for a moment's state.
func TestRollbackWaitsForChangesInProgress(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one")))
	r.Dev.SetDelay(300 * time.Millisecond)
	async := sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"))
	async.Extension = []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, sidecartest.AsyncMode())}
	if ext := sidecartest.ResponseExtension(t, r.MustSet(t, async)); ext.GetApply() == sidecarpb.Status_STATUS_COMPLETE {
		t.Fatalf("the ASYNC Set was applied before its reply (%v): nothing to wait for", ext)
	}
	resp := r.MustSet(t, sidecartest.RollbackRequest(t, 0))
	want := &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
		Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE}
	if diff := cmp.Diff(want, sidecartest.ResponseExtension(t, resp), protocmp.Transform()); diff != "" {
		t.Errorf("rollback reply (-want +got):\n%s", diff)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))
}
