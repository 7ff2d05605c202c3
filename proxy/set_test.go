package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// result is one UpdateResult (or journaled operation), with its full path.
type result struct {
	Path string
	Op   gpb.UpdateResult_Operation
}

func results(resp *gpb.SetResponse) []result {
	var out []result
	for _, r := range resp.GetResponse() {
		out = append(out, result{sidecartest.FullPath(resp.GetPrefix(), r.GetPath()), r.GetOp()})
	}
	return out
}

// journaledOps describes proposal p's operations like UpdateResults.
func journaledOps(p *journal.Proposal) []result {
	ops := map[journal.OpKind]gpb.UpdateResult_Operation{
		journal.OpDelete: gpb.UpdateResult_DELETE, journal.OpReplace: gpb.UpdateResult_REPLACE, journal.OpUpdate: gpb.UpdateResult_UPDATE,
	}
	var out []result
	for _, op := range p.GetChange().GetOps() {
		out = append(out, result{sidecartest.FullPath(nil, op.GetPath()), ops[op.GetKind()]})
	}
	return out
}

func TestSetSync(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T) []*gpb.SetRequest
		req    func(t *testing.T) *gpb.SetRequest
		want   []result
		device map[string]*gpb.TypedValue // leaves after the Set; nil value: absent
	}{{
		name: "update",
		req: func(t *testing.T) *gpb.SetRequest {
			return sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("uplink"))
		},
		want: []result{{descPath, gpb.UpdateResult_UPDATE}},
		device: map[string]*gpb.TypedValue{
			descPath: sidecartest.StringVal("uplink"),
		},
	}, {
		name: "prefix joined with a relative path",
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{
				Prefix: sidecartest.Path(t, "/interfaces/interface[name=eth0]"),
				Update: []*gpb.Update{{Path: sidecartest.Path(t, "config/description"), Val: sidecartest.StringVal("from a prefix")}},
			}
		},
		want:   []result{{descPath, gpb.UpdateResult_UPDATE}},
		device: map[string]*gpb.TypedValue{descPath: sidecartest.StringVal("from a prefix")},
	}, {
		name: "replace",
		setup: func(t *testing.T) []*gpb.SetRequest {
			return []*gpb.SetRequest{sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(1500))}
		},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Replace: []*gpb.Update{{Path: sidecartest.Path(t, mtuPath), Val: sidecartest.UintVal(9000)}}}
		},
		want:   []result{{mtuPath, gpb.UpdateResult_REPLACE}},
		device: map[string]*gpb.TypedValue{mtuPath: sidecartest.UintVal(9000)},
	}, {
		name: "delete",
		setup: func(t *testing.T) []*gpb.SetRequest {
			return []*gpb.SetRequest{sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("doomed"))}
		},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, descPath)}}
		},
		want:   []result{{descPath, gpb.UpdateResult_DELETE}},
		device: map[string]*gpb.TypedValue{descPath: nil},
	}, {
		name: "delete, replace and update in one Set",
		setup: func(t *testing.T) []*gpb.SetRequest {
			return []*gpb.SetRequest{sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("doomed"))}
		},
		req: func(t *testing.T) *gpb.SetRequest {
			return &gpb.SetRequest{
				Delete:  []*gpb.Path{sidecartest.Path(t, descPath)},
				Replace: []*gpb.Update{{Path: sidecartest.Path(t, mtuPath), Val: sidecartest.UintVal(1400)}},
				Update:  []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/interface[name=eth1]/config/description"), Val: sidecartest.StringVal("second port")}},
			}
		},
		want: []result{
			{descPath, gpb.UpdateResult_DELETE},
			{mtuPath, gpb.UpdateResult_REPLACE},
			{"/interfaces/interface[name=eth1]/config/description", gpb.UpdateResult_UPDATE},
		},
		device: map[string]*gpb.TypedValue{
			descPath: nil,
			mtuPath:  sidecartest.UintVal(1400),
			"/interfaces/interface[name=eth1]/config/description": sidecartest.StringVal("second port"),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := sidecartest.Start(t, sidecartest.Options{})
			if tc.setup != nil {
				for _, req := range tc.setup(t) {
					r.MustSet(t, req)
				}
			}
			before := r.LastIndex(t)
			req := tc.req(t)
			resp := r.MustSet(t, req)

			// SYNC: the reply comes after the device has the change.
			for p, v := range tc.device {
				r.WantDeviceLeaf(t, p, v)
			}
			if diff := cmp.Diff(tc.want, results(resp)); diff != "" {
				t.Errorf("UpdateResults (-want +got):\n%s", diff)
			}
			// In the client's terms: its prefix, its paths, in its order.
			clientPaths := slices.Clone(req.GetDelete())
			for _, u := range append(slices.Clone(req.GetReplace()), req.GetUpdate()...) {
				clientPaths = append(clientPaths, u.GetPath())
			}
			if !proto.Equal(resp.GetPrefix(), req.GetPrefix()) {
				t.Errorf("reply prefix %v, want the request's %v", resp.GetPrefix(), req.GetPrefix())
			}
			for k, ur := range resp.GetResponse() {
				if k < len(clientPaths) && !proto.Equal(ur.GetPath(), clientPaths[k]) {
					t.Errorf("UpdateResult %d path %v, want the client's %v", k, ur.GetPath(), clientPaths[k])
				}
			}
			if resp.GetTimestamp() == 0 {
				t.Error("SetResponse has no timestamp")
			}
			ext := sidecartest.ResponseExtension(t, resp)
			wantResponse(t, ext, &sidecarpb.Response{Index: before + 1, Phase: sidecarpb.Phase_PHASE_CHANGE,
				Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE})

			if got := r.LastIndex(t); got != ext.GetIndex() {
				t.Errorf("journal's last index is %d, the reply names proposal %d", got, ext.GetIndex())
			}
			p := r.Proposal(t, ext.GetIndex())
			if diff := cmp.Diff(tc.want, journaledOps(p)); diff != "" {
				t.Errorf("journaled operations (full paths) (-want +got):\n%s", diff)
			}
			if ch := p.GetChange(); ch.GetCommit() != journal.StatusComplete || ch.GetApply() != journal.StatusComplete {
				t.Errorf("journaled proposal: commit %v apply %v, want both complete", ch.GetCommit(), ch.GetApply())
			}
		})
	}
}

