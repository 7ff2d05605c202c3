package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// as returns a context carrying username/password metadata.
func as(ctx context.Context, user, password string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "username", user, "password", password)
}

// TestDeviceCredentials checks the credentials passthrough RPCs carry to
// the device: the client's username and password when the sidecar has no
// device credentials of its own, the sidecar's when it has.
func TestDeviceCredentials(t *testing.T) {
	for _, tt := range []struct {
		name               string
		opts               sidecartest.Options
		clientUser         string // "" sends no credentials
		wantUser, wantPass string // "" wants none
	}{
		{name: "client's forwarded", clientUser: "carol", wantUser: "carol", wantPass: "carol-pw"},
		{name: "none", clientUser: "", wantUser: "", wantPass: ""},
		{name: "sidecar's replace the client's", opts: sidecartest.Options{DeviceUsername: "sidecar", DevicePassword: "dev-pw"},
			clientUser: "carol", wantUser: "sidecar", wantPass: "dev-pw"},
		{name: "sidecar's without client credentials", opts: sidecartest.Options{DeviceUsername: "sidecar", DevicePassword: "dev-pw"},
			clientUser: "", wantUser: "sidecar", wantPass: "dev-pw"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := newRecordingDevice(t)
			opts := tt.opts
			opts.Target = fake.addr
			r := sidecartest.Start(t, opts)
			ctx := metadata.AppendToOutgoingContext(t.Context(), "x-test", tt.name)
			if tt.clientUser != "" {
				ctx = as(ctx, tt.clientUser, tt.clientUser+"-pw")
			}
			check := func(method string, md metadata.MD) {
				t.Helper()
				for k, want := range map[string]string{"username": tt.wantUser, "password": tt.wantPass} {
					got := md.Get(k)
					switch {
					case want == "" && len(got) > 0:
						t.Errorf("%s: the device saw %s %q, want none", method, k, got)
					case want != "" && (len(got) != 1 || got[0] != want):
						t.Errorf("%s: the device saw %s %q, want [%q]", method, k, got, want)
					}
				}
				if got := md.Get("x-test"); len(got) != 1 || got[0] != tt.name {
					t.Errorf("%s: the device saw x-test %q: other metadata must still be forwarded", method, got)
				}
			}
			// nextTestCall skips the agent's own calls.
			nextTestCall := func() recordedCall {
				for {
					c := fake.nextCall(t)
					if len(c.md.Get("x-test")) > 0 {
						return c
					}
				}
			}

			if _, err := r.Client.Capabilities(ctx, &gpb.CapabilityRequest{}); err != nil {
				t.Fatal(err)
			}
			c := nextTestCall()
			check(c.method, c.md)
			if _, err := r.Client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}}); err != nil {
				t.Fatal(err)
			}
			c = nextTestCall()
			check(c.method, c.md)

			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := r.Client.Subscribe(sctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Subscription: []*gpb.Subscription{{Path: sidecartest.Path(t, descPath)}},
			}}}); err != nil {
				t.Fatal(err)
			}
			for {
				select {
				case dctx := <-fake.streams:
					md, _ := metadata.FromIncomingContext(dctx)
					if len(md.Get("x-test")) == 0 {
						continue // the agent's
					}
					check("Subscribe", md)
				case <-time.After(waitFor):
					t.Fatal("no subscription reached the device")
				}
				break
			}
		})
	}
}

// TestRollbacksCarryTheClientsCredentials: without a device account, a
// rollback a client asks for (the sidecar's rollback, a commit-confirmed
// cancel) reaches the device with that client's credentials, as its
// changes do; the revert of a commit-confirmed left to expire is the
// sidecar's own and has none: a device that requires them refuses it, and
// the refusal is reported at once (out of sync, naming the fix).
func TestRollbacksCarryTheClientsCredentials(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{Users: map[string]string{"alice": "secret"}}})
	ctx := as(t.Context(), "alice", "secret")
	set := func(val string, exts ...*gnmi_ext.Extension) {
		t.Helper()
		if _, err := r.Client.Set(ctx, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal(val), exts...)); err != nil {
			t.Fatalf("Set %q as alice: %v", val, err)
		}
	}
	set("one")
	set("two")
	if _, err := r.Client.Set(ctx, sidecartest.RollbackRequest(t, r.LastIndex(t))); err != nil {
		t.Fatalf("rollback as alice: %v", err)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))

	set("three", sidecartest.CommitExtension("c1", sidecartest.CommitFor(time.Minute)))
	if _, err := r.Client.Set(ctx, sidecartest.BareRequest(sidecartest.CommitExtension("c1", &gnmi_ext.CommitCancel{}))); err != nil {
		t.Fatalf("commit-confirmed cancel as alice: %v", err)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))

	set("four", sidecartest.CommitExtension("c2", sidecartest.CommitFor(100*time.Millisecond)))
	var recs []*journal.OutOfSync
	sidecartest.Eventually(t, 10*time.Second, "the refused revert to be recorded out of sync", func() bool {
		var err error
		recs, err = r.Journal.OutOfSync(t.Context())
		return err == nil && len(recs) > 0
	})
	if msg := recs[0].GetError().GetMessage(); !strings.Contains(msg, "--device-username") {
		t.Errorf("out-of-sync record %q does not name the fix (--device-username)", msg)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("four"))
}

