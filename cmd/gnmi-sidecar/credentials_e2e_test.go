package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/google/go-cmp/cmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// The device of these tests insists, as SONiC's gNMI server does: every
// Get, Set and Subscribe must name its target, and every RPC must carry
// the username and password of one of its accounts.
const insistingTarget = "OC-YANG"

var insistingDeviceArgs = []string{"--require-target", insistingTarget,
	"--user", "alice:secret", "--user", "mallory:guess", "--user", "sidecar:svc-pw"}

// as returns a context with a user's credentials and a request id, as
// gnmic -u NAME -p PASSWORD sends them.
func as(ctx context.Context, user, password, requestID string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "username", user, "password", password, "x-request-id", requestID)
}

// lastDeviceRequest returns the device's record of the last request of rpc
// (gnmi-testbed's GET /requests).
func lastDeviceRequest(t *testing.T, admin, rpc string, msg proto.Message) testbed.RecordedRequest {
	t.Helper()
	resp, err := http.Get(admin + "/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all map[string]testbed.RecordedRequest
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	r, ok := all[rpc]
	if !ok {
		t.Fatalf("the device has received no %s", rpc)
	}
	if msg != nil {
		if err := protojson.Unmarshal(r.Request, msg); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func oneMeta(md map[string][]string, key string) string {
	if v := md[key]; len(v) == 1 {
		return v[0]
	}
	return fmt.Sprint(md[key])
}

func descUpdate(intf, val string) *gpb.SetRequest {
	return &gpb.SetRequest{Prefix: &gpb.Path{Target: insistingTarget}, Update: []*gpb.Update{{Path: descPath(intf), Val: strVal(val)}}}
}

// readAs reads interface intf's description on c with target and
// credentials ("" when the device has none).
func readAs(t *testing.T, ctx context.Context, c gpb.GNMIClient, intf string) (string, error) {
	t.Helper()
	resp, err := c.Get(ctx, &gpb.GetRequest{Prefix: &gpb.Path{Target: insistingTarget}, Path: []*gpb.Path{descPath(intf)}, Encoding: gpb.Encoding_JSON_IETF})
	if status.Code(err) == codes.NotFound {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	n := resp.GetNotification()
	if len(n) != 1 || len(n[0].GetUpdate()) != 1 {
		return "", fmt.Errorf("Get of %s's description: want one value, got %v", intf, resp)
	}
	var s string
	err = json.Unmarshal(n[0].GetUpdate()[0].GetVal().GetJsonIetfVal(), &s)
	return s, err
}

// TestDeviceRequiringTargetAndCredentials runs the sidecar in front of a
// device that requires target OC-YANG and credentials, with a device
// account (--device-username) and without one: Set, Get, Subscribe and
// rollback through the sidecar reach the device as they do directly
// (target, credentials, custom metadata; the reply is the device's), and
// after the device restarts empty the re-push restores the configuration
// with the account, and without one ends in a definitive report within
// 10 s (status, metric, log) with nothing retried.
func TestDeviceRequiringTargetAndCredentials(t *testing.T) {
	t.Parallel()
	for _, account := range []bool{true, false} {
		name := "without a device account"
		if account {
			name = "with --device-username"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"--device-target", insistingTarget}
			if account {
				pw := filepath.Join(t.TempDir(), "device-password")
				if err := os.WriteFile(pw, []byte("svc-pw\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--device-username", "sidecar", "--device-password-file", pw)
			}
			s := startStack(t, insistingDeviceArgs, args)
			metrics := s.sidecar.metricsAddr(t)
			alice := func(id string) context.Context {
				ctx, cancel := context.WithTimeout(as(context.Background(), "alice", "secret", id), 10*time.Second)
				t.Cleanup(cancel)
				return ctx
			}
			// wantUser is who the device must see on a Set made for alice.
			wantUser := "alice"
			if account {
				wantUser = "sidecar"
			}

			// Set: directly, then through the sidecar; the device sees the
			// same request, target and credentials (the account's with one).
			direct, err := s.devClient.Set(alice("direct"), descUpdate("eth9", "direct"))
			if err != nil {
				t.Fatalf("Set directly: %v", err)
			}
			var directReq gpb.SetRequest
			lastDeviceRequest(t, s.devAdmin, "Set", &directReq)
			resp, err := s.client.Set(alice("set-1"), descUpdate("eth0", "one"))
			if err != nil {
				t.Fatalf("Set through the sidecar: %v", err)
			}
			var viaReq gpb.SetRequest
			rec := lastDeviceRequest(t, s.devAdmin, "Set", &viaReq)
			if got := viaReq.GetPrefix().GetTarget(); got != insistingTarget {
				t.Errorf("the device's Set through the sidecar has prefix target %q, want %q (directly: %q)", got, insistingTarget, directReq.GetPrefix().GetTarget())
			}
			if got := oneMeta(rec.Metadata, "username"); got != wantUser {
				t.Errorf("the device's Set through the sidecar came as %q, want %q", got, wantUser)
			}
			if !account && oneMeta(rec.Metadata, "x-request-id") != "set-1" {
				t.Errorf("the device's Set through the sidecar has x-request-id %v, want the client's set-1", rec.Metadata["x-request-id"])
			}
			if len(resp.GetExtension()) != 0 || len(direct.GetExtension()) != 0 {
				t.Errorf("Set reply extensions: %v through the sidecar, %v directly; the client asked for none", resp.GetExtension(), direct.GetExtension())
			}
			if !proto.Equal(resp.GetPrefix(), direct.GetPrefix()) || len(resp.GetResponse()) != len(direct.GetResponse()) {
				t.Errorf("Set reply through the sidecar %v, directly %v", resp, direct)
			}

			// Refusals come back as the device gives them.
			for _, tt := range []struct {
				what string
				ctx  context.Context
				req  *gpb.SetRequest
				want codes.Code
			}{
				{"no target", alice("no-target"), &gpb.SetRequest{Update: descUpdate("eth1", "x").GetUpdate()}, codes.NotFound},
				{"another target", alice("other-target"), &gpb.SetRequest{Prefix: &gpb.Path{Target: "CONFIG_DB"}, Update: descUpdate("eth1", "x").GetUpdate()}, codes.NotFound},
			} {
				_, direct := s.devClient.Set(tt.ctx, tt.req)
				_, via := s.client.Set(tt.ctx, tt.req)
				if status.Code(direct) != tt.want || status.Code(via) != tt.want || status.Convert(via).Message() != status.Convert(direct).Message() {
					t.Errorf("Set with %s: directly %v, through the sidecar %v; want both %v with the device's message", tt.what, direct, via, tt.want)
				}
			}
			// A wrong password: the device refuses it, directly and through
			// the sidecar without an account; with one, the sidecar's
			// account makes the Set (docs/security.md).
			wrong := as(context.Background(), "alice", "wrong", "wrong-pw")
			_, direct2 := s.devClient.Set(wrong, descUpdate("eth1", "wrong"))
			_, via := s.client.Set(wrong, descUpdate("eth1", "wrong"))
			wantVia := codes.Unauthenticated
			if account {
				wantVia = codes.OK
			}
			if status.Code(direct2) != codes.Unauthenticated || status.Code(via) != wantVia {
				t.Errorf("Set with a wrong password: directly %v, through the sidecar %v; want Unauthenticated and %v", direct2, via, wantVia)
			}

			// Get and Subscribe through the sidecar see what a direct
			// client sees.
			for _, intf := range []string{"eth0", "eth9"} {
				d, err1 := readAs(t, alice("get"), s.devClient, intf)
				v, err2 := readAs(t, alice("get"), s.client, intf)
				if err1 != nil || err2 != nil || d != v {
					t.Errorf("Get %s: directly %q (%v), through the sidecar %q (%v)", intf, d, err1, v, err2)
				}
			}
			if d, v := subscribeOnce(t, alice("sub"), s.devClient), subscribeOnce(t, alice("sub"), s.client); !cmp.Equal(d, v) {
				t.Errorf("Subscribe ONCE: directly %v, through the sidecar %v", d, v)
			}
			var subReq gpb.SubscribeRequest
			rec = lastDeviceRequest(t, s.devAdmin, "Subscribe", &subReq)
			if subReq.GetSubscribe().GetPrefix().GetTarget() != insistingTarget || oneMeta(rec.Metadata, "x-request-id") != "sub" {
				t.Errorf("the device's Subscribe through the sidecar: %v with %v", &subReq, rec.Metadata)
			}

			// Rollback of a second change through the sidecar, as alice.
			if _, err := s.client.Set(alice("set-2"), descUpdate("eth0", "two")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := client.Rollback(alice("rollback"), s.client, 0, sidecarpb.SetMode_SET_MODE_SYNC); err != nil {
				t.Fatalf("rollback through the sidecar: %v", err)
			}
			rec = lastDeviceRequest(t, s.devAdmin, "Set", &viaReq)
			if viaReq.GetPrefix().GetTarget() != insistingTarget || oneMeta(rec.Metadata, "username") != wantUser {
				t.Errorf("the device's rollback Set: prefix %v as %v, want target %q as %q", viaReq.GetPrefix(), rec.Metadata["username"], insistingTarget, wantUser)
			}
			if v, err := readAs(t, alice("check"), s.devClient, "eth0"); err != nil || v != "one" {
				t.Errorf("device eth0 after the rollback: %q (%v), want %q", v, err, "one")
			}

			// The device restarts empty.
			postAdmin(t, s.devAdmin, "/restart")
			restarted := time.Now()
			if account {
				took := poll(t, 10*time.Second, "the re-push to restore eth0", func() (bool, string) {
					v, err := readAs(t, alice("check"), s.devClient, "eth0")
					return err == nil && v == "one", fmt.Sprintf("%q %v", v, err)
				})
				t.Logf("re-push restored the configuration %v after the restart", took)
				return
			}
			eth0 := "/interfaces/interface[name=eth0]/config/description"
			poll(t, 10*time.Second, "a definitive report of the refused re-push", func() (bool, string) {
				got := outOfSyncPaths(t, s.sidecar.addr)
				return slices.Contains(got, eth0), strings.Join(got, ", ")
			})
			took := time.Since(restarted)
			m := waitMetrics(t, metrics, "the out-of-sync metric", func(m map[string]float64) (bool, string) {
				return m["gnmi_sidecar_out_of_sync_paths"] >= 1, fmt.Sprint(m["gnmi_sidecar_out_of_sync_paths"])
			})
			t.Logf("refused re-push reported %v after the restart; out-of-sync paths %v", took.Round(time.Millisecond), m["gnmi_sidecar_out_of_sync_paths"])
			if text := mustOps(t, s.sidecar.addr, "status"); !strings.Contains(text, "--device-username") {
				t.Errorf("status does not name the fix (--device-username):\n%s", text)
			}
			if _, err := s.sidecar.errOut.waitLine(func(l string) bool {
				return strings.Contains(l, "level=ERROR") && strings.Contains(l, "--device-username")
			}, time.Second, s.sidecar.done); err != nil {
				t.Errorf("no ERROR log line naming --device-username: %v", err)
			}
			// Nothing retried: the device receives no Set for 2 s.
			before := lastDeviceRequest(t, s.devAdmin, "Set", nil).Time
			time.Sleep(2 * time.Second)
			if after := lastDeviceRequest(t, s.devAdmin, "Set", nil).Time; !after.Equal(before) {
				t.Errorf("the device received another Set %v after the definitive report: retried", after.Sub(before))
			}

			// An operator's retry carries the operator's credentials: it
			// puts the configuration back.
			cmd := exec.Command(s.sidecarBin, "resolve", "retry", "--username", "alice", "--address", s.sidecar.addr)
			cmd.Env = append(os.Environ(), opsPasswordEnv+"=secret")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("gnmi-sidecar resolve retry --username alice: %v\n%s", err, out)
			}
			if got := outOfSyncPaths(t, s.sidecar.addr); len(got) != 0 {
				t.Errorf("out of sync after alice's retry: %v", got)
			}
			if v, err := readAs(t, alice("check"), s.devClient, "eth0"); err != nil || v != "one" {
				t.Errorf("device eth0 after alice's retry: %q (%v), want %q", v, err, "one")
			}
		})
	}
}

// subscribeOnce returns the leaves of a ONCE subscription to the
// interfaces, path → value.
func subscribeOnce(t *testing.T, ctx context.Context, c gpb.GNMIClient) map[string]string {
	t.Helper()
	st, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Prefix: &gpb.Path{Target: insistingTarget}, Mode: gpb.SubscriptionList_ONCE,
		Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if resp.GetSyncResponse() {
			return out
		}
		for _, u := range resp.GetUpdate().GetUpdate() {
			out[oneLine(u.GetPath())] = oneLine(u.GetVal())
		}
	}
}

func oneLine(m proto.Message) string { return strings.Join(strings.Fields(fmt.Sprint(m)), " ") }

// TestConcurrentUsersNeverMerged: without a device account, two users'
// concurrent Sets through the sidecar are never merged into one device
// Set: every Set of the user the device refuses is refused, every Set of
// the user it accepts succeeds, and only the accepted user's values are
// on the device.
func TestConcurrentUsersNeverMerged(t *testing.T) {
	t.Parallel()
	s := startStack(t, append(insistingDeviceArgs, "--set-delay", "5ms"), []string{"--device-target", insistingTarget})
	const perUser = 25
	var wg sync.WaitGroup
	errs := map[string][]error{}
	var mu sync.Mutex
	for _, u := range []struct{ name, password, intf string }{{"alice", "secret", "eth0"}, {"mallory", "wrong", "eth1"}} {
		wg.Go(func() {
			var sub sync.WaitGroup
			for n := range perUser {
				sub.Go(func() {
					ctx, cancel := context.WithTimeout(as(context.Background(), u.name, u.password, fmt.Sprint(n)), 20*time.Second)
					defer cancel()
					_, err := s.client.Set(ctx, descUpdate(fmt.Sprintf("%s-%d", u.intf, n), u.name))
					mu.Lock()
					errs[u.name] = append(errs[u.name], err)
					mu.Unlock()
				})
			}
			sub.Wait()
		})
	}
	wg.Wait()
	for _, err := range errs["alice"] {
		if err != nil {
			t.Errorf("alice's Set: %v", err)
		}
	}
	for _, err := range errs["mallory"] {
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("mallory's Set with a wrong password: %v, want Unauthenticated (merged with alice's?)", err)
		}
	}
	ctx := as(context.Background(), "alice", "secret", "check")
	for n := range perUser {
		if v, err := readAs(t, ctx, s.devClient, fmt.Sprintf("eth0-%d", n)); err != nil || v != "alice" {
			t.Errorf("device eth0-%d: %q (%v), want alice's value", n, v, err)
		}
		if v, err := readAs(t, ctx, s.devClient, fmt.Sprintf("eth1-%d", n)); err != nil || v != "" {
			t.Errorf("device eth1-%d: %q (%v), want nothing: mallory's Set was refused", n, v, err)
		}
	}
}

// TestServeSaysTheDeviceRefusesItsAccount: a wrong device password is
// said plainly at start, once, in one ERROR line naming the options to
// fix, and in gnmi-sidecar status, while the sidecar keeps trying.
func TestServeSaysTheDeviceRefusesItsAccount(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "device-password")
	if err := os.WriteFile(pw, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, insistingDeviceArgs, []string{"--device-target", insistingTarget,
		"--device-username", "sidecar", "--device-password-file", pw})
	s.startSidecarOnly(t, "127.0.0.1:0")
	refused := func(l string) bool {
		return strings.Contains(l, "level=ERROR") && strings.Contains(l, "refuses the sidecar's device account") &&
			strings.Contains(l, "--device-username") && strings.Contains(l, "--device-password-file")
	}
	if _, err := s.sidecar.errOut.waitLine(refused, 10*time.Second, s.sidecar.done); err != nil {
		t.Fatalf("no ERROR line saying the device refuses the account: %v", err)
	}
	if text := mustOps(t, s.sidecar.addr, "status"); !strings.Contains(text, "refuses the sidecar's device account") {
		t.Errorf("status does not say the device refuses the account:\n%s", text)
	}
	time.Sleep(time.Second) // the connector retries meanwhile
	n := 0
	for _, l := range strings.Split(s.sidecar.errOut.text(), "\n") {
		if refused(l) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d ERROR lines about the refused account, want 1 (once per distinct answer)", n)
	}
}
