package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// TestLargeSetThroughSidecar: one JSON_IETF Replace of /interfaces with
// 1,000 interfaces (about 3,000 values, several times what one
// transaction of the journal's steady memtable holds) is journaled,
// applied and acknowledged like any Set; after a SIGKILL of the sidecar and
// a device restarted empty, the re-push puts every value back; and the
// sidecar keeps taking small Sets throughout.
func TestLargeSetThroughSidecar(t *testing.T) {
	s := startStack(t, nil, nil)
	const n = 1000
	var entries []string
	for k := range n {
		entries = append(entries, fmt.Sprintf(`{"name":"big%d","config":{"name":"big%d","description":"d%d"}}`, k, k, k))
	}
	json := `{"openconfig-interfaces:interface":[` + strings.Join(entries, ",") + `]}`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	small := func(value string) {
		t.Helper()
		req := &gpb.SetRequest{Update: []*gpb.Update{{Path: diffPath(t, "/interfaces/interface[name=big0]/config/description"),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: value}}}}}
		if _, err := s.client.Set(ctx, req); err != nil {
			t.Fatalf("a small Set (%s): %v", value, err)
		}
	}
	small("before") // a keyed path: the sidecar learns the list's key (no --yang here)
	req := &gpb.SetRequest{Replace: []*gpb.Update{{Path: diffPath(t, "/interfaces"),
		Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(json)}}}}}
	if _, err := s.client.Set(ctx, req); err != nil {
		t.Fatalf("the large Set: %v", err)
	}
	small("after")
	checkDevice := func(when string) {
		t.Helper()
		for _, k := range []int{1, n / 2, n - 1} {
			got, ok, err := getLeaf(ctx, s.devClient, diffPath(t, fmt.Sprintf("/interfaces/interface[name=big%d]/config/description", k)))
			if err != nil || !ok || got != fmt.Sprintf("d%d", k) {
				t.Fatalf("%s: the device holds big%d's description %q (present %v, %v), want d%d", when, k, got, ok, err, k)
			}
		}
		got, ok, err := getLeaf(ctx, s.devClient, diffPath(t, "/interfaces/interface[name=big0]/config/description"))
		if err != nil || !ok || got != "after" {
			t.Fatalf("%s: the device holds big0's description %q (present %v, %v), want the small Set's", when, got, ok, err)
		}
	}
	checkDevice("after the Sets")

	// Killed, restarted, in front of a device that lost everything: the
	// journal holds the large Set and re-pushes it.
	s.sidecar.kill(t)
	postAdmin(t, s.devAdmin, "/restart")
	s.startSidecarOnly(t, "127.0.0.1:0")
	s.client = dial(t, s.sidecar.addr)
	s.waitSynced(t, 2*time.Minute) // the re-push of a large configuration to the simulated device takes seconds
	checkDevice("after a SIGKILL and a device restarted empty")
	small("after")
}
