package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// TestTransparencyDeviceAnswer is the transparency test (transparency_test.go)
// of the device's answer, whole (issue 34, point 5), against a device of
// its own: a simulated device (package testbed, in process) behind a small
// front that records what each Set brought (request and metadata: the
// device's view), refuses Sets of one path with a status carrying
// google.rpc.BadRequest details, and takes its time over each Set, so that
// concurrent clients' changes reach it as one Set. The sidecar in front of
// it has a device account (--device-username), as the direct client does.
func TestTransparencyDeviceAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dev, err := testbed.New(testbed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(t.Context(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Stop)
	front := newFrontDevice(t, dev.Addr())
	const user, password = "sidecar", "device-pw"
	t.Setenv(passwordEnv, password)
	sb, _ := binaries(t)
	dir := t.TempDir()
	s := &stack{sidecarBin: sb, journalDir: filepath.Join(dir, "journal"), tracePath: filepath.Join(dir, "trace.jsonl"), target: front.addr,
		sidecarArgs: []string{"--device-username", user, "--drift-policy", "off"}}
	t.Cleanup(func() { keepTrace(t, s.tracePath) })
	s.startSidecar(t, "127.0.0.1:0")
	conn, err := grpc.NewClient(front.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := &transHarness{direct: gpb.NewGNMIClient(conn), sidecar: s.client, marks: map[string]int64{}, values: map[string]*gpb.TypedValue{},
		creds: func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "username", user, "password", password)
		},
		view: front.view}

	path := func(s string) *gpb.Path {
		p, err := ygot.StringToStructuredPath(s)
		if err != nil {
			panic(err)
		}
		return p
	}
	str := func(s string) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}} }
	withOrigin := func(origin, p string) *gpb.Path {
		x := path(p)
		x.Origin = origin
		return x
	}
	system := path("/system/config").GetElem()
	rows := []transRow{
		{name: "Set refused by the device with BadRequest details",
			set: &gpb.SetRequest{Update: []*gpb.Update{{Path: path(front.refuse), Val: str("refused")}}}},
		{name: "Set with a prefix, refused by the device with BadRequest details",
			set: &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1", Origin: "openconfig", Elem: system},
				Update: []*gpb.Update{{Path: path("/login-banner"), Val: str("refused")}}}},
		{name: "Set with custom metadata, the sidecar with a device account",
			set: &gpb.SetRequest{Update: []*gpb.Update{{Path: path("/system/config/hostname"), Val: str("custom")}}},
			md:  metadata.Pairs("x-custom", "1", "x-request-id", "req-51")},
		{name: "Set with the same origin on the prefix and the path",
			set: &gpb.SetRequest{Prefix: &gpb.Path{Origin: "openconfig", Elem: system},
				Update: []*gpb.Update{{Path: withOrigin("openconfig", "/hostname"), Val: str("both-origins")}},
				Delete: []*gpb.Path{withOrigin("openconfig", "/domain-name")}}},
		{name: "Set with origin openconfig on the path and the prefix, a target and custom metadata",
			set: &gpb.SetRequest{Prefix: &gpb.Path{Target: "dev1", Origin: "openconfig", Elem: system},
				Replace: []*gpb.Update{{Path: withOrigin("openconfig", "/hostname"), Val: str("replaced")}}},
			md: metadata.Pairs("x-custom", "2")},
		{name: "Sets of concurrent clients batched: each reply carries the device's timestamp",
			expect:   "each client the same answer as directly, with a timestamp the device stamped on the Set through the sidecar, fewer device Sets than clients",
			answered: func(t *testing.T, h *transHarness) error { return batchedReplies(t, h, front) }},
		{name: "deadline seen by the device",
			expect:   "a Set with a 2 s deadline answered OK both ways, the device seeing about 2 s left directly and, through the sidecar, at most the client's 2 s and at least 1.5 s (its remaining deadline less the sidecar's margin)",
			answered: func(t *testing.T, h *transHarness) error { return deadlineSeen(t, h, front) }},
		{name: "cancel reaches the device",
			expect:   "a client cancelling after 1 s a Set the device takes 3 s for gets Canceled both ways, the device's Set context cancelled and its value not applied",
			answered: func(t *testing.T, h *transHarness) error { return cancelReaches(t, h, dev) }},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if r.answered != nil {
				if err := r.answered(t, h); err != nil {
					t.Errorf("expected %s; %v", r.expect, err)
				}
				return
			}
			if diff := h.compare(t, r); diff != "" {
				t.Errorf("the sidecar changed the answer (-direct +through the sidecar):\n%s", diff)
			}
		})
	}
}

