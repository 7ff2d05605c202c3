package testbed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

func setReq(t *testing.T, path, val string) *gpb.SetRequest {
	return &gpb.SetRequest{Update: []*gpb.Update{upd(t, path, str(val))}}
}

// answered waits until the newest record of the Set log is answered and
// returns it (the answer is recorded when the handler returns, which may
// be just after the client has it).
func answered(t *testing.T, d *testbed.Device) testbed.SetRecord {
	t.Helper()
	var r testbed.SetRecord
	eventually(t, "the device to record its answer", func() bool {
		log := d.SetLog()
		if len(log) == 0 {
			return false
		}
		r = log[len(log)-1]
		return r.Answered
	})
	return r
}

// ctxCode is the code a device answers a Set whose client's deadline
// passed: DeadlineExceeded if its own timer fired first, Canceled if the
// client's cancel (RST_STREAM) arrived first. Either says its context
// ended.
func ctxCode(want, got codes.Code) bool {
	return got == want || want == codes.DeadlineExceeded && got == codes.Canceled
}

func ctxErr(want, got string) bool {
	return got == want || want == "context deadline exceeded" && got == "context canceled"
}

// TestSetLog: every Set RPC is recorded with when it arrived, the deadline
// the device saw, its metadata and paths, the faults that met it, its
// answer, and whether its context had ended and whether it was applied.
func TestSetLog(t *testing.T) {
	tests := []struct {
		name        string
		arm         func(d *testbed.Device)
		deadline    time.Duration // 0: none
		cancelAfter time.Duration // 0: never
		md          []string
		wantCode    codes.Code
		wantFaults  []string
		wantApplied bool
		wantCtxErr  string
	}{
		{name: "no deadline, custom metadata", md: []string{"x-custom", "v1"}, wantCode: codes.OK, wantApplied: true},
		{name: "deadline 5s", deadline: 5 * time.Second, wantCode: codes.OK, wantApplied: true},
		{name: "rejected", arm: func(d *testbed.Device) { d.RejectNextSets(1, codes.ResourceExhausted) },
			wantCode: codes.ResourceExhausted, wantFaults: []string{"reject RESOURCE_EXHAUSTED"}},
		{name: "refused at its path", arm: func(d *testbed.Device) { _ = d.RefuseSetsAt(eth0Desc, codes.InvalidArgument) },
			wantCode: codes.InvalidArgument, wantFaults: []string{"refuse INVALID_ARGUMENT at " + eth0Desc}},
		{name: "hung past its deadline", arm: func(d *testbed.Device) { d.HangNextSet() }, deadline: 300 * time.Millisecond,
			wantCode: codes.DeadlineExceeded, wantFaults: []string{"hang"}, wantCtxErr: "context deadline exceeded"},
		{name: "cancelled during a delay", arm: func(d *testbed.Device) { d.SetDelay(time.Hour) }, cancelAfter: 200 * time.Millisecond,
			wantCode: codes.Canceled, wantFaults: []string{"delay 1h0m0s"}, wantCtxErr: "context canceled"},
		{name: "slow but in time", arm: func(d *testbed.Device) { d.SetDelay(50 * time.Millisecond) }, deadline: 10 * time.Second,
			wantCode: codes.OK, wantFaults: []string{"delay 50ms"}, wantApplied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, c := startDevice(t, testbed.Options{})
			if tt.arm != nil {
				tt.arm(d)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.deadline > 0 {
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			if tt.cancelAfter > 0 {
				time.AfterFunc(tt.cancelAfter, cancel)
			}
			if len(tt.md) > 0 {
				ctx = metadata.AppendToOutgoingContext(ctx, tt.md...)
			}
			sent := time.Now()
			_, err := c.Set(ctx, setReq(t, eth0Desc, "logged"))
			wantCode(t, err, tt.wantCode)
			r := answered(t, d)
			d.ClearFaults()

			if r.Seq != 1 || r.Arrived.Before(sent) || r.Finished.Before(r.Arrived) {
				t.Errorf("seq %d, arrived %v, finished %v; sent at %v", r.Seq, r.Arrived, r.Finished, sent)
			}
			switch {
			case tt.deadline == 0 && r.HasDeadline:
				t.Errorf("the device saw a deadline %v; the client set none", r.Deadline)
			case tt.deadline > 0 && (!r.HasDeadline || r.Deadline > tt.deadline || r.Deadline < tt.deadline-2*time.Second):
				t.Errorf("the device saw deadline %v (has %v); the client set %v", r.Deadline, r.HasDeadline, tt.deadline)
			}
			for k := 0; k+1 < len(tt.md); k += 2 {
				if got := r.Metadata.Get(tt.md[k]); !slices.Equal(got, []string{tt.md[k+1]}) {
					t.Errorf("metadata %s = %v, want [%s]", tt.md[k], got, tt.md[k+1])
				}
			}
			if len(r.Metadata.Get("user-agent")) > 0 || len(r.Metadata.Get("content-type")) > 0 {
				t.Errorf("the transport's metadata is recorded: %v", r.Metadata)
			}
			if !slices.Equal(r.Paths, []string{eth0Desc}) || r.Request.GetUpdate()[0].GetVal().GetStringVal() != "logged" {
				t.Errorf("paths %v, request %v", r.Paths, r.Request)
			}
			if !ctxCode(tt.wantCode, r.Code) || !slices.Equal(r.Faults, tt.wantFaults) {
				t.Errorf("code %v, faults %q; want %v, %q", r.Code, r.Faults, tt.wantCode, tt.wantFaults)
			}
			if r.Applied != tt.wantApplied || !ctxErr(tt.wantCtxErr, r.CtxErr) || r.Cancelled != (tt.wantCtxErr != "") {
				t.Errorf("applied %v, cancelled %v (%q); want applied %v, context error %q", r.Applied, r.Cancelled, r.CtxErr, tt.wantApplied, tt.wantCtxErr)
			}
			if injected := tt.wantCode != codes.OK && len(tt.wantFaults) > 0 && tt.wantCtxErr == "" || slices.Contains(tt.wantFaults, "hang"); r.Injected() != injected {
				t.Errorf("Injected() = %v, want %v", r.Injected(), injected)
			}
			_, err = getVal(t, c, eth0Desc)
			if applied := err == nil; applied != tt.wantApplied {
				t.Errorf("the value is on the device: %v; want %v", applied, tt.wantApplied)
			}
			if got := len(d.SetLog()); got != 1 {
				t.Errorf("%d records, want 1 (the Get is not a Set)", got)
			}
			d.ClearSetLog()
			setLeaf(t, c, eth1Desc, str("after clear"))
			if log := d.SetLog(); len(log) != 1 || log[0].Seq != 2 {
				t.Errorf("after ClearSetLog and one Set: %+v", log)
			}
		})
	}
}

// TestSetFaultsAtPath: faults armed for a path meet the Sets that touch it
// (an operation at or under it, or a JSON value above it holding it), as
// many times as armed, and leave the others alone; what they refuse,
// delay past a cancel or hang is never applied.
func TestSetFaultsAtPath(t *testing.T) {
	eth0 := "/interfaces/interface[name=eth0]"
	above := func(t *testing.T, v string) *gpb.SetRequest {
		return &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0, jsonIETF(`{"name":"eth0","config":{"name":"eth0","description":"`+v+`"}}`))}}
	}
	type try struct {
		req      func(t *testing.T, v string) *gpb.SetRequest
		path     string // where the value lands
		deadline time.Duration
		cancel   time.Duration
		want     codes.Code
		minTook  time.Duration
		faults   []string
	}
	at := func(path string) func(t *testing.T, v string) *gpb.SetRequest {
		return func(t *testing.T, v string) *gpb.SetRequest { return setReq(t, path, v) }
	}
	refuse := "refuse RESOURCE_EXHAUSTED at " + eth0Desc
	tests := []struct {
		name    string
		fault   testbed.SetFault
		details bool
		tries   []try
	}{
		{name: "refuse once", fault: testbed.SetFault{Path: eth0Desc, Times: 1, Code: codes.ResourceExhausted}, tries: []try{
			{req: at(eth1Desc), path: eth1Desc, want: codes.OK},
			{req: at(eth0Desc), path: eth0Desc, want: codes.ResourceExhausted, faults: []string{refuse}},
			{req: at(eth0Desc), path: eth0Desc, want: codes.OK},
		}},
		{name: "refuse twice with details", details: true, fault: testbed.SetFault{Path: eth0Desc, Times: 2, Code: codes.ResourceExhausted, Details: true}, tries: []try{
			{req: at(eth0Desc), path: eth0Desc, want: codes.ResourceExhausted, faults: []string{refuse}},
			{req: above, path: eth0Desc, want: codes.ResourceExhausted, faults: []string{refuse}},
			{req: above, path: eth0Desc, want: codes.OK},
		}},
		{name: "refuse a whole entry, every time", fault: testbed.SetFault{Path: eth0, Code: codes.InvalidArgument}, tries: []try{
			{req: at(eth0Desc), path: eth0Desc, want: codes.InvalidArgument, faults: []string{"refuse INVALID_ARGUMENT at " + eth0}},
			{req: at(eth0MTU), path: eth0Desc, want: codes.InvalidArgument, faults: []string{"refuse INVALID_ARGUMENT at " + eth0}},
			{req: at(eth1Desc), path: eth1Desc, want: codes.OK},
		}},
		{name: "hang once", fault: testbed.SetFault{Path: eth0Desc, Times: 1, Hang: true}, tries: []try{
			{req: at(eth0Desc), path: eth0Desc, deadline: 300 * time.Millisecond, want: codes.DeadlineExceeded, minTook: 300 * time.Millisecond, faults: []string{"hang"}},
			{req: at(eth0Desc), path: eth0Desc, want: codes.OK},
		}},
		{name: "hang, cancelled", fault: testbed.SetFault{Path: eth0Desc, Times: 1, Hang: true}, tries: []try{
			{req: at(eth1Desc), path: eth1Desc, want: codes.OK},
			{req: above, path: eth0Desc, cancel: 200 * time.Millisecond, want: codes.Canceled, minTook: 200 * time.Millisecond, faults: []string{"hang"}},
		}},
		{name: "delay in time", fault: testbed.SetFault{Path: eth0Desc, Times: 1, Delay: 300 * time.Millisecond}, tries: []try{
			{req: at(eth0Desc), path: eth0Desc, deadline: 10 * time.Second, want: codes.OK, minTook: 300 * time.Millisecond, faults: []string{"delay 300ms"}},
			{req: at(eth0Desc), path: eth0Desc, want: codes.OK},
		}},
		{name: "delay past the deadline", fault: testbed.SetFault{Path: eth0Desc, Delay: 500 * time.Millisecond}, tries: []try{
			{req: at(eth0Desc), path: eth0Desc, deadline: 200 * time.Millisecond, want: codes.DeadlineExceeded, minTook: 200 * time.Millisecond, faults: []string{"delay 500ms"}},
			{req: at(eth1Desc), path: eth1Desc, want: codes.OK},
		}},
		{name: "delay, cancelled", fault: testbed.SetFault{Path: eth0Desc, Delay: time.Hour, Times: 1}, tries: []try{
			{req: at(eth0Desc), path: eth0Desc, cancel: 200 * time.Millisecond, want: codes.Canceled, minTook: 200 * time.Millisecond, faults: []string{"delay 1h0m0s"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, c := startDevice(t, testbed.Options{})
			if err := d.ArmSetFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			for k, tr := range tt.tries {
				v := fmt.Sprintf("try %d", k)
				// Before the deadline and the cancel are armed: took is at
				// least either.
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if tr.deadline > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), tr.deadline)
				}
				if tr.cancel > 0 {
					time.AfterFunc(tr.cancel, cancel)
				}
				_, err := c.Set(ctx, tr.req(t, v))
				took := time.Since(start)
				cancel()
				if status.Code(err) != tr.want {
					t.Fatalf("try %d: %v, want %v", k, err, tr.want)
				}
				if took < tr.minTook {
					t.Errorf("try %d: answered after %v, want at least %v", k, took, tr.minTook)
				}
				if tr.want == codes.ResourceExhausted {
					msg := status.Convert(err).Message()
					if !strings.Contains(msg, eth0Desc) {
						t.Errorf("try %d: message %q does not name the path", k, msg)
					}
					var fields []string
					for _, det := range status.Convert(err).Details() {
						if br, ok := det.(*errdetails.BadRequest); ok {
							for _, fv := range br.GetFieldViolations() {
								fields = append(fields, fv.GetField())
							}
						}
					}
					if want := map[bool][]string{true: {eth0Desc}}[tt.details]; !slices.Equal(fields, want) {
						t.Errorf("try %d: BadRequest field violations %q, want %q", k, fields, want)
					}
				}
				r := answered(t, d)
				if !slices.Equal(r.Faults, tr.faults) || !ctxCode(tr.want, r.Code) || r.Applied != (tr.want == codes.OK) {
					t.Errorf("try %d: set log: faults %q, code %v, applied %v; want %q, %v", k, r.Faults, r.Code, r.Applied, tr.faults, tr.want)
				}
				got, gerr := getVal(t, c, tr.path)
				if onDevice := gerr == nil && (got.GetStringVal() == v || strings.Contains(got.GetStringVal(), v)); onDevice != (tr.want == codes.OK) && tr.path == eth0Desc || tr.want == codes.OK && !onDevice {
					t.Errorf("try %d: %s holds %v (%v) after %v", k, tr.path, got, gerr, status.Code(err))
				}
			}
			if got := len(d.SetLog()); got != len(tt.tries) {
				t.Errorf("%d Set records, want %d: each Set received once", got, len(tt.tries))
			}
		})
	}
}

