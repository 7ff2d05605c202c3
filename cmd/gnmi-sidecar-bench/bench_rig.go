package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// bencher runs the scenarios of one bench run.
type bencher struct {
	cfg benchConfig
	log *slog.Logger
}

// side is one gNMI endpoint under test with the device behind it: the
// sidecar in front of its own device, or a device on its own (direct).
type side struct {
	dev     *testbed.Device
	sidecar *sidecar.Sidecar // nil on the direct side
	addr    string
	conn    *grpc.ClientConn
	client  gpb.GNMIClient
	stop    func()
}

// rig is the sidecar (with its device) and a separate direct device.
type rig struct {
	sidecar, direct *side
}

func (r *rig) close() {
	r.sidecar.stop()
	r.direct.stop()
}

// startRig starts a fresh sidecar, as serve runs it, in front of a fresh
// device, and a second device for the direct side.
func (b *bencher) startRig(ctx context.Context) (*rig, error) {
	direct, err := b.startDirect(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := b.startSidecar(ctx)
	if err != nil {
		direct.stop()
		return nil, err
	}
	return &rig{sidecar: sc, direct: direct}, nil
}

func (b *bencher) startDevice(ctx context.Context) (*testbed.Device, error) {
	dev, err := testbed.New(testbed.Options{Logger: b.log.With("component", "device")})
	if err != nil {
		return nil, err
	}
	labeled("device", func() { err = dev.Start(ctx, "127.0.0.1:0") })
	if err != nil {
		return nil, fmt.Errorf("starting the device: %w", err)
	}
	return dev, nil
}

func (b *bencher) startDirect(ctx context.Context) (*side, error) {
	dev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := dialInsecure(dev.Addr())
	if err != nil {
		dev.Stop()
		return nil, err
	}
	return &side{dev: dev, addr: dev.Addr(), conn: conn, client: gpb.NewGNMIClient(conn), stop: func() {
		_ = conn.Close()
		dev.Stop()
	}}, nil
}

func dialInsecure(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// startSidecar builds a sidecar with package sidecar, with serve's
// defaults (the journal with fsync in a new temporary directory, metrics
// on a free port), in front of a new device, runs it in this process and
// waits until the agent is connected and not re-pushing.
func (b *bencher) startSidecar(ctx context.Context) (*side, error) {
	dev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-")
	if err != nil {
		dev.Stop()
		return nil, err
	}
	var sc *sidecar.Sidecar
	labeled("sidecar", func() { // New opens the journal, whose writer runs from then on
		sc, err = sidecar.New(sidecar.Config{
			Target:              dev.Addr(),
			JournalDir:          dir,
			JournalMinFreeBytes: 64 << 20, // serve's --journal-min-free default
			Listen:              "127.0.0.1:0",
			MetricsAddr:         "127.0.0.1:0", // on, as by default, but on a free port
			Reflection:          true,
			Logger:              b.log.With("component", "sidecar"),
		})
	})
	if err != nil {
		dev.Stop()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	labeled("sidecar", func() { go func() { done <- sc.Run(runCtx) }() })
	stopSidecar := func() {
		cancel()
		if err := <-done; err != nil {
			b.log.Error("sidecar", "err", err)
		}
		dev.Stop()
		_ = os.RemoveAll(dir)
	}
	conn, err := dialInsecure(sc.Addr())
	if err != nil {
		stopSidecar()
		return nil, err
	}
	s := &side{dev: dev, sidecar: sc, addr: sc.Addr(), conn: conn, client: gpb.NewGNMIClient(conn), stop: func() {
		_ = conn.Close()
		stopSidecar()
	}}
	if err := waitConnected(ctx, s.client); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// labeled runs start, which starts goroutines, with the profiler label
// part=part: the goroutines it starts, and theirs, carry it, so that a
// --cpuprofile tells the parts of the process apart
// (go tool pprof -tagfocus part=sidecar).
func labeled(part string, start func()) {
	pprof.Do(context.Background(), pprof.Labels("part", part), func(context.Context) { start() })
}

// introspectionOrigin is the gNMI origin of the sidecar's own tree
// (docs/introspection.md).
const introspectionOrigin = "gnmi-sidecar"

// waitConnected polls the sidecar's device state over gNMI until its agent
// is connected to the device and not re-pushing.
func waitConnected(ctx context.Context, c gpb.GNMIClient) error {
	return benchPoll(ctx, 2*time.Minute, "the sidecar to connect to its device", func(ctx context.Context) (bool, error) {
		st, err := deviceState(ctx, c)
		if err != nil {
			return false, nil //nolint:nilerr // not serving yet: keep polling
		}
		return st["connected"] && !st["repushing"], nil
	})
}

// deviceState reads the boolean leaves of the sidecar's device/state
// (connected, repushing, fenced) by name.
func deviceState(ctx context.Context, c gpb.GNMIClient) (map[string]bool, error) {
	resp, err := c.Get(ctx, &gpb.GetRequest{
		Prefix: &gpb.Path{Origin: introspectionOrigin},
		Path:   []*gpb.Path{{Elem: []*gpb.PathElem{{Name: "device"}, {Name: "state"}}}},
	})
	if err != nil {
		return nil, err
	}
	st := map[string]bool{}
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			elems := append(slices.Clone(n.GetPrefix().GetElem()), u.GetPath().GetElem()...)
			if len(elems) == 0 {
				continue
			}
			v := u.GetVal()
			st[elems[len(elems)-1].GetName()] = v.GetBoolVal() || v.GetStringVal() == "true"
		}
	}
	return st, nil
}

// benchPoll calls cond every 5 ms until it holds, it fails, ctx ends or timeout
// passes.
func benchPoll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// benchLeafPath is /interfaces/interface[name=NAME]/config/description.
func benchLeafPath(name string) *gpb.Path {
	return &gpb.Path{Elem: []*gpb.PathElem{
		{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": name}},
		{Name: "config"}, {Name: "description"},
	}}
}

func benchStr(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// setLeaf sets one leaf and returns how long the Set took.
func setLeaf(ctx context.Context, c gpb.GNMIClient, name, value string) (time.Duration, error) {
	req := &gpb.SetRequest{Update: []*gpb.Update{{Path: benchLeafPath(name), Val: benchStr(value)}}}
	start := time.Now()
	defer trace.StartRegion(ctx, "client.Set").End()
	if _, err := c.Set(ctx, req); err != nil {
		return 0, fmt.Errorf("gNMI Set %s: %w", name, err)
	}
	return time.Since(start), nil
}

// preloadBatch is the number of leaves per preload Set: more than one
// transaction of the journal's steady 2 MiB memtable holds, so a preload
// grows it once for its burst (journal/grow.go), as a bulk load does.
const preloadBatch = 2000

// preload sets leaves bench0…bench(n-1) in Sets of preloadBatch leaves.
func preload(ctx context.Context, c gpb.GNMIClient, n int) error {
	for base := 0; base < n; base += preloadBatch {
		req := &gpb.SetRequest{}
		for i := base; i < min(base+preloadBatch, n); i++ {
			req.Update = append(req.Update, &gpb.Update{Path: benchLeafPath(fmt.Sprintf("bench%d", i)), Val: benchStr("preloaded")})
		}
		if _, err := c.Set(ctx, req); err != nil {
			return fmt.Errorf("preloading leaves %d…: %w", base, err)
		}
	}
	return nil
}

// measureSets runs n one-leaf Sets from one client over leaves bench0…
// bench(spread-1) and returns their latencies.
func measureSets(ctx context.Context, c gpb.GNMIClient, n, spread int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		d, err := setLeaf(ctx, c, fmt.Sprintf("bench%d", (i*7919)%spread), fmt.Sprintf("v%d", i))
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// percentile of d (q in [0,1]) by sorting a copy.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fsyncer writes and fsyncs a temporary file in the journal's kind of
// place (the temporary directory), as the journal's commit does.
type fsyncer struct {
	f   *os.File
	buf []byte
}

func newFsyncer() (*fsyncer, error) {
	f, err := os.CreateTemp("", "gnmi-sidecar-bench-fsync-")
	if err != nil {
		return nil, err
	}
	return &fsyncer{f: f, buf: make([]byte, 4096)}, nil
}

func (s *fsyncer) close() {
	_ = s.f.Close()
	_ = os.Remove(s.f.Name())
}

// sync writes 4 KiB and fsyncs the file.
func (s *fsyncer) sync() error {
	if _, err := s.f.Write(s.buf); err != nil {
		return err
	}
	return s.f.Sync()
}

// fsyncTime is the median time of 50 writes of 4 KiB, each fsync'd, in
// the temporary directory (the journal's disk): the "one fsync" of the
// latency target.
func fsyncTime() (time.Duration, error) {
	s, err := newFsyncer()
	if err != nil {
		return 0, err
	}
	defer s.close()
	var lat []time.Duration
	for range 50 {
		start := time.Now()
		if err := s.sync(); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(start))
	}
	return percentile(lat, 0.5), nil
}