// batchedReplies sends clients' Sets (one prefix, a leaf each) directly one
// by one, then through the sidecar all at once, and compares: the same
// replies (but for the timestamp), and each timestamp one the device put
// on a Set through the sidecar.
func batchedReplies(t *testing.T, h *transHarness, front *frontDevice) error {
	const clients = 6
	prefix := &gpb.Path{Target: "dev1", Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth0"}}, {Name: "config"}}}
	reqs := make([]*gpb.SetRequest, clients)
	direct := make([]*gpb.SetResponse, clients)
	for k := range clients {
		leaf := "description"
		val := &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: fmt.Sprint("client-", k)}}
		if k%2 == 1 {
			leaf, val = "mtu", &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: uint64(1500 + k)}}
		}
		reqs[k] = &gpb.SetRequest{Prefix: prefix, Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: leaf}}}, Val: val}}}
		var err error
		if direct[k], err = h.direct.Set(h.creds(rpcCtx(t)), reqs[k]); err != nil {
			return fmt.Errorf("client %d directly: %w", k, err)
		}
	}
	before := front.setCount()
	front.setDelay(200 * time.Millisecond)
	defer front.setDelay(0)
	through := make([]*gpb.SetResponse, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for k := range clients {
		wg.Go(func() { through[k], errs[k] = h.sidecar.Set(rpcCtx(t), reqs[k]) })
	}
	wg.Wait()
	stamps := front.stampsSince(before)
	var out []string
	if len(stamps) >= clients {
		t.Logf("no batch formed: %d device Sets for %d clients (the replies are still compared)", len(stamps), clients)
	}
	for k := range clients {
		if errs[k] != nil {
			out = append(out, fmt.Sprintf("client %d through the sidecar: %v", k, errs[k]))
			continue
		}
		if ts := through[k].GetTimestamp(); !slices.Contains(stamps, ts) {
			out = append(out, fmt.Sprintf("client %d: timestamp %d is not one the device stamped on the Sets through the sidecar %v", k, ts, stamps))
		}
		d, s := proto.CloneOf(direct[k]), proto.CloneOf(through[k])
		maskOrderAndTime(d)
		maskOrderAndTime(s)
		if err := protoDiff(d, s); err != nil {
			out = append(out, fmt.Sprintf("client %d: reply differs from the direct one: %v", k, err))
		}
	}
	t.Logf("%d clients, %d device Sets through the sidecar", clients, len(stamps))
	if len(out) > 0 {
		return errors.New(strings.Join(out, "\n"))
	}
	return nil
}

