package sidecartest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// connectTimeout bounds WaitConnected; tests connect far sooner.
const connectTimeout = 20 * time.Second

// shutdownTimeout bounds how long the sidecar Start started waits, when
// the test ends, for RPCs still running.
const shutdownTimeout = 2 * time.Second

// Options configures Start.
type Options struct {
	// Target, if set, is the address of the device the sidecar fronts
	// (a fake device of the test); Start then starts no device, ignores
	// Device and does not wait for the agent to connect.
	Target string
	// Device configures the simulated device Start starts otherwise. Its
	// Logger defaults to the test log.
	Device testbed.Options
	// QueueWhenDisconnected is sidecar.Config.QueueWhenDisconnected.
	QueueWhenDisconnected bool
	// MaxRollbackDuration is sidecar.Config.MaxRollbackDuration.
	MaxRollbackDuration time.Duration
	// AlwaysReplyExtension is sidecar.Config.AlwaysReplyExtension.
	AlwaysReplyExtension bool
	// Retain is the journal's retention (journal.Options.Retain; 0: the
	// journal's default).
	Retain int
	// DeviceUsername and DevicePassword are the sidecar's own device
	// credentials (sidecar.Config's).
	DeviceUsername, DevicePassword string
	// DeviceTarget is sidecar.Config.DeviceTarget.
	DeviceTarget string
	// ServerOptions are added to the northbound gRPC server's options
	// (credentials, interceptors). Client still dials plaintext.
	ServerOptions []grpc.ServerOption
	// DriftPolicy and DriftInterval are sidecar.Config's (drift
	// detection; "" is report).
	DriftPolicy   drift.Policy
	DriftInterval time.Duration
	// Schema is the device's YANG schema (sidecar.Config.Schema); nil:
	// none.
	Schema *leaves.Schema
	// Seed are Sets sent to the simulated device directly before the
	// sidecar starts: configuration the device holds that the sidecar did
	// not write.
	Seed []*gpb.SetRequest
	// Baseline and ManagedPaths are sidecar.Config's (the onboarding
	// baseline); Start then also waits for the baseline to be decided.
	Baseline     bool
	ManagedPaths []*gpb.Path
}

// Sidecar is a whole sidecar in-process, built by sidecar.New as
// gnmi-sidecar serve builds it: a journal, a running agent and the proxy
// served over gRPC on 127.0.0.1, in front of a device, with a client
// connected to the proxy.
type Sidecar struct {
	// Dev is the simulated device; nil with Options.Target.
	Dev *testbed.Device
	// Target is the device's address.
	Target string
	// Journal is the sidecar's journal (no fsync, in a temporary
	// directory).
	Journal *journal.Journal
	// Agent is the running agent.
	Agent *agent.Agent
	// Proxy is the northbound gNMI service.
	Proxy *proxy.Server
	// Drift is the drift watcher.
	Drift *drift.Watcher
	// Addr is the address the proxy is served on.
	Addr string
	// Client is a gNMI client connected to Addr.
	Client gpb.GNMIClient
}

// Start starts a sidecar for the test with sidecar.New (northbound on a
// free 127.0.0.1 port, the journal without fsync in a temporary directory,
// no metrics listener, agent backoffs of 5 ms to 50 ms and a 200 ms resync),
// logging to the test log. Unless opts.Target is set it starts a simulated
// device first and waits until the agent is connected to it. When the test
// ends it closes the client and stops the sidecar as gnmi-sidecar serve
// does on SIGTERM; an error of Run fails the test.
func Start(t testing.TB, opts Options) *Sidecar {
	t.Helper()
	log := Logger(t) // first, so the cleanups below still log
	s := &Sidecar{Target: opts.Target}
	if s.Target == "" {
		devOpts := opts.Device
		if devOpts.Logger == nil {
			devOpts.Logger = log.With("component", "device")
		}
		s.Dev = testbed.StartT(t, devOpts)
		s.Target = s.Dev.Addr()
		if len(opts.Seed) > 0 {
			dev := Dial(t, s.Target)
			for _, req := range opts.Seed {
				if _, err := dev.Set(context.Background(), req); err != nil {
					t.Fatalf("seeding the device: %v", err)
				}
			}
		}
	}
	sc, err := sidecar.New(sidecar.Config{
		Target:                s.Target,
		DeviceUsername:        opts.DeviceUsername,
		DevicePassword:        opts.DevicePassword,
		DeviceTarget:          opts.DeviceTarget,
		QueueWhenDisconnected: opts.QueueWhenDisconnected,
		MaxRollbackDuration:   opts.MaxRollbackDuration,
		AlwaysReplyExtension:  opts.AlwaysReplyExtension,
		DriftPolicy:           opts.DriftPolicy,
		DriftInterval:         opts.DriftInterval,
		Schema:                opts.Schema,
		Baseline:              opts.Baseline,
		ManagedPaths:          opts.ManagedPaths,
		JournalDir:            t.TempDir(),
		JournalNoSync:         true,
		JournalRetain:         opts.Retain,
		JournalMemTableSize:   1 << 20,
		Listen:                "127.0.0.1:0",
		// Stop waits for the handlers, so that none runs on once the
		// journal is closed.
		ServerOptions:   append([]grpc.ServerOption{grpc.WaitForHandlers(true)}, opts.ServerOptions...),
		ShutdownTimeout: shutdownTimeout,
		BackoffInitial:  5 * time.Millisecond,
		BackoffMax:      50 * time.Millisecond,
		Resync:          200 * time.Millisecond,
		Logger:          log,
	})
	if err != nil {
		t.Fatalf("sidecar.New: %v", err)
	}
	s.Journal, s.Agent, s.Proxy, s.Drift, s.Addr = sc.Journal(), sc.Agent(), sc.Proxy(), sc.Drift(), sc.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sidecar Run: %v", err)
		}
	})
	<-sc.Ready()
	s.Client = Dial(t, s.Addr)
	if s.Dev != nil {
		s.WaitConnected(t, true)
	}
	return s
}

// WaitConnected waits until the agent's session with the device is up
// (want) or down, failing t after 20 s.
func (s *Sidecar) WaitConnected(t testing.TB, want bool) {
	t.Helper()
	Eventually(t, connectTimeout, fmt.Sprintf("the agent's Status().Connected to be %v", want), func() bool {
		return s.Agent.Status().Connected == want
	})
}

// DeviceLeaves returns dev's configuration, leaf path → value (see
// testbed.Device.ConfigLeaves), failing the test on an error.
func DeviceLeaves(t testing.TB, dev *testbed.Device) map[string]*gpb.TypedValue {
	t.Helper()
	leaves, err := dev.ConfigLeaves()
	if err != nil {
		t.Fatalf("the device's configuration: %v", err)
	}
	return leaves
}

// OpenJournal opens a journal for the test in a temporary directory, with
// no fsync and small memtables, logging to log (nil: the journal's
// default). It is closed when the test ends; an error closing it fails the
// test.
func OpenJournal(t testing.TB, log *slog.Logger) *journal.Journal {
	t.Helper()
	return openJournal(t, journal.Options{Logger: log})
}

// openJournal is OpenJournal with opts, whose NoSync and MemTableSize it
// sets.
func openJournal(t testing.TB, opts journal.Options) *journal.Journal {
	t.Helper()
	opts.NoSync, opts.MemTableSize = true, 1<<20
	j, err := journal.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("journal.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Errorf("journal Close: %v", err)
		}
	})
	return j
}

// RunAgent runs a until the test ends, then stops it and fails the test
// if Run returned an error.
func RunAgent(t testing.TB, a *agent.Agent) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent Run: %v", err)
		}
	})
}
