package devread_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// noCaps hides the client's Capabilities: the Reader finds out what the
// device refuses by asking.
type noCaps struct {
	gpb.GNMIClient
}

func (c noCaps) Get(ctx context.Context, in *gpb.GetRequest, opts ...grpc.CallOption) (*gpb.GetResponse, error) {
	return c.GNMIClient.Get(ctx, in, opts...)
}

func (c noCaps) Subscribe(ctx context.Context, opts ...grpc.CallOption) (gpb.GNMI_SubscribeClient, error) {
	return c.GNMIClient.Subscribe(ctx, opts...)
}

func dial(t *testing.T, addr string) gpb.GNMIClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gpb.NewGNMIClient(conn)
}

func mustPath(t *testing.T, s string) *gpb.Path {
	t.Helper()
	return fixture.Path(t, s)
}

// startDevice starts the simulated device with opts, holding a hostname
// and an interface (its state data, boot time, comes with the device).
func startDevice(t *testing.T, opts testbed.Options) (*testbed.Device, gpb.GNMIClient) {
	t.Helper()
	dev := testbed.StartT(t, opts)
	c := dial(t, dev.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{
		{Path: mustPath(t, "/system/config/hostname"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "r1"}}},
		{Path: mustPath(t, "/interfaces/interface[name=eth0]/config"), Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{
			JsonIetfVal: []byte(`{"name":"eth0","description":"uplink","mtu":1500}`)}}},
	}})
	if err != nil {
		t.Fatalf("setting up the device: %v", err)
	}
	return dev, c
}

// flatten renders updates as leaf path → value text, module prefixes
// dropped; a JSON list's entries are numbered (enough for these tests).
func flatten(t *testing.T, ups []*gpb.Update) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(prefix+"/"+leaves.Name(k), c)
			}
		case []any:
			for _, c := range x {
				walk(prefix, c)
			}
		default:
			b, _ := json.Marshal(x)
			out[prefix] = strings.Trim(string(b), `"`)
		}
	}
	for _, u := range ups {
		if u.GetPath().GetTarget() != "" {
			t.Errorf("update %s has target %q", gnmipath.String(u.GetPath()), u.GetPath().GetTarget())
		}
		var elems []string
		for _, e := range u.GetPath().GetElem() {
			elems = append(elems, leaves.Name(e.GetName()))
		}
		p := "/" + strings.Join(elems, "/")
		val := u.GetVal()
		raw := val.GetJsonIetfVal()
		if raw == nil {
			raw = val.GetJsonVal()
		}
		if raw != nil {
			var doc any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			walk(p, doc)
			continue
		}
		switch x := val.GetValue().(type) {
		case *gpb.TypedValue_StringVal:
			out[p] = x.StringVal
		case *gpb.TypedValue_UintVal:
			out[p] = strconv.FormatUint(x.UintVal, 10)
		default:
			out[p] = val.String()
		}
	}
	return out
}

