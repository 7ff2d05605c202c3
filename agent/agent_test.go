package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func wantLeaf(t *testing.T, r *rig, p string, want *gpb.TypedValue) {
	t.Helper()
	got, ok := r.deviceLeaf(p)
	if !ok || !proto.Equal(got, want) {
		t.Errorf("device %s = %v (present %v), want %v", p, got, ok, want)
	}
}

func TestAppliesInIndexOrder(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	for n := range 5 {
		r.propose(updateOp(t, descPath("eth0"), str(strings.Repeat("x", n+1))))
	}
	i2 := r.propose(updateOp(t, mtuPath("eth0"), uintv(9000)))
	r.waitApplied(i2)
	for i := uint64(1); i <= i2; i++ {
		if p := r.waitApplied(i); p.GetChange().GetApply() != journal.StatusComplete {
			t.Errorf("proposal %d apply %v, want COMPLETE", i, p.GetChange().GetApply())
		}
	}
	wantLeaf(t, r, descPath("eth0"), str("xxxxx")) // the last of the five writes wins: applied in order
	wantLeaf(t, r, mtuPath("eth0"), uintv(9000))
	if c := r.config(); c.GetApplied().GetIndex() != i2 || c.GetCommitted().GetIndex() != i2 {
		t.Errorf("committed/applied index = %d/%d, want %d", c.GetCommitted().GetIndex(), c.GetApplied().GetIndex(), i2)
	}
	r.waitQuiescent()
	r.verify()
}

// No Set fails for another's failure (issue 34): the device's refusal
// fails the refused proposal only; the ones committed on top of it are
// re-based (journal.FailApply), committed again over what the device
// holds and applied as they would be directly, the one writing the same
// leaf included.
func TestRejectFailsProposalAndRebasesTheLaterOnes(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	base := r.propose(updateOp(t, descPath("eth0"), str("base")))
	r.waitApplied(base)

	// The device takes a while, then rejects a Set whose value does not
	// fit the schema: by then the two proposals after it are committed on
	// top of it (and may have gone out with it in one batch, which the
	// agent then splits to find the offending one).
	r.dev.SetDelay(300 * time.Millisecond)
	bad := r.propose(updateOp(t, mtuPath("eth0"), str("rejected")))
	later1 := r.propose(updateOp(t, mtuPath("eth0"), uintv(1500)))
	later2 := r.propose(updateOp(t, descPath("eth1"), str("later")))
	r.wait(later2, func(p *journal.Proposal) bool { return p.GetChange().GetCommit() == journal.StatusComplete })

	p := r.waitApplied(bad)
	if got := p.GetChange().GetApply(); got != journal.StatusFailed {
		t.Fatalf("rejected proposal apply = %v, want FAILED", got)
	}
	if e := p.GetChange().GetError(); codes.Code(e.GetCode()) != codes.InvalidArgument || !strings.Contains(e.GetMessage(), "rejected") {
		t.Errorf("recorded error = %v, want the device's InvalidArgument and message", e)
	}
	// later1 writes the failed proposal's leaf, later2 another: both
	// applied, as they would be had the rejected one never been sent.
	for _, i := range []uint64{later1, later2} {
		p := r.waitApplied(i)
		if ch := p.GetChange(); ch.GetApply() != journal.StatusComplete || ch.GetCommit() != journal.StatusComplete ||
			ch.GetAbortedBy() != 0 || ch.GetError() != nil {
			t.Errorf("proposal %d after the rejected one: commit %v, apply %v, error %v; want applied",
				i, ch.GetCommit(), ch.GetApply(), ch.GetError())
		}
	}
	// later1's rollback puts back what the device held before it: no MTU
	// (the rejected value never reached it).
	p = r.waitApplied(later1)
	if undo := p.GetRollback().GetValues(); len(undo) != 1 || !undo[0].GetDeleted() || undo[0].GetIndex() != 0 ||
		gnmipath.String(undo[0].GetPath()) != mtuPath("eth0") {
		t.Errorf("proposal %d rollback values %v, want the MTU deleted (absent before it)", later1, undo)
	}
	if got := p.GetRollback().GetIndex(); got != base {
		t.Errorf("proposal %d rollback index %d, want %d (the rejected one is skipped)", later1, got, base)
	}
	r.dev.ClearFaults()
	wantLeaf(t, r, descPath("eth0"), str("base"))
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	wantLeaf(t, r, descPath("eth1"), str("later"))
	if c := r.config(); c.GetCommitted().GetIndex() != later2 || c.GetApplied().GetIndex() != later2 {
		t.Errorf("committed/applied index = %d/%d, want %d", c.GetCommitted().GetIndex(), c.GetApplied().GetIndex(), later2)
	}
	// Work continues after the failure.
	next := r.propose(updateOp(t, descPath("eth0"), str("after")))
	if p := r.waitApplied(next); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal after the failure: apply %v", p.GetChange().GetApply())
	}
	wantLeaf(t, r, descPath("eth0"), str("after"))
	r.waitQuiescent()
	if rep := r.verify(); rep.Counts.Failures != 1 {
		t.Errorf("trace counts %v, want one failed apply", rep.Counts)
	}
}

