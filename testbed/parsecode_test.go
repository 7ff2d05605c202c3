package testbed_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func TestParseCode(t *testing.T) {
	for in, want := range map[string]codes.Code{
		"CANCELLED": codes.Canceled, "canceled": codes.Canceled, "DEADLINE_EXCEEDED": codes.DeadlineExceeded,
		"ResourceExhausted": codes.ResourceExhausted, "14": codes.Unavailable,
	} {
		if got, err := testbed.ParseCode(in); err != nil || got != want {
			t.Errorf("ParseCode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := testbed.ParseCode("NOPE"); err == nil {
		t.Error(`ParseCode("NOPE") succeeded`)
	}
}
