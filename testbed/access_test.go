package testbed_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// TestInsistingDevice checks Options.RequireTarget and Options.Users on
// every RPC that has a prefix: the right target and account get through,
// anything else is refused with the code a real device answers.
func TestInsistingDevice(t *testing.T) {
	d, c := startDevice(t, testbed.Options{RequireTarget: "OC-YANG", Users: map[string]string{"alice": "secret"}})
	type call func(ctx context.Context, target string) error
	rpcs := map[string]call{
		"Get": func(ctx context.Context, target string) error {
			setLeafAs(t, c, "OC-YANG", "alice", "secret") // something to read
			_, err := c.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: target}, Path: []*gpb.Path{p(t, eth0Desc)}, Encoding: gpb.Encoding_JSON_IETF})
			return err
		},
		"Set": func(ctx context.Context, target string) error {
			_, err := c.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: target}, Update: []*gpb.Update{upd(t, eth0Desc, str("x"))}})
			return err
		},
		"Subscribe": func(ctx context.Context, target string) error {
			st, err := c.Subscribe(ctx)
			if err != nil {
				return err
			}
			if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
				Prefix: &gpb.Path{Target: target}, Mode: gpb.SubscriptionList_ONCE,
				Subscription: []*gpb.Subscription{{Path: p(t, "/system")}},
			}}}); err != nil {
				return err
			}
			for {
				resp, err := st.Recv()
				if err != nil || resp.GetSyncResponse() {
					return err
				}
			}
		},
	}
	for _, tt := range []struct {
		name, target, user, password string
		want                         codes.Code
	}{
		{"right target and account", "OC-YANG", "alice", "secret", codes.OK},
		{"no target", "", "alice", "secret", codes.NotFound},
		{"another target", "CONFIG_DB", "alice", "secret", codes.NotFound},
		{"no credentials", "OC-YANG", "", "", codes.Unauthenticated},
		{"wrong password", "OC-YANG", "alice", "guess", codes.Unauthenticated},
		{"unknown user", "OC-YANG", "mallory", "secret", codes.Unauthenticated},
	} {
		for rpc, do := range rpcs {
			t.Run(tt.name+"/"+rpc, func(t *testing.T) {
				ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-request-id", tt.name)
				if tt.user != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "username", tt.user, "password", tt.password)
				}
				err := do(ctx, tt.target)
				wantCode(t, err, tt.want)
				// Recorded before the checks: a refused request too.
				got, ok := d.LastRequest(rpc)
				if !ok {
					t.Fatalf("LastRequest(%s): none recorded", rpc)
				}
				if id := got.Metadata.Get("x-request-id"); len(id) != 1 || id[0] != tt.name {
					t.Errorf("LastRequest(%s) metadata x-request-id = %q, want [%q]", rpc, id, tt.name)
				}
				if u := got.Metadata.Get("username"); tt.user != "" && (len(u) != 1 || u[0] != tt.user) {
					t.Errorf("LastRequest(%s) metadata username = %q, want [%q]", rpc, u, tt.user)
				}
				if ua := got.Metadata.Get("user-agent"); len(ua) > 0 {
					t.Errorf("LastRequest(%s) kept the transport header user-agent %q", rpc, ua)
				}
				var target string
				switch m := got.Message.(type) {
				case *gpb.GetRequest:
					target = m.GetPrefix().GetTarget()
				case *gpb.SetRequest:
					target = m.GetPrefix().GetTarget()
				case *gpb.SubscribeRequest:
					target = m.GetSubscribe().GetPrefix().GetTarget()
				default:
					t.Fatalf("LastRequest(%s) message is a %T", rpc, got.Message)
				}
				if target != tt.target {
					t.Errorf("LastRequest(%s) prefix target = %q, want %q", rpc, target, tt.target)
				}
			})
		}
	}
	// Capabilities has no prefix: credentials only.
	_, err := c.Capabilities(ctxT(t), &gpb.CapabilityRequest{})
	wantCode(t, err, codes.Unauthenticated)
	_, err = c.Capabilities(metadata.AppendToOutgoingContext(ctxT(t), "username", "alice", "password", "secret"), &gpb.CapabilityRequest{})
	wantCode(t, err, codes.OK)
}

func setLeafAs(t *testing.T, c gpb.GNMIClient, target, user, password string) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "username", user, "password", password)
	if _, err := c.Set(ctx, &gpb.SetRequest{Prefix: &gpb.Path{Target: target}, Update: []*gpb.Update{upd(t, eth0Desc, str("seed"))}}); err != nil {
		t.Fatalf("Set as %s: %v", user, err)
	}
}

// TestAdminRequests checks GET /requests: the last request of each RPC
// with its metadata, as JSON a test in another process can compare.
func TestAdminRequests(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	admin := httptest.NewServer(d.AdminHandler())
	t.Cleanup(admin.Close)

	req := &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1", Origin: "openconfig"}, Update: []*gpb.Update{upd(t, eth0Desc, str("uplink"))}}
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "username", "bob", "x-trace", "42")
	if _, err := c.Set(ctx, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(admin.URL + "/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]testbed.RecordedRequest
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	set, ok := got["Set"]
	if !ok {
		t.Fatalf("GET /requests has no Set: %v", got)
	}
	if _, ok := got["Get"]; ok {
		t.Errorf("GET /requests shows a Get the device never received")
	}
	if u, x := set.Metadata["username"], set.Metadata["x-trace"]; len(u) != 1 || u[0] != "bob" || len(x) != 1 || x[0] != "42" {
		t.Errorf("Set metadata = %v, want username bob and x-trace 42", set.Metadata)
	}
	var sent gpb.SetRequest
	if err := protojson.Unmarshal(set.Request, &sent); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&sent, req) {
		t.Errorf("GET /requests Set = %v, want %v", &sent, req)
	}
}
