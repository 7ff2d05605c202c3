package testbed_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

const (
	eth0Desc = "/interfaces/interface[name=eth0]/config/description"
	eth0MTU  = "/interfaces/interface[name=eth0]/config/mtu"
)

func dial(t *testing.T, addr string) gpb.GNMIClient { return dialB(t, addr) }

func dialB(t testing.TB, addr string) gpb.GNMIClient {
	t.Helper()
	// WaitForReady: across a device restart an RPC waits for the reconnect
	// instead of failing fast.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return gpb.NewGNMIClient(conn)
}

// startDevice starts a device and returns it with a connected client.
func startDevice(t *testing.T, opts testbed.Options) (*testbed.Device, gpb.GNMIClient) {
	t.Helper()
	d := testbed.StartT(t, opts)
	return d, dial(t, d.Addr())
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func p(t testing.TB, s string) *gpb.Path {
	t.Helper()
	if s == "/" {
		return &gpb.Path{}
	}
	path, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	return path
}

func str(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}
func uintV(u uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: u}}
}
func jsonIETF(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

func upd(t testing.TB, path string, v *gpb.TypedValue) *gpb.Update {
	return &gpb.Update{Path: p(t, path), Val: v}
}

func mustSet(t *testing.T, c gpb.GNMIClient, req *gpb.SetRequest) *gpb.SetResponse {
	t.Helper()
	resp, err := c.Set(ctxT(t), req)
	if err != nil {
		t.Fatalf("Set(%v): %v", req, err)
	}
	return resp
}

func setLeaf(t *testing.T, c gpb.GNMIClient, path string, v *gpb.TypedValue) {
	t.Helper()
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, path, v)}})
}

// getVal returns the single value at path (PROTO encoding), or the error.
func getVal(t *testing.T, c gpb.GNMIClient, path string) (*gpb.TypedValue, error) {
	t.Helper()
	resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, path)}, Encoding: gpb.Encoding_PROTO})
	if err != nil {
		return nil, err
	}
	if len(resp.GetNotification()) != 1 || len(resp.GetNotification()[0].GetUpdate()) != 1 {
		t.Fatalf("Get %s: want one update, got %v", path, resp)
	}
	return resp.GetNotification()[0].GetUpdate()[0].GetVal(), nil
}

// getJSON returns the decoded JSON_IETF value at path.
func getJSON(t *testing.T, c gpb.GNMIClient, path string, dt gpb.GetRequest_DataType) (any, error) {
	t.Helper()
	resp, err := c.Get(ctxT(t), &gpb.GetRequest{Path: []*gpb.Path{p(t, path)}, Encoding: gpb.Encoding_JSON_IETF, Type: dt})
	if err != nil {
		return nil, err
	}
	if len(resp.GetNotification()) != 1 || len(resp.GetNotification()[0].GetUpdate()) != 1 {
		t.Fatalf("Get %s: want one update, got %v", path, resp)
	}
	var v any
	if err := json.Unmarshal(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal(), &v); err != nil {
		t.Fatalf("Get %s: bad JSON_IETF: %v", path, err)
	}
	return v, nil
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v, want code %v", err, code)
	}
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// adminPost POSTs to url, an admin endpoint, and returns the answer's
// status code and body.
func adminPost(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
