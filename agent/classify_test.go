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
		want   Answer
	}{
		{"no error", nil, false, Accepted},
		{"invalid value", status.Error(codes.InvalidArgument, "bad"), false, Refused},
		{"unknown path", status.Error(codes.NotFound, "no such path"), false, Refused},
		{"precondition", status.Error(codes.FailedPrecondition, "locked"), false, Refused},
		{"unimplemented", status.Error(codes.Unimplemented, "union_replace"), false, Refused},
		{"aborted", status.Error(codes.Aborted, "conflict"), false, Refused},
		{"device bug", status.Error(codes.Internal, "oops"), false, Refused},
		// An answer is an answer: codes that used to look transient.
		{"overload", status.Error(codes.ResourceExhausted, "busy"), false, Refused},
		{"credentials refused", status.Error(codes.Unauthenticated, "who"), false, Refused},
		// No answer, or one that cannot be told from none: read back.
		{"unavailable", status.Error(codes.Unavailable, "conn reset"), false, InDoubt},
		{"timeout", status.Error(codes.DeadlineExceeded, "slow"), false, InDoubt},
		{"cancel", status.Error(codes.Canceled, "client gave up"), false, InDoubt},
		{"not a gRPC error", errors.New("io"), false, InDoubt},
		{"arbitration with fencing", arbitration, true, Superseded},
		{"arbitration without fencing", arbitration, false, Refused},
		{"authorization refusal with fencing", status.Error(codes.PermissionDenied, "user may not write /system"), true, Refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Target: "x", Fencing: tt.fenced, RetryCodes: []codes.Code{codes.ResourceExhausted}}.withDefaults()
			a := &Agent{opts: o}
			if got := a.policy().Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v, fenced=%v) = %v, want %v", tt.err, tt.fenced, got, tt.want)
			}
		})
	}
}
