package devread_test

import (
	"context"
	"fmt"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// TestReadCoalesced: many entries of one list are read with one Get of the
// list, named as read wide; a device that refuses that Get (an account
// limited to some entries) is read entry by entry, and nothing is then
// wide; a device that cannot be reached is not read entry by entry.
func TestReadCoalesced(t *testing.T) {
	const entries = devread.CoalesceAt + 4
	var paths []*gpb.Path
	for n := range entries {
		paths = append(paths, mustPath(t, fmt.Sprintf("/interfaces/interface[name=e%d]", n)))
	}
	parent := "/interfaces"
	for _, tc := range []struct {
		name       string
		parentCode codes.Code // the device's answer to a Get of the parent; OK: it answers
		wantGets   int
		wantWide   bool
		wantValues int
		wantCode   codes.Code
	}{
		{name: "the device answers the list", parentCode: codes.OK, wantGets: 1, wantWide: true, wantValues: 1},
		{name: "the device refuses the list", parentCode: codes.PermissionDenied, wantGets: 1 + entries, wantValues: entries},
		{name: "the device is unreachable", parentCode: codes.Unavailable, wantGets: 1, wantCode: codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &fakeDevice{answer: func(in *gpb.GetRequest) (*gpb.GetResponse, error) {
				p := in.GetPath()[0]
				if gnmipath.String(p) == parent && tc.parentCode != codes.OK {
					return nil, status.Error(tc.parentCode, "not for this account")
				}
				return &gpb.GetResponse{Notification: []*gpb.Notification{{
					Update: []*gpb.Update{{Path: p, Val: jsonIETF(`{"config":{"description":"d"}}`)}}}}}, nil
			}}
			r := devread.New(dev)
			values, wide, err := r.ReadCoalesced(context.Background(), "", paths)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("err %v, want code %v", err, tc.wantCode)
			}
			if dev.gets != tc.wantGets {
				t.Errorf("%d Gets, want %d", dev.gets, tc.wantGets)
			}
			if got := len(wide) == 1 && gnmipath.String(wide[0]) == parent; got != tc.wantWide || (!tc.wantWide && len(wide) > 0) {
				t.Errorf("wide %v, want %s: %v", wide, parent, tc.wantWide)
			}
			if len(values) != tc.wantValues {
				t.Errorf("%d values, want %d", len(values), tc.wantValues)
			}
		})
	}
	t.Run("a few entries", func(t *testing.T) {
		dev := &fakeDevice{answer: func(in *gpb.GetRequest) (*gpb.GetResponse, error) {
			return &gpb.GetResponse{}, nil
		}}
		if _, wide, err := devread.New(dev).ReadCoalesced(context.Background(), "", paths[:devread.CoalesceAt-1]); err != nil || len(wide) > 0 || dev.gets != devread.CoalesceAt-1 {
			t.Errorf("reading %d entries: %d Gets, wide %v, err %v; want one Get each, nothing wide", devread.CoalesceAt-1, dev.gets, wide, err)
		}
	})
}
