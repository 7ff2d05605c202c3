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
		want   outcome
	}{
		{"no error", nil, false, nil, accepted},
		{"invalid value", status.Error(codes.InvalidArgument, "bad"), false, nil, rejected},
		{"unknown path", status.Error(codes.NotFound, "no such path"), false, nil, rejected},
		{"precondition", status.Error(codes.FailedPrecondition, "locked"), false, nil, rejected},
		{"unimplemented", status.Error(codes.Unimplemented, "union_replace"), false, nil, rejected},
		{"aborted", status.Error(codes.Aborted, "conflict"), false, nil, rejected},
		{"device bug", status.Error(codes.Internal, "oops"), false, nil, rejected},
		{"unavailable", status.Error(codes.Unavailable, "conn reset"), false, nil, transient},
		{"timeout", status.Error(codes.DeadlineExceeded, "slow"), false, nil, transient},
		{"overload", status.Error(codes.ResourceExhausted, "busy"), false, nil, transient},
		{"own cancel", status.Error(codes.Canceled, "session ended"), false, nil, transient},
		{"bad credentials", status.Error(codes.Unauthenticated, "who"), false, nil, transient},
		{"not a gRPC error", errors.New("io"), false, nil, transient},
		{"arbitration with fencing", arbitration, true, nil, superseded},
		{"arbitration without fencing", arbitration, false, nil, rejected},
		{"authorization refusal with fencing", status.Error(codes.PermissionDenied, "user may not write /system"), true, nil, rejected},
		{"configured transient", status.Error(codes.Aborted, "commit in progress"), false, []codes.Code{codes.Aborted}, transient},
		{"configured away", status.Error(codes.ResourceExhausted, "quota"), false, []codes.Code{codes.Unavailable}, rejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{opts: Options{Fencing: tt.fenced, TransientCodes: tt.codes}.withDefaults()}
			if got := a.classify(tt.err); got != tt.want {
				t.Errorf("classify(%v, fenced=%v) = %v, want %v", tt.err, tt.fenced, got, tt.want)
			}
		})
	}
}
