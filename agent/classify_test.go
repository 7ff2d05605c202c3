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
		want   outcome
	}{
		{"no error", nil, false, accepted},
		{"invalid value", status.Error(codes.InvalidArgument, "bad"), false, rejected},
		{"unknown path", status.Error(codes.NotFound, "no such path"), false, rejected},
		{"precondition", status.Error(codes.FailedPrecondition, "locked"), false, rejected},
		{"unimplemented", status.Error(codes.Unimplemented, "union_replace"), false, rejected},
		{"aborted", status.Error(codes.Aborted, "conflict"), false, rejected},
		{"device bug", status.Error(codes.Internal, "oops"), false, rejected},
		{"unavailable", status.Error(codes.Unavailable, "conn reset"), false, transient},
		{"timeout", status.Error(codes.DeadlineExceeded, "slow"), false, transient},
		{"overload", status.Error(codes.ResourceExhausted, "busy"), false, transient},
		{"own cancel", status.Error(codes.Canceled, "session ended"), false, transient},
		{"bad credentials", status.Error(codes.Unauthenticated, "who"), false, transient},
		{"not a gRPC error", errors.New("io"), false, transient},
		{"arbitration with fencing", arbitration, true, superseded},
		{"arbitration without fencing", arbitration, false, rejected},
		{"authorization refusal with fencing", status.Error(codes.PermissionDenied, "user may not write /system"), true, rejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err, tt.fenced); got != tt.want {
				t.Errorf("classify(%v, fenced=%v) = %v, want %v", tt.err, tt.fenced, got, tt.want)
			}
		})
	}
}
