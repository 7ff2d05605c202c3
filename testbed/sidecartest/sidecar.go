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
	"github.com/gnmi-sidecar/gnmi-sidecar/introspection"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// connectTimeout bounds WaitConnected; tests connect far sooner.
const connectTimeout = 20 * time.Second

// Options configures Start.
type Options struct {
	// Target, if set, is the address of the device the sidecar fronts
	// (a fake device of the test); Start then starts no device, ignores
	// Device and does not wait for the agent to connect.
	Target string
	// Device configures the simulated device Start starts otherwise. Its
	// Logger defaults to the test log.
	Device testbed.Options
	// Agent configures the agent. Target is always the device's address;
	// zero BackoffInitial, BackoffMax and Resync get fast test values
	// (5 ms, 50 ms, 200 ms) and a nil Logger the test log.
	Agent agent.Options
	// QueueWhenDisconnected is proxy.Options.QueueWhenDisconnected.
	QueueWhenDisconnected bool
	// Retain is journal.Options.Retain (0: the journal's default).
	Retain int
	// DeviceUsername and DevicePassword are proxy.Options' (the sidecar's
	// own device credentials on passthrough RPCs).
	DeviceUsername, DevicePassword string
	// ServerOptions are added to the proxy's gRPC server options
	// (credentials, interceptors). Client still dials plaintext.
	ServerOptions []grpc.ServerOption
}

// Sidecar is a whole sidecar in-process, as gnmi-sidecar serve runs it: a
// journal, a running agent and the proxy served over gRPC on 127.0.0.1,
// in front of a device, with a client connected to the proxy.
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
	// Addr is the address the proxy is served on.
	Addr string
	// Client is a gNMI client connected to Addr.
	Client gpb.GNMIClient
}

// Start starts a sidecar for the test, logging to the test log. Unless
// opts.Target is set it starts a simulated device first and waits until
// the agent is connected to it. When the test ends it closes the client,
// stops the gRPC server and the agent (an error of Run fails the test),
// then closes the proxy and the journal, as gnmi-sidecar serve does.
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
	}
	s.Journal = openJournal(t, journal.Options{Retain: opts.Retain, Logger: log})

	aopts := opts.Agent
	aopts.Target = s.Target
	if aopts.BackoffInitial == 0 {
		aopts.BackoffInitial = 5 * time.Millisecond
	}
	if aopts.BackoffMax == 0 {
		aopts.BackoffMax = 50 * time.Millisecond
	}
	if aopts.Resync == 0 {
		aopts.Resync = 200 * time.Millisecond
	}
	if aopts.Logger == nil {
		aopts.Logger = log
	}
	a, err := agent.New(s.Journal, aopts)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	s.Agent = a

	tree, err := introspection.New(introspection.Options{Journal: s.Journal, Agent: a, Address: s.Target, Logger: log})
	if err != nil {
		t.Fatalf("introspection.New: %v", err)
	}
	srv, err := proxy.New(proxy.Options{
		Target:                s.Target,
		Journal:               s.Journal,
		Agent:                 a,
		QueueWhenDisconnected: opts.QueueWhenDisconnected,
		DeviceUsername:        opts.DeviceUsername,
		DevicePassword:        opts.DevicePassword,
		Introspection:         tree,
		Logger:                log,
	})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	s.Proxy = srv
	// Cleanups run last registered first: this one after the agent's.
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("proxy Close: %v", err)
		}
	})
	RunAgent(t, a)
	s.Addr = Serve(t, srv.Register, opts.ServerOptions...)
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