// TestArmSetFaultRefusesNonsense: a fault that does nothing, negative
// counts and bad paths are refused.
func TestArmSetFaultRefusesNonsense(t *testing.T) {
	d, _ := startDevice(t, testbed.Options{})
	for _, f := range []testbed.SetFault{
		{Path: eth0Desc},
		{Path: eth0Desc, Times: -1, Code: codes.Internal},
		{Path: eth0Desc, Delay: -time.Second},
		{Path: "/interfaces/interface[name=eth0", Code: codes.Internal},
	} {
		if err := d.ArmSetFault(f); err == nil {
			t.Errorf("ArmSetFault(%+v) armed", f)
		}
	}
	if err := d.RefuseNextSetsAt(eth0Desc, codes.OK, 1); err == nil {
		t.Error("RefuseNextSetsAt with OK armed")
	}
	if err := d.DelayNextSetsAt(eth0Desc, 0, 1); err == nil {
		t.Error("DelayNextSetsAt of 0 armed")
	}
}

// TestCancelledSetNeverApplied: a Set whose context ends while it waits
// for the device, in every fault that holds it, is never applied, and the
// next Set goes through.
func TestCancelledSetNeverApplied(t *testing.T) {
	for _, tt := range []struct {
		name string
		arm  func(d *testbed.Device)
	}{
		{"SetDelay", func(d *testbed.Device) { d.SetDelay(time.Hour) }},
		{"SetUpdateDelay", func(d *testbed.Device) { d.SetUpdateDelay(time.Hour) }},
		{"HangNextSet", func(d *testbed.Device) { d.HangNextSet() }},
		{"HangNextSetAt", func(d *testbed.Device) { _ = d.HangNextSetAt(eth0Desc) }},
		{"DelayNextSetsAt", func(d *testbed.Device) { _ = d.DelayNextSetsAt(eth0Desc, time.Hour, 0) }},
	} {
		for _, how := range []string{"cancel", "deadline"} {
			t.Run(tt.name+" "+how, func(t *testing.T) {
				d, c := startDevice(t, testbed.Options{})
				tt.arm(d)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				want := codes.Canceled
				if how == "deadline" {
					ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
					want = codes.DeadlineExceeded
				}
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := c.Set(ctx, setReq(t, eth0Desc, "abandoned"))
					done <- err
				}()
				eventually(t, "the Set to reach the device", func() bool { return d.SetCount() == 1 })
				if how == "cancel" {
					cancel()
				}
				select {
				case err := <-done:
					wantCode(t, err, want)
				case <-time.After(10 * time.Second):
					t.Fatal("the abandoned Set was not answered")
				}
				r := answered(t, d)
				if !r.Cancelled || r.Applied || !ctxCode(want, r.Code) {
					t.Errorf("set log: cancelled %v, applied %v, code %v; want cancelled, not applied, %v", r.Cancelled, r.Applied, r.Code, want)
				}
				d.ClearFaults()
				setLeaf(t, c, eth1Desc, str("next"))
				if _, err := getVal(t, c, eth0Desc); status.Code(err) != codes.NotFound {
					t.Errorf("the abandoned Set was applied: %v", err)
				}
			})
		}
	}
}

