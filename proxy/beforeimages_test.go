package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// configuredDevice is configuration a device holds before the sidecar
// arrives: a hostname, two banners, a domain, and eth0 with a description
// and an mtu.
func configuredDevice(t *testing.T) []*gpb.SetRequest {
	return []*gpb.SetRequest{{
		Update: []*gpb.Update{{
			Path: sidecartest.Path(t, "/system/config"),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(
				`{"hostname":"zz-dev01","domain-name":"lab.example","login-banner":"authorized only","motd-banner":"welcome"}`)}},
		}, {
			Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]"),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(
				`{"name":"eth0","config":{"name":"eth0","description":"uplink to core","mtu":1500}}`)}},
		}},
	}}
}

// TestConfiguredDevice undoes changes made through the sidecar in front of
// a device that held configuration before it: every undo restores what the
// device held, whether the journal took a baseline or read each change's
// paths before it.
func TestConfiguredDevice(t *testing.T) {
	for _, baseline := range []bool{true, false} {
		t.Run(fmt.Sprintf("baseline=%v", baseline), func(t *testing.T) {
			for _, tc := range []struct {
				name string
				set  func(t *testing.T) *gpb.SetRequest
			}{{
				name: "a leaf's value",
				set: func(t *testing.T) *gpb.SetRequest {
					return sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1"))
				},
			}, {
				name: "a leaf in an existing list entry",
				set: func(t *testing.T) *gpb.SetRequest {
					return sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("changed"))
				},
			}, {
				name: "a new leaf in an existing list entry, as JSON",
				set: func(t *testing.T) *gpb.SetRequest {
					return &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]/config"),
						Val: jsonIETF(`{"enabled":false,"mtu":9000}`)}}}
				},
			}, {
				name: "a Replace of a container",
				set: func(t *testing.T) *gpb.SetRequest {
					return &gpb.SetRequest{Replace: []*gpb.Update{{Path: sidecartest.Path(t, "/system/config"), Val: jsonIETF(`{"hostname":"r"}`)}}}
				},
			}, {
				name: "a Delete of a leaf",
				set: func(t *testing.T) *gpb.SetRequest {
					return &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, "/system/config/login-banner")}}
				},
			}, {
				name: "a Delete of a list entry",
				set: func(t *testing.T) *gpb.SetRequest {
					return &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=eth0]")}}
				},
			}, {
				name: "a Replace at the root",
				set: func(t *testing.T) *gpb.SetRequest {
					return &gpb.SetRequest{Replace: []*gpb.Update{{Path: &gpb.Path{}, Val: jsonIETF(`{"openconfig-system:system":{"config":{"hostname":"only"}}}`)}}}
				},
			}} {
				t.Run(tc.name, func(t *testing.T) {
					r := sidecartest.Start(t, sidecartest.Options{Seed: configuredDevice(t), Baseline: baseline})
					before := sidecartest.DeviceLeaves(t, r.Dev)
					r.MustSet(t, tc.set(t))
					if cmp.Equal(before, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()) {
						t.Fatal("the change did not change the device")
					}
					r.MustSet(t, sidecartest.RollbackRequest(t, 0))
					if diff := cmp.Diff(before, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()); diff != "" {
						t.Errorf("the device after the rollback differs from before the change (-before +after):\n%s", diff)
					}
				})
			}

			t.Run("commit-confirmed expiry", func(t *testing.T) {
				r := sidecartest.Start(t, sidecartest.Options{Seed: configuredDevice(t), Baseline: baseline})
				before := sidecartest.DeviceLeaves(t, r.Dev)
				req := sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("temporary"),
					sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Second)))
				r.MustSet(t, req)
				sidecartest.Eventually(t, 30*time.Second, "the commit-confirmed to expire and its rollback to be applied", func() bool {
					return r.OutstandingCommit(t) == nil && cmp.Equal(before, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform())
				})
			})
		})
	}
}

