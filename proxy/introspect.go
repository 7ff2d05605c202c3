package proxy

import (
	"context"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (s *Server) introspectGet(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	return nil, status.Error(codes.Unimplemented, "introspection: not yet")
}

func (s *Server) introspectSubscribe(stream gpb.GNMI_SubscribeServer, first *gpb.SubscribeRequest) error {
	return status.Error(codes.Unimplemented, "introspection: not yet")
}
