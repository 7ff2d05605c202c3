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
	}{
		{"no error", nil, false, nil, Accepted},
		{"invalid value", status.Error(codes.InvalidArgument, "bad"), false, nil, Refused},
		{"unknown path", status.Error(codes.NotFound, "no such path"), false, nil, Refused},
		{"precondition", status.Error(codes.FailedPrecondition, "locked"), false, nil, Refused},
		{"unimplemented", status.Error(codes.Unimplemented, "union_replace"), false, nil, Refused},
		{"aborted", status.Error(codes.Aborted, "conflict"), false, nil, Refused},
		{"device bug", status.Error(codes.Internal, "oops"), false, nil, Refused},
		{"unavailable", status.Error(codes.Unavailable, "conn reset"), false, nil, Transient},
		{"timeout", status.Error(codes.DeadlineExceeded, "slow"), false, nil, Transient},
		{"overload", status.Error(codes.ResourceExhausted, "busy"), false, nil, Transient},
		{"own cancel", status.Error(codes.Canceled, "session ended"), false, nil, Transient},
		{"bad credentials", status.Error(codes.Unauthenticated, "who"), false, nil, Transient},
		{"not a gRPC error", errors.New("io"), false, nil, Transient},
		{"arbitration with fencing", arbitration, true, nil, Superseded},
		{"arbitration without fencing", arbitration, false, nil, Refused},
		{"authorization refusal with fencing", status.Error(codes.PermissionDenied, "user may not write /system"), true, nil, Refused},
		{"configured transient", status.Error(codes.Aborted, "commit in progress"), false, []codes.Code{codes.Aborted}, Transient},
		{"configured away", status.Error(codes.ResourceExhausted, "quota"), false, []codes.Code{codes.Unavailable}, Refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Target: "x", Fencing: tt.fenced, TransientCodes: tt.codes}.withDefaults()
			a := &Agent{opts: o}
			if got := a.policy().Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v, fenced=%v) = %v, want %v", tt.err, tt.fenced, got, tt.want)
			}
		})
	}
}