// configuredTestbed starts a simulated device holding configuredDevice,
// for a test that puts something between it and the sidecar.
func configuredTestbed(t *testing.T) *testbed.Device {
	t.Helper()
	dev := testbed.StartT(t, testbed.Options{Logger: sidecartest.Logger(t)})
	seed := sidecartest.Dial(t, dev.Addr())
	for _, req := range configuredDevice(t) {
		if _, err := seed.Set(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	return dev
}

// TestBaseline onboards a configured device: its configuration is
// journaled first as proposals authored device and tagged baseline; a
// rollback to the tag returns the device to it exactly; neither the
// baseline nor a point before it can be rolled back to.
func TestBaseline(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Seed: configuredDevice(t), Baseline: true})
	before := sidecartest.DeviceLeaves(t, r.Dev)
	r.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
	p := r.Proposal(t, 1)
	if !p.GetChange().GetBaseline() || p.GetChange().GetAuthor() != "device" {
		t.Fatalf("proposal 1 is not the baseline authored device: %v", p.GetChange())
	}
	if got := r.LastIndex(t); got != 2 {
		t.Fatalf("last index %d, want 2: the baseline, then the change", got)
	}
	r.MustSet(t, &gpb.SetRequest{Replace: []*gpb.Update{{Path: sidecartest.Path(t, "/system/config"), Val: jsonIETF(`{"hostname":"r2"}`)}}})
	r.MustSet(t, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=eth0]")}})
	r.MustSet(t, sidecartest.UpdateRequest(t, "/interfaces/interface[name=eth1]/config/description", sidecartest.StringVal("new")))

	ctx := context.Background()
	_, _, err := client.RollbackTo(ctx, r.Client, "", 0, sidecarpb.SetMode_SET_MODE_SYNC, "")
	sidecartest.WantStatus(t, err, codes.FailedPrecondition, "baseline")
	_, err = r.Set(t, sidecartest.RollbackRequest(t, 1))
	sidecartest.WantStatus(t, err, codes.FailedPrecondition, "roll back proposal 1", "baseline")

	if _, _, err := client.RollbackTo(ctx, r.Client, journal.BaselineTag, 0, sidecarpb.SetMode_SET_MODE_SYNC, "back"); err != nil {
		t.Fatalf("rollback --to baseline: %v", err)
	}
	if diff := cmp.Diff(before, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()); diff != "" {
		t.Errorf("after rollback --to baseline the device differs from before the sidecar (-before +after):\n%s", diff)
	}
	_, err = client.Tag(ctx, r.Client, &sidecarpb.Tag{Name: journal.BaselineTag}, "")
	sidecartest.WantStatus(t, err, codes.InvalidArgument, "the sidecar's own")
}

// TestSetBeforeTheFirstSessionWaitsForTheBaseline: a Set that reaches a
// new sidecar while its first session with the device is being set up
// waits for the onboarding baseline like any other: the baseline is
// proposal 1, the change proposal 2, and a rollback of the newest change
// undoes the change. Journaled first, the change was held by the baseline
// as the device's own configuration, and the rollback refused (CI saw it
// in TestServeAuthorization, whose Set races the sidecar's start).
func TestSetBeforeTheFirstSessionWaitsForTheBaseline(t *testing.T) {
	dev := configuredTestbed(t)
	before := sidecartest.DeviceLeaves(t, dev)
	gated := newGatedDevice(t, dev.Addr())
	release := gated.holdSubscribes()
	defer release()
	arrived := make(chan struct{})
	arrival := sync.OnceFunc(func() { close(arrived) })
	r := sidecartest.Start(t, sidecartest.Options{Target: gated.addr, Baseline: true,
		ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if info.FullMethod == gpb.GNMI_Set_FullMethodName {
				arrival()
			}
			return handler(ctx, req)
		})}})
	sidecartest.Eventually(t, 30*time.Second, "the agent's first session to wait for its liveness subscription", func() bool {
		return gated.subscribesHeld() > 0
	})
	if r.Agent.Status().Connected {
		t.Fatal("the agent is connected while its liveness subscription is held")
	}

	done := make(chan error, 1)
	go func() {
		_, err := r.Client.Set(context.Background(), sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1"),
			sidecartest.SidecarExtension(t, &sidecarpb.Request{Mode: sidecarpb.SetMode_SET_MODE_ASYNC})))
		done <- err
	}()
	<-arrived
	// An ASYNC Set that does not wait is journaled at once: give it the
	// time to, then let the session up.
	select {
	case err := <-done:
		t.Fatalf("the Set was answered (%v) before the agent's first session was up and the baseline taken", err)
	case <-time.After(time.Second):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Set: %v", err)
	}
	if p := r.Proposal(t, 1); !p.GetChange().GetBaseline() {
		t.Fatalf("proposal 1 is not the baseline: %v", p.GetChange())
	}
	if p := r.Proposal(t, 2); p.GetChange().GetBaseline() || len(p.GetChange().GetOps()) != 1 {
		t.Fatalf("proposal 2 is not the client's change: %v", p.GetChange())
	}
	sidecartest.Eventually(t, 30*time.Second, "the change to be applied", func() bool {
		return proto.Equal(sidecartest.DeviceLeaves(t, dev)["/system/config/hostname"], sidecartest.StringVal("r1"))
	})
	r.MustSet(t, sidecartest.RollbackRequest(t, 0))
	if diff := cmp.Diff(before, sidecartest.DeviceLeaves(t, dev), protocmp.Transform()); diff != "" {
		t.Errorf("after the change's rollback the device differs from before the sidecar (-before +after):\n%s", diff)
	}
}

