package proxy_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// clientPrefixes are SetRequest prefixes a client may send with a resolve
// or a rollback to a point, none of which the proposal may take.
var clientPrefixes = []struct {
	name   string
	prefix *gpb.Path
}{
	{"elements", &gpb.Path{Elem: []*gpb.PathElem{{Name: "system"}}}},
	{"origin", &gpb.Path{Origin: "openconfig"}},
	{"origin and elements", &gpb.Path{Origin: "openconfig", Elem: []*gpb.PathElem{{Name: "system"}, {Name: "config"}}}},
	{"target", &gpb.Path{Target: "dev1"}},
}

// TestResolveAdoptionIgnoresTheClientsPrefix: a resolve Set's prefix
// (target, origin, elements) has no bearing on the adopted proposal: the
// proposal carries the prefix of the target its values were read from
// (none here), the journal records them there, and when the adoption
// reaches the device as a Set after all (the session changed term between
// the read and the apply), the device gets the journaled paths, in no
// prefix of the client's.
func TestResolveAdoptionIgnoresTheClientsPrefix(t *testing.T) {
	for _, tt := range clientPrefixes {
		t.Run(tt.name, func(t *testing.T) {
			dev := testbed.StartT(t, testbed.Options{})
			gd := newGatedDevice(t, dev.Addr())
			r := sidecartest.Start(t, sidecartest.Options{Target: gd.addr})
			r.WaitConnected(t, true)
			r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))) // proposal 1

			// The adoption's read of the device: once answered, the
			// session goes down and stays down until the proposal is
			// journaled, so that it is applied under another term.
			downed := make(chan struct{})
			var once sync.Once
			gd.setAfterGet(func() {
				once.Do(func() {
					gd.setDown(true)
					for deadline := time.Now().Add(waitFor); r.Agent.Status().Connected && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					close(downed)
				})
			})
			req := &gpb.SetRequest{Prefix: tt.prefix, Extension: []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, &sidecarpb.Request{
				Resolve: &sidecarpb.Resolve{Action: sidecarpb.Resolve_ACTION_ADOPT, Paths: []string{descPath}}})}}
			type answer struct {
				resp *gpb.SetResponse
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), markerKey, "resolve"), waitFor)
				defer cancel()
				resp, err := r.Client.Set(ctx, req)
				answered <- answer{resp, err}
			}()
			select {
			case <-downed:
				if r.Agent.Status().Connected {
					t.Fatal("the agent is still connected to the gated device")
				}
			case a := <-answered:
				t.Fatalf("resolve answered before the device was read: %v", a.err)
			case <-time.After(waitFor):
				t.Fatal("resolve adopt never read the device")
			}
			sidecartest.Eventually(t, waitFor, "the adoption to be journaled", func() bool {
				c, err := r.Journal.Configuration(t.Context())
				return err == nil && c.GetLastIndex() == 2
			})
			gd.setDown(false)
			a := <-answered
			if a.err != nil {
				t.Fatalf("resolve adopt: %v", a.err)
			}
			if got := sidecartest.ResponseExtension(t, a.resp).GetResolve().GetProposal(); got != 2 {
				t.Fatalf("resolve adopt journaled proposal %d, want 2", got)
			}

			p := r.Proposal(t, 2)
			if !p.GetChange().GetAdopted() {
				t.Fatalf("proposal 2 is not an adoption: %v", p)
			}
			if got := p.GetChange().GetPrefix(); proto.Size(got) != 0 {
				t.Errorf("the adopted proposal's prefix %v, want none (the values' target, none): the client's prefix is not the adoption's", got)
			}
			m, ok := dev.LastRequest("Set") // the adoption's: the re-push came before it
			if !ok {
				t.Fatal("no Set reached the device")
			}
			set := m.Message.(*gpb.SetRequest)
			if proto.Size(set.GetPrefix()) != 0 {
				t.Errorf("the adoption's device Set has prefix %v, want none", set.GetPrefix())
			}
			var paths []string
			for _, p := range set.GetDelete() {
				paths = append(paths, gnmipath.String(p))
			}
			for _, u := range set.GetUpdate() {
				paths = append(paths, gnmipath.String(u.GetPath()))
			}
			if len(paths) != 2 || paths[0] != descPath || paths[1] != descPath {
				t.Errorf("the device's last Set writes %q, want the adoption's: a delete and an update of %s", paths, descPath)
			}
			v := journalValues(t, r)
			for name, pvs := range map[string][]*journal.PathValue{"committed": v.Committed, "applied": v.Applied} {
				var desc *journal.PathValue
				for _, pv := range pvs {
					if gnmipath.String(pv.GetPath()) == descPath {
						desc = pv
					}
				}
				if desc.GetIndex() != 2 || desc.GetPath().GetOrigin() != "" || desc.GetPath().GetTarget() != "" ||
					string(desc.GetValue().GetJsonIetfVal()) != `"one"` {
					t.Errorf("journal's %s value at %s: %v, want \"one\" of proposal 2, with no origin nor target", name, descPath, desc)
				}
			}
			if got := sidecartest.DeviceLeaves(t, dev)[descPath]; got.GetStringVal() != "one" {
				t.Errorf("device's %s = %v, want one", descPath, got)
			}
		})
	}
}

