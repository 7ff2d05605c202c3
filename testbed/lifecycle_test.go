package testbed_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func restart(t *testing.T, d *testbed.Device) {
	t.Helper()
	addr := d.Addr()
	d.Stop()
	if d.Running() {
		t.Fatal("Running after Stop")
	}
	if err := d.Start(ctxT(t), ""); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if d.Addr() != addr {
		t.Fatalf("restarted on %s, want the same address %s", d.Addr(), addr)
	}
}

// getAfterRestart is getVal that retries while the client still holds the
// connection the restart closed (Unavailable), as any client must.
func getAfterRestart(t *testing.T, c gpb.GNMIClient, path string) (*gpb.TypedValue, error) {
	t.Helper()
	var v *gpb.TypedValue
	var err error
	eventually(t, "the client to reach the restarted device", func() bool {
		v, err = getVal(t, c, path)
		return status.Code(err) != codes.Unavailable
	})
	return v, err
}

func TestRestart(t *testing.T) {
	tests := []struct {
		name      string
		opts      func(t *testing.T) testbed.Options
		wantValue bool
	}{
		{name: "non-persistent comes back empty", opts: func(*testing.T) testbed.Options { return testbed.Options{} }},
		{name: "persistent in memory keeps config", opts: func(*testing.T) testbed.Options { return testbed.Options{Persistent: true} }, wantValue: true},
		{name: "persistent with state file keeps config", opts: func(t *testing.T) testbed.Options {
			return testbed.Options{Persistent: true, StateFile: filepath.Join(t.TempDir(), "state.json")}
		}, wantValue: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, c := startDevice(t, tc.opts(t))
			setLeaf(t, c, eth0Desc, str("survives?"))
			boot := d.BootTime()
			restart(t, d)

			// The client reconnects on its own to the same address.
			got, err := getAfterRestart(t, c, eth0Desc)
			if tc.wantValue {
				if err != nil || got.GetStringVal() != "survives?" {
					t.Fatalf("after restart Get = %v, %v; want the value kept", got, err)
				}
			} else {
				wantCode(t, err, codes.NotFound)
			}
			if !d.BootTime().After(boot) {
				t.Errorf("boot time %v did not move past %v", d.BootTime(), boot)
			}
			bt, err := getVal(t, c, "/system/state/boot-time")
			if err != nil || bt.GetUintVal() != uint64(d.BootTime().UnixNano()) {
				t.Errorf("boot-time leaf = %v, %v; want %d", bt, err, d.BootTime().UnixNano())
			}
		})
	}
}

func TestStateFileSurvivesProcess(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	first, c := startDevice(t, testbed.Options{Persistent: true, StateFile: file})
	setLeaf(t, c, eth0Desc, str("from the first process"))
	first.Stop()

	// A new Device on the same file stands for a new process.
	_, c2 := startDevice(t, testbed.Options{Persistent: true, StateFile: file})
	got, err := getVal(t, c2, eth0Desc)
	if err != nil || got.GetStringVal() != "from the first process" {
		t.Fatalf("Get = %v, %v; want the saved value", got, err)
	}
	entries, err := os.ReadDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("state directory holds %v; want only the state file (no temporaries left)", entries)
	}
}

func TestCorruptStateFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, []byte(`{"openconfig-interfaces:interfaces": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := testbed.New(testbed.Options{Persistent: true, StateFile: file})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Start(ctxT(t), "127.0.0.1:0")
	if !errors.Is(err, testbed.ErrStateFile) || !strings.Contains(err.Error(), file) {
		t.Fatalf("Start = %v; want ErrStateFile naming %s", err, file)
	}
	if d.Running() {
		t.Error("device runs after a failed Start")
	}
}

func TestStartTwice(t *testing.T) {
	d := testbed.StartT(t, testbed.Options{})
	if err := d.Start(ctxT(t), "127.0.0.1:0"); !errors.Is(err, testbed.ErrRunning) {
		t.Fatalf("second Start = %v, want ErrRunning", err)
	}
}

func TestRejectNextSets(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	d.RejectNextSets(2, codes.Unavailable)
	for i := 0; i < 2; i++ {
		_, err := c.Set(ctxT(t), &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("x"))}})
		wantCode(t, err, codes.Unavailable)
	}
	_, err := getVal(t, c, eth0Desc)
	wantCode(t, err, codes.NotFound)
	setLeaf(t, c, eth0Desc, str("third"))
	if got, err := getVal(t, c, eth0Desc); err != nil || got.GetStringVal() != "third" {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if d.SetCount() != 3 {
		t.Errorf("SetCount = %d, want 3 (rejected Sets count)", d.SetCount())
	}
}

func TestSetDelay(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	d.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("late"))}})
	wantCode(t, err, codes.DeadlineExceeded)
	d.SetDelay(0)
	setLeaf(t, c, eth0MTU, uintV(1500))
	if _, err := getVal(t, c, eth0Desc); status.Code(err) != codes.NotFound {
		t.Errorf("a Set abandoned during its delay was applied: %v", err)
	}
}

// TestSetUpdateDelay: the per-update delay grows with the operations a
// Set carries, on top of the per-Set delay.
func TestSetUpdateDelay(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	d.SetDelay(10 * time.Millisecond)
	d.SetUpdateDelay(20 * time.Millisecond)
	timed := func(req *gpb.SetRequest) time.Duration {
		t.Helper()
		start := time.Now()
		mustSet(t, c, req)
		return time.Since(start)
	}
	if took := timed(&gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("one"))}}); took < 30*time.Millisecond {
		t.Errorf("a Set of one update took %v, want ≥ 10 ms + 20 ms", took)
	}
	four := &gpb.SetRequest{
		Delete:  []*gpb.Path{p(t, "/interfaces/interface[name=eth9]")},
		Replace: []*gpb.Update{upd(t, "/interfaces/interface[name=eth1]/config/description", str("r"))},
		Update:  []*gpb.Update{upd(t, eth0Desc, str("two")), upd(t, eth0MTU, uintV(1500))},
	}
	if took := timed(four); took < 90*time.Millisecond {
		t.Errorf("a Set of four operations took %v, want ≥ 10 ms + 4 × 20 ms", took)
	}
	d.ClearFaults()
	if took := timed(&gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("three"))}}); took >= 20*time.Millisecond {
		t.Logf("a Set after ClearFaults took %v (a slow machine?)", took)
	}
	d.SetUpdateDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("late"))}})
	wantCode(t, err, codes.DeadlineExceeded)
}

func TestHangNextSetUntilConnectionDrops(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	d.HangNextSet()
	done := make(chan error, 1)
	go func() {
		_, err := c.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("hung"))}})
		done <- err
	}()
	eventually(t, "the Set to reach the device", func() bool { return d.SetCount() == 1 })
	select {
	case err := <-done:
		t.Fatalf("hanging Set returned %v", err)
	default:
	}
	d.DropConnections()
	select {
	case err := <-done:
		wantCode(t, err, codes.Unavailable)
	case <-time.After(10 * time.Second):
		t.Fatal("hanging Set did not end when the connection dropped")
	}
	// Only the next Set hangs; the hung one was not applied.
	setLeaf(t, c, eth0MTU, uintV(1500))
	if _, err := getVal(t, c, eth0Desc); status.Code(err) != codes.NotFound {
		t.Errorf("the hung Set was applied: %v", err)
	}
}

func TestDropConnectionsEndsStreams(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, eth0Desc)})
	untilSync(t, sub)
	d.DropConnections()
	if _, err := sub.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream after drop: %v, want Unavailable", err)
	}
	// The device keeps listening.
	setLeaf(t, c, eth0Desc, str("after drop"))
}

func TestStopEndsStreamsAndHangingSets(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	sub := subscribe(t, c, gpb.SubscriptionList_STREAM, &gpb.Subscription{Path: p(t, eth0Desc)})
	untilSync(t, sub)
	d.HangNextSet()
	done := make(chan error, 1)
	go func() {
		_, err := c.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("hung"))}})
		done <- err
	}()
	eventually(t, "the Set to reach the device", func() bool { return d.SetCount() == 1 })
	d.Stop()
	if err := <-done; err == nil {
		t.Error("hanging Set succeeded across Stop")
	}
	if _, err := sub.Recv(); err == nil {
		t.Error("stream survived Stop")
	}
}

func TestAdminHandler(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	srv := httptest.NewServer(d.AdminHandler())
	defer srv.Close()
	post := func(path string) int {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/faults/reject?n=1&code=FAILED_PRECONDITION"); code != http.StatusOK {
		t.Fatalf("reject: HTTP %d", code)
	}
	_, err := c.Set(ctxT(t), &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0Desc, str("x"))}})
	wantCode(t, err, codes.FailedPrecondition)
	setLeaf(t, c, eth0Desc, str("via-admin"))

	resp, err := http.Get(srv.URL + "/config")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), eth0Desc) || !strings.Contains(string(body), "via-admin") {
		t.Errorf("/config = %s; want the description leaf", body)
	}

	if code := post("/faults/delay?update=30ms"); code != http.StatusOK {
		t.Fatalf("delay per update: HTTP %d", code)
	}
	start := time.Now()
	setLeaf(t, c, eth0Desc, str("slow"))
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("a Set of one update took %v after POST /faults/delay?update=30ms", took)
	}
	if code := post("/faults/delay?d=0&update=0"); code != http.StatusOK {
		t.Fatalf("delay off: HTTP %d", code)
	}

	for _, bad := range []string{"/faults/reject?n=1&code=NOPE", "/faults/reject?n=x&code=UNAVAILABLE", "/faults/delay?d=soon", "/faults/delay?update=-1ms", "/faults/delay"} {
		if code := post(bad); code != http.StatusBadRequest {
			t.Errorf("POST %s: HTTP %d, want 400", bad, code)
		}
	}

	boot := d.BootTime()
	if code := post("/restart"); code != http.StatusOK {
		t.Fatalf("restart: HTTP %d", code)
	}
	if !d.BootTime().After(boot) {
		t.Error("restart did not restart")
	}
	_, err = getAfterRestart(t, c, eth0Desc)
	wantCode(t, err, codes.NotFound)
}
