package proxy_test

import (
	"context"
	"maps"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// deviceConfig is the simulated device's configuration, path → value text
// (boot time left out).
func deviceConfig(t *testing.T, s *sidecartest.Sidecar) map[string]string {
	t.Helper()
	leaves, err := s.Dev.ConfigLeaves()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for p, v := range leaves {
		if p != "/system/state/boot-time" {
			out[p] = prototext.Format(v)
		}
	}
	return out
}

func jsonIETF(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

// TestUnionReplace: a Set with union_replaces through the sidecar is
// applied as the device applies it directly (the union of the values
// replaces the data at each path), rolled back exactly, and re-pushed after
// the device restarts empty.
func TestUnionReplace(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	direct := sidecartest.Start(t, sidecartest.Options{}) // only its device is used, as a reference
	setup := &gpb.SetRequest{Update: []*gpb.Update{
		{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]/config"), Val: jsonIETF(`{"name":"eth0","description":"old","mtu":1500}`)},
		{Path: sidecartest.Path(t, "/interfaces/interface[name=eth1]/config"), Val: jsonIETF(`{"name":"eth1","description":"keep"}`)},
		{Path: sidecartest.Path(t, "/system/config/hostname"), Val: sidecartest.StringVal("h0")},
	}}
	union := &gpb.SetRequest{UnionReplace: []*gpb.Update{
		{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]"), Val: jsonIETF(`{"name":"eth0","config":{"name":"eth0","enabled":true}}`)},
		{Path: sidecartest.Path(t, "/interfaces/interface[name=eth0]/config"), Val: jsonIETF(`{"description":"united"}`)},
		{Path: sidecartest.Path(t, "/system/config"), Val: jsonIETF(`{"hostname":"h1"}`)},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, c := range []gpb.GNMIClient{s.Client, sidecartest.Dial(t, direct.Target)} {
		if _, err := c.Set(ctx, setup); err != nil {
			t.Fatal(err)
		}
	}
	before := deviceConfig(t, s)
	if _, err := sidecartest.Dial(t, direct.Target).Set(ctx, union); err != nil {
		t.Fatalf("union_replace sent to the device directly: %v", err)
	}
	resp := s.MustSet(t, union)
	want := deviceConfig(t, direct)
	if got := deviceConfig(t, s); !maps.Equal(got, want) {
		t.Fatalf("through the sidecar the device holds\n%v\ndirectly\n%v", got, want)
	}
	if maps.Equal(want, before) {
		t.Fatal("the union_replace changed nothing: the test proves nothing")
	}
	r, ok, err := client.ResponseOf(resp)
	if err != nil || !ok {
		t.Fatalf("no sidecar response: %v", err)
	}

	// Rolled back exactly.
	if _, _, err := client.Rollback(ctx, s.Client, r.GetIndex(), sidecarpb.SetMode_SET_MODE_SYNC); err != nil {
		t.Fatal(err)
	}
	if got := deviceConfig(t, s); !maps.Equal(got, before) {
		t.Fatalf("rolled back, the device holds\n%v\nwant\n%v", got, before)
	}
	// Applied again, then the device restarts empty: the re-push restores
	// the union's result.
	s.MustSet(t, union)
	repushes := s.Agent.Status().Repushes
	s.Dev.Stop()
	if err := s.Dev.Start(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	sidecartest.Eventually(t, 20*time.Second, "the re-push", func() bool { return s.Agent.Status().Repushes > repushes })
	if got := deviceConfig(t, s); !maps.Equal(got, want) {
		t.Fatalf("re-pushed, the device holds\n%v\nwant\n%v", got, want)
	}
}

// TestUnionReplaceRefusedByTheDevice: a device without union_replace
// answers Unimplemented; the client gets the device's code and message,
// the proposal is recorded as failed, and nothing changes.
func TestUnionReplaceRefusedByTheDevice(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{NoUnionReplace: true}})
	s.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("h0")))
	before := deviceConfig(t, s)
	_, direct := sidecartest.Dial(t, s.Target).Set(t.Context(), &gpb.SetRequest{UnionReplace: []*gpb.Update{
		{Path: sidecartest.Path(t, "/system/config"), Val: jsonIETF(`{"hostname":"h1"}`)}}})
	_, err := s.Set(t, &gpb.SetRequest{UnionReplace: []*gpb.Update{
		{Path: sidecartest.Path(t, "/system/config"), Val: jsonIETF(`{"hostname":"h1"}`)}}})
	sidecartest.WantStatus(t, direct, codes.Unimplemented)
	sidecartest.WantStatus(t, err, codes.Unimplemented)
	if err.Error() != direct.Error() {
		t.Errorf("through the sidecar: %v; directly: %v", err, direct)
	}
	if r, ok := client.ResponseFromError(err); !ok || r.GetApply() != sidecarpb.Status_STATUS_FAILED {
		t.Errorf("the error's Response: %v", r)
	}
	if got := deviceConfig(t, s); !maps.Equal(got, before) {
		t.Errorf("the device changed: %v", got)
	}
}

// TestSetRelaysExtensions: the extensions a Set carries that the sidecar
// does not handle reach the device with the change, and the device's
// answer comes back with its own extensions.
func TestSetRelaysExtensions(t *testing.T) {
	// A device that echoes the registered extensions it receives.
	s := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{EchoExtensions: true}})
	vendor := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{
		Id: 1000, Msg: []byte("vendor knob")}}}
	req := sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("h1"))
	req.Extension = []*gnmi_ext.Extension{vendor}
	direct, err := sidecartest.Dial(t, s.Target).Set(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp := s.MustSet(t, req)
	var got, want []*gnmi_ext.Extension
	for _, e := range resp.GetExtension() {
		if e.GetRegisteredExt().GetId() != client.ExtensionID {
			got = append(got, e)
		}
	}
	want = direct.GetExtension()
	if len(want) == 0 {
		t.Fatal("the device echoed nothing directly: the test proves nothing")
	}
	if len(got) != len(want) || prototext.Format(&gpb.SetResponse{Extension: got}) != prototext.Format(&gpb.SetResponse{Extension: want}) {
		t.Errorf("the device's answer extensions through the sidecar: %v; directly: %v", got, want)
	}
}
