package devread_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// fakeDevice answers Gets with answer (by data type), counting them.
type fakeDevice struct {
	mu     sync.Mutex
	gets   int
	answer func(*gpb.GetRequest) (*gpb.GetResponse, error)
}

func (d *fakeDevice) Get(_ context.Context, in *gpb.GetRequest, _ ...grpc.CallOption) (*gpb.GetResponse, error) {
	d.mu.Lock()
	d.gets++
	d.mu.Unlock()
	return d.answer(in)
}

func jsonIETF(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

func TestReadFake(t *testing.T) {
	configRefused := func(in *gpb.GetRequest) error {
		if in.GetType() == gpb.GetRequest_CONFIG {
			return status.Error(codes.Unimplemented, "unsupported request type: CONFIG")
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		path   string
		answer func(*gpb.GetRequest) (*gpb.GetResponse, error)
		want   map[string]string // flattened
		code   codes.Code        // of the error, OK for none
		gets   int               // Gets made, 0: not checked
	}{
		{
			name: "state pruned inside lists and module-prefixed members",
			path: "/interfaces",
			answer: func(in *gpb.GetRequest) (*gpb.GetResponse, error) {
				if err := configRefused(in); err != nil {
					return nil, err
				}
				return &gpb.GetResponse{Notification: []*gpb.Notification{{Prefix: &gpb.Path{Target: "dev"}, Update: []*gpb.Update{{
					Path: mustPath(t, "/interfaces"),
					Val: jsonIETF(`{"openconfig-interfaces:interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500},` +
						`"openconfig-interfaces:state":{"counters":{"in-octets":"7"}},"subinterfaces":{"subinterface":[{"index":0,"state":{"x":1},"config":{"index":0}}]}}]}`),
				}}}}}, nil
			},
			want: map[string]string{"/interfaces/interface/name": "eth0", "/interfaces/interface/config/name": "eth0", "/interfaces/interface/config/mtu": "1500",
				"/interfaces/interface/subinterfaces/subinterface/index": "0", "/interfaces/interface/subinterfaces/subinterface/config/index": "0"},
		},
		{
			name: "scalar state updates dropped, origin openconfig as none",
			path: "/system",
			answer: func(in *gpb.GetRequest) (*gpb.GetResponse, error) {
				if err := configRefused(in); err != nil {
					return nil, err
				}
				return &gpb.GetResponse{Notification: []*gpb.Notification{{Prefix: &gpb.Path{Origin: "openconfig", Elem: []*gpb.PathElem{{Name: "system"}}}, Update: []*gpb.Update{
					{Path: mustPath(t, "/config/hostname"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "r1"}}},
					{Path: mustPath(t, "/state/boot-time"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 1}}},
				}}}}, nil
			},
			want: map[string]string{"/system/config/hostname": "r1"},
		},
		{
			name:   "nothing there with Get ALL",
			path:   "/system",
			answer: func(in *gpb.GetRequest) (*gpb.GetResponse, error) { return nil, configRefusedOr(in, codes.NotFound) },
			want:   map[string]string{},
		},
		{
			name: "the account refused: no other method tried",
			path: "/system",
			answer: func(*gpb.GetRequest) (*gpb.GetResponse, error) {
				return nil, status.Error(codes.PermissionDenied, "no")
			},
			code: codes.PermissionDenied,
			gets: 1,
		},
		{
			name: "unreachable: no other method tried",
			path: "/system",
			answer: func(*gpb.GetRequest) (*gpb.GetResponse, error) {
				return nil, status.Error(codes.Unavailable, "connection refused")
			},
			code: codes.Unavailable,
			gets: 1,
		},
		{
			name: "every Get refused, no Subscribe",
			path: "/system",
			answer: func(*gpb.GetRequest) (*gpb.GetResponse, error) {
				return nil, status.Error(codes.InvalidArgument, "no")
			},
			code: codes.FailedPrecondition,
			gets: 6,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &fakeDevice{answer: tc.answer}
			ups, err := devread.New(dev).Read(context.Background(), "dev", mustPath(t, tc.path))
			if tc.code != codes.OK {
				if status.Code(err) != tc.code || !errors.Is(err, devread.ErrUnreadable) {
					t.Errorf("error %v (code %v), want %v wrapping ErrUnreadable", err, status.Code(err), tc.code)
				}
			} else if err != nil {
				t.Fatal(err)
			} else {
				got := flatten(t, ups)
				if len(got) != len(tc.want) {
					t.Errorf("values %v, want %v", got, tc.want)
				}
				for p, v := range tc.want {
					if got[p] != v {
						t.Errorf("%s = %q, want %q (all %v)", p, got[p], v, got)
					}
				}
				for _, u := range ups {
					if u.GetPath().GetOrigin() != "" || u.GetPath().GetTarget() != "" {
						t.Errorf("path %s with origin %q, target %q", gnmipath.String(u.GetPath()), u.GetPath().GetOrigin(), u.GetPath().GetTarget())
					}
				}
			}
			if tc.gets > 0 && dev.gets != tc.gets {
				t.Errorf("%d Gets, want %d", dev.gets, tc.gets)
			}
		})
	}
}

func configRefusedOr(in *gpb.GetRequest, code codes.Code) error {
	if in.GetType() == gpb.GetRequest_CONFIG {
		return status.Error(codes.Unimplemented, "unsupported request type: CONFIG")
	}
	return status.Error(code, "nothing")
}