// TestSyncFrom re-reads a device changed behind the sidecar's back: the
// journal then holds exactly what the device holds, and the tag baseline
// names the new point.
func TestSyncFrom(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Seed: configuredDevice(t), Baseline: true})
	r.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
	dev := sidecartest.Dial(t, r.Target)
	ctx := context.Background()
	// Behind the sidecar's back: a banner gone, a new interface.
	if _, err := dev.Set(ctx, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, "/system/config/motd-banner")},
		Update: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/interface[name=eth7]/config/mtu"), Val: sidecartest.UintVal(1400)}}}); err != nil {
		t.Fatal(err)
	}
	res, err := client.SyncFrom(ctx, r.Client, "re-read")
	if err != nil {
		t.Fatalf("sync-from: %v", err)
	}
	if res.GetFirstIndex() != 3 || res.GetUnits() == 0 {
		t.Errorf("sync-from journaled %v, want proposals from 3 with units", res)
	}
	synced := sidecartest.DeviceLeaves(t, r.Dev)
	// A change and its rollback now come back to the device as synced.
	r.MustSet(t, &gpb.SetRequest{Replace: []*gpb.Update{{Path: sidecartest.Path(t, "/system/config"), Val: jsonIETF(`{"hostname":"x"}`)}}})
	if _, _, err := client.RollbackTo(ctx, r.Client, journal.BaselineTag, 0, sidecarpb.SetMode_SET_MODE_SYNC, ""); err != nil {
		t.Fatalf("rollback --to baseline: %v", err)
	}
	if diff := cmp.Diff(synced, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()); diff != "" {
		t.Errorf("after rollback --to baseline the device differs from what sync-from read (-synced +after):\n%s", diff)
	}
	var stale int
	if err := r.Journal.Committed(ctx, sidecartest.Path(t, "/system/config/motd-banner"), func(pv *journal.PathValue) error {
		if !pv.GetDeleted() {
			stale++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Error("the journal still holds the banner the device lost before sync-from")
	}
}

// TestUnreadableBeforeImage: a change to a path the device cannot be read
// at goes ahead, but its rollback, which would delete what the sidecar
// never saw, is refused naming the path, and a commit-confirmed there is
// refused before anything is journaled.
func TestUnreadableBeforeImage(t *testing.T) {
	dev := configuredTestbed(t)
	gated := newGatedDevice(t, dev.Addr())
	gated.refuseGets(status.Error(codes.Unavailable, "reads are down"))
	r := sidecartest.Start(t, sidecartest.Options{Target: gated.addr})
	r.WaitConnected(t, true)
	r.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
	_, err := r.Set(t, sidecartest.RollbackRequest(t, 0))
	sidecartest.WantStatus(t, err, codes.FailedPrecondition, "/system/config/hostname", "not known")
	if got := sidecartest.DeviceLeaves(t, dev)["/system/config/hostname"]; !proto.Equal(got, sidecartest.StringVal("r1")) {
		t.Errorf("hostname %v after a refused rollback, want r1", got)
	}

	req := sidecartest.UpdateRequest(t, "/system/config/login-banner", sidecartest.StringVal("x"),
		sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Minute)))
	last := r.LastIndex(t)
	_, err = r.Set(t, req)
	sidecartest.WantStatus(t, err, codes.FailedPrecondition, "could not be read")
	if got := r.LastIndex(t); got != last {
		t.Errorf("a refused commit-confirmed journaled proposal %d", got)
	}
}

