package proxy

import (
	"fmt"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// BenchmarkRequestOps: a client's SetRequest of 10 updates under a prefix
// decomposed into journal operations (full paths, validated).
func BenchmarkRequestOps(b *testing.B) {
	req := &gpb.SetRequest{Prefix: &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}}}}
	for i := range 10 {
		req.Update = append(req.Update, &gpb.Update{
			Path: &gpb.Path{Elem: []*gpb.PathElem{
				{Name: "interface", Key: map[string]string{"name": fmt.Sprintf("eth%d", i)}},
				{Name: "config"}, {Name: "description"},
			}},
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "uplink"}},
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		ops, err := requestOps(req)
		if err != nil || len(ops) != 10 {
			b.Fatalf("requestOps: %d ops, %v", len(ops), err)
		}
	}
}