// A proposal queued behind one the device refuses, writing the same leaf,
// ends applied with its value on the device (issue 34 point 4): here both
// were committed by an earlier run that crashed while sending the first.
func TestRefusedSetDoesNotFailTheNextOneOnTheSameLeaf(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	base := r.propose(updateOp(t, descPath("eth0"), str("base")))
	r.waitApplied(base)
	var first, second uint64
	r.offline(func(j *journal.Journal) {
		first = startedOffline(t, j, updateOp(t, mtuPath("eth0"), str("not a number")))
		p, err := j.ProposeChange(context.Background(), []*journal.Op{updateOp(t, mtuPath("eth0"), uintv(9000))})
		if err != nil {
			t.Fatal(err)
		}
		second = p.GetIndex()
		if _, _, err := j.CommitChange(context.Background(), second); err != nil {
			t.Fatal(err)
		}
	})
	if p := r.waitApplied(first); p.GetChange().GetApply() != journal.StatusFailed {
		t.Fatalf("proposal %d (refused): apply %v, want FAILED", first, p.GetChange().GetApply())
	}
	p := r.waitApplied(second)
	if ch := p.GetChange(); ch.GetApply() != journal.StatusComplete || ch.GetError() != nil {
		t.Fatalf("proposal %d (same leaf, queued behind the refused one): apply %v, error %v; want applied",
			second, ch.GetApply(), ch.GetError())
	}
	wantLeaf(t, r, mtuPath("eth0"), uintv(9000))
	r.waitQuiescent()
	r.verify()
}

func TestHangThenDisconnectReappliesAfterReconnect(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	first := r.propose(updateOp(t, descPath("eth0"), str("first")))
	r.waitApplied(first)
	term := r.a.Status().Term

	r.dev.HangNextSet()
	sets := r.dev.SetCount()
	hung := r.propose(updateOp(t, descPath("eth0"), str("hung")))
	r.wait(hung, func(p *journal.Proposal) bool { return p.GetChange().GetApply() == journal.StatusInProgress })
	r.eventually("the Set to reach the device", func() bool { return r.dev.SetCount() > sets })
	r.dev.DropConnections()

	p := r.waitApplied(hung)
	if got := p.GetChange().GetApply(); got != journal.StatusComplete {
		t.Fatalf("hung proposal apply = %v, want COMPLETE after reconnect", got)
	}
	if now := r.config().GetApplied().GetTerm(); now <= term {
		t.Errorf("applied term = %d, want a term after %d", now, term)
	}
	wantLeaf(t, r, descPath("eth0"), str("hung"))
	r.waitQuiescent()
	r.verify()
}

func TestDeviceRestartIsRepushedBeforeNextApply(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	a := r.propose(updateOp(t, descPath("eth0"), str("kept")), updateOp(t, mtuPath("eth0"), uintv(1400)))
	b := r.propose(updateOp(t, descPath("eth1"), str("also kept")))
	c := r.propose(deleteOp(t, mtuPath("eth0")))
	r.waitApplied(c)
	_, _ = a, b
	term := r.a.Status().Term
	sets := r.dev.SetCount()

	r.restartDevice()
	if leaves, _ := r.dev.ConfigLeaves(); len(leaves) != 0 {
		t.Fatalf("restarted device is not empty: %v", leaves)
	}
	// Healed without any new proposal.
	r.eventually("re-push after the device restart", func() bool {
		v, ok := r.deviceLeaf(descPath("eth1"))
		return ok && proto.Equal(v, str("also kept"))
	})
	wantLeaf(t, r, descPath("eth0"), str("kept"))
	if _, ok := r.deviceLeaf(mtuPath("eth0")); ok {
		t.Error("re-push brought back a deleted leaf")
	}
	r.waitQuiescent()
	// The two descriptions, the mtu's tombstone, and the two interfaces'
	// entries.
	if st := r.a.Status(); st.Term <= term || st.LastRepushValues != 5 {
		t.Errorf("status after restart: %+v, want a new term past %d and a re-push of 5 values", st, term)
	}
	if got := r.dev.SetCount() - sets; got != 1 {
		t.Errorf("re-push took %d Sets, want 1 (nothing in it overlaps)", got)
	}
	d := r.propose(updateOp(t, descPath("eth2"), str("new")))
	r.waitApplied(d)
	wantLeaf(t, r, descPath("eth2"), str("new"))
	r.waitQuiescent()
	r.verify() // Term property: every apply ran after the re-push of its term
}