// deadlineSeen sends a Set with a 2 s deadline directly, then through the
// sidecar, and checks the time left the device saw (the front records it
// on arrival): directly about the client's 2 s; through the sidecar the
// client's remaining deadline less the sidecar's margin (docs/agent.md,
// "Deadlines and cancel"): at most 2 s, at least 1.5 s. Both answers must
// be OK and the same (but for the timestamp).
func deadlineSeen(t *testing.T, h *transHarness, front *frontDevice) error {
	const deadline, floor = 2 * time.Second, 1500 * time.Millisecond
	req := &gpb.SetRequest{Update: []*gpb.Update{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "system"}, {Name: "config"}, {Name: "hostname"}}},
		Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "deadline"}}}}}
	send := func(c gpb.GNMIClient, direct bool) (*gpb.SetResponse, time.Duration, error) {
		mark := h.mark()
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), callMarker, mark), deadline)
		defer cancel()
		if direct {
			ctx = h.creds(ctx)
		}
		resp, err := c.Set(ctx, req)
		if err != nil {
			return nil, 0, err
		}
		left, has, ok := front.deadlineSeen(mark)
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("the device received no Set marked %s", mark)
		case !has:
			return nil, 0, errors.New("the device's Set had no deadline")
		}
		return resp, left, nil
	}
	var out []string
	dResp, dLeft, err := send(h.direct, true)
	if err != nil {
		return fmt.Errorf("directly: %w", err)
	}
	if dLeft > deadline || dLeft < floor {
		out = append(out, fmt.Sprintf("directly, the device saw %v left; want about %v", dLeft, deadline))
	}
	sResp, sLeft, err := send(h.sidecar, false)
	if err != nil {
		return fmt.Errorf("through the sidecar: %w", err)
	}
	if sLeft > deadline || sLeft < floor {
		out = append(out, fmt.Sprintf("through the sidecar, the device saw %v left; want at most %v and at least %v", sLeft, deadline, floor))
	}
	t.Logf("time left the device saw: directly %v, through the sidecar %v", dLeft.Round(time.Millisecond), sLeft.Round(time.Millisecond))
	maskOrderAndTime(dResp)
	maskOrderAndTime(sResp)
	if err := protoDiff(dResp, sResp); err != nil {
		out = append(out, fmt.Sprintf("reply differs from the direct one: %v", err))
	}
	if len(out) > 0 {
		return errors.New(strings.Join(out, "\n"))
	}
	return nil
}

// cancelReaches sends a Set the device takes 3 s for (an injected delay at
// its path) and cancels it after 1 s, directly, then through the sidecar:
// each time the client gets Canceled, and the device's Set log shows that
// Set's context cancelled and its value not applied.
func cancelReaches(t *testing.T, h *transHarness, dev *testbed.Device) error {
	const at = "/interfaces/interface[name=eth0]/config/description"
	var out []string
	for _, way := range []struct {
		name   string
		client gpb.GNMIClient
		direct bool
	}{{"directly", h.direct, true}, {"through the sidecar", h.sidecar, false}} {
		value := "cancelled " + way.name
		if err := dev.DelayNextSetsAt(at, 3*time.Second, 1); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if way.direct {
			ctx = h.creds(ctx)
		}
		time.AfterFunc(time.Second, cancel) // the scenario: the client gives up after 1 s
		start := time.Now()
		_, err := way.client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: descPath("eth0"), Val: strVal(value)}}})
		took := time.Since(start)
		cancel()
		if status.Code(err) != codes.Canceled {
			out = append(out, fmt.Sprintf("%s, the cancelling client got %v after %v; want Canceled", way.name, err, took.Round(time.Millisecond)))
		}
		var recs []testbed.SetRecord
		poll(t, 10*time.Second, "the device to answer the Set "+way.name, func() (bool, string) {
			recs = carrying(dev.SetLog(), value)
			if len(recs) == 0 {
				return false, "no Set carrying " + value
			}
			for _, r := range recs {
				if !r.Answered {
					return false, "unanswered:" + describe(recs)
				}
			}
			return true, ""
		})
		if len(recs) != 1 || !recs[0].Cancelled || recs[0].CtxErr != context.Canceled.Error() || recs[0].Applied {
			out = append(out, fmt.Sprintf("%s, the device's record of the cancelled Set: want one, its context cancelled, not applied:%s", way.name, describe(recs)))
		}
		leaves, lerr := dev.ConfigLeaves()
		if lerr != nil {
			return lerr
		}
		if leaves[at].GetStringVal() == value {
			out = append(out, fmt.Sprintf("%s, the cancelled Set's value is on the device", way.name))
		}
		t.Logf("%s: client %v after %v; the device:%s", way.name, status.Code(err), took.Round(time.Millisecond), describe(recs))
	}
	if len(out) > 0 {
		return errors.New(strings.Join(out, "\n"))
	}
	return nil
}

