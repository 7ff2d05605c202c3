package main

import (
	"fmt"
	"net"

	"github.com/spf13/pflag"
)

// defaultMetricsAddr is where serve exposes /metrics unless told otherwise.
const defaultMetricsAddr = "127.0.0.1:9341"

// observabilityConfig holds the serve options about metrics, health and
// reflection (served by package sidecar).
type observabilityConfig struct {
	metricsAddr string
	reflection  bool
	pprof       bool
}

func (c *observabilityConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.metricsAddr, "metrics", defaultMetricsAddr, `serve Prometheus metrics on http://ADDR/metrics ("" turns them off; port 0 picks a free port, printed after the listen address)`)
	f.BoolVar(&c.pprof, "pprof", false, "a diagnostic: also serve Go's profiles (net/http/pprof) on http://ADDR/debug/pprof/ of --metrics")
	_ = f.MarkHidden("pprof")
	f.BoolVar(&c.reflection, "reflection", true, "register the gRPC reflection service (grpcurl and similar tools list the services with it)")
}

// check refuses a --metrics that is not host:port.
func (c *observabilityConfig) check() error {
	if c.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.metricsAddr); err != nil {
			return fmt.Errorf("--metrics %q: %w", c.metricsAddr, err)
		}
	} else if c.pprof {
		return fmt.Errorf("--pprof serves on the --metrics address: give one")
	}
	return nil
}