func TestDeviceRestartDetectedQuickly(t *testing.T) {
	for _, watchState := range []bool{false, true} {
		name := map[bool]string{false: "liveness stream", true: "connection state"}[watchState]
		t.Run(name, func(t *testing.T) {
			r := newRig(t, testbed.Options{}, agent.Options{WatchConnectionState: watchState})
			r.waitQuiescent()
			r.dev.Stop()
			start := time.Now()
			for r.a.Status().Connected {
				if time.Since(start) > time.Second {
					t.Fatal("device stop not detected within 1 s")
				}
				time.Sleep(time.Millisecond)
			}
			t.Logf("break detected after %v", time.Since(start))
			if err := r.dev.Start(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			i := r.propose(updateOp(t, descPath("eth0"), str("back")))
			r.waitApplied(i)
			r.waitQuiescent()
			r.verify()
		})
	}
}

func TestPersistentDeviceIsNotRepushed(t *testing.T) {
	r := newRig(t, testbed.Options{Persistent: true}, agent.Options{Persistent: true})
	i := r.propose(updateOp(t, descPath("eth0"), str("persisted")))
	r.waitApplied(i)
	r.waitQuiescent()
	term := r.config().GetApplied().GetTerm()
	sets := r.dev.SetCount()

	r.restartDevice()
	r.eventually("the new term to be adopted", func() bool { return r.config().GetApplied().GetTerm() > term })
	if got := r.dev.SetCount(); got != sets {
		t.Errorf("device received %d Sets on reconnect, want none (persistent device)", got-sets)
	}
	wantLeaf(t, r, descPath("eth0"), str("persisted"))
	j := r.propose(updateOp(t, descPath("eth0"), str("next")))
	r.waitApplied(j)
	if got := r.dev.SetCount(); got != sets+1 {
		t.Errorf("device received %d Sets, want exactly the one new proposal", got-sets)
	}
	r.waitQuiescent()
	r.verify()
}

func TestStaleTermNeverApplies(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitQuiescent()
	old := r.a.Status().Term
	// Another incarnation takes a newer term behind this agent's back.
	m, err := r.j.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := r.propose(updateOp(t, descPath("eth0"), str("fenced")))
	p := r.waitApplied(i)
	if p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("apply = %v", p.GetChange().GetApply())
	}
	if got := r.config().GetApplied().GetTerm(); got <= m.GetTerm() {
		t.Errorf("applied under term %d; the connection of term %d was superseded by %d and must not apply", got, old, m.GetTerm())
	}
	r.waitQuiescent()
	r.verify() // Term property: no apply line under a term other than the current one
}

func TestSidecarRestartRepushesAndResumes(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	a := r.propose(updateOp(t, descPath("eth0"), str("before restart")))
	r.waitApplied(a)
	r.dev.HangNextSet()
	sets := r.dev.SetCount()
	b := r.propose(updateOp(t, descPath("eth1"), str("in flight")))
	r.wait(b, func(p *journal.Proposal) bool { return p.GetChange().GetApply() == journal.StatusInProgress })
	r.eventually("the Set to reach the device", func() bool { return r.dev.SetCount() > sets })
	r.restartSidecar() // the hung Set is abandoned; the journal keeps it in progress
	p := r.waitApplied(b)
	if p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("in-flight proposal after restart: %v", p.GetChange().GetApply())
	}
	wantLeaf(t, r, descPath("eth1"), str("in flight"))
	wantLeaf(t, r, descPath("eth0"), str("before restart"))
	r.waitQuiescent()
	r.verify()
}

