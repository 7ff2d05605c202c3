package gnmipath

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"", "openconfig", true},
		{"openconfig", "", true},
		{"openconfig", "openconfig", true},
		{"", "cli", false},
		{"openconfig", "cli", false},
		{"cli", "cli", true},
		{"gnmi-sidecar", "", false},
		{"OpenConfig", "", false}, // origins are case-sensitive
	} {
		if got := SameOrigin(&gpb.Path{Origin: tc.a}, &gpb.Path{Origin: tc.b}); got != tc.want {
			t.Errorf("SameOrigin(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if got := Origin(nil); got != "" {
		t.Errorf("Origin(nil) = %q, want \"\"", got)
	}
}
