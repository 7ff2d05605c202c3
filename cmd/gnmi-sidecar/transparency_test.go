package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The differential transparency test (issue 22): a table of requests, of
// every RPC, encoding, data type, subscription mode and error case, each
// sent to the device directly and through a real gnmi-sidecar in front of
// that same device; the two answers (responses, or the error's code and
// message) are compared field by field after the masks below, and any
// other difference fails the test with a diff. -transparency.target runs
// the same table against an external target (docs/testing.md).
//
// One device, both paths. A Set goes to the device directly first, then
// through the sidecar: a SetRequest applied twice leaves the device as
// applied once, and its answer does not depend on the state it met, so the
// second is compared with the first, and the sidecar's journal stays in
// step with the device. Gets and Subscribes read the same state both ways;
// the Sets a STREAM or POLL row makes while its two streams are open go
// through the sidecar only (the device takes them once, both streams see
// them).
//
// Masks, every one of them (a mask never hides a difference a client could
// act on; each is checked where it can be):
//
//  1. timestamps (Notification.timestamp of Get and Subscribe,
//     SetResponse.timestamp): two requests made one after the other are
//     answered at two times.
//  2. (no longer a mask) the sidecar's own Response extension (id 999):
//     the reply to a Set is the device's, with the sidecar's receipt only
//     for a client that asked for it with the sidecar's extension
//     (docs/extension.md); the table's Sets do not ask, so a receipt in
//     their replies is a difference like any other.
//  3. (no longer a mask) the sidecar's Response in the status details of a
//     Set the device refused: the error is the device's, code, message and
//     details (issue 34), with the sidecar's Response as a last detail only
//     for a client that asked for the sidecar's extension; the table's Sets
//     do not ask, so such a detail is a difference like any other.
//  4. the order of the updates, and of the deletes, within one
//     Notification (Get and Subscribe): both are sorted by path. gNMI gives
//     no meaning to the order of the independent updates of one
//     notification (specification 3.5), and the simulated device itself
//     answers the same request twice in different orders (it walks Go
//     maps). The order of the notifications themselves is compared.
//  5. per row (maskMessage, with its reason): a Set the sidecar refuses
//     itself before journaling (docs/extension.md, "Requests the sidecar
//     refuses itself") carries the sidecar's message; only the code is
//     compared, and both messages are logged.
//
// The device's view (issue 25), with the simulated device: what reached
// the device is compared too. After each Get and Set, directly and
// through the sidecar, the device's record of the last request of that
// RPC (gnmi-testbed GET /requests: the request, and its metadata without
// transport headers) is read; both must be the same request with the
// same metadata (credentials, custom headers), but for the call marker
// x-transparency-call the harness adds to tell its calls apart. A request
// the sidecar refuses itself (maskMessage) does not reach the device;
// deviceViewDiffers names, per row, a documented difference in what the
// device receives.
//
// Rows of the kind "answered by the sidecar" (History, commit-confirmed,
// rollback, the sidecar's own origin) are not compared with the device,
// which knows nothing of them: each states its expectation (answered) and
// checks it, where it can against what the device held at the time (a
// History snapshot against the device's own answer then).
//
// A row marked pending (pendingSidecar) is something the sidecar does not
// pass yet: a difference is logged as KNOWN DIFFERENCE instead of failing,
// and a pending row that passes fails, so that its mark is removed.

var (
	transTarget = flag.String("transparency.target", "", "TestTransparency: an external gNMI target (host:port) to run the table against instead of the simulated device; "+
		"the test writes (and deletes under) the interfaces of -transparency.interfaces, /system/config and /system/dns there: a lab device only")
	transInterfaces = flag.String("transparency.interfaces", "eth0,eth1", "TestTransparency: the two interface names the table configures")
	transTLS        = flag.Bool("transparency.tls", false, "TestTransparency with -transparency.target: connect to it with TLS (implied by -transparency.ca and -transparency.skip-verify)")
	transCA         = flag.String("transparency.ca", "", "TestTransparency with -transparency.target: PEM file of the CA of the target's certificate")
	transSkipVerify = flag.Bool("transparency.skip-verify", false, "TestTransparency with -transparency.target: do not verify the target's certificate")
	transUsername   = flag.String("transparency.username", "", "TestTransparency with -transparency.target: username for the target, with the password in $"+passwordEnv)
	transYANG       = flag.String("transparency.yang", "", "TestTransparency with -transparency.target: the target's YANG (files or directories, comma-separated) for the sidecar's --yang; "+
		"without it the sidecar refuses the rows' JSON lists whose keys it has not learned (FAILED_PRECONDITION naming --yang)")
	transReport = flag.Bool("transparency.report", false, "TestTransparency: also print the request counts on stdout")
)