func TestRollbacksNewestFirst(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	a := r.propose(updateOp(t, descPath("eth0"), str("one")))
	b := r.propose(updateOp(t, descPath("eth0"), str("two")), updateOp(t, mtuPath("eth0"), uintv(1300)))
	r.waitApplied(b)

	if err := r.rollback(a); err == nil || !strings.Contains(err.Error(), "roll back proposal 2 first") {
		t.Fatalf("rollback of an older change: %v, want a refusal naming proposal %d", err, b)
	}
	if err := r.rollback(b); err != nil {
		t.Fatal(err)
	}
	r.waitApplied(b)
	wantLeaf(t, r, descPath("eth0"), str("one"))
	if _, ok := r.deviceLeaf(mtuPath("eth0")); ok {
		t.Error("rollback left a leaf the change created")
	}
	if err := r.rollback(b); err == nil || !strings.Contains(err.Error(), "already rolled back") {
		t.Errorf("rollback of a rollback: %v, want a refusal", err)
	}
	if err := r.rollback(a); err != nil {
		t.Fatal(err)
	}
	r.waitApplied(a)
	if _, ok := r.deviceLeaf(descPath("eth0")); ok {
		t.Error("rolling back the first change left its leaf")
	}
	r.waitQuiescent()
	r.verify()
}

func TestRolledBackChangeSurvivesDeviceRestart(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	a := r.propose(updateOp(t, descPath("eth0"), str("one")))
	b := r.propose(updateOp(t, descPath("eth0"), str("two")))
	r.waitApplied(b)
	if err := r.rollback(b); err != nil {
		t.Fatal(err)
	}
	r.waitApplied(b)
	r.restartDevice()
	r.eventually("re-push", func() bool {
		v, ok := r.deviceLeaf(descPath("eth0"))
		return ok && proto.Equal(v, str("one"))
	})
	_ = a
	r.waitQuiescent()
	r.verify()
}