// TestBaselineOfAnEmptyDevice: a new journal in front of a device that
// holds nothing journals no baseline proposal, yet knows the device holds
// nothing: a change then reads nothing from the device first.
func TestBaselineOfAnEmptyDevice(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Baseline: true})
	sidecartest.Eventually(t, 30*time.Second, "the baseline read of the empty device", func() bool {
		return r.Journal.Covered(&gpb.Path{})
	})
	r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("first")))
	if got := r.LastIndex(t); got != 1 {
		t.Fatalf("last index %d, want 1: no baseline proposal for an empty device; 1: %v", got, r.Proposal(t, 1).GetChange().GetOps())
	}
	if reads := r.Proposal(t, 1).GetChange().GetDeviceReads(); len(reads) != 0 {
		t.Errorf("the change read the device first: %v", reads)
	}
	r.MustSet(t, sidecartest.RollbackRequest(t, 0))
	r.WantDeviceLeaf(t, descPath, nil)
}

// TestRepushWhereTheDeviceDiffers: a device that comes back from a restart
// with its startup configuration is re-pushed only what it does not hold
// as the journal says: a change made through the sidecar that it lost,
// and a value changed behind the sidecar's back; the rest, read from it,
// is not sent again.
func TestRepushWhereTheDeviceDiffers(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Seed: configuredDevice(t), Baseline: true, Device: testbed.Options{Persistent: true}})
	r.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
	want := sidecartest.DeviceLeaves(t, r.Dev)
	dev := sidecartest.Dial(t, r.Target)
	repushes := r.Agent.Status().Repushes
	r.Dev.Stop()
	if err := r.Dev.Start(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	sidecartest.Eventually(t, 30*time.Second, "a re-push after the device's restart", func() bool {
		return r.Agent.Status().Repushes > repushes
	})
	if got := r.Agent.Status().LastRepushValues; got != 0 {
		t.Errorf("the re-push after a restart with everything saved sent %d values, want none", got)
	}
	// Behind the sidecar's back.
	if _, err := dev.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{
		{Path: sidecartest.Path(t, "/system/config/motd-banner"), Val: sidecartest.StringVal("changed")},
		{Path: sidecartest.Path(t, "/system/config/hostname"), Val: sidecartest.StringVal("zz-dev01")},
	}}); err != nil {
		t.Fatal(err)
	}
	repushes = r.Agent.Status().Repushes
	r.Dev.DropConnections()
	sidecartest.Eventually(t, 30*time.Second, "a re-push after the reconnect", func() bool {
		return r.Agent.Status().Repushes > repushes
	})
	if diff := cmp.Diff(want, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()); diff != "" {
		t.Errorf("after the re-push the device differs from the journal (-journal +device):\n%s", diff)
	}
	if got := r.Agent.Status().LastRepushValues; got != 2 {
		t.Errorf("the re-push sent %d values, want 2: the hostname and the banner the device held otherwise", got)
	}
}

