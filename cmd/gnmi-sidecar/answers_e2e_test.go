package main

// End-to-end tests of issue 34, "one client's Set never stalls the
// others": real gnmi-sidecar and gnmi-testbed processes, the device holding
// a configuration before the sidecar starts (startupConfig, written to it
// directly), faults armed on one path through the device's admin endpoint,
// and the device's Set log (GET /setlog) to see what reached it: how many
// times, with which deadline and metadata, whether its client's cancel
// reached it. Timings are measured on the client.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// slack is what the timing checks allow on top of the bounds
// for scheduling on a loaded 2-core machine: the sidecar, the device and
// the test share it.
const slack = 500 * time.Millisecond

// answersStack starts a gnmi-testbed (devArgs), seeds it directly with
// startupConfig (with the credentials in seedMD, if it needs them), starts
// a gnmi-sidecar in front of it (sidecarArgs), and empties the device's
// Set log.
func answersStack(t *testing.T, devArgs, sidecarArgs, seedMD []string) *stack {
	t.Helper()
	s := newStack(t, devArgs, sidecarArgs)
	req := &gpb.SetRequest{}
	for _, op := range startupConfig {
		req.Update = append(req.Update, &gpb.Update{Path: diffPath(t, op.path),
			Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(op.json)}}})
	}
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), seedMD...), 10*time.Second)
	defer cancel()
	if _, err := s.devClient.Set(ctx, req); err != nil {
		t.Fatalf("seeding the device directly: %v", err)
	}
	s.startSidecar(t, "127.0.0.1:0")
	postAdmin(t, s.devAdmin, "/setlog/clear")
	return s
}