func TestFencingStopsWritingWhenAnotherIsMaster(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{Fencing: true})
	i := r.propose(updateOp(t, descPath("eth0"), str("ours")))
	r.waitApplied(i)
	term := r.config().GetApplied().GetTerm()
	id, ok := r.dev.ElectionID()
	if !ok || id.High != term || id.Low == 0 {
		t.Fatalf("device election id = %v (%v), want {high: term %d, low: the journal's incarnation}", id, ok, term)
	}

	// Another client becomes master with a higher election id: the
	// agent's next Set is refused for arbitration, and it stops writing
	// instead of out-bidding the other (which would make the two take
	// turns on the device).
	conn, err := grpc.NewClient(r.dev.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	other := &gnmi_ext.Uint128{High: term + 100}
	_, err = gpb.NewGNMIClient(conn).Set(context.Background(), &gpb.SetRequest{
		Update: []*gpb.Update{{Path: sidecartest.Path(t, descPath("eth0")), Val: str("theirs")}},
		Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_MasterArbitration{
			MasterArbitration: &gnmi_ext.MasterArbitration{ElectionId: other}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	j := r.propose(updateOp(t, descPath("eth0"), str("ours again")))
	waited := make(chan error, 1)
	go func() {
		_, err := r.a.WaitChange(context.Background(), j, true)
		waited <- err
	}()
	r.eventually("the agent to report itself fenced", func() bool { return r.a.Status().Fenced })
	select {
	case err := <-waited:
		if !errors.Is(err, agent.ErrFenced) {
			t.Errorf("the client waiting for proposal %d got %v, want %v", j, err, agent.ErrFenced)
		}
	case <-time.After(time.Minute):
		t.Errorf("the client waiting for proposal %d is still waiting a minute after the agent was fenced", j)
	}
	if st := r.a.Status(); !strings.Contains(st.FencedBy, "election") || st.Connected {
		t.Errorf("status %+v: want fenced by the device's arbitration answer, and disconnected", st)
	}
	sets := r.dev.SetCount()
	time.Sleep(300 * time.Millisecond) // several backoff periods of the rig
	if got := r.dev.SetCount(); got != sets {
		t.Errorf("a fenced agent sent %d more Sets", got-sets)
	}
	if id, _ := r.dev.ElectionID(); id.High != other.GetHigh() {
		t.Errorf("device election id = %v, want the other master's %v: the agent must not raise its own", id, other)
	}
	wantLeaf(t, r, descPath("eth0"), str("theirs"))
	// The proposal is not failed: it stays journaled, in progress.
	if p, _ := r.j.Proposal(context.Background(), j); journal.Finished(p.GetChange().GetApply()) {
		t.Errorf("proposal %d apply = %v, want it left unfinished", j, p.GetChange().GetApply())
	}
}

func TestUnreachableDeviceThenUp(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitQuiescent()
	r.dev.Stop()
	r.eventually("disconnect", func() bool { return !r.a.Status().Connected })
	i := r.propose(updateOp(t, descPath("eth0"), str("queued")))
	time.Sleep(50 * time.Millisecond)
	if p, _ := r.j.Proposal(context.Background(), i); p.GetChange().GetApply() != journal.StatusPending {
		t.Errorf("applied while the device was down: %v", p.GetChange().GetApply())
	}
	if st := r.a.Status(); st.LastError == "" {
		t.Error("status shows no error while the device is unreachable")
	}
	if err := r.dev.Start(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	r.waitApplied(i)
	wantLeaf(t, r, descPath("eth0"), str("queued"))
	r.waitQuiescent()
	r.verify()
}

// A JSON value and a later delete under it: the journal records the JSON
// leaf by leaf, the delete as the description's tombstone, so the re-push
// neither brings the description back nor needs to split.
func TestRepushKeepsWriteOrderOfOverlappingValues(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	cfgPath := "/interfaces/interface[name=eth0]/config"
	blob := &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(`{"name":"eth0","description":"from json","mtu":1500}`)}}
	a := r.propose(&journal.Op{Kind: journal.OpUpdate, Path: sidecartest.Path(t, cfgPath), Values: []*journal.Leaf{{Path: sidecartest.Path(t, cfgPath), Value: blob}}})
	b := r.propose(deleteOp(t, descPath("eth0")))
	c := r.propose(updateOp(t, descPath("eth1"), str("other")))
	for _, i := range []uint64{a, b, c} {
		if p := r.waitApplied(i); p.GetChange().GetApply() != journal.StatusComplete {
			t.Fatalf("proposal %d: apply %v: %v", i, p.GetChange().GetApply(), p.GetChange().GetError())
		}
	}
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	if _, ok := r.deviceLeaf(descPath("eth0")); ok {
		t.Fatal("delete did not remove the description")
	}
	sets := r.dev.SetCount()
	r.restartDevice()
	r.eventually("re-push", func() bool {
		v, ok := r.deviceLeaf(descPath("eth1"))
		return ok && proto.Equal(v, str("other"))
	})
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	if v, ok := r.deviceLeaf(descPath("eth0")); ok {
		t.Errorf("re-push brought back the deleted description %v: the delete must be replayed after the JSON value", v)
	}
	if got := r.dev.SetCount() - sets; got != 1 {
		t.Errorf("re-push took %d Sets, want 1 (nothing overlaps: the JSON is recorded leaf by leaf)", got)
	}
	r.waitQuiescent()
	r.verify()
}

// An earlier run sent a proposal and crashed before the device's answer was
// journaled; the device applied it. Re-sent on restart, the device now
// rejects it: the proposal fails, and what the first attempt wrote must not
// stay on the device.
func TestRejectedRetryRestoresWhatAnEarlierAttemptWrote(t *testing.T) {
	// A persistent device: no re-push, so the re-sent proposal is the first
	// Set after the restart.
	r := newRig(t, testbed.Options{Persistent: true}, agent.Options{Persistent: true})
	base := r.propose(updateOp(t, descPath("eth0"), str("base")))
	r.waitApplied(base)
	ctx := context.Background()
	var i uint64
	r.offline(func(j *journal.Journal) {
		i = startedOffline(t, j, updateOp(t, descPath("eth0"), str("uncertain")), updateOp(t, mtuPath("eth1"), uintv(1500)))
		// The crashed run's Set reached the device.
		conn, err := grpc.NewClient(r.dev.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := gpb.NewGNMIClient(conn).Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{
			{Path: sidecartest.Path(t, descPath("eth0")), Val: str("uncertain")},
			{Path: sidecartest.Path(t, mtuPath("eth1")), Val: uintv(1500)},
		}}); err != nil {
			t.Fatal(err)
		}
		r.dev.RejectNextSets(1, codes.FailedPrecondition)
	})
	p := r.waitApplied(i)
	if p.GetChange().GetApply() != journal.StatusFailed {
		t.Fatalf("apply = %v, want FAILED", p.GetChange().GetApply())
	}
	wantLeaf(t, r, descPath("eth0"), str("base"))
	if v, ok := r.deviceLeaf(mtuPath("eth1")); ok {
		t.Errorf("the first attempt's %s = %v is still on the device", mtuPath("eth1"), v)
	}
	r.waitQuiescent()
	r.verify()
}

func TestTooLargeToCommitFailsAndWorkGoesOn(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	// 1 MiB memtables that may not grow: about 150 KB per transaction.
	r.stop()
	r.maxMemTable = 1 << 20
	r.start()
	huge := r.propose(manyDescriptions(t, 5000))
	next := r.propose(updateOp(t, descPath("eth0"), str("after the huge one")))
	p := r.waitApplied(huge)
	if p.GetChange().GetCommit() != journal.StatusFailed || codes.Code(p.GetChange().GetError().GetCode()) != codes.ResourceExhausted {
		t.Fatalf("huge proposal: commit %v, error %v; want FAILED with ResourceExhausted", p.GetChange().GetCommit(), p.GetChange().GetError())
	}
	if p.GetChange().GetApply() != journal.StatusAborted {
		t.Errorf("huge proposal apply = %v, want ABORTED", p.GetChange().GetApply())
	}
	if p := r.waitApplied(next); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal after the huge one: apply %v", p.GetChange().GetApply())
	}
	wantLeaf(t, r, descPath("eth0"), str("after the huge one"))
	r.waitQuiescent()
	r.verify()
}

