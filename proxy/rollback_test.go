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
		r := newRig(t, sidecartest.Options{})
		_, err := r.set(rollbackReq(t, 0))
		wantStatus(t, err, codes.NotFound, "nothing to roll back")
		if got := r.lastIndex(); got != 0 {
			t.Errorf("journal's last index is %d after a refused rollback", got)
		}
	})

	r := newRig(t, sidecartest.Options{})
	r.mustSet(updateReq(t, descPath, strVal("one"))) // proposal 1
	r.mustSet(updateReq(t, descPath, strVal("two"))) // proposal 2

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
		req:  rollbackReq(t, 1),
		code: codes.FailedPrecondition, msg: []string{"roll back proposal 2 first"},
		desc: strVal("two"),
	}, {
		name: "a proposal that does not exist",
		req:  rollbackReq(t, 99),
		code: codes.NotFound, msg: []string{"99", "does not exist"},
		desc: strVal("two"),
	}, {
		name: "with operations",
		req: &gpb.SetRequest{
			Update:    []*gpb.Update{{Path: sidecartest.Path(t, mtuPath), Val: uintVal(1500)}},
			Extension: rollbackReq(t, 0).GetExtension(),
		},
		code: codes.InvalidArgument, msg: []string{"no operations"},
		desc: strVal("two"),
	}, {
		name: "the newest change",
		req:  rollbackReq(t, 0),
		want: &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
			Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
		desc: strVal("one"),
	}, {
		name: "a rollback",
		req:  rollbackReq(t, 2),
		code: codes.FailedPrecondition, msg: []string{"proposal 2", "already rolled back"},
		desc: strVal("one"),
	}, {
		name: "the first change by index",
		req:  rollbackReq(t, 1),
		want: &sidecarpb.Response{Index: 1, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
			Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE},
		desc: nil, // absent before proposal 1
	}, {
		name: "with every change rolled back",
		req:  rollbackReq(t, 0),
		code: codes.NotFound, msg: []string{"nothing to roll back"},
	}} {
		t.Run(step.name, func(t *testing.T) {
			r := r.with(t)
			lastIndex, setCount := r.lastIndex(), r.Dev.SetCount()
			resp, err := r.set(step.req)
			if step.code != codes.OK {
				wantStatus(t, err, step.code, step.msg...)
				if got := r.Dev.SetCount(); got != setCount {
					t.Errorf("a refused rollback sent %d Sets to the device", got-setCount)
				}
			} else {
				if err != nil {
					t.Fatalf("rollback: %v", err)
				}
				wantResponse(t, responseExt(t, resp), step.want)
			}
			if got := r.lastIndex(); got != lastIndex {
				t.Errorf("journal's last index moved from %d to %d: a rollback is not a new proposal", lastIndex, got)
			}
			r.wantDeviceLeaf(descPath, step.desc)
		})
	}
}

// TestRollbackWaitsForChangesInProgress: a rollback sent while a change is
// still being applied (an ASYNC Set, here; a change re-sent after a sidecar
// restart is another) waits for it and rolls it back, rather than being
// refused for a moment's state.
func TestRollbackWaitsForChangesInProgress(t *testing.T) {
	r := newRig(t, sidecartest.Options{})
	r.mustSet(updateReq(t, descPath, strVal("one")))
	r.Dev.SetDelay(300 * time.Millisecond)
	async := updateReq(t, descPath, strVal("two"))
	async.Extension = []*gnmi_ext.Extension{sidecarExt(t, asyncExt)}
	if ext := responseExt(t, r.mustSet(async)); ext.GetApply() == sidecarpb.Status_STATUS_COMPLETE {
		t.Fatalf("the ASYNC Set was applied before its reply (%v): nothing to wait for", ext)
	}
	resp := r.mustSet(rollbackReq(t, 0))
	want := &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_ROLLBACK,
		Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE}
	if diff := cmp.Diff(want, responseExt(t, resp), protocmp.Transform()); diff != "" {
		t.Errorf("rollback reply (-want +got):\n%s", diff)
	}
	r.wantDeviceLeaf(descPath, strVal("one"))
}
