package agent

import (
	"testing"

	"github.com/openconfig/ygot/ygot"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// TestBlame: a refused batch's answer is one proposal's only when it names
// that proposal's paths and no other's.
func TestBlame(t *testing.T) {
	proposal := func(i uint64, paths ...string) *journal.Proposal {
		ch := &journal.Change{}
		for _, s := range paths {
			p, err := ygot.StringToStructuredPath(s)
			if err != nil {
				t.Fatal(err)
			}
			ch.Ops = append(ch.Ops, &journal.Op{Kind: journal.OpUpdate, Path: p})
		}
		return &journal.Proposal{Index: i, Change: ch}
	}
	batch := []*journal.Proposal{
		proposal(1, "/interfaces/interface[name=eth0]/config/description"),
		proposal(2, "/interfaces/interface[name=eth1]/config/mtu", "/system/config/hostname"),
		proposal(3, "/interfaces/interface[name=eth2]/config/description"),
	}
	withDetails := func(field string) error {
		st, err := status.New(codes.InvalidArgument, "bad value").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: "out of range"}}})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for _, tt := range []struct {
		name string
		err  error
		want uint64
	}{
		{"the message names one proposal's path", status.Error(codes.ResourceExhausted, "/interfaces/interface[name=eth1]/config/mtu: quota"), 2},
		{"a path under one proposal's", status.Error(codes.InvalidArgument, "/system/config/hostname/x is bad"), 2},
		{"BadRequest details name it", withDetails("/interfaces/interface[name=eth2]/config/description"), 3},
		{"no path named", status.Error(codes.ResourceExhausted, "device busy"), 0},
		{"two proposals named", status.Error(codes.InvalidArgument,
			"/interfaces/interface[name=eth0]/config/description and /interfaces/interface[name=eth2]/config/description"), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := blame(batch, tt.err); got != tt.want {
				t.Errorf("blame = %d, want %d", got, tt.want)
			}
		})
	}
}