// deviceSetLog reads the device's Set log (GET /setlog) of the Sets
// touching path ("" all).
func deviceSetLog(t *testing.T, admin, path string) []testbed.SetRecord {
	t.Helper()
	q := ""
	if path != "" {
		q = "?path=" + url.QueryEscape(path)
	}
	resp, err := http.Get(admin + "/setlog" + q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /setlog: %s", resp.Status)
	}
	var js []testbed.SetRecordJSON
	if err := json.NewDecoder(resp.Body).Decode(&js); err != nil {
		t.Fatalf("GET /setlog: %v", err)
	}
	out := make([]testbed.SetRecord, 0, len(js))
	for _, j := range js {
		r, err := j.Record()
		if err != nil {
			t.Fatalf("GET /setlog: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// carrying returns the records of Sets whose request carries the string
// value (as a string value, or inside a JSON one).
func carrying(log []testbed.SetRecord, value string) []testbed.SetRecord {
	var out []testbed.SetRecord
	for _, r := range log {
		if requestCarries(r.Request, value) {
			out = append(out, r)
		}
	}
	return out
}

func requestCarries(req *gpb.SetRequest, value string) bool {
	for _, u := range slices.Concat(req.GetReplace(), req.GetUnionReplace(), req.GetUpdate()) {
		v := u.GetVal()
		if v.GetStringVal() == value || strings.Contains(string(v.GetJsonIetfVal()), `"`+value+`"`) || strings.Contains(string(v.GetJsonVal()), `"`+value+`"`) {
			return true
		}
	}
	return false
}

// describe renders records for a failure message.
func describe(log []testbed.SetRecord) string {
	var b strings.Builder
	for _, r := range log {
		fmt.Fprintf(&b, "\n  #%d %v paths %v faults %v code %v cancelled %v applied %v deadline %v (%v)",
			r.Seq, r.Arrived.Format("15:04:05.000"), r.Paths, r.Faults, r.Code, r.Cancelled, r.Applied, r.Deadline, r.HasDeadline)
	}
	return b.String()
}

// waitAnswered waits until the device has answered every Set carrying
// value and returns their records.
func waitAnswered(t *testing.T, admin, path, value string, d time.Duration) []testbed.SetRecord {
	t.Helper()
	var recs []testbed.SetRecord
	poll(t, d, "the device to answer the Set carrying "+value, func() (bool, string) {
		recs = carrying(deviceSetLog(t, admin, path), value)
		for _, r := range recs {
			if !r.Answered {
				return false, describe(recs)
			}
		}
		return len(recs) > 0, describe(recs)
	})
	return recs
}

// timedSet sets intf's description with a deadline and returns how long
// the client waited, and the error.
func timedSet(c gpb.GNMIClient, ctx context.Context, intf, val string, deadline time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	_, err := setDesc(ctx, c, intf, val)
	return time.Since(start), err
}

// TestAnswerResourceExhaustedAtOnce: the device answers one Set
// RESOURCE_EXHAUSTED. That client gets ResourceExhausted at once, well
// before its deadline; 50 other clients' concurrent Sets to other paths
// all succeed, none answered Unavailable; the device received the refused
// Set exactly once (it is not resent).
func TestAnswerResourceExhaustedAtOnce(t *testing.T) {
	t.Parallel()
	const others, deadline = 50, 10 * time.Second
	s := answersStack(t, nil, nil, nil)
	postAdmin(t, s.devAdmin, "/faults/refuse?code=RESOURCE_EXHAUSTED&n=1&details=1&path="+url.QueryEscape(eth0DescPath))

	conns := make([]gpb.GNMIClient, others)
	for k := range conns {
		conns[k] = dial(t, s.sidecar.addr)
	}
	var wg sync.WaitGroup
	begin := make(chan struct{})
	errs := make([]error, others)
	took := make([]time.Duration, others)
	for k := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			took[k], errs[k] = timedSet(conns[k], context.Background(), fmt.Sprintf("eth%d", 100+k), fmt.Sprintf("other-%d", k), deadline)
		}()
	}
	close(begin)
	refusedTook, refusedErr := timedSet(s.client, context.Background(), "eth0", "refused by the device", deadline)
	wg.Wait()

	if status.Code(refusedErr) != codes.ResourceExhausted {
		t.Errorf("the refused client got %v after %v; want ResourceExhausted", refusedErr, refusedTook.Round(time.Millisecond))
	} else if refusedTook > deadline/2 {
		t.Errorf("the refused client got ResourceExhausted after %v; want it at once, well before its %v deadline", refusedTook.Round(time.Millisecond), deadline)
	}
	failed := map[codes.Code]int{}
	for k, err := range errs {
		if err != nil {
			failed[status.Code(err)]++
			t.Errorf("client %d (eth%d): %v after %v; want OK", k, 100+k, err, took[k].Round(time.Millisecond))
		}
	}
	if failed[codes.Unavailable] > 0 {
		t.Errorf("%d of the other clients were answered Unavailable", failed[codes.Unavailable])
	}
	t.Logf("refused client: %v after %v; %d others: %d failed (%v), slowest %v", status.Code(refusedErr),
		refusedTook.Round(time.Millisecond), others, len(failed), failed, slices.Max(took).Round(time.Millisecond))

	// Every other Set is answered, so the sidecar has settled the refused
	// one: a resend would be in the log by now.
	recs := waitAnswered(t, s.devAdmin, eth0DescPath, "refused by the device", 10*time.Second)
	if len(recs) != 1 || recs[0].Code != codes.ResourceExhausted {
		t.Errorf("the device received the refused Set %d times, want exactly once, refused:%s", len(recs), describe(recs))
	}
}

// TestAnswerHungSetDeadline: the device hangs on one Set; its client, with
// a 2 s deadline, gets DeadlineExceeded within 2 s (plus slack); the
// device saw a deadline of at most 2 s for that Set; the next client's Set
// to another path, sent 100 ms after the hang started with a 10 s
// deadline, is answered OK within 3 s of the hang's start; the hung Set
// reached the device once.
func TestAnswerHungSetDeadline(t *testing.T) {
	t.Parallel()
	s := answersStack(t, nil, nil, nil)
	postAdmin(t, s.devAdmin, "/faults/hang?path="+url.QueryEscape(eth0DescPath))

	type answer struct {
		err  error
		took time.Duration
	}
	hung := make(chan answer, 1)
	go func() {
		took, err := timedSet(s.client, context.Background(), "eth0", "hung", 2*time.Second)
		hung <- answer{err, took}
	}()
	// The hang starts when the Set reaches the device.
	poll(t, 2*time.Second, "the Set to reach the device and hang", func() (bool, string) {
		return len(carrying(deviceSetLog(t, s.devAdmin, eth0DescPath), "hung")) > 0, "not in the set log"
	})
	hangStart := time.Now()
	time.Sleep(100 * time.Millisecond) // the scenario: the next Set comes 100 ms later
	next := dial(t, s.sidecar.addr)
	_, nextErr := timedSet(next, context.Background(), "eth1", "after the hang", 10*time.Second)
	nextAt := time.Since(hangStart)

	a := <-hung
	if status.Code(a.err) != codes.DeadlineExceeded || a.took > 2*time.Second+slack {
		t.Errorf("the hung client got %v after %v; want DeadlineExceeded within 2 s (+%v)", a.err, a.took.Round(time.Millisecond), slack)
	}
	if nextErr != nil || nextAt > 3*time.Second {
		t.Errorf("the next client's Set: %v, answered %v after the hang started; want OK within 3 s", nextErr, nextAt.Round(time.Millisecond))
	}
	t.Logf("hung client: %v after %v; next client: %v, %v after the hang started", status.Code(a.err), a.took.Round(time.Millisecond),
		status.Code(nextErr), nextAt.Round(time.Millisecond))

	// The hung Set's context ends with its client's 2 s deadline: 5 s is
	// ample.
	recs := waitAnswered(t, s.devAdmin, eth0DescPath, "hung", 5*time.Second)
	if len(recs) != 1 {
		t.Errorf("the hung Set reached the device %d times, want once:%s", len(recs), describe(recs))
	}
	for _, r := range recs {
		if !r.HasDeadline || r.Deadline > 2*time.Second {
			t.Errorf("the device saw deadline %v (has one: %v) for the hung Set; want at most the client's 2 s", r.Deadline, r.HasDeadline)
		}
		if r.Applied {
			t.Error("the hung Set was applied")
		}
	}
}

// TestAnswerRefusedThenQueuedSameLeaf: one client's Set the device
// refuses with InvalidArgument, and another client's Set to the same
// leaf queued behind it: the second gets OK, and its value is on the
// device.
func TestAnswerRefusedThenQueuedSameLeaf(t *testing.T) {
	t.Parallel()
	s := answersStack(t, nil, nil, nil)
	// The first Set is held 500 ms, then refused: the second arrives
	// meanwhile and queues behind it.
	postAdmin(t, s.devAdmin, "/faults/delay?d=500ms&n=1&path="+url.QueryEscape(eth0DescPath))
	postAdmin(t, s.devAdmin, "/faults/refuse?code=INVALID_ARGUMENT&n=1&path="+url.QueryEscape(eth0DescPath))

	first := make(chan error, 1)
	go func() {
		_, err := timedSet(s.client, context.Background(), "eth0", "refused", 10*time.Second)
		first <- err
	}()
	poll(t, 5*time.Second, "the first Set to reach the device", func() (bool, string) {
		return len(carrying(deviceSetLog(t, s.devAdmin, eth0DescPath), "refused")) > 0, "not in the set log"
	})
	second := dial(t, s.sidecar.addr)
	took, secondErr := timedSet(second, context.Background(), "eth0", "queued behind the refused one", 10*time.Second)
	if err := <-first; status.Code(err) != codes.InvalidArgument {
		t.Errorf("the first client got %v; want the device's InvalidArgument", err)
	}
	if secondErr != nil {
		t.Errorf("the second client, queued behind the refused Set, got %v after %v; want OK", secondErr, took.Round(time.Millisecond))
	}
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v != "queued behind the refused one" {
		t.Errorf("the device holds eth0 description %q; want the second client's value", v)
	}
}

// TestAnswerSlowDeviceWithinDeadline: a device Set taking 1.85 s for a
// client with a 2 s deadline: OK, and the value is on the device.
func TestAnswerSlowDeviceWithinDeadline(t *testing.T) {
	t.Parallel()
	s := answersStack(t, nil, nil, nil)
	postAdmin(t, s.devAdmin, "/faults/delay?d=1850ms&n=1&path="+url.QueryEscape(eth0DescPath))
	took, err := timedSet(s.client, context.Background(), "eth0", "slow but in time", 2*time.Second)
	if err != nil {
		t.Errorf("a Set the device takes 1.85 s for, with a 2 s deadline: %v after %v; want OK", err, took.Round(time.Millisecond))
	}
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v != "slow but in time" {
		t.Errorf("the device holds eth0 description %q; want %q", v, "slow but in time")
	}
	recs := waitAnswered(t, s.devAdmin, eth0DescPath, "slow but in time", 10*time.Second)
	t.Logf("answered %v after %v; the device:%s", status.Code(err), took.Round(time.Millisecond), describe(recs))
}

// TestAnswerClientCancelReachesDevice: a client cancelling after 1 s while
// the device takes 3 s: the device sees the Set's context cancelled, the
// value is not on the device, and the next Set succeeds.
func TestAnswerClientCancelReachesDevice(t *testing.T) {
	t.Parallel()
	s := answersStack(t, nil, nil, nil)
	postAdmin(t, s.devAdmin, "/faults/delay?d=3s&n=1&path="+url.QueryEscape(eth0DescPath))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel) // the scenario: the client gives up after 1 s
	took, err := timedSet(s.client, ctx, "eth0", "cancelled", 10*time.Second)
	if status.Code(err) != codes.Canceled {
		t.Errorf("the cancelling client got %v after %v; want Canceled", err, took.Round(time.Millisecond))
	}
	recs := waitAnswered(t, s.devAdmin, eth0DescPath, "cancelled", 10*time.Second)
	if len(recs) != 1 || !recs[0].Cancelled || recs[0].Applied {
		t.Errorf("the device's record of the cancelled Set: want one, its context cancelled, not applied:%s", describe(recs))
	}
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v == "cancelled" {
		t.Error("the cancelled Set's value is on the device")
	}
	if took, err := timedSet(s.client, context.Background(), "eth1", "after the cancel", 10*time.Second); err != nil {
		t.Errorf("the next Set: %v after %v; want OK", err, took.Round(time.Millisecond))
	}
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v == "cancelled" {
		t.Error("the cancelled Set's value reached the device after the next Set")
	}
}

// TestAnswerCustomMetadataWithDeviceAccount: a Set with custom metadata
// (x-custom) through a sidecar that uses a device account
// (--device-username): the device's Set log shows x-custom on that Set.
func TestAnswerCustomMetadataWithDeviceAccount(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "device-password")
	if err := os.WriteFile(pw, []byte("svc-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := answersStack(t, []string{"--user", "sidecar:svc-pw"},
		[]string{"--device-username", "sidecar", "--device-password-file", pw},
		[]string{"username", "sidecar", "password", "svc-pw"})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-custom", "from-the-client")
	if took, err := timedSet(s.client, ctx, "eth0", "with custom metadata", 10*time.Second); err != nil {
		t.Fatalf("Set with x-custom: %v after %v", err, took.Round(time.Millisecond))
	}
	recs := waitAnswered(t, s.devAdmin, eth0DescPath, "with custom metadata", 10*time.Second)
	for _, r := range recs {
		if got := r.Metadata.Get("x-custom"); !slices.Equal(got, []string{"from-the-client"}) {
			t.Errorf("the device's Set #%d has x-custom %v (metadata %v); want [from-the-client]", r.Seq, got, r.Metadata)
		}
		if got := r.Metadata.Get("username"); !slices.Equal(got, []string{"sidecar"}) {
			t.Errorf("the device's Set #%d came as %v; want the device account", r.Seq, got)
		}
	}
}
