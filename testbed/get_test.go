package testbed_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// jsonOf decodes a JSON literal for comparisons.
func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestGetJSON(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{
		upd(t, eth0Desc, str("uplink")),
		upd(t, eth0MTU, uintV(9000)),
		upd(t, "/system/config/hostname", str("r1")),
	}})
	tests := []struct {
		name string
		path string
		dt   gpb.GetRequest_DataType
		want string // JSON
	}{
		{name: "leaf", path: eth0Desc, want: `"uplink"`},
		{name: "list entry", path: "/interfaces/interface[name=eth0]", want: `{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":9000}}`},
		{name: "compressed config container", path: "/interfaces/interface[name=eth0]/config", want: `{"name":"eth0","description":"uplink","mtu":9000}`},
		{name: "compressed top container", path: "/interfaces", want: `{"interface":[{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":9000}}]}`},
		{name: "state path of a config leaf mirrors config", path: "/interfaces/interface[name=eth0]/state/description", want: `"uplink"`},
		{name: "STATE data mirrors config into state", path: "/interfaces/interface[name=eth0]", dt: gpb.GetRequest_STATE, want: `{"name":"eth0","state":{"name":"eth0","description":"uplink","mtu":9000}}`},
		{name: "state container", path: "/interfaces/interface[name=eth0]/state", want: `{"name":"eth0","description":"uplink","mtu":9000}`},
		{name: "CONFIG data leaves state out", path: "/system", dt: gpb.GetRequest_CONFIG, want: `{"config":{"hostname":"r1"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := getJSON(t, c, tc.path, tc.dt)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if want := jsonOf(t, tc.want); !reflect.DeepEqual(unqualified(got), want) {
				g, _ := json.Marshal(got)
				t.Errorf("Get %s = %s, want %s", tc.path, g, tc.want)
			}
		})
	}

	t.Run("root carries config and boot-time", func(t *testing.T) {
		got, err := getJSON(t, c, "/", gpb.GetRequest_ALL)
		if err != nil {
			t.Fatal(err)
		}
		sys := got.(map[string]any)["openconfig-system:system"].(map[string]any)
		if sys["config"].(map[string]any)["hostname"] != "r1" {
			t.Errorf("root JSON lacks hostname: %v", got)
		}
		boot := sys["state"].(map[string]any)["boot-time"]
		if boot != formatUint(uint64(d.BootTime().UnixNano())) {
			t.Errorf("boot-time %v, want %d", boot, d.BootTime().UnixNano())
		}
	})
}

// unqualified drops RFC 7951 module qualifiers ("openconfig-interfaces:")
// from member names, so expectations need not spell out where the device
// qualifies them.
func unqualified(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			if i := strings.IndexByte(k, ':'); i >= 0 {
				k = k[i+1:]
			}
			out[k] = unqualified(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = unqualified(c)
		}
		return out
	}
	return v
}

func formatUint(u uint64) string {
	b, _ := json.Marshal(u)
	return strings.Trim(string(b), `"`) // RFC 7951 renders uint64 as a string
}

func TestGetProtoAndErrors(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{
		upd(t, eth0Desc, str("uplink")),
		upd(t, "/interfaces/interface[name=eth1]/config/description", str("second")),
	}})

	t.Run("container as scalar leaves", func(t *testing.T) {
		resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, "/interfaces/interface[name=eth0]")}, Encoding: gpb.Encoding_PROTO})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, u := range resp.GetNotification()[0].GetUpdate() {
			s, _ := ygot.PathToString(u.GetPath())
			got[s] = u.GetVal().GetStringVal()
		}
		want := map[string]string{eth0Desc: "uplink", "/interfaces/interface[name=eth0]/config/name": "eth0", "/interfaces/interface[name=eth0]/name": "eth0"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("wildcard key", func(t *testing.T) {
		resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, "/interfaces/interface[name=*]/config/description")}, Encoding: gpb.Encoding_PROTO})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, u := range resp.GetNotification()[0].GetUpdate() {
			s, _ := ygot.PathToString(u.GetPath())
			got[s] = u.GetVal().GetStringVal()
		}
		want := map[string]string{eth0Desc: "uplink", "/interfaces/interface[name=eth1]/config/description": "second"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("boot-time as uint", func(t *testing.T) {
		v, err := getVal(t, c, "/system/state/boot-time")
		if err != nil {
			t.Fatal(err)
		}
		if v.GetUintVal() != uint64(d.BootTime().UnixNano()) {
			t.Errorf("boot-time %v, want %d", v, d.BootTime().UnixNano())
		}
	})
	t.Run("prefix", func(t *testing.T) {
		resp, err := c.Get(ctxT(t), &gpb.GetRequest{Prefix: p(t, "/interfaces/interface[name=eth1]"), Path: []*gpb.Path{p(t, "/config/description")}, Encoding: gpb.Encoding_PROTO})
		if err != nil {
			t.Fatal(err)
		}
		u := resp.GetNotification()[0].GetUpdate()[0]
		if s, _ := ygot.PathToString(u.GetPath()); s != "/config/description" || u.GetVal().GetStringVal() != "second" {
			t.Errorf("got %s = %v, want /config/description = second (relative to the prefix)", s, u.GetVal())
		}
	})

	errs := []struct {
		name string
		req  *gpb.GetRequest
		code codes.Code
	}{
		{name: "missing list entry", req: &gpb.GetRequest{Path: []*gpb.Path{p(t, "/interfaces/interface[name=nope]")}}, code: codes.NotFound},
		{name: "missing leaf", req: &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0MTU)}}, code: codes.NotFound},
		{name: "unknown path", req: &gpb.GetRequest{Path: []*gpb.Path{p(t, "/bogus")}}, code: codes.NotFound},
		{name: "state leaf asked as CONFIG", req: &gpb.GetRequest{Path: []*gpb.Path{p(t, "/system/state/boot-time")}, Type: gpb.GetRequest_CONFIG}, code: codes.NotFound},
		{name: "unparseable path", req: &gpb.GetRequest{Path: []*gpb.Path{{Elem: []*gpb.PathElem{{Name: ""}}}}}, code: codes.InvalidArgument},
		{name: "unsupported encoding", req: &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0Desc)}, Encoding: gpb.Encoding_ASCII}, code: codes.Unimplemented},
		{name: "target on a path", req: &gpb.GetRequest{Path: []*gpb.Path{{Target: "dev1", Elem: p(t, eth0Desc).GetElem()}}}, code: codes.InvalidArgument},
		{name: "one missing path fails the request", req: &gpb.GetRequest{Path: []*gpb.Path{p(t, eth0Desc), p(t, eth0MTU)}}, code: codes.NotFound},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Get(ctxT(t), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
			if tc.code == codes.NotFound && len(tc.req.GetPath()) == 1 {
				want, _ := ygot.PathToString(tc.req.GetPath()[0])
				if !strings.Contains(status.Convert(err).Message(), want) {
					t.Errorf("message %q does not name %s", status.Convert(err).Message(), want)
				}
			}
		})
	}
}

func TestConfigLeaves(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("uplink")), upd(t, eth0MTU, uintV(1500))}})
	got, err := d.ConfigLeaves()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		eth0Desc: `string_val:"uplink"`,
		eth0MTU:  `uint_val:1500`,
		"/interfaces/interface[name=eth0]/config/name": `string_val:"eth0"`,
		"/interfaces/interface[name=eth0]/name":        `string_val:"eth0"`,
	}
	if len(got) != len(want) {
		t.Errorf("got %d leaves %v, want %d", len(got), got, len(want))
	}
	for path, w := range want {
		if g, ok := got[path]; !ok || strings.ReplaceAll(g.String(), " ", "") != strings.ReplaceAll(w, " ", "") {
			t.Errorf("leaf %s = %v, want %s", path, g, w)
		}
	}
	if d.SetCount() != 1 {
		t.Errorf("SetCount = %d, want 1", d.SetCount())
	}
}