// TestRepushReadsListEntriesAtOnce: a journal that knows the device at
// many entries of one list (each read before the change that created it)
// reads the device before a re-push with one Get of the list's parent,
// not a Get per entry, and still sends exactly what the device does not
// hold: what the parent holds outside the read scopes is left out.
func TestRepushReadsListEntriesAtOnce(t *testing.T) {
	const entries = 40
	r := sidecartest.Start(t, sidecartest.Options{Seed: configuredDevice(t), Device: testbed.Options{Persistent: true}})
	req := &gpb.SetRequest{}
	for n := range entries {
		req.Update = append(req.Update, &gpb.Update{
			Path: sidecartest.Path(t, fmt.Sprintf("/interfaces/interface[name=e%d]/config/description", n)),
			Val:  sidecartest.StringVal(fmt.Sprintf("entry %d", n)),
		})
	}
	r.MustSet(t, req)
	r.Settle(t)
	repush := func(what string, restart bool) (gets int64) {
		t.Helper()
		before, repushes := r.Dev.Requests("Get"), r.Agent.Status().Repushes
		if restart {
			r.Dev.Stop()
			if err := r.Dev.Start(t.Context(), ""); err != nil {
				t.Fatal(err)
			}
		} else {
			r.Dev.DropConnections()
		}
		sidecartest.Eventually(t, 30*time.Second, what, func() bool {
			return r.Agent.Status().Repushes > repushes
		})
		return r.Dev.Requests("Get") - before
	}
	// Per entry, the re-push would read the device entries times; the
	// drift watcher's own reads are a few.
	if gets := repush("a re-push after the device's restart", true); gets >= entries/2 {
		t.Errorf("the device was read with %d Gets around the re-push, want a few (the %d entries' parent at once)", gets, entries)
	}
	if got := r.Agent.Status().LastRepushValues; got != 0 {
		t.Errorf("the re-push after a restart with everything saved sent %d values, want none", got)
	}
	dev := sidecartest.Dial(t, r.Target)
	if _, err := dev.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{
		{Path: sidecartest.Path(t, "/interfaces/interface[name=e7]/config/description"), Val: sidecartest.StringVal("behind its back")},
		{Path: sidecartest.Path(t, descPath), Val: sidecartest.StringVal("outside the journal")},
	}}); err != nil {
		t.Fatal(err)
	}
	repush("a re-push after the reconnect", false)
	if got := r.Agent.Status().LastRepushValues; got != 1 {
		t.Errorf("the re-push sent %d values, want 1: e7's description", got)
	}
	r.WantDeviceLeaf(t, "/interfaces/interface[name=e7]/config/description", sidecartest.StringVal("entry 7"))
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("outside the journal"))
}