func TestSetSyncRepliesWithDeviceTimestamp(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	// The device stamps its change notification with its Set's timestamp.
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	watch, err := sidecartest.Dial(t, r.Target).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Send(streamReq(t, gpb.SubscriptionList_STREAM, descPath)); err != nil {
		t.Fatal(err)
	}
	untilSync(t, watch)

	resp := r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("stamped")))
	n, err := watch.Recv()
	if err != nil {
		t.Fatalf("device change notification: %v", err)
	}
	if got, want := resp.GetTimestamp(), n.GetUpdate().GetTimestamp(); got != want {
		t.Errorf("SetResponse timestamp %d, the device's Set took effect at %d", got, want)
	}
}

func TestSetDeviceRejection(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("kept")))
	before := journalValues(t, r)
	if len(before.Committed) == 0 || len(before.Applied) == 0 {
		t.Fatalf("journal has no values after a Set: %+v", before)
	}

	bad := sidecartest.UpdateRequest(t, mtuPath, sidecartest.StringVal("jumbo")) // mtu is a uint16
	_, deviceErr := sidecartest.Dial(t, r.Target).Set(t.Context(), bad)
	deviceSt := sidecartest.WantStatus(t, deviceErr, codes.InvalidArgument)

	_, err := r.Set(t, bad)
	st := sidecartest.WantStatus(t, err, codes.InvalidArgument)
	if st.Message() != deviceSt.Message() {
		t.Errorf("message %q, the device's is %q", st.Message(), deviceSt.Message())
	}
	wantResponse(t, detailResponse(t, st), &sidecarpb.Response{Index: 2, Phase: sidecarpb.Phase_PHASE_CHANGE,
		Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_FAILED})

	if diff := cmp.Diff(before, journalValues(t, r), protocmp.Transform()); diff != "" {
		t.Errorf("journal values changed by a rejected Set (-before +after):\n%s", diff)
	}
	r.WantDeviceLeaf(t, mtuPath, nil)
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("kept"))

	// The sidecar goes on: the next Set is applied.
	resp := r.MustSet(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(9000)))
	if ext := sidecartest.ResponseExtension(t, resp); ext.GetIndex() != 3 || ext.GetApply() != sidecarpb.Status_STATUS_COMPLETE {
		t.Errorf("Set after the rejection: %v, want proposal 3 applied", ext)
	}
	r.WantDeviceLeaf(t, mtuPath, sidecartest.UintVal(9000))
}

