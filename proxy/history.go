package proxy

import (
	"context"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// historyExtension returns the History extension of a Get or Subscribe
// request (nil if absent).
func historyExtension(exts []*gnmi_ext.Extension) (*gnmi_ext.History, error) {
	var out *gnmi_ext.History
	for _, e := range exts {
		if h := e.GetHistory(); h != nil {
			if out != nil {
				return nil, status.Error(codes.InvalidArgument, "more than one History extension in one request")
			}
			out = h
		}
	}
	return out, nil
}

func (s *Server) historyGet(ctx context.Context, req *gpb.GetRequest, h *gnmi_ext.History) (*gpb.GetResponse, error) {
	return nil, status.Error(codes.Unimplemented, "History: not yet")
}

func (s *Server) historySubscribe(stream gpb.GNMI_SubscribeServer, first *gpb.SubscribeRequest, h *gnmi_ext.History) error {
	return status.Error(codes.Unimplemented, "History: not yet")
}
