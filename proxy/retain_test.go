package proxy_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// retainSentinel is hung on each RPC's context by TestSetsRetainNothing;
// its pointer keeps it out of the tiny allocator, whose blocks are freed
// together.
type retainSentinel struct {
	_ *int
	_ [16]byte
}

type retainKey struct{}

// TestSetsRetainNothing: once a Set is answered, nothing the server keeps
// for its lifetime holds the Set's context, and so its gRPC stream, its
// request and what hangs from them (issue 39: a SYNC Set's wait context
// registered an AfterFunc on the server's long-lived wait context and never
// stopped it, about 2 KB of live heap per Set, for good). Counted, not
// measured: each RPC's context carries a sentinel whose cleanup counts it
// freed; after the Sets and a GC, all but a few must be.
func TestSetsRetainNothing(t *testing.T) {
	var made, freed atomic.Int64
	track := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s := &retainSentinel{}
		made.Add(1)
		runtime.AddCleanup(s, func(struct{}) { freed.Add(1) }, struct{}{})
		return h(context.WithValue(ctx, retainKey{}, s), req)
	}
	r := sidecartest.Start(t, sidecartest.Options{ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(track)}})

	const sets = 200 // half SYNC, half ASYNC
	for i := range sets {
		req := sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal(fmt.Sprintf("v%d", i)))
		if i%2 == 1 {
			req.Extension = []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, sidecartest.AsyncMode())}
		}
		r.MustSet(t, req)
	}
	r.Settle(t)

	// A few RPCs may still be on their way out of gRPC: allow them.
	const slack = 8
	deadline := time.Now().Add(waitFor)
	for made.Load()-freed.Load() > slack && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if kept := made.Load() - freed.Load(); kept > slack {
		t.Errorf("after %d Sets (%d RPCs), %d RPC contexts are still reachable, want at most %d: something the server keeps holds finished Sets", sets, made.Load(), kept, slack)
	}
}