// frontDevice is a gNMI server in front of a simulated device (see
// TestTransparencyDeviceAnswer): Capabilities, Get and Subscribe pass
// through, a Set is recorded (its request, its metadata without the
// transport's, and the time its context had left), refused with BadRequest details if it writes refuse, else
// passed through after the Set delay, its answer's timestamp recorded.
type frontDevice struct {
	gpb.UnimplementedGNMIServer
	addr   string
	dev    gpb.GNMIClient
	refuse string

	mu     sync.Mutex
	delay  time.Duration
	sets   []frontSet // every Set received, in order
	stamps []int64    // the timestamps of the Sets passed through, in order
}

func newFrontDevice(t *testing.T, devAddr string) *frontDevice {
	t.Helper()
	conn, err := grpc.NewClient(devAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &frontDevice{dev: gpb.NewGNMIClient(conn), refuse: "/system/config/login-banner"}
	g := grpc.NewServer()
	gpb.RegisterGNMIServer(g, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return f
}

func (f *frontDevice) setDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

func (f *frontDevice) setCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.stamps)
}

func (f *frontDevice) stampsSince(n int) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stamps[n:])
}

// frontSet is the front's record of one Set: the device's view, and the
// time its incoming context had left when it arrived (hasDeadline false:
// none).
type frontSet struct {
	deviceView
	hasDeadline bool
	left        time.Duration
}

// deadlineSeen returns the time left of the Set marked mark when it
// reached the front (ok false if no such Set arrived; has false if it had
// no deadline).
func (f *frontDevice) deadlineSeen(mark string) (left time.Duration, has, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range slices.Backward(f.sets) {
		if got := s.md[callMarker]; len(got) == 1 && got[0] == mark {
			return s.left, s.hasDeadline, true
		}
	}
	return 0, false, false
}

// view is transHarness.view: the last Set if it is the call marked mark.
func (f *frontDevice) view(rpc, mark string) *deviceView {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rpc != "Set" || len(f.sets) == 0 {
		return nil
	}
	last := f.sets[len(f.sets)-1]
	if got := last.md[callMarker]; len(got) != 1 || got[0] != mark {
		return nil
	}
	md := map[string][]string{}
	for k, v := range last.md {
		if k != callMarker {
			md[k] = v
		}
	}
	return &deviceView{req: last.req, md: md}
}

func (f *frontDevice) refusal() error {
	st, err := status.New(codes.InvalidArgument, "front device: "+f.refuse+" is not writable here").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "update.path", Description: f.refuse + " is read-only on this device"}}})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (f *frontDevice) Capabilities(ctx context.Context, req *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	return f.dev.Capabilities(ctx, req)
}

func (f *frontDevice) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	return f.dev.Get(ctx, req)
}

func (f *frontDevice) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	rec := frontSet{}
	if dl, ok := ctx.Deadline(); ok {
		rec.hasDeadline, rec.left = true, time.Until(dl)
	}
	in, _ := metadata.FromIncomingContext(ctx)
	md := map[string][]string{}
	for k, v := range in {
		if !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, "grpc-") && k != "content-type" && k != "user-agent" {
			md[k] = slices.Clone(v)
		}
	}
	f.mu.Lock()
	rec.deviceView = deviceView{req: proto.Clone(req), md: md}
	f.sets = append(f.sets, rec)
	delay := f.delay
	f.mu.Unlock()
	for _, u := range slices.Concat(req.GetReplace(), req.GetUpdate()) {
		full := &gpb.Path{Elem: slices.Concat(req.GetPrefix().GetElem(), u.GetPath().GetElem())}
		if pathText(full) == f.refuse {
			return nil, f.refusal()
		}
	}
	time.Sleep(delay)
	resp, err := f.dev.Set(ctx, req)
	if err == nil {
		f.mu.Lock()
		f.stamps = append(f.stamps, resp.GetTimestamp())
		f.mu.Unlock()
	}
	return resp, err
}

func (f *frontDevice) Subscribe(ss gpb.GNMI_SubscribeServer) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	cs, err := f.dev.Subscribe(ctx)
	if err != nil {
		return err
	}
	go func() {
		for {
			req, err := ss.Recv()
			if err != nil {
				_ = cs.CloseSend()
				return
			}
			if err := cs.Send(req); err != nil {
				return
			}
		}
	}()
	for {
		resp, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.Send(resp); err != nil {
			return err
		}
	}
}
