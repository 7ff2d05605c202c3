package testbed_test

import (
	"encoding/json"
	"fmt"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// BenchmarkSet measures one client's Set of one leaf straight to the device
// (the baseline the sidecar's Set latency is compared with), at several
// configuration sizes. Each interface holds 3 config leaves.
func BenchmarkSet(b *testing.B) {
	for _, interfaces := range []int{30, 3000, 33334} {
		b.Run(fmt.Sprintf("leaves=%d", interfaces*3), func(b *testing.B) {
			d := testbed.StartT(b, testbed.Options{})
			c := dialB(b, d.Addr())
			var list []map[string]any
			for i := 0; i < interfaces; i++ {
				name := fmt.Sprintf("eth%d", i)
				list = append(list, map[string]any{"name": name, "config": map[string]any{"name": name, "description": "bench"}})
			}
			js, _ := json.Marshal(map[string]any{"openconfig-interfaces:interfaces": map[string]any{"interface": list}})
			if _, err := c.Set(b.Context(), &gpb.SetRequest{Replace: []*gpb.Update{{Path: &gpb.Path{}, Val: jsonIETF(string(js))}}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := &gpb.SetRequest{Update: []*gpb.Update{upd(b, eth0Desc, str(fmt.Sprintf("v%d", i)))}}
				if _, err := c.Set(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