// TestAdminSetFaultsAndLog: the admin endpoints of path faults and of
// the Set log.
func TestAdminSetFaultsAndLog(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	srv := httptest.NewServer(d.AdminHandler())
	defer srv.Close()
	post := func(path string) (int, string) { return adminPost(t, srv.URL+path) }
	getLog := func(query string) []testbed.SetRecord {
		t.Helper()
		resp, err := http.Get(srv.URL + "/setlog" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var js []testbed.SetRecordJSON
		if err := json.NewDecoder(resp.Body).Decode(&js); err != nil {
			t.Fatalf("GET /setlog%s: %v", query, err)
		}
		var out []testbed.SetRecord
		for _, j := range js {
			r, err := j.Record()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	q := url.QueryEscape
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/faults/refuse?code=RESOURCE_EXHAUSTED&n=1&details=1&path=" + q(eth0Desc), http.StatusOK,
			"refusing the next 1 set(s) writing at or under " + eth0Desc + " with ResourceExhausted (with a BadRequest naming the path)\n"},
		{"/faults/refuse?code=RESOURCE_EXHAUSTED&n=x&path=" + q(eth0Desc), http.StatusBadRequest, "n must be a non-negative integer (0: every matching set)\n"},
		{"/faults/hang?path=" + q(eth1Desc), http.StatusOK, "the next set writing at or under " + eth1Desc + " hangs until its RPC ends\n"},
		{"/faults/delay?d=150ms&n=1&path=" + q(eth0MTU), http.StatusOK, "delaying the next 1 set(s) writing at or under " + eth0MTU + " by 150ms\n"},
		{"/faults/delay?d=0&path=" + q(eth0MTU), http.StatusBadRequest, "delay sets at \"" + eth0MTU + "\": delay 0s, want a positive one\n"},
		{"/faults/hang?path=" + q("/interfaces/interface[name="), http.StatusBadRequest, ""},
	} {
		code, body := post(tc.path)
		if code != tc.code || tc.body != "" && body != tc.body {
			t.Errorf("POST %s: HTTP %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-custom", "via-admin")
	ctx1, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Set(ctx1, setReq(t, eth0Desc, "refused"))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 {
		t.Errorf("the refused Set: %v with details %v", err, st.Details())
	}
	ctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	_, err = c.Set(ctx2, setReq(t, eth1Desc, "hung"))
	wantCode(t, err, codes.DeadlineExceeded)
	start := time.Now()
	mustSet(t, c, &gpb.SetRequest{Update: []*gpb.Update{upd(t, eth0MTU, uintV(1500))}})
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("the delayed Set took %v", took)
	}

	eventually(t, "three answered records", func() bool {
		log := getLog("")
		return len(log) == 3 && log[2].Answered
	})
	log := getLog("")
	if r := log[0]; r.Code != codes.ResourceExhausted || !r.HasDeadline || r.Deadline > 5*time.Second ||
		!slices.Equal(r.Metadata.Get("x-custom"), []string{"via-admin"}) || r.Request.GetUpdate()[0].GetVal().GetStringVal() != "refused" {
		t.Errorf("record 1: %+v", r)
	}
	if r := log[1]; !ctxCode(codes.DeadlineExceeded, r.Code) || !r.Cancelled || r.Applied || !slices.Equal(r.Faults, []string{"hang"}) {
		t.Errorf("record 2: %+v", r)
	}
	if r := log[2]; r.Code != codes.OK || !r.Applied || !slices.Equal(r.Faults, []string{"delay 150ms"}) {
		t.Errorf("record 3: %+v", r)
	}
	if got := getLog("?path=" + q("/interfaces/interface[name=eth1]")); len(got) != 1 || got[0].Seq != 2 {
		t.Errorf("GET /setlog?path=eth1: %+v", got)
	}
	if got := getLog("?since=2"); len(got) != 1 || got[0].Seq != 3 {
		t.Errorf("GET /setlog?since=2: %+v", got)
	}
	if code, _ := post("/setlog/clear"); code != http.StatusOK {
		t.Errorf("POST /setlog/clear: HTTP %d", code)
	}
	if got := getLog(""); len(got) != 0 {
		t.Errorf("after POST /setlog/clear: %d records", len(got))
	}
}