// transHarness is the device (or the external target), the sidecar in front
// of it, a client of each, and what rows record for later ones.
type transHarness struct {
	direct, sidecar gpb.GNMIClient
	// devAdmin is the simulated device's admin endpoint ("" with
	// -transparency.target): the device's view is compared through it.
	devAdmin string
	// view, if set, is the device's view instead (a device of the test's
	// own, TestTransparencyDeviceAnswer): what it received of the call
	// marked mark of rpc, without the marker; nil if another call's.
	view  func(rpc, mark string) *deviceView
	calls int
	// creds adds the target's credentials to a direct call's context.
	creds func(context.Context) context.Context
	intf  [2]string
	// marks are times rows recorded (ns), values what the device held then.
	marks  map[string]int64
	values map[string]*gpb.TypedValue
}

// transRow is one request of the table.
type transRow struct {
	name string
	// The request, sent directly and through the sidecar: exactly one.
	caps *gpb.CapabilityRequest
	get  *gpb.GetRequest
	set  *gpb.SetRequest
	sub  *subScript
	// answered, instead: a request the sidecar answers itself, sent
	// through it only; expect states what it must answer, answered checks
	// it.
	expect   string
	answered func(t *testing.T, h *transHarness) error
	// maskMessage says why only the status code is compared (mask 5).
	maskMessage string
	// md is request metadata the client sends with the row's request
	// (credentials, custom headers), both ways.
	md metadata.MD
	// deviceViewDiffers says why the request the device receives through
	// the sidecar differs from the one it receives directly: then the
	// device's view is logged, not compared.
	deviceViewDiffers string
	// pendingSidecar names what the sidecar does not pass yet: a
	// difference is a KNOWN DIFFERENCE, not a failure.
	pendingSidecar string
	// after records what later rows need (times, values), once the row
	// ran.
	after func(t *testing.T, h *transHarness)
}

// subScript is a Subscribe row: its first request, then what happens on
// both streams.
type subScript struct {
	req *gpb.SubscribeRequest
	// polls (POLL): Poll requests after the first sync_response; before
	// Poll k, pollSets[k] (if any) goes through the sidecar.
	polls    int
	pollSets []*gpb.SetRequest
	// trigger (STREAM): Sets through the sidecar once both streams have
	// their sync_response; then collect responses are compared.
	trigger []*gpb.SetRequest
	collect int
}

// outcome is one side's answer: the responses (masked) and how the RPC
// ended.
type outcome struct {
	msgs    []proto.Message
	code    codes.Code
	message string
	details []*anypb.Any // of the error's status
	note    string       // why a mask's check failed
}

// TestTransparency runs the table (see above) and prints its counts.
func TestTransparency(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	start := time.Now()
	h := newTransHarness(t)
	rows := transparencyTable(h)
	compared, answered, known := 0, 0, map[string]int{}
	var pendingRows []string
	for _, r := range rows {
		if r.answered != nil {
			answered++
		} else {
			compared++
		}
		if r.pendingSidecar != "" {
			pendingRows = append(pendingRows, fmt.Sprintf("%s (%s)", r.name, r.pendingSidecar))
		}
		t.Run(r.name, func(t *testing.T) {
			if r.answered != nil {
				if err := r.answered(t, h); err != nil {
					t.Errorf("answered by the sidecar: expected %s; %v", r.expect, err)
				} else {
					t.Logf("answered by the sidecar as expected: %s", r.expect)
				}
			} else {
				diff := h.compare(t, r)
				switch {
				case diff != "" && r.pendingSidecar != "":
					known[r.pendingSidecar]++
					t.Logf("KNOWN DIFFERENCE (pendingSidecar %q): direct vs through the sidecar:\n%s", r.pendingSidecar, diff)
				case diff != "":
					t.Errorf("the sidecar changed the answer (-direct +through the sidecar):\n%s", diff)
				case r.pendingSidecar != "":
					t.Errorf("row marked pendingSidecar %q passes: remove the mark", r.pendingSidecar)
				}
			}
			if r.after != nil {
				r.after(t, h)
			}
		})
	}
	summary := fmt.Sprintf("transparency: %d requests: %d compared with the device, %d answered by the sidecar; %d pending (%s); %v",
		len(rows), compared, answered, len(pendingRows), strings.Join(pendingRows, "; "), time.Since(start).Round(100*time.Millisecond))
	t.Log(summary)
	if *transReport {
		fmt.Println(summary)
	}
}