func TestSetAsync(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.Dev.SetDelay(300 * time.Millisecond)
	// With a prefix, so the reply's UpdateResults (the proxy's own, the
	// device has not answered yet) must keep it.
	resp := r.MustSet(t, &gpb.SetRequest{
		Prefix:    sidecartest.Path(t, "/interfaces/interface[name=eth0]"),
		Update:    []*gpb.Update{{Path: sidecartest.Path(t, "config/description"), Val: sidecartest.StringVal("later")}},
		Extension: []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, sidecartest.AsyncMode())},
	})

	ext := sidecartest.ResponseExtension(t, resp)
	if ext.GetPhase() != sidecarpb.Phase_PHASE_CHANGE || ext.GetCommit() != sidecarpb.Status_STATUS_COMPLETE {
		t.Errorf("ASYNC reply %v, want a change with commit complete", ext)
	}
	if a := ext.GetApply(); a != sidecarpb.Status_STATUS_PENDING && a != sidecarpb.Status_STATUS_IN_PROGRESS {
		t.Errorf("ASYNC reply has apply %v; it should not wait for a device that takes 300 ms", a)
	}
	if diff := cmp.Diff([]result{{descPath, gpb.UpdateResult_UPDATE}}, results(resp)); diff != "" {
		t.Errorf("UpdateResults (-want +got):\n%s", diff)
	}

	p := waitProposal(t, r, ext.GetIndex(), agent.Applied)
	if p.GetChange().GetApply() != journal.StatusComplete {
		t.Fatalf("proposal %d apply %v, want complete", p.GetIndex(), p.GetChange().GetApply())
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("later"))
}

func TestSetWhileDisconnected(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("before the outage")))
	r.Dev.Stop()
	r.WaitConnected(t, false)
	before := r.LastIndex(t)

	t.Run("SYNC is refused", func(t *testing.T) {
		for _, req := range []*gpb.SetRequest{
			sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(9000)),
			sidecartest.RollbackRequest(t, 0),
		} {
			_, err := r.Set(t, req)
			sidecartest.WantStatus(t, err, codes.Unavailable, "device "+r.Target, "nothing was journaled")
			if got := r.LastIndex(t); got != before {
				t.Errorf("journal's last index moved from %d to %d", before, got)
			}
			if p := r.Proposal(t, before); p.GetPhase() != journal.PhaseChange {
				t.Errorf("proposal %d is in phase %v after a refused rollback", before, p.GetPhase())
			}
		}
	})

	t.Run("ASYNC is journaled and applied once the device is back", func(t *testing.T) {
		resp := r.MustSet(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(9000), sidecartest.SidecarExtension(t, sidecartest.AsyncMode())))
		wantResponse(t, sidecartest.ResponseExtension(t, resp), &sidecarpb.Response{Index: before + 1, Phase: sidecarpb.Phase_PHASE_CHANGE,
			Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_PENDING})

		if err := r.Dev.Start(t.Context(), ""); err != nil {
			t.Fatalf("restarting the device: %v", err)
		}
		waitProposal(t, r, before+1, agent.Applied)
		r.WantDeviceLeaf(t, mtuPath, sidecartest.UintVal(9000))
		// The device came back empty: the earlier change was re-pushed.
		r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("before the outage"))
	})
}

func TestSetQueueWhenDisconnected(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{QueueWhenDisconnected: true})
	r.Dev.Stop()
	r.WaitConnected(t, false)

	type reply struct {
		resp *gpb.SetResponse
		err  error
	}
	replied := make(chan reply, 1)
	req := sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("queued"))
	go func() {
		resp, err := r.Client.Set(t.Context(), sidecartest.AskReceipt(req))
		replied <- reply{resp, err}
	}()
	sidecartest.Eventually(t, waitFor, "the Set to be journaled", func() bool { return r.LastIndex(t) == 1 })
	waitProposal(t, r, 1, func(p *journal.Proposal) bool { return journal.Finished(p.GetChange().GetCommit()) })
	select {
	case got := <-replied:
		t.Fatalf("SYNC Set answered while the device is down: %v, %v", got.resp, got.err)
	default:
	}

	if err := r.Dev.Start(t.Context(), ""); err != nil {
		t.Fatalf("restarting the device: %v", err)
	}
	var got reply
	select {
	case got = <-replied:
	case <-time.After(waitFor):
		t.Fatal("the queued SYNC Set was not answered after the device came back")
	}
	if got.err != nil {
		t.Fatalf("queued SYNC Set: %v", got.err)
	}
	wantResponse(t, sidecartest.ResponseExtension(t, got.resp), &sidecarpb.Response{Index: 1, Phase: sidecarpb.Phase_PHASE_CHANGE,
		Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE})
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("queued"))
}