// manyDescriptions is an update of n interfaces' descriptions.
func manyDescriptions(t *testing.T, n int) *journal.Op {
	var leaves []*journal.Leaf
	for k := range n {
		leaves = append(leaves, &journal.Leaf{Path: sidecartest.Path(t, descPath(fmt.Sprintf("eth%d", k))), Value: str(fmt.Sprintf("d%d", k))})
	}
	return &journal.Op{Kind: journal.OpUpdate, Path: sidecartest.Path(t, "/interfaces"), Values: leaves}
}

// A proposal too large for one transaction of the journal's steady
// memtable (1 MiB here) is committed and applied all the same: the
// journal grows its memtable for it.
func TestLargeProposalIsApplied(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	huge := r.propose(manyDescriptions(t, 1500)) // about 4 times what one transaction holds
	next := r.propose(updateOp(t, descPath("eth0"), str("after the large one")))
	if p := r.waitApplied(huge); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("large proposal: commit %v, apply %v, error %v; want applied", p.GetChange().GetCommit(), p.GetChange().GetApply(), p.GetChange().GetError())
	}
	if p := r.waitApplied(next); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal after the large one: apply %v", p.GetChange().GetApply())
	}
	wantLeaf(t, r, descPath("eth1499"), str("d1499"))
	wantLeaf(t, r, descPath("eth0"), str("after the large one"))
	r.waitQuiescent()
	r.verify()
}

// proposeThroughAgent journals a Set the way the proxy does, through
// Agent.ProposeChange.
func proposeThroughAgent(t *testing.T, r *rig, ops ...*journal.Op) uint64 {
	t.Helper()
	p, err := r.a.ProposeChange(context.Background(), journal.Sender{}, ops)
	if err != nil {
		t.Fatalf("Agent.ProposeChange: %v", err)
	}
	return p.GetIndex()
}

func TestProposalsReadyTogetherGoInOneSet(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitApplied(proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("base"))))
	before := r.dev.SetCount()

	// While the device takes its time with the first Set, ten more
	// proposals are committed: they go out together once it answers.
	r.dev.SetDelay(300 * time.Millisecond)
	first := proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("first")))
	var last uint64
	for n := range 10 {
		last = proposeThroughAgent(t, r, updateOp(t, mtuPath(fmt.Sprintf("eth%d", n)), uintv(uint64(1500+n))))
	}
	for i := first; i <= last; i++ {
		if p := r.waitApplied(i); p.GetChange().GetApply() != journal.StatusComplete {
			t.Errorf("proposal %d apply %v, want COMPLETE", i, p.GetChange().GetApply())
		}
	}
	for n := range 10 {
		wantLeaf(t, r, mtuPath(fmt.Sprintf("eth%d", n)), uintv(uint64(1500+n)))
	}
	if sets := r.dev.SetCount() - before; sets > 3 {
		t.Errorf("the device received %d Sets for %d proposals ready together, want at most 3", sets, last-first+1)
	}
	r.dev.SetDelay(0)
	r.waitQuiescent()
	r.verify()
}

