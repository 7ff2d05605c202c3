package proxy

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAdoptionTarget: the reads and the proposal of resolve skip/adopt go
// to the target the out-of-sync values were written to, else to
// --device-target; paths of two targets are refused.
func TestAdoptionTarget(t *testing.T) {
	p := func(target string) *gpb.Path {
		return &gpb.Path{Target: target, Elem: []*gpb.PathElem{{Name: "system"}}}
	}
	for _, tt := range []struct {
		name         string
		paths        []*gpb.Path
		deviceTarget string
		want         string
		wantCode     codes.Code
	}{
		{name: "none", paths: []*gpb.Path{p(""), p("")}},
		{name: "the device target", paths: []*gpb.Path{p("")}, deviceTarget: "OC-YANG", want: "OC-YANG"},
		{name: "the values' target", paths: []*gpb.Path{p("dev1"), p("")}, deviceTarget: "OC-YANG", want: "dev1"},
		{name: "one target twice", paths: []*gpb.Path{p("dev1"), p("dev1")}, want: "dev1"},
		{name: "two targets", paths: []*gpb.Path{p("dev1"), p("dev2")}, wantCode: codes.FailedPrecondition},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target, paths, err := AdoptionTarget(tt.paths, tt.deviceTarget)
			if status.Code(err) != tt.wantCode {
				t.Fatalf("AdoptionTarget: %v, want code %v", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if target != tt.want {
				t.Errorf("target %q, want %q", target, tt.want)
			}
			for n, q := range paths {
				if q.GetTarget() != "" {
					t.Errorf("path %d keeps target %q: a target goes in the prefix only", n, q.GetTarget())
				}
				if tt.paths[n].GetTarget() != "" && q == tt.paths[n] {
					t.Errorf("path %d: the caller's path was not copied", n)
				}
			}
		})
	}
}