// The client's deadline reaches the device: the hung Set is cancelled
// there, read back (not applied), recorded failed, and never sent again;
// the next Set goes at once.
func TestSetClientGivesUpWhileDeviceHangs(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.WaitConnected(t, true)
	sets := r.Dev.SetCount()
	r.Dev.HangNextSet()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := r.Client.Set(ctx, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("despite the timeout")))
	sidecartest.WantStatus(t, err, codes.DeadlineExceeded)

	const i = 1
	p := waitProposal(t, r, i, agent.Applied)
	if p.GetChange().GetApply() != journal.StatusFailed || codes.Code(p.GetChange().GetError().GetCode()) != codes.DeadlineExceeded {
		t.Fatalf("proposal %d apply %v (%v), want FAILED with DeadlineExceeded", i, p.GetChange().GetApply(), p.GetChange().GetError())
	}
	r.WantDeviceLeaf(t, descPath, nil)
	if n := r.Dev.SetCount() - sets; n != 1 {
		t.Errorf("the device received the hung Set %d times, want once", n)
	}
	if _, err := r.Set(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("next"))); err != nil {
		t.Fatalf("the next Set: %v", err)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("next"))
}

// A SYNC Set waiting for the device ends when the sidecar stops waiting
// (its shutdown), with Aborted naming its journaled proposal, not a code
// a client would retry (it would journal the Set twice).
func TestSetWaitEndsOnStopWaiting(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.WaitConnected(t, true)
	sets := r.Dev.SetCount()
	r.Dev.HangNextSet()
	errs := make(chan error, 1)
	go func() {
		_, err := r.Client.Set(t.Context(), sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("during shutdown")))
		errs <- err
	}()
	sidecartest.Eventually(t, 30*time.Second, "the device holds the Set", func() bool { return r.Dev.SetCount() > sets })
	select {
	case err := <-errs:
		t.Fatalf("the Set ended before the sidecar stopped waiting: %v", err)
	default:
	}
	r.Proxy.StopWaiting()
	select {
	case err := <-errs:
		sidecartest.WantStatus(t, err, codes.Aborted, "the sidecar is shutting down; the Set is journaled as proposal 1")
	case <-time.After(30 * time.Second):
		t.Fatal("the Set still waits 30s after StopWaiting")
	}
}