func TestRejectedBatchIsolatesTheOffendingProposal(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitApplied(proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("base"))))

	r.dev.SetDelay(300 * time.Millisecond)
	slow := proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("slow")))
	good := proposeThroughAgent(t, r, updateOp(t, mtuPath("eth1"), uintv(1500)))
	bad := proposeThroughAgent(t, r, updateOp(t, mtuPath("eth2"), str("not a number")))
	after := proposeThroughAgent(t, r, updateOp(t, descPath("eth3"), str("after")))
	r.waitApplied(after)
	r.dev.SetDelay(0)

	for _, tc := range []struct {
		i    uint64
		want journal.Status
	}{{slow, journal.StatusComplete}, {good, journal.StatusComplete}, {bad, journal.StatusFailed}, {after, journal.StatusComplete}} {
		if got := r.waitApplied(tc.i).GetChange().GetApply(); got != tc.want {
			t.Errorf("proposal %d apply %v, want %v", tc.i, got, tc.want)
		}
	}
	if e := r.waitApplied(bad).GetChange().GetError(); codes.Code(e.GetCode()) != codes.InvalidArgument {
		t.Errorf("the offending proposal's error = %v, want the device's InvalidArgument", e)
	}
	wantLeaf(t, r, mtuPath("eth1"), uintv(1500))
	// Independent of the offending one: applied.
	wantLeaf(t, r, descPath("eth3"), str("after"))
	if v, ok := r.deviceLeaf(mtuPath("eth2")); ok {
		t.Errorf("the offending proposal's value is on the device: %v", v)
	}
	r.waitQuiescent()
	r.verify()
}

func TestRepushSetsHoldAtMostMaxSetValues(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{MaxSetValues: 10})
	var ops []*journal.Op
	for n := range 35 {
		ops = append(ops, updateOp(t, descPath(fmt.Sprintf("eth%d", n)), str("kept")))
	}
	r.waitApplied(r.propose(ops...))
	sets := r.dev.SetCount()
	repushes := r.a.Status().Repushes

	r.restartDevice()
	r.eventually("re-push after the device restart", func() bool { return r.a.Status().Repushes > repushes })
	// Each interface's description and entry (a marker the description
	// creates anyway: not sent, not counted against MaxSetValues).
	if st := r.a.Status(); st.LastRepushValues != 70 {
		t.Errorf("re-pushed %d values, want 70", st.LastRepushValues)
	}
	if got := r.dev.SetCount() - sets; got != 4 {
		t.Errorf("re-push of 35 values took %d Sets, want 4 of at most 10 values", got)
	}
	wantLeaf(t, r, descPath("eth34"), str("kept"))
	r.waitQuiescent()
	r.verify()
}

// TestSequentialSetsShareTransactions: a client sending Sets one after the
// other, as the proxy serves them (Agent.ProposeChange, then WaitChange for
// the device's answer), costs one journal transaction per Set, not two: the
// record of the device's answer waits for the next proposal and shares its
// fsync. After Settle the journal records every answered Set as applied.
func TestSequentialSetsShareTransactions(t *testing.T) {
	// A linger no scheduling delay outlasts: every answer's record waits
	// for the next proposal.
	r := newRig(t, testbed.Options{}, agent.Options{CompletionLinger: time.Second})
	r.waitApplied(proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("base"))))
	ctx := context.Background()
	if err := r.a.Settle(ctx); err != nil {
		t.Fatal(err)
	}

	const sets = 60
	before := r.j.Transactions()
	var last uint64
	for n := range sets {
		last = proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str(fmt.Sprint(n))))
		p, err := r.a.WaitChange(ctx, last, true)
		if err != nil {
			t.Fatal(err)
		}
		if p.GetChange().GetApply() != journal.StatusComplete {
			t.Fatalf("proposal %d answered with apply %v, want COMPLETE", last, p.GetChange().GetApply())
		}
	}
	// One each (the last answer's record still waits); without sharing,
	// two each.
	if n := r.j.Transactions() - before; n > sets+2 {
		t.Errorf("%d sequential Sets took %d journal transactions, want one each (two each without sharing)", sets, n)
	}
	if err := r.a.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := r.j.Proposal(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetChange().GetApply() != journal.StatusComplete {
		t.Errorf("after Settle, the journal records proposal %d with apply %v, want COMPLETE", last, p.GetChange().GetApply())
	}
	wantLeaf(t, r, descPath("eth0"), str(fmt.Sprint(sets-1)))
	r.waitQuiescent()
	r.verify()
}

