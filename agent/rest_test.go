package agent_test

import (
	"context"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func (r *rig) rest() agent.Rest {
	r.t.Helper()
	rest, err := r.a.Rest(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return rest
}

// TestRest: the pipeline is at rest once synced and every proposal
// finished, not while a proposal is being applied nor while the device is
// away, and every write to the device moves the fingerprint.
func TestRest(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.eventually("at rest after the start-up re-push", func() bool { return r.rest().AtRest })
	i := r.propose(updateOp(t, descPath("eth0"), str("one")))
	r.waitApplied(i)
	r.eventually("at rest after the Set", func() bool { return r.rest().AtRest })
	before := r.rest()

	r.dev.SetDelay(300 * time.Millisecond)
	j := r.propose(updateOp(t, descPath("eth0"), str("two")))
	if rest := r.rest(); rest.AtRest || rest.Why == "" {
		t.Errorf("at rest with proposal %d being applied: %+v", j, rest)
	}
	r.waitApplied(j)
	r.dev.SetDelay(0)
	r.eventually("at rest after the slow Set", func() bool { return r.rest().AtRest })
	after := r.rest()
	if before.Same(after) {
		t.Errorf("a Set left the fingerprint as it was: %+v", after)
	}
	if !after.Same(r.rest()) {
		t.Errorf("the fingerprint moved with nothing going on: %+v then %+v", after, r.rest())
	}

	r.restartDevice()
	r.eventually("at rest on a new session after the device restart", func() bool {
		rest := r.rest()
		return rest.AtRest && rest.Session != after.Session
	})
	if again := r.rest(); again.Term == after.Term || again.Repushes == after.Repushes {
		t.Errorf("a reconnect and re-push left the term or the re-push count as they were: %+v, before %+v", again, after)
	}
	r.dev.Stop()
	r.eventually("not at rest without the device", func() bool { return !r.rest().AtRest })
}

// TestRevertDrift: the journal's values at a path go back on the device,
// a delete where the journal holds nothing live; a value the device
// refuses is out of sync with cause DRIFT.
func TestRevertDrift(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitApplied(r.propose(updateOp(t, descPath("eth0"), str("uplink")), updateOp(t, mtuPath("eth0"), uintv(1500))))
	r.waitApplied(r.propose(updateOp(t, descPath("eth1"), str("x"))))
	r.waitApplied(r.propose(deleteOp(t, "/interfaces/interface[name=eth1]")))
	dev := sidecartest.Dial(t, r.dev.Addr())
	ctx := context.Background()
	if _, err := dev.Set(ctx, &gpb.SetRequest{
		Delete: []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=eth0]")},
		Update: []*gpb.Update{{Path: sidecartest.Path(t, descPath("eth1")), Val: str("back")}}}); err != nil {
		t.Fatal(err)
	}
	r.eventually("at rest", func() bool { return r.rest().AtRest })
	res, err := r.a.RevertDrift(ctx, []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=eth0]"), sidecartest.Path(t, "/interfaces/interface[name=eth1]")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) != 0 || len(res.Sent) == 0 {
		t.Errorf("revert: %+v", res)
	}
	wantLeaf(t, r, descPath("eth0"), str("uplink"))
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	if v, ok := r.deviceLeaf(descPath("eth1")); ok {
		t.Errorf("the device still holds %v at %s, which the journal deleted", v, descPath("eth1"))
	}

	if _, err := dev.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, descPath("eth0")), Val: str("locked")}}}); err != nil {
		t.Fatal(err)
	}
	r.dev.RejectNextSets(1, codes.InvalidArgument)
	res, err = r.a.RevertDrift(ctx, []*gpb.Path{sidecartest.Path(t, descPath("eth0"))})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) != 1 || res.Err.Code() != codes.InvalidArgument {
		t.Fatalf("revert: %+v", res)
	}
	recs := r.outOfSync()
	if len(recs) != 1 || recs[0].GetCause() != journal.CauseDrift || gnmipath.String(recs[0].GetValue().GetPath()) != descPath("eth0") {
		t.Errorf("out of sync: %v", recs)
	}
	if st := r.a.Status(); st.SetsRefused == 0 {
		t.Errorf("status %+v: the refusal is not counted", st)
	}
}