// newTransHarness starts the simulated device (a gnmi-testbed process) or
// takes -transparency.target, and a gnmi-sidecar process in front of it.
func newTransHarness(t *testing.T) *transHarness {
	t.Helper()
	names := strings.Split(*transInterfaces, ",")
	if len(names) != 2 || names[0] == "" || names[1] == "" {
		t.Fatalf("-transparency.interfaces %q: want two names, comma-separated", *transInterfaces)
	}
	h := &transHarness{intf: [2]string{names[0], names[1]}, marks: map[string]int64{}, values: map[string]*gpb.TypedValue{},
		creds: func(ctx context.Context) context.Context { return ctx }}
	// The sidecar runs with the device's YANG (--yang), so that it
	// records the rows' JSON lists exactly (docs/values.md) rather than
	// refusing those whose keys it has not learned.
	var s *stack
	if *transTarget == "" {
		// --echo-extensions: the device answers with the registered
		// extensions of each request, so that their relay back shows.
		s = newStack(t, []string{"--echo-extensions"}, nil)
		h.devAdmin = s.devAdmin
		dir := filepath.Join(t.TempDir(), "yang")
		if out, err := exec.Command(s.testbedBin, "yang", "--out", dir).CombinedOutput(); err != nil {
			t.Fatalf("gnmi-testbed yang: %v\n%s", err, out)
		}
		// No drift watching: its Gets of the device would take the place
		// of the rows' in the device's record of the last Get.
		s.sidecarArgs = []string{"--yang", dir, "--drift-policy", "off"}
	} else {
		sb, _ := binaries(t)
		dir := t.TempDir()
		s = &stack{sidecarBin: sb, journalDir: filepath.Join(dir, "journal"), tracePath: filepath.Join(dir, "trace.jsonl"), target: *transTarget}
		if *transYANG != "" {
			s.sidecarArgs = []string{"--yang", *transYANG}
		}
	}
	directCreds := insecure.NewCredentials()
	if *transTarget != "" {
		if *transTLS || *transCA != "" || *transSkipVerify {
			cfg := &tls.Config{InsecureSkipVerify: *transSkipVerify} // a lab option, as the sidecar's --device-skip-verify
			s.sidecarArgs = append(s.sidecarArgs, "--device-tls")
			if *transCA != "" {
				pem, err := os.ReadFile(*transCA)
				if err != nil {
					t.Fatalf("-transparency.ca: %v", err)
				}
				cfg.RootCAs = x509.NewCertPool()
				if !cfg.RootCAs.AppendCertsFromPEM(pem) {
					t.Fatalf("-transparency.ca %s: no PEM certificate", *transCA)
				}
				s.sidecarArgs = append(s.sidecarArgs, "--device-ca", *transCA)
			}
			if *transSkipVerify {
				s.sidecarArgs = append(s.sidecarArgs, "--device-skip-verify")
			}
			directCreds = credentials.NewTLS(cfg)
		}
		if *transUsername != "" {
			s.sidecarArgs = append(s.sidecarArgs, "--device-username", *transUsername) // the password: $GNMI_SIDECAR_DEVICE_PASSWORD, inherited
			user, pass := *transUsername, os.Getenv(passwordEnv)
			h.creds = func(ctx context.Context) context.Context {
				return metadata.AppendToOutgoingContext(ctx, "username", user, "password", pass)
			}
		}
	}
	s.startSidecar(t, "127.0.0.1:0")
	target := s.target
	if target == "" {
		target = s.dev.addr
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(directCreds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h.direct, h.sidecar = gpb.NewGNMIClient(conn), s.client
	return h
}

// callMarker is the metadata key that tells the harness's calls apart in
// the device's record of the last request.
const callMarker = "x-transparency-call"

// mark returns a new call marker value ("" without the device's view).
func (h *transHarness) mark() string {
	if h.devAdmin == "" && h.view == nil {
		return ""
	}
	h.calls++
	return fmt.Sprint(h.calls)
}

// callCtx is rpcCtx with the row's metadata and the call marker, if any.
func (h *transHarness) callCtx(t *testing.T, r transRow, mark string) context.Context {
	ctx := rpcCtx(t)
	md := r.md.Copy()
	if mark != "" {
		md.Set(callMarker, mark)
	}
	if len(md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	return ctx
}

// deviceView is what the device received of one call: nil if it received
// nothing (its last request of the RPC is another call's).
type deviceView struct {
	req proto.Message
	md  map[string][]string
}

// deviceView reads the device's record of its last request of rpc, and
// returns it if it is the call marked mark (nil if not, or without the
// device's view). The agent's Set for a change comes before the sidecar
// answers the client, so it is recorded by then.
func (h *transHarness) deviceView(t *testing.T, rpc, mark string, msg proto.Message) *deviceView {
	t.Helper()
	if mark == "" {
		return nil
	}
	if h.view != nil {
		return h.view(rpc, mark)
	}
	rec := lastDeviceRequest(t, h.devAdmin, rpc, msg)
	if got := rec.Metadata[callMarker]; len(got) != 1 || got[0] != mark {
		return nil
	}
	md := map[string][]string{}
	for k, v := range rec.Metadata {
		if k != callMarker {
			md[k] = v
		}
	}
	return &deviceView{req: msg, md: md}
}

// compareDeviceViews compares what reached the device directly (d) and
// through the sidecar (s, whose answer was so); "" if the same.
func compareDeviceViews(t *testing.T, r transRow, d, s *deviceView, so outcome) string {
	t.Helper()
	switch {
	case d == nil && s == nil:
		return ""
	case d == nil:
		return "device's view: the device received the request through the sidecar only"
	case s == nil:
		if so.code != codes.OK && r.maskMessage != "" {
			return "" // the sidecar refused it itself (mask 5)
		}
		if r.deviceViewDiffers != "" {
			t.Logf("device's view differs (%s): nothing reached the device through the sidecar", r.deviceViewDiffers)
			return ""
		}
		return "device's view: the request reached the device directly, but not through the sidecar"
	}
	var out []string
	if diff := cmp.Diff(d.req, s.req, protocmp.Transform()); diff != "" {
		out = append(out, "device's view, the request (-direct +through the sidecar):\n"+diff)
	}
	if diff := cmp.Diff(d.md, s.md, cmpopts.EquateEmpty()); diff != "" {
		out = append(out, "device's view, the metadata (-direct +through the sidecar):\n"+diff)
	}
	if len(out) > 0 && r.deviceViewDiffers != "" {
		t.Logf("device's view differs (%s):\n%s", r.deviceViewDiffers, strings.Join(out, "\n"))
		return ""
	}
	if len(out) == 0 && r.deviceViewDiffers != "" {
		return fmt.Sprintf("device's view: the same both ways, but the row says it differs (%s): remove deviceViewDiffers", r.deviceViewDiffers)
	}
	if len(out) == 0 {
		t.Logf("the device received the same request and metadata both ways")
	}
	return strings.Join(out, "\n")
}

// rpcCtx bounds one call.
func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// compare sends r both ways and returns the differences ("" if none).
func (h *transHarness) compare(t *testing.T, r transRow) string {
	t.Helper()
	var d, s outcome
	var dView, sView *deviceView
	if len(r.md) > 0 && *transTarget != "" && *transUsername != "" {
		t.Skip("the row sends its own credentials; -transparency.username sends the target's")
	}
	switch {
	case r.caps != nil:
		d = unary(h.direct.Capabilities(h.creds(h.callCtx(t, r, "")), r.caps))
		s = unary(h.sidecar.Capabilities(h.callCtx(t, r, ""), r.caps))
	case r.get != nil:
		mark := h.mark()
		d = unary(h.direct.Get(h.creds(h.callCtx(t, r, mark)), r.get))
		dView = h.deviceView(t, "Get", mark, &gpb.GetRequest{})
		mark = h.mark()
		s = unary(h.sidecar.Get(h.callCtx(t, r, mark), r.get))
		sView = h.deviceView(t, "Get", mark, &gpb.GetRequest{})
	case r.set != nil:
		mark := h.mark()
		d = unary(h.direct.Set(h.creds(h.callCtx(t, r, mark)), r.set))
		dView = h.deviceView(t, "Set", mark, &gpb.SetRequest{})
		mark = h.mark()
		resp, err := h.sidecar.Set(h.callCtx(t, r, mark), r.set)
		sView = h.deviceView(t, "Set", mark, &gpb.SetRequest{})
		s = unary(resp, err)
	case r.sub != nil:
		d, s = h.subscribeBoth(t, r.sub, r.md)
	default:
		t.Fatal("a row without a request")
	}
	for _, o := range []*outcome{&d, &s} {
		for _, m := range o.msgs {
			maskOrderAndTime(m)
		}
	}
	var out []string
	// EquateEmpty: no response (or no detail) is the same whether the
	// slice holding none is nil or empty.
	if diff := cmp.Diff(d.msgs, s.msgs, protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
		out = append(out, "responses:\n"+diff)
	}
	if d.code != s.code {
		out = append(out, fmt.Sprintf("status code: direct %v, through the sidecar %v", d.code, s.code))
	}
	if diff := cmp.Diff(d.details, s.details, protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
		out = append(out, "status details:\n"+diff)
	}
	if d.message != s.message {
		if r.maskMessage != "" && d.code == s.code {
			t.Logf("message not compared (%s):\n  direct:  %q\n  sidecar: %q", r.maskMessage, d.message, s.message)
		} else {
			out = append(out, fmt.Sprintf("status message:\n  direct:  %q\n  sidecar: %q", d.message, s.message))
		}
	}
	if s.note != "" {
		out = append(out, s.note)
	}
	if diff := compareDeviceViews(t, r, dView, sView, s); diff != "" {
		out = append(out, diff)
	}
	if len(out) == 0 {
		t.Logf("same answer both ways: %s", summarize(d))
	}
	return strings.Join(out, "\n")
}

func summarize(o outcome) string {
	if o.code != codes.OK {
		return fmt.Sprintf("%v %q", o.code, o.message)
	}
	return fmt.Sprintf("OK, %d response(s)", len(o.msgs))
}

// unary turns a unary RPC's answer into an outcome (responses cloned, so
// that masking leaves the original alone).
func unary[M proto.Message](resp M, err error) outcome {
	if err != nil {
		return errOutcome(err)
	}
	return outcome{msgs: []proto.Message{proto.Clone(resp)}}
}

// errOutcome is an RPC's error: code, message and details.
func errOutcome(err error) outcome {
	st := status.Convert(err).Proto()
	return outcome{code: codes.Code(st.GetCode()), message: st.GetMessage(), details: st.GetDetails()}
}

// maskOrderAndTime applies masks 1 and 4.
func maskOrderAndTime(m proto.Message) {
	switch x := m.(type) {
	case *gpb.GetResponse:
		for _, n := range x.GetNotification() {
			n.Timestamp = 0
			sortNotification(n)
		}
	case *gpb.SetResponse:
		x.Timestamp = 0
		for _, r := range x.GetResponse() {
			//lint:ignore SA1019 the deprecated per-result timestamp is a time too
			r.Timestamp = 0
		}
	case *gpb.SubscribeResponse:
		if n := x.GetUpdate(); n != nil {
			n.Timestamp = 0
			sortNotification(n)
		}
	}
}

// sortNotification sorts a notification's updates and deletes by path
// (mask 4), stably: updates of one path keep their order.
func sortNotification(n *gpb.Notification) {
	slices.SortStableFunc(n.Update, func(a, b *gpb.Update) int { return strings.Compare(pathText(a.GetPath()), pathText(b.GetPath())) })
	slices.SortStableFunc(n.Delete, func(a, b *gpb.Path) int { return strings.Compare(pathText(a), pathText(b)) })
}

// --- Subscribe ---

// subStream is one side's Subscribe stream, its responses pumped into ch.
type subStream struct {
	name   string
	stream gpb.GNMI_SubscribeClient
	ch     chan subEvent
	got    []proto.Message
	end    error // how the stream ended (io.EOF: cleanly), once it did
	ended  bool
}

type subEvent struct {
	resp *gpb.SubscribeResponse
	err  error
}

func openSub(ctx context.Context, name string, c gpb.GNMIClient, first *gpb.SubscribeRequest) *subStream {
	s := &subStream{name: name, ch: make(chan subEvent, 1000)}
	st, err := c.Subscribe(ctx)
	if err == nil {
		err = st.Send(first)
	}
	if err != nil {
		s.ch <- subEvent{err: err}
		return s
	}
	s.stream = st
	go func() {
		for {
			resp, err := st.Recv()
			s.ch <- subEvent{resp: resp, err: err}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// next waits up to d for the next response; false once the stream ended
// (s.end says how) or nothing came.
func (s *subStream) next(d time.Duration) (*gpb.SubscribeResponse, bool) {
	if s.ended {
		return nil, false
	}
	select {
	case ev := <-s.ch:
		if ev.err != nil {
			s.end, s.ended = ev.err, true
			return nil, false
		}
		s.got = append(s.got, proto.Clone(ev.resp))
		return ev.resp, true
	case <-time.After(d):
		s.end, s.ended = fmt.Errorf("no response within %v (after %d)", d, len(s.got)), true
		return nil, false
	}
}

// untilSync reads up to and including a sync_response.
func (s *subStream) untilSync(d time.Duration) bool {
	for {
		resp, ok := s.next(d)
		if !ok {
			return false
		}
		if resp.GetSyncResponse() {
			return true
		}
	}
}

// outcome is what the stream answered; cancelled is the end the test
// caused itself (a STREAM it stopped reading), which counts as OK.
func (s *subStream) outcome(cancelled bool) outcome {
	o := outcome{msgs: s.got}
	switch {
	case !s.ended && cancelled, errors.Is(s.end, io.EOF):
	case !s.ended:
		o.code, o.message = codes.Unknown, "the test stopped reading before the stream ended"
	default:
		e := errOutcome(s.end)
		o.code, o.message, o.details = e.code, e.message, e.details
	}
	return o
}

// subscribeBoth runs a Subscribe row on both paths at once.
func (h *transHarness) subscribeBoth(t *testing.T, sc *subScript, md metadata.MD) (outcome, outcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	const wait = 10 * time.Second // generous: what is due comes within a second
	d := openSub(h.creds(ctx), "direct", h.direct, sc.req)
	s := openSub(ctx, "sidecar", h.sidecar, sc.req)
	both := []*subStream{d, s}
	synced := true
	for _, x := range both {
		synced = x.untilSync(wait) && synced
	}
	mode := sc.req.GetSubscribe().GetMode()
	switch {
	case !synced:
		// An error (or an end) before sync_response: compared as it is.
	case mode == gpb.SubscriptionList_ONCE:
		for _, x := range both {
			for x.untilSync(wait) {
			}
		}
	case mode == gpb.SubscriptionList_POLL:
		for k := range sc.polls {
			if k < len(sc.pollSets) && sc.pollSets[k] != nil {
				mustSidecarSet(t, h, sc.pollSets[k])
			}
			for _, x := range both {
				if err := x.stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}}); err != nil {
					t.Errorf("%s: Poll %d: %v", x.name, k+1, err)
				}
				x.untilSync(wait)
			}
		}
		for _, x := range both {
			_ = x.stream.CloseSend()
			for x.untilSync(wait) {
			}
		}
	default: // STREAM
		for _, set := range sc.trigger {
			mustSidecarSet(t, h, set)
		}
		for _, x := range both {
			for range sc.collect {
				if _, ok := x.next(wait); !ok {
					break
				}
			}
		}
		cancel()
		return d.outcome(true), s.outcome(true)
	}
	return d.outcome(false), s.outcome(false)
}

// mustSidecarSet sends a Set through the sidecar and fails the test on an
// error.
func mustSidecarSet(t *testing.T, h *transHarness, req *gpb.SetRequest) *gpb.SetResponse {
	t.Helper()
	resp, err := h.sidecar.Set(rpcCtx(t), req)
	if err != nil {
		t.Fatalf("Set through the sidecar: %v\n%v", err, req)
	}
	return resp
}

// directGet reads one leaf from the device directly (PROTO).
func (h *transHarness) directGet(t *testing.T, p *gpb.Path) (*gpb.TypedValue, error) {
	t.Helper()
	resp, err := h.direct.Get(h.creds(rpcCtx(t)), &gpb.GetRequest{Path: []*gpb.Path{p}, Encoding: gpb.Encoding_PROTO})
	if err != nil {
		return nil, err
	}
	var vals []*gpb.TypedValue
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			vals = append(vals, u.GetVal())
		}
	}
	if len(vals) != 1 {
		return nil, fmt.Errorf("Get %s: %d values, want one: %v", pathText(p), len(vals), resp)
	}
	return vals[0], nil
}

func pathText(p *gpb.Path) string {
	var b strings.Builder
	if p.GetOrigin() != "" {
		b.WriteString(p.GetOrigin() + ":")
	}
	for _, e := range p.GetElem() {
		b.WriteString("/" + e.GetName())
		keys := make([]string, 0, len(e.GetKey()))
		for k := range e.GetKey() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "[%s=%s]", k, e.GetKey()[k])
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// durationOf is a protobuf Duration.
func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
