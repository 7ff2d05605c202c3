package agent

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	arbitration := status.Error(codes.PermissionDenied, "election_id 3 is lower than the current master's election_id 5")
	tests := []struct {
		name   string
		err    error
		fenced bool
		codes  []codes.Code
		want   Answer
		// account: the agent has a device account (Options.Username).
		account bool
	}{
		{"no error", nil, false, nil, Accepted, false},
		{"invalid value", status.Error(codes.InvalidArgument, "bad"), false, nil, Refused, false},
		{"unknown path", status.Error(codes.NotFound, "no such path"), false, nil, Refused, false},
		{"precondition", status.Error(codes.FailedPrecondition, "locked"), false, nil, Refused, false},
		{"unimplemented", status.Error(codes.Unimplemented, "union_replace"), false, nil, Refused, false},
		{"aborted", status.Error(codes.Aborted, "conflict"), false, nil, Refused, false},
		{"device bug", status.Error(codes.Internal, "oops"), false, nil, Refused, false},
		{"unavailable", status.Error(codes.Unavailable, "conn reset"), false, nil, Transient, false},
		{"timeout", status.Error(codes.DeadlineExceeded, "slow"), false, nil, Transient, false},
		{"overload", status.Error(codes.ResourceExhausted, "busy"), false, nil, Transient, false},
		{"own cancel", status.Error(codes.Canceled, "session ended"), false, nil, Transient, false},
		{"the device account refused", status.Error(codes.Unauthenticated, "who"), false, nil, Transient, true},
		{"a client's credentials refused (no device account)", status.Error(codes.Unauthenticated, "who"), false, nil, Refused, false},
		{"not a gRPC error", errors.New("io"), false, nil, Transient, false},
		{"arbitration with fencing", arbitration, true, nil, Superseded, false},
		{"arbitration without fencing", arbitration, false, nil, Refused, false},
		{"authorization refusal with fencing", status.Error(codes.PermissionDenied, "user may not write /system"), true, nil, Refused, false},
		{"configured transient", status.Error(codes.Aborted, "commit in progress"), false, []codes.Code{codes.Aborted}, Transient, false},
		{"configured away", status.Error(codes.ResourceExhausted, "quota"), false, []codes.Code{codes.Unavailable}, Refused, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Target: "x", Fencing: tt.fenced, TransientCodes: tt.codes}.withDefaults()
			if tt.account {
				o.Username = "sidecar"
			}
			a := &Agent{opts: o}
			if got := a.policy().Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v, fenced=%v) = %v, want %v", tt.err, tt.fenced, got, tt.want)
			}
		})
	}
}
