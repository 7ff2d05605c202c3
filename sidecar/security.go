package sidecar

import (
	"crypto/tls"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/gnmi-sidecar/gnmi-sidecar/authz"
)

// securityOptions returns the northbound gRPC server's credentials (TLS
// when serverTLS is set) and authorization interceptors (when policy is
// set). See docs/security.md.
func securityOptions(serverTLS *tls.Config, policy *authz.Policy, log *slog.Logger) []grpc.ServerOption {
	var opts []grpc.ServerOption
	if serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(serverTLS)))
	}
	if policy != nil {
		a := authz.NewAuthorizer(policy, log)
		opts = append(opts,
			grpc.ChainUnaryInterceptor(a.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(a.StreamInterceptor()))
	}
	return opts
}
