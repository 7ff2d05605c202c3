package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/trace"
	"slices"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// floorProxy is the least a proxy that journals each Set before the device
// sees it can do: a gNMI server whose Set makes one durable write
// (durable) and then forwards the request, as it came, to the device,
// answering with the device's answer. The latency row measures Sets
// through it beside the sidecar's, on the same machine in the same run:
// what is left of the sidecar's latency above it is the sidecar's own.
type floorProxy struct {
	gpb.UnimplementedGNMIServer
	device  gpb.GNMIClient
	durable func(context.Context) error
	region  string // the runtime/trace region of its Sets, "floor.<kind>.Set"
}

func (p *floorProxy) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	defer trace.StartRegion(ctx, p.region).End() // hack/setstages tells these Sets from direct ones
	if err := p.durable(ctx); err != nil {
		return nil, status.Errorf(codes.Internal, "durable write: %v", err)
	}
	return p.device.Set(ctx, req)
}

// startFloorProxy serves a floorProxy (kind names it in traces) in front
// of the device at deviceAddr on 127.0.0.1 and returns its address and a
// stop function.
func startFloorProxy(deviceAddr, kind string, durable func(context.Context) error) (string, func(), error) {
	device, err := dialInsecure(deviceAddr)
	if err != nil {
		return "", nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		device.Close()
		return "", nil, err
	}
	srv := grpc.NewServer()
	gpb.RegisterGNMIServer(srv, &floorProxy{device: gpb.NewGNMIClient(device), durable: durable, region: "floor." + kind + ".Set"})
	labeled("floor", func() { go func() { _ = srv.Serve(lis) }() })
	return lis.Addr().String(), func() {
		srv.Stop()
		device.Close()
	}, nil
}

// forwardOnly is the floor proxy that writes nothing: only the extra gRPC
// hop any proxy adds.
func forwardOnly(context.Context) error { return nil }

// floorJournal is the journal floor proxy's journal (Badger, as the
// sidecar's) in a directory of its own: its durable write is one small
// record committed (a Connect, which writes the mastership record).
// Concurrent commits share a transaction and its fsync, as the sidecar's
// transitions do (the journal's group commit).
type floorJournal struct {
	j   *journal.Journal
	dir string
}

func openFloorJournal(log *slog.Logger) (*floorJournal, error) {
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-floor-")
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(dir, journal.Options{Logger: log})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("floor journal: %w", err)
	}
	return &floorJournal{j: j, dir: dir}, nil
}

// commit is the floor proxy's durable write.
func (f *floorJournal) commit(ctx context.Context) error { _, err := f.j.Connect(ctx); return err }

// transactions counts the transactions the journal committed.
func (f *floorJournal) transactions() uint64 { return f.j.Transactions() }

func (f *floorJournal) close() { _ = f.j.Close(); _ = os.RemoveAll(f.dir) }

// floors are the two floor proxies of the latency row, in front of the
// direct device: one fsyncs a 4 KiB write before forwarding (the target's
// one fsync), the other commits one small record to a journal (Badger, as
// the sidecar's journal does: a Connect, which writes the mastership
// record).
type floors struct {
	fsync, journal gpb.GNMIClient
	close          func()
}

func startFloors(deviceAddr string, log *slog.Logger) (_ *floors, err error) {
	var undo []func() // run last to first by close
	f := &floors{close: func() {
		for _, u := range slices.Backward(undo) {
			u()
		}
	}}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	fs, err := newFsyncer()
	if err != nil {
		return nil, err
	}
	undo = append(undo, fs.close)
	fj, err := openFloorJournal(log)
	if err != nil {
		return nil, err
	}
	undo = append(undo, fj.close)
	for _, p := range []struct {
		client  *gpb.GNMIClient
		kind    string
		durable func(context.Context) error
	}{
		{&f.fsync, "fsync", func(context.Context) error { return fs.sync() }},
		{&f.journal, "journal", fj.commit},
	} {
		addr, stop, err := startFloorProxy(deviceAddr, p.kind, p.durable)
		if err != nil {
			return nil, err
		}
		undo = append(undo, stop)
		clients, closeConns, err := dialClients(&side{addr: addr}, 1)
		if err != nil {
			return nil, err
		}
		undo = append(undo, closeConns)
		*p.client = clients[0]
	}
	return f, nil
}
