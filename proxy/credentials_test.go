package proxy_test

import (
	"context"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/metadata"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
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