// TestBeforeImagesReadListEntriesAtOnce: a Set of many entries of one list
// outside the journal's read scopes reads the device before it with a
// Get of the list, not a Get per entry (a Set of 2,000 new interfaces made
// 2,000 round trips), and takes from that read only the entries it
// writes. Whatever the device refuses of reads (Get CONFIG; every Get and
// JSON_IETF, read with Subscribe ONCE in JSON), every undo (rollback,
// commit-confirmed expiry, rollback --to) restores the entries the device
// held and deletes those it created, a re-push after the device's restart
// loses nothing, and what the list holds besides is neither journaled nor
// touched.
func TestBeforeImagesReadListEntriesAtOnce(t *testing.T) {
	const entries, held = 40, 5
	seed := configuredDevice(t)
	for n := range held {
		seed = append(seed, sidecartest.UpdateRequest(t, fmt.Sprintf("/interfaces/interface[name=e%d]/config/description", n), sidecartest.StringVal(fmt.Sprintf("held %d", n))))
	}
	seed = append(seed, sidecartest.UpdateRequest(t, "/interfaces/interface[name=bystander]/config/description", sidecartest.StringVal("not in the Set")))
	set := func(t *testing.T, ext ...*gnmi_ext.Extension) *gpb.SetRequest {
		req := &gpb.SetRequest{Extension: ext}
		for n := range entries {
			req.Update = append(req.Update, &gpb.Update{
				Path: sidecartest.Path(t, fmt.Sprintf("/interfaces/interface[name=e%d]/config/description", n)),
				Val:  sidecartest.StringVal(fmt.Sprintf("entry %d", n)),
			})
		}
		return req
	}
	for _, dev := range []struct {
		name string
		opts testbed.Options
	}{
		{name: "a device that answers every read", opts: testbed.Options{Persistent: true}},
		{name: "a device that refuses Get CONFIG", opts: testbed.Options{Persistent: true, RefuseGetConfig: true}},
		{name: "a device read only with Subscribe, not in JSON_IETF", opts: testbed.Options{Persistent: true, RefuseGet: true,
			RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented}}},
	} {
		for _, undo := range []struct {
			name string
			ext  []*gnmi_ext.Extension
			do   func(t *testing.T, r *sidecartest.Sidecar, beforeIndex uint64, before map[string]*gpb.TypedValue)
		}{{
			name: "rollback",
			do: func(t *testing.T, r *sidecartest.Sidecar, _ uint64, _ map[string]*gpb.TypedValue) {
				r.MustSet(t, sidecartest.RollbackRequest(t, 0))
			},
		}, {
			name: "commit-confirmed expiry",
			ext:  []*gnmi_ext.Extension{sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Second))},
			do: func(t *testing.T, r *sidecartest.Sidecar, _ uint64, before map[string]*gpb.TypedValue) {
				sidecartest.Eventually(t, 30*time.Second, "the commit-confirmed to expire and its rollback to be applied", func() bool {
					return r.OutstandingCommit(t) == nil && cmp.Equal(before, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform())
				})
			},
		}, {
			name: "rollback --to",
			do: func(t *testing.T, r *sidecartest.Sidecar, beforeIndex uint64, _ map[string]*gpb.TypedValue) {
				if _, _, err := client.RollbackTo(t.Context(), r.Client, "", beforeIndex, sidecarpb.SetMode_SET_MODE_SYNC, "back"); err != nil {
					t.Fatal(err)
				}
			},
		}} {
			t.Run(dev.name+", "+undo.name, func(t *testing.T) {
				r := sidecartest.Start(t, sidecartest.Options{Seed: seed, Device: dev.opts})
				// A change first, so that rollback --to has a point before the Set.
				r.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
				before, beforeIndex := sidecartest.DeviceLeaves(t, r.Dev), r.LastIndex(t)
				reads := func() int64 { return r.Dev.Requests("Get") + r.Dev.Requests("Subscribe") }
				was := reads()
				r.MustSet(t, set(t, undo.ext...))
				if got := reads() - was; got >= entries/2 {
					t.Errorf("the Set of %d entries read the device with %d Gets and Subscribes, want a few (the list at once)", entries, got)
				}
				p := r.Proposal(t, r.LastIndex(t))
				for _, op := range p.GetChange().GetDeviceReads() {
					for _, u := range journal.Units(op) {
						if s := gnmipath.String(u.GetPath()); strings.Contains(s, "bystander") || strings.Contains(s, "eth0") {
							t.Errorf("the proposal's device reads hold %s, outside the entries the Set writes", s)
						}
					}
				}
				if got, err := r.Journal.AppliedAt(t.Context(), []*gpb.Path{sidecartest.Path(t, "/interfaces/interface[name=bystander]/config/description")}); err != nil || got[0] != nil {
					t.Errorf("the journal holds %v (err %v) for an entry the Set did not write, want nothing", got, err)
				}
				r.Settle(t)
				after := sidecartest.DeviceLeaves(t, r.Dev)
				// The device restarts with what it held: the re-push loses
				// nothing of it and adds nothing.
				repushes := r.Agent.Status().Repushes
				r.Dev.Stop()
				if err := r.Dev.Start(t.Context(), ""); err != nil {
					t.Fatal(err)
				}
				sidecartest.Eventually(t, 30*time.Second, "a re-push after the device's restart", func() bool { return r.Agent.Status().Repushes > repushes })
				if diff := cmp.Diff(after, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()); diff != "" {
					t.Errorf("the device after the re-push differs from after the Set (-after the Set +after the re-push):\n%s", diff)
				}
				undo.do(t, r, beforeIndex, before)
				if diff := cmp.Diff(before, sidecartest.DeviceLeaves(t, r.Dev), protocmp.Transform()); diff != "" {
					t.Errorf("the device after the %s differs from before the Set (-before +after):\n%s", undo.name, diff)
				}
			})
		}
	}
}