// TestResolveOnADeviceTarget: against a device that serves one target, a
// re-push refused there leaves out-of-sync records of values written to
// that target; resolve skip reads the device there (and the proposal it
// journals is applied there), and the sidecar's own liveness subscription
// names --device-target.
func TestResolveOnADeviceTarget(t *testing.T) {
	const target = "OC-YANG"
	r := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{RequireTarget: target}, DeviceTarget: target})
	if sub, ok := r.Dev.LastRequest("Subscribe"); !ok || sub.Message.(*gpb.SubscribeRequest).GetSubscribe().GetPrefix().GetTarget() != target {
		t.Errorf("the sidecar's liveness subscription: %v, want prefix target %q", sub.Message, target)
	}
	req := sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))
	req.Prefix = &gpb.Path{Target: target}
	if _, err := r.Client.Set(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := r.Dev.RefuseSetsAt(descPath, codes.InvalidArgument); err != nil {
		t.Fatal(err)
	}
	r.Dev.Stop()
	if err := r.Dev.Start(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	var recs []*journal.OutOfSync
	sidecartest.Eventually(t, 10*time.Second, "the refused re-push to be recorded out of sync", func() bool {
		var err error
		recs, err = r.Journal.OutOfSync(t.Context())
		return err == nil && len(recs) > 0
	})
	if got := recs[0].GetValue().GetPath().GetTarget(); got != target {
		t.Errorf("out-of-sync value's target %q, want %q", got, target)
	}
	res, err := client.Resolve(t.Context(), r.Client, sidecarpb.Resolve_ACTION_SKIP, nil)
	if err != nil {
		t.Fatalf("resolve skip: %v", err)
	}
	if res.GetSettled() != 1 {
		t.Errorf("resolve skip settled %d, want 1", res.GetSettled())
	}
	p := r.Proposal(t, res.GetProposal())
	if got := p.GetChange().GetPrefix().GetTarget(); got != target {
		t.Errorf("the adopted proposal's target %q, want %q", got, target)
	}
	if get, ok := r.Dev.LastRequest("Get"); !ok || get.Message.(*gpb.GetRequest).GetPrefix().GetTarget() != target {
		t.Errorf("resolve skip's read of the device: %v, want prefix target %q", get.Message, target)
	}
}

// TestDeviceAccountKeepsCustomMetadata: with a device account, a client's
// change reaches the device with the sidecar's credentials in place of the
// client's (username, password, authorization), and the client's custom
// metadata still along, as Get's does; so does a rollback it asks for.
func TestDeviceAccountKeepsCustomMetadata(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{DeviceUsername: "sidecar", DevicePassword: "dev-pw",
		Device: testbed.Options{Users: map[string]string{"sidecar": "dev-pw"}}})
	ctx := metadata.AppendToOutgoingContext(t.Context(), "username", "carol", "password", "carol-pw",
		"authorization", "Bearer carol-token", "x-custom", "1")
	check := func(what, rpc string) {
		t.Helper()
		rec, ok := r.Dev.LastRequest(rpc)
		if !ok {
			t.Fatalf("%s: no %s reached the device", what, rpc)
		}
		md := rec.Metadata
		if got := md.Get("x-custom"); len(got) != 1 || got[0] != "1" {
			t.Errorf("%s: the device saw x-custom %q, want [1]", what, got)
		}
		if got := md.Get("username"); len(got) != 1 || got[0] != "sidecar" {
			t.Errorf("%s: the device saw username %q, want the device account's alone", what, got)
		}
		if got := md.Get("password"); len(got) != 1 || got[0] != "dev-pw" {
			t.Errorf("%s: the device saw password %q, want the device account's alone", what, got)
		}
		if got := md.Get("authorization"); len(got) > 0 {
			t.Errorf("%s: the device saw the client's authorization %q", what, got)
		}
	}
	for _, v := range []string{"one", "two"} {
		if _, err := r.Client.Set(ctx, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal(v))); err != nil {
			t.Fatal(err)
		}
	}
	check("the change's Set", "Set")
	if _, err := r.Client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{sidecartest.Path(t, descPath)}}); err != nil {
		t.Fatal(err)
	}
	check("Get", "Get")
	if _, err := r.Client.Set(ctx, sidecartest.RollbackRequest(t, r.LastIndex(t))); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))
	check("the rollback's Set", "Set")
}