func TestSetConcurrentClients(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	const n = 8
	type reply struct {
		resp *gpb.SetResponse
		err  error
	}
	replies := make(chan reply, n)
	for k := range n {
		req := sidecartest.UpdateRequest(t, fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", k), sidecartest.StringVal(fmt.Sprint("port ", k)))
		go func() {
			resp, err := r.Set(t, req)
			replies <- reply{resp, err}
		}()
	}
	seen := map[uint64]bool{}
	for range n {
		got := <-replies
		if got.err != nil {
			t.Errorf("concurrent Set: %v", got.err)
			continue
		}
		ext := sidecartest.ResponseExtension(t, got.resp)
		if ext.GetApply() != sidecarpb.Status_STATUS_COMPLETE {
			t.Errorf("concurrent SYNC Set answered with apply %v", ext.GetApply())
		}
		if seen[ext.GetIndex()] {
			t.Errorf("two replies name proposal %d", ext.GetIndex())
		}
		seen[ext.GetIndex()] = true
	}
	for k := range n {
		r.WantDeviceLeaf(t, fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", k), sidecartest.StringVal(fmt.Sprint("port ", k)))
	}
	if got := r.LastIndex(t); got != n {
		t.Errorf("journal's last index is %d after %d Sets", got, n)
	}
}

func TestSetDeviceFailureClasses(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	for _, tc := range []struct {
		device codes.Code // what the device answers the first time
		want   codes.Code // what the client gets
	}{
		// An answer is an answer: the proposal fails with the device's
		// code, whatever it is, and the Set is sent once.
		{codes.NotFound, codes.NotFound},
		{codes.FailedPrecondition, codes.FailedPrecondition},
		{codes.PermissionDenied, codes.PermissionDenied},
		{codes.Aborted, codes.Aborted},
		{codes.ResourceExhausted, codes.ResourceExhausted},
		{codes.Unauthenticated, codes.Unauthenticated},
		// In doubt, read back: not applied, so the device's code too.
		{codes.Unavailable, codes.Unavailable},
		{codes.DeadlineExceeded, codes.DeadlineExceeded},
	} {
		t.Run(tc.device.String(), func(t *testing.T) {
			r.WaitConnected(t, true)
			value := sidecartest.StringVal("after " + tc.device.String())
			setCount := r.Dev.SetCount()
			r.Dev.RejectNextSets(1, tc.device)
			resp, err := r.Set(t, sidecartest.UpdateRequest(t, descPath, value))
			i := r.LastIndex(t)
			if tc.want != codes.OK {
				st := sidecartest.WantStatus(t, err, tc.want, "injected fault")
				wantResponse(t, detailResponse(t, st), &sidecarpb.Response{Index: i, Phase: sidecarpb.Phase_PHASE_CHANGE,
					Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_FAILED})
				if got := sidecartest.DeviceLeaves(t, r.Dev)[descPath]; proto.Equal(got, value) {
					t.Errorf("device holds the value of a failed Set")
				}
				if sets := r.Dev.SetCount() - setCount; sets != 1 {
					t.Errorf("the device saw %d Sets; an answer is never sent again", sets)
				}
				return
			}
			t.Fatalf("unexpected success %v", resp)
		})
	}
}

// TestSetBehindFailedProposalIsApplied: a Set committed on top of one the
// device refuses does not fail for it (issue 34): it is re-based and
// applied, and its client gets the answer it would get directly.
func TestSetBehindFailedProposalIsApplied(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	r.Dev.SetDelay(500 * time.Millisecond)

	type reply struct {
		resp *gpb.SetResponse
		err  error
	}
	send := func(req *gpb.SetRequest) <-chan reply {
		c := make(chan reply, 1)
		go func() {
			resp, err := r.Set(t, req)
			c <- reply{resp, err}
		}()
		return c
	}
	// Proposal 1 is on its way to a slow device that will reject it;
	// proposal 2 is committed on top of it meanwhile.
	first := send(sidecartest.UpdateRequest(t, mtuPath, sidecartest.StringVal("jumbo")))
	sidecartest.Eventually(t, waitFor, "proposal 1 to be journaled", func() bool { return r.LastIndex(t) == 1 })
	waitProposal(t, r, 1, func(p *journal.Proposal) bool { return p.GetChange().GetApply() == journal.StatusInProgress })
	second := send(sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("applied")))
	sidecartest.Eventually(t, waitFor, "proposal 2 to be journaled", func() bool { return r.LastIndex(t) == 2 })
	waitProposal(t, r, 2, func(p *journal.Proposal) bool { return p.GetChange().GetCommit() == journal.StatusComplete })
	if p := r.Proposal(t, 1); journal.Finished(p.GetChange().GetApply()) {
		t.Fatalf("the device answered proposal 1 before proposal 2 was committed (apply %v); the test needs a slower device", p.GetChange().GetApply())
	}

	got := <-first
	sidecartest.WantStatus(t, got.err, codes.InvalidArgument)
	got = <-second
	if got.err != nil {
		t.Fatalf("the Set behind the refused one: %v, want it applied", got.err)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("applied"))
	r.WantDeviceLeaf(t, mtuPath, nil)
}

// TestReplyIsTheDevicesReply: the reply to a Set is the device's; the
// sidecar's receipt (extension 999) is added only for a client that asked
// for it with the sidecar's extension (an empty one will do), or for every
// Set with AlwaysReplyExtension (--reply-extension=always).
func TestReplyIsTheDevicesReply(t *testing.T) {
	receipt := func(resp *gpb.SetResponse) bool {
		for _, e := range resp.GetExtension() {
			if e.GetRegisteredExt().GetId() == gnmi_ext.ExtensionID_EID_EXPERIMENTAL {
				return true
			}
		}
		return false
	}
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("always=%v", always), func(t *testing.T) {
			r := sidecartest.Start(t, sidecartest.Options{AlwaysReplyExtension: always})
			plain, err := r.Client.Set(t.Context(), sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("plain")))
			if err != nil {
				t.Fatal(err)
			}
			if receipt(plain) != always {
				t.Errorf("a Set without the sidecar's extension: receipt %v, want %v: %v", receipt(plain), always, plain)
			}
			asked := r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("asked")))
			if !receipt(asked) {
				t.Errorf("a Set with an empty sidecar extension has no receipt: %v", asked)
			}
			// A commit-confirmed confirm asks nothing of the sidecar's
			// extension either.
			if _, err := r.Client.Set(t.Context(), &gpb.SetRequest{Update: sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("cc")).GetUpdate(),
				Extension: []*gnmi_ext.Extension{sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Minute))}}); err != nil {
				t.Fatal(err)
			}
			confirm, err := r.Client.Set(t.Context(), sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitConfirm{})))
			if err != nil {
				t.Fatal(err)
			}
			if receipt(confirm) != always {
				t.Errorf("a confirm: receipt %v, want %v", receipt(confirm), always)
			}
		})
	}
}
