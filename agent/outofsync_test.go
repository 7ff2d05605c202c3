package agent_test

import (
	"context"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// outOfSyncPaths returns the paths of the journal's out-of-sync records.
func outOfSyncPaths(r *rig) []string {
	var out []string
	for _, rec := range r.outOfSync() {
		out = append(out, gnmipath.String(rec.GetValue().GetPath()))
	}
	return out
}

// A rollback the device refuses for good ends (rollback apply FAILED with
// the device's error), its refused value is out of sync, the values the
// device took are on it, and later proposals go on (docs/design.md "never stuck").
func TestRefusedRollbackEndsAndWorkGoesOn(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.propose(updateOp(t, descPath("eth0"), str("one")))
	b := r.propose(updateOp(t, descPath("eth0"), str("two")), updateOp(t, mtuPath("eth0"), uintv(1300)))
	r.waitApplied(b)
	if err := r.dev.RefuseSetsAt(descPath("eth0"), codes.InvalidArgument); err != nil {
		t.Fatal(err)
	}
	if err := r.rollback(b); err != nil {
		t.Fatal(err)
	}
	p := r.waitApplied(b)
	rb := p.GetRollback()
	if rb.GetApply() != journal.StatusFailed || codes.Code(rb.GetError().GetCode()) != codes.InvalidArgument {
		t.Fatalf("rollback apply %v, error %v; want FAILED with the device's InvalidArgument", rb.GetApply(), rb.GetError())
	}
	if got := outOfSyncPaths(r); len(got) != 1 || got[0] != descPath("eth0") {
		t.Fatalf("out of sync: %v, want [%s]", got, descPath("eth0"))
	}
	if c := r.config(); c.GetOutOfSync() != 1 || c.GetRollingBack() != 0 {
		t.Errorf("configuration: out_of_sync %d, rolling_back %d; want 1 and 0", c.GetOutOfSync(), c.GetRollingBack())
	}
	// The device took the rest of the rollback: the mtu the change created
	// is gone; it still holds the refused path's old value.
	if _, ok := r.deviceLeaf(mtuPath("eth0")); ok {
		t.Error("the rollback's accepted values did not reach the device")
	}
	wantLeaf(t, r, descPath("eth0"), str("two"))

	// The pipeline is not blocked.
	c := r.propose(updateOp(t, descPath("eth1"), str("after")))
	if p := r.waitApplied(c); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal after the refused rollback: apply %v", p.GetChange().GetApply())
	}
	// Writing the path again, once the device takes it, settles it.
	r.dev.ClearFaults()
	d := r.propose(updateOp(t, descPath("eth0"), str("three")))
	r.waitApplied(d)
	if got := outOfSyncPaths(r); len(got) != 0 {
		t.Errorf("out of sync after the path was written again: %v", got)
	}
	r.waitQuiescent()
	r.verify()
}

// A re-push the device refuses in part does not loop: the refused value is
// narrowed down and marked out of sync, everything else is pushed, the term
// is recorded, and new proposals are applied.
func TestRefusedRepushPushesTheRest(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	var last uint64
	for _, intf := range []string{"eth0", "eth1", "eth2", "eth3"} {
		last = r.propose(updateOp(t, descPath(intf), str("d-"+intf)), updateOp(t, mtuPath(intf), uintv(1400)))
	}
	r.waitApplied(last)
	if err := r.dev.RefuseSetsAt(mtuPath("eth2"), codes.FailedPrecondition); err != nil {
		t.Fatal(err)
	}
	r.restartDevice()
	r.eventually("a re-push that leaves the refused value out of sync", func() bool {
		return r.config().GetOutOfSync() == 1 && r.a.Status().Repushes >= 1
	})
	if got := outOfSyncPaths(r); len(got) != 1 || got[0] != mtuPath("eth2") {
		t.Fatalf("out of sync: %v, want [%s]", got, mtuPath("eth2"))
	}
	for _, intf := range []string{"eth0", "eth1", "eth2", "eth3"} {
		wantLeaf(t, r, descPath(intf), str("d-"+intf))
		if intf != "eth2" {
			wantLeaf(t, r, mtuPath(intf), uintv(1400))
		}
	}
	if _, ok := r.deviceLeaf(mtuPath("eth2")); ok {
		t.Error("the refused value is on the device")
	}
	e := r.propose(updateOp(t, descPath("eth4"), str("new")))
	if p := r.waitApplied(e); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal after the refused re-push: apply %v", p.GetChange().GetApply())
	}
	st := r.a.Status()
	if st.SetsRefused == 0 {
		t.Errorf("status counts no refusal: %+v", st)
	}
	// The next re-push, which the device takes whole, settles the path.
	r.dev.ClearFaults()
	r.restartDevice()
	r.eventually("a re-push that settles the path", func() bool { return r.config().GetOutOfSync() == 0 })
	v, ok := r.deviceLeaf(mtuPath("eth2"))
	if !ok || !proto.Equal(v, uintv(1400)) {
		t.Errorf("after the second re-push %s = %v, want 1400", mtuPath("eth2"), v)
	}
	r.waitQuiescent()
	r.verify()
}

