package main

import (
	"log/slog"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// observabilityConfig holds the serve options about metrics, health and
// reflection.
type observabilityConfig struct{}

func (c *observabilityConfig) addFlags(f *pflag.FlagSet) {}

// observability is the sidecar's metrics, health and reflection.
type observability struct{}

func newObservability(cfg observabilityConfig, log *slog.Logger) (*observability, error) {
	return &observability{}, nil
}

// Observe receives every journal transition (a journal.Options.Observer).
func (o *observability) Observe(e journal.Event) {}

// attach gives the journal and agent to watch.
func (o *observability) attach(j *journal.Journal, a *agent.Agent) {}

// serverOptions returns the northbound gRPC server's options (RPC metrics).
func (o *observability) serverOptions() []grpc.ServerOption { return nil }

// register registers the health and reflection services on g.
func (o *observability) register(g *grpc.Server) {}

// start starts serving metrics and tracking health; stop undoes it.
func (o *observability) start() (stop func(), err error) { return func() {}, nil }