// An earlier run sent a proposal, the device took it, and the run died
// before recording the device's answer: its client may have been answered
// already (the answer is recorded after it). The re-push on restart must
// not put the older value back on the device, even for a moment: the
// device never goes back behind a Set its client saw succeed.
func TestRepushKeepsWhatTheDeviceMayHaveTaken(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{})
	r.waitApplied(r.propose(updateOp(t, descPath("eth0"), str("base")), updateOp(t, mtuPath("eth0"), uintv(1500))))
	ctx := context.Background()
	var i uint64
	var seen func() []string
	r.offline(func(j *journal.Journal) {
		i = startedOffline(t, j, updateOp(t, descPath("eth0"), str("answered")))
		c := sidecartest.Dial(t, r.dev.Addr())
		if _, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{
			{Path: sidecartest.Path(t, descPath("eth0")), Val: str("answered")},
		}}); err != nil {
			t.Fatal(err)
		}
		seen = watchLeaf(t, c, descPath("eth0"))
	})
	if p := r.waitApplied(i); p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal %d apply %v after the restart, want COMPLETE", i, p.GetChange().GetApply())
	}
	r.waitQuiescent()
	if st := r.a.Status(); st.Repushes == 0 {
		t.Fatal("the restart did not re-push")
	}
	for _, v := range seen() {
		if v != "answered" {
			t.Errorf("the device went back to description %q after the restart (values seen: %q)", v, seen())
			break
		}
	}
	wantLeaf(t, r, descPath("eth0"), str("answered"))
	wantLeaf(t, r, mtuPath("eth0"), uintv(1500))
	r.verify()
}

// watchLeaf subscribes (STREAM, ON_CHANGE) to the device's leaf at path and
// returns a function listing the values it reported since the subscription
// synced.
func watchLeaf(t *testing.T, c gpb.GNMIClient, path string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Subscribe(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	err = stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode:         gpb.SubscriptionList_STREAM,
		Subscription: []*gpb.Subscription{{Path: sidecartest.Path(t, path), Mode: gpb.SubscriptionMode_ON_CHANGE}},
	}}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var values []string
	synced := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		inSync := false
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			if resp.GetSyncResponse() {
				inSync = true
				close(synced)
				continue
			}
			if !inSync {
				continue
			}
			mu.Lock()
			for _, u := range resp.GetUpdate().GetUpdate() {
				values = append(values, u.GetVal().GetStringVal())
			}
			for range resp.GetUpdate().GetDelete() {
				values = append(values, "<deleted>")
			}
			mu.Unlock()
		}
	}()
	select {
	case <-synced:
	case <-time.After(20 * time.Second):
		t.Fatal("no sync_response from the device subscription")
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), values...)
	}
}

// A batch the device does not answer within ApplyTimeout (a device that
// takes long per value, or hangs) would time out again if sent whole: after
// the re-push its proposals go one at a time.
func TestBatchTimedOutGoesOneAtATime(t *testing.T) {
	r := newRig(t, testbed.Options{}, agent.Options{ApplyTimeout: 500 * time.Millisecond})
	r.waitApplied(proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("base"))))

	// While the device works on the first Set, five proposals are
	// committed: they go out together, and the device hangs on them.
	r.dev.SetDelay(200 * time.Millisecond)
	arrived := r.dev.SetCount()
	first := proposeThroughAgent(t, r, updateOp(t, descPath("eth0"), str("first")))
	r.eventually("the first Set at the device", func() bool { return r.dev.SetCount() > arrived })
	r.dev.HangNextSet()
	var last uint64
	for n := range 5 {
		last = proposeThroughAgent(t, r, updateOp(t, mtuPath(fmt.Sprintf("eth%d", n)), uintv(uint64(1500+n))))
	}
	r.waitApplied(first)
	r.dev.SetDelay(0)
	before := r.dev.SetCount()
	for i := first + 1; i <= last; i++ {
		if p := r.waitApplied(i); p.GetChange().GetApply() != journal.StatusComplete {
			t.Errorf("proposal %d apply %v, want COMPLETE", i, p.GetChange().GetApply())
		}
	}
	// The hung batch, the re-push, and then each proposal alone.
	if sets := r.dev.SetCount() - before; sets < 5 {
		t.Errorf("the device received %d Sets after the first, want the 5 timed-out proposals sent one at a time", sets)
	}
	for n := range 5 {
		wantLeaf(t, r, mtuPath(fmt.Sprintf("eth%d", n)), uintv(uint64(1500+n)))
	}
	r.waitQuiescent()
	r.verify()
}