// A proposal an earlier run may have sent, then refused, is restored; a
// path the device will not restore is marked out of sync (cause RESTORE)
// and the failure is recorded: nothing blocks.
func TestRefusedRestoreMarksOutOfSync(t *testing.T) {
	r := newRig(t, testbed.Options{Persistent: true}, agent.Options{Persistent: true})
	r.waitApplied(r.propose(updateOp(t, descPath("eth0"), str("base"))))
	var i uint64
	r.offline(func(j *journal.Journal) {
		i = startedOffline(t, j, updateOp(t, descPath("eth0"), str("uncertain")), updateOp(t, mtuPath("eth1"), uintv(1500)))
		// The device now refuses eth0's description: the proposal, and the
		// restore of that path.
		if err := r.dev.RefuseSetsAt(descPath("eth0"), codes.FailedPrecondition); err != nil {
			t.Fatal(err)
		}
	})
	if p := r.waitApplied(i); p.GetChange().GetApply() != journal.StatusFailed {
		t.Fatalf("apply = %v, want FAILED", p.GetChange().GetApply())
	}
	recs := r.outOfSync()
	if len(recs) != 1 || gnmipath.String(recs[0].GetValue().GetPath()) != descPath("eth0") ||
		recs[0].GetCause() != journal.CauseRestore || recs[0].GetProposal() != i {
		t.Fatalf("out of sync: %v, want %s (RESTORE, proposal %d)", recs, descPath("eth0"), i)
	}
	next := r.propose(updateOp(t, descPath("eth2"), str("after")))
	if p := r.waitApplied(next); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal after the refused restore: apply %v", p.GetChange().GetApply())
	}
	r.waitQuiescent()
	r.verify()
}

// What clients send, and a device that keeps refusing: one Set with a
// JSON_IETF Update of a container and a JSON Replace of another, rolled
// back while the device refuses one leaf for good. The rollback's JSON
// objects are split down to that leaf; every other leaf is rolled back.
// A device restart while it still refuses it leaves only that leaf out of
// sync again; once the device takes it, a retry settles it.
func TestRefusedLeafInsideJSONRollbackAndRepush(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	eth0 := "/interfaces/interface[name=eth0]/config"
	eth1 := "/interfaces/interface[name=eth1]/config"
	jsonOp := func(kind journal.OpKind, path, text string) *journal.Op {
		v := &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(text)}}
		if kind == journal.OpReplace {
			v = &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(text)}}
		}
		return &journal.Op{Kind: kind, Path: sidecartest.Path(t, path), Values: []*journal.Leaf{{Path: sidecartest.Path(t, path), Value: v}}}
	}
	r.waitApplied(r.propose(jsonOp(journal.OpUpdate, eth0, `{"name":"eth0","description":"d0","mtu":1400}`)))
	change := r.propose(
		jsonOp(journal.OpUpdate, eth0, `{"openconfig-interfaces:description":"d1","mtu":1500}`),
		jsonOp(journal.OpReplace, eth1, `{"name":"eth1","description":"e1","mtu":9000}`),
	)
	r.waitApplied(change)
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	wantLeaf(t, r, descPath("eth1"), str("e1"))

	if err := r.dev.RefuseSetsAt(mtuPath("eth0"), codes.FailedPrecondition); err != nil {
		t.Fatal(err)
	}
	if err := r.rollback(change); err != nil {
		t.Fatal(err)
	}
	if p := r.waitApplied(change); p.GetRollback().GetApply() != journal.StatusFailed {
		t.Fatalf("rollback apply %v, want FAILED", p.GetRollback().GetApply())
	}
	if got := outOfSyncPaths(r); len(got) != 1 || got[0] != mtuPath("eth0") {
		t.Fatalf("out of sync after the rollback: %v, want only %s", got, mtuPath("eth0"))
	}
	wantLeaf(t, r, descPath("eth0"), str("d0")) // from the same JSON object as the refused leaf
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	if v, ok := r.deviceLeaf(descPath("eth1")); ok {
		t.Errorf("the rollback left the replaced container's description %v", v)
	}

	r.restartDevice() // still refusing
	r.eventually("a re-push that leaves only the refused leaf out", func() bool {
		v, ok := r.deviceLeaf(descPath("eth0"))
		return ok && proto.Equal(v, str("d0")) && r.a.Status().Repushes >= 2
	})
	recs := r.outOfSync()
	if len(recs) != 1 || gnmipath.String(recs[0].GetValue().GetPath()) != mtuPath("eth0") || recs[0].GetCause() != journal.CauseRepush {
		t.Fatalf("out of sync after the re-push: %v, want %s (REPUSH)", recs, mtuPath("eth0"))
	}
	if _, ok := r.deviceLeaf(mtuPath("eth0")); ok {
		t.Error("the refused leaf is on the restarted device")
	}

	r.dev.ClearFaults()
	res, err := r.a.RetryOutOfSync(context.Background(), nil, "test")
	if err != nil || len(res.GetSettled()) != 1 || len(res.GetStillOutOfSync()) != 0 {
		t.Fatalf("retry once the device takes it: %v, %v; want 1 settled", res, err)
	}
	wantLeaf(t, r, mtuPath("eth0"), uintv(1400))
	r.waitQuiescent()
	r.verify()
}