func TestReadFallbacks(t *testing.T) {
	all := map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented, gpb.Encoding_JSON: codes.InvalidArgument, gpb.Encoding_PROTO: codes.Unimplemented}
	for _, tc := range []struct {
		name string
		opts testbed.Options
		caps bool // the Reader sees the device's Capabilities
		want string
	}{
		{name: "get config", want: "get-config/JSON_IETF"},
		{name: "no JSON_IETF", opts: testbed.Options{RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented}}, want: "get-config/JSON"},
		{name: "no JSON_IETF, JSON", opts: testbed.Options{RefuseEncodings: map[gpb.Encoding]codes.Code{
			gpb.Encoding_JSON_IETF: codes.InvalidArgument, gpb.Encoding_JSON: codes.Unimplemented}}, want: "get-config/PROTO"},
		{name: "capabilities order", caps: true, opts: testbed.Options{RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented}},
			want: "get-config/JSON"},
		{name: "gnxi: no CONFIG, no PROTO", opts: testbed.Options{RefuseGetConfig: true, RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_PROTO: codes.Unimplemented}},
			want: "get-all/JSON_IETF"},
		{name: "no CONFIG, JSON", opts: testbed.Options{RefuseGetConfig: true, RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_JSON_IETF: codes.Unimplemented}},
			want: "get-all/JSON"},
		{name: "no CONFIG, PROTO only", opts: testbed.Options{RefuseGetConfig: true, RefuseEncodings: map[gpb.Encoding]codes.Code{
			gpb.Encoding_JSON_IETF: codes.Unimplemented, gpb.Encoding_JSON: codes.InvalidArgument}}, want: "get-all/PROTO"},
		{name: "subscribe only", opts: testbed.Options{RefuseGet: true}, want: "subscribe-once/JSON_IETF"},
		{name: "subscribe only, PROTO", opts: testbed.Options{RefuseGet: true, RefuseEncodings: map[gpb.Encoding]codes.Code{
			gpb.Encoding_JSON_IETF: codes.Unimplemented, gpb.Encoding_JSON: codes.Unimplemented}}, want: "subscribe-once/PROTO"},
		{name: "nothing", opts: testbed.Options{RefuseGet: true, RefuseEncodings: all}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := startDevice(t, tc.opts)
			var client devread.Client = noCaps{c}
			if tc.caps {
				client = c
			}
			r := devread.New(client)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for round := range 2 { // the second read starts with the method found
				ups, err := r.Read(ctx, "", mustPath(t, "/system"), mustPath(t, "/interfaces/interface[name=eth0]"), mustPath(t, "/network-instances"))
				if tc.want == "" {
					if err == nil {
						t.Fatalf("read %d: no error, values %v", round, flatten(t, ups))
					}
					if !errors.Is(err, devread.ErrUnreadable) || status.Code(err) != codes.FailedPrecondition {
						t.Fatalf("read %d: error %v (code %v), want FailedPrecondition wrapping ErrUnreadable", round, err, status.Code(err))
					}
					for _, m := range []string{"get-config/JSON_IETF", "get-config/JSON", "get-config/PROTO", "get-all/JSON_IETF", "get-all/JSON", "get-all/PROTO",
						"subscribe-once/JSON_IETF", "subscribe-once/JSON", "subscribe-once/PROTO", "unsupported encoding: PROTO", "Get is not supported"} {
						if !strings.Contains(err.Error(), m) {
							t.Errorf("read %d: the error does not name %q: %v", round, m, err)
						}
					}
					if st := r.Status(); st.Readable() || !st.Checked || st.Err == nil {
						t.Errorf("status %+v", st)
					}
					continue
				}
				if err != nil {
					t.Fatalf("read %d: %v", round, err)
				}
				got := flatten(t, ups)
				for p, v := range map[string]string{
					"/system/config/hostname":                  "r1",
					"/interfaces/interface/config/description": "uplink",
					"/interfaces/interface/config/mtu":         "1500",
					"/interfaces/interface/config/name":        "eth0",
				} {
					if got[p] != v {
						t.Errorf("read %d: %s = %q, want %q (all: %v)", round, p, got[p], v, got)
					}
				}
				for p := range got {
					if strings.Contains(p, "/state") {
						t.Errorf("read %d: state data %s = %s", round, p, got[p])
					}
				}
				for _, u := range ups {
					if p := gnmipath.String(u.GetPath()); !strings.HasPrefix(p, "/system") && !strings.HasPrefix(p, "/interfaces/interface[name=eth0]") {
						t.Errorf("read %d: a value outside the paths asked: %s", round, p)
					}
				}
				if m := r.Method().String(); m != tc.want {
					t.Errorf("read %d: method %s, want %s", round, m, tc.want)
				}
				if st := r.Status(); !st.Readable() {
					t.Errorf("status %+v", st)
				}
			}
		})
	}
}

// toggled refuses Get CONFIG while refuse is set, as a device whose
// software changed.
type toggled struct {
	gpb.GNMIClient
	refuse atomic.Bool
	// answer, if set, replaces the device's answer to every Get.
	answer *gpb.GetResponse
}

func (c *toggled) Get(ctx context.Context, in *gpb.GetRequest, opts ...grpc.CallOption) (*gpb.GetResponse, error) {
	if c.answer != nil {
		return c.answer, nil
	}
	if c.refuse.Load() && in.GetType() == gpb.GetRequest_CONFIG {
		return nil, status.Error(codes.Unimplemented, "unsupported request type: CONFIG")
	}
	return c.GNMIClient.Get(ctx, in, opts...)
}

func (c *toggled) Subscribe(ctx context.Context, opts ...grpc.CallOption) (gpb.GNMI_SubscribeClient, error) {
	if c.answer != nil {
		return nil, status.Error(codes.Unimplemented, "Subscribe is not implemented.")
	}
	return c.GNMIClient.Subscribe(ctx, opts...)
}