// TestRestoreIgnoresTheClientsPrefix: a rollback to a point (to_index,
// to_tag) carries the target of the values it writes back, and nothing
// of its Set's prefix: the device gets the journaled paths.
func TestRestoreIgnoresTheClientsPrefix(t *testing.T) {
	for _, tt := range clientPrefixes {
		t.Run(tt.name, func(t *testing.T) {
			r := sidecartest.Start(t, sidecartest.Options{})
			r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("one"))) // proposal 1
			r.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("two"))) // proposal 2
			req := &gpb.SetRequest{Prefix: tt.prefix, Extension: []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, &sidecarpb.Request{
				Rollback: &sidecarpb.Rollback{ToIndex: proto.Uint64(1)}})}}
			if _, err := r.Set(t, req); err != nil {
				t.Fatalf("rollback to proposal 1: %v", err)
			}
			if got := r.Proposal(t, 3).GetChange().GetPrefix(); proto.Size(got) != 0 {
				t.Errorf("the restore's prefix %v, want none (the values' target, none)", got)
			}
			m, ok := r.Dev.LastRequest("Set")
			if !ok {
				t.Fatal("no Set reached the device")
			}
			set := m.Message.(*gpb.SetRequest)
			if proto.Size(set.GetPrefix()) != 0 || len(set.GetUpdate()) != 1 || gnmipath.String(set.GetUpdate()[0].GetPath()) != descPath {
				t.Errorf("the restore's device Set %v, want an update of %s in no prefix", set, descPath)
			}
			r.WantDeviceLeaf(t, descPath, sidecartest.StringVal("one"))
			for _, pv := range journalValues(t, r).Committed {
				if pv.GetPath().GetTarget() != "" || pv.GetPath().GetOrigin() != "" {
					t.Errorf("committed value %v: want no target nor origin", pv)
				}
			}
		})
	}
}

// markerKey is the metadata key of the test's own calls: a gatedDevice
// lets them through while it is down (the proxy forwards a client's
// metadata to the device).
const markerKey = "x-test-marker"

// gatedDevice is a device between the sidecar and a simulated device that
// relays every RPC; while down, it ends the streams it relays and refuses
// every call but the test's own (markerKey) with Unavailable, so the
// agent loses its session and cannot open another. afterGet (if set) runs
// after each of the test's Gets is answered by the device, before the
// answer is relayed.
type gatedDevice struct {
	gpb.UnimplementedGNMIServer
	addr     string
	dev      gpb.GNMIClient
	afterGet func()
	// getErr, if set, answers every Get.
	getErr error

	mu      sync.Mutex
	down    bool
	streams map[*int]context.CancelFunc
	// hold, if set, holds every Subscribe but the test's own until it is
	// closed; held counts those it holds.
	hold chan struct{}
	held int
}

// holdSubscribes holds the Subscribes (the agent's liveness subscription,
// which sets up its session) until the function it returns is called.
func (d *gatedDevice) holdSubscribes() (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	hold := make(chan struct{})
	d.hold = hold
	return sync.OnceFunc(func() {
		d.mu.Lock()
		d.hold = nil
		d.mu.Unlock()
		close(hold)
	})
}

// subscribesHeld counts the Subscribes holdSubscribes held.
func (d *gatedDevice) subscribesHeld() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held
}

func newGatedDevice(t *testing.T, target string) *gatedDevice {
	d := &gatedDevice{dev: sidecartest.Dial(t, target), streams: map[*int]context.CancelFunc{}}
	d.addr = sidecartest.Serve(t, func(g *grpc.Server) { gpb.RegisterGNMIServer(g, d) })
	return d
}

func marked(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(markerKey)) > 0
}

// setDown takes the device down (ending the streams it relays) or up.
func (d *gatedDevice) setDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
	if down {
		for _, cancel := range d.streams {
			cancel()
		}
	}
}

func (d *gatedDevice) gate(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down && !marked(ctx) {
		return status.Error(codes.Unavailable, "gated device: down")
	}
	return nil
}

// setAfterGet sets afterGet.
func (d *gatedDevice) setAfterGet(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.afterGet = fn
}

func (d *gatedDevice) Capabilities(ctx context.Context, req *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	if err := d.gate(ctx); err != nil {
		return nil, err
	}
	return d.dev.Capabilities(ctx, req)
}

// refuseGets answers every Get with err from now on (nil: relays them).
func (d *gatedDevice) refuseGets(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.getErr = err
}

func (d *gatedDevice) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	if err := d.gate(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	refused := d.getErr
	d.mu.Unlock()
	if refused != nil {
		return nil, refused
	}
	resp, err := d.dev.Get(ctx, req)
	d.mu.Lock()
	after := d.afterGet
	d.mu.Unlock()
	if err == nil && marked(ctx) && after != nil {
		after()
	}
	return resp, err
}

func (d *gatedDevice) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	if err := d.gate(ctx); err != nil {
		return nil, err
	}
	return d.dev.Set(ctx, req)
}

func (d *gatedDevice) Subscribe(stream gpb.GNMI_SubscribeServer) error {
	if err := d.gate(stream.Context()); err != nil {
		return err
	}
	d.mu.Lock()
	hold := d.hold
	if hold != nil && !marked(stream.Context()) {
		d.held++
	} else {
		hold = nil
	}
	d.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	id := new(int)
	d.mu.Lock()
	d.streams[id] = cancel
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.streams, id)
		d.mu.Unlock()
	}()
	up, err := d.dev.Subscribe(ctx)
	if err != nil {
		return err
	}
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				_ = up.CloseSend()
				return
			}
			if up.Send(req) != nil {
				return
			}
		}
	}()
	for {
		resp, err := up.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil && stream.Context().Err() == nil {
				return status.Error(codes.Unavailable, "gated device: down")
			}
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