// logBuffer is a slog handler's output, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestReadReprobesAndLogsOnce(t *testing.T) {
	dev, c := startDevice(t, testbed.Options{RefuseEncodings: map[gpb.Encoding]codes.Code{gpb.Encoding_PROTO: codes.Unimplemented}})
	client := &toggled{GNMIClient: noCaps{c}}
	var logs logBuffer
	r := devread.NewWithOptions(devread.Options{Client: client, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := mustPath(t, "/system")
	read := func() error {
		_, err := r.Read(ctx, "", p)
		return err
	}
	if err := read(); err != nil || r.Method().String() != "get-config/JSON_IETF" {
		t.Fatalf("first read: %v, method %s", err, r.Method())
	}
	client.refuse.Store(true)
	if err := read(); err != nil || r.Method().String() != "get-all/JSON_IETF" {
		t.Fatalf("read with CONFIG refused: %v, method %s", err, r.Method())
	}
	client.refuse.Store(false)
	if err := read(); err != nil || r.Method().String() != "get-all/JSON_IETF" {
		t.Fatalf("the method that works is kept: %v, method %s", err, r.Method())
	}

	// Unreadable: one WARN however many reads fail, one INFO when it is
	// readable again.
	client.answer = &gpb.GetResponse{Notification: []*gpb.Notification{{Update: []*gpb.Update{{Path: mustPath(t, "/interfaces/interface[name=eth0]/config/mtu"),
		Val: &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 1}}}}}}}
	for range 3 {
		err := read()
		if !errors.Is(err, devread.ErrUnreadable) || status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "outside /system") {
			t.Fatalf("read of a device answering outside the path: %v", err)
		}
	}
	client.answer = nil
	if err := read(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d WARN lines, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "can be read again"); n != 1 {
		t.Errorf("%d lines of readable again, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "method=get-all/JSON_IETF") || !strings.Contains(out, "unsupported request type: CONFIG") {
		t.Errorf("no line of the method change with the refusal:\n%s", out)
	}

	// A lost connection is Unavailable, and no other method is tried.
	dev.Stop()
	err := read()
	if !errors.Is(err, devread.ErrUnreadable) || status.Code(err) != codes.Unavailable {
		t.Fatalf("read of a stopped device: %v (code %v)", err, status.Code(err))
	}
	if st := r.Status(); st.Readable() || st.Method.String() != "get-all/JSON_IETF" {
		t.Errorf("status after the device stopped: %+v", st)
	}
}

func TestReadNothingThere(t *testing.T) {
	for _, opts := range []testbed.Options{{}, {RefuseGetConfig: true}, {RefuseGet: true}} {
		dev := testbed.StartT(t, opts)
		r := devread.New(noCaps{dial(t, dev.Addr())})
		ups, err := r.Read(context.Background(), "", mustPath(t, "/interfaces/interface[name=eth9]"))
		if err != nil || len(ups) != 0 {
			t.Errorf("%+v: read of nothing: %v, %v", opts, ups, err)
		}
	}
}

func TestReadPrunesStateWithSchema(t *testing.T) {
	schema := testbed.SchemaT(t)
	_, c := startDevice(t, testbed.Options{RefuseGetConfig: true})
	r := devread.NewWithOptions(devread.Options{Client: noCaps{c}, Schema: schema})
	ups, err := r.Read(context.Background(), "", mustPath(t, "/system"))
	if err != nil {
		t.Fatal(err)
	}
	got := flatten(t, ups)
	if got["/system/config/hostname"] != "r1" || r.Method().String() != "get-all/JSON_IETF" {
		t.Errorf("read %v with %s", got, r.Method())
	}
	for p := range got {
		if strings.Contains(p, "state") {
			t.Errorf("state data %s", p)
		}
	}
}

// scripted answers every Get with the next of its errors (the last one
// from then on), and serves no Subscribe nor Capabilities.
type scripted struct {
	mu   sync.Mutex
	errs []error
}

func (c *scripted) Get(context.Context, *gpb.GetRequest, ...grpc.CallOption) (*gpb.GetResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.errs[0]
	if len(c.errs) > 1 {
		c.errs = c.errs[1:]
	}
	return nil, err
}

func (c *scripted) Subscribe(context.Context, ...grpc.CallOption) (gpb.GNMI_SubscribeClient, error) {
	return nil, status.Error(codes.Unimplemented, "no Subscribe")
}

// TestReadWarnsAfterUnreachable: a device unreachable at first (INFO) that
// then answers and refuses every read is warned about.
func TestReadWarnsAfterUnreachable(t *testing.T) {
	client := &scripted{errs: []error{status.Error(codes.Unavailable, "connection refused"),
		status.Error(codes.PermissionDenied, "not allowed")}}
	var logs logBuffer
	r := devread.NewWithOptions(devread.Options{Client: client, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		if _, err := r.Read(context.Background(), "", mustPath(t, "/system")); !errors.Is(err, devread.ErrUnreadable) {
			t.Fatalf("read: %v, want unreadable", err)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "level=INFO"); n != 1 {
		t.Errorf("%d INFO lines, want 1 (unreachable):\n%s", n, out)
	}
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d WARN lines, want 1 (refused after it was reachable):\n%s", n, out)
	}
}
