package main

// What TestChaos checks of the answers clients get (issue 34, "one
// client's Set never stalls the others"): every client is answered within
// its deadline plus answerMargin, and no Set fails that the device would
// have accepted directly. A failed Set must be explained by the device's
// Set log (a fault the device injected into a Set carrying its value: a
// rejection, a refusal, a hang), by the client itself (its deadline passed,
// it cancelled), or by a fault of the system around it (the sidecar
// killed, the device restarted or dropping connections, the network cut,
// partitioned, black-holed or slow, a path refused, a second sidecar):
// those cover the Sets answered from their start until recoveryGrace after
// they ended, and until reconnectGrace after for the Sets the sidecar
// refused because its device was not connected (it waits out a reconnect
// backoff of up to 15 s after Sets the device left unanswered). The
// device's own faults of one Set (rejections, hangs,
// retryable-looking codes, a cancel storm's delays) open no such window:
// only their own Sets may fail.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

const (
	// answerMargin is how late past its deadline a client may be
	// answered: scheduling on a loaded machine (the clients, the sidecar
	// built with -race and the device share it).
	answerMargin = 2 * time.Second
	// recoveryGrace is how long after a fault of the system around the
	// sidecar ended a Set may still fail because of it: a killed sidecar
	// restarting on its journal, a reconnect's backoff, a re-push.
	recoveryGrace = 5 * time.Second
	// reconnectGrace is how long after a fault the sidecar may still
	// refuse Sets because its device is not connected (its DEVICE_UNREACHABLE
	// refusal): it reconnects after a backoff that grows, while sessions
	// end on Sets the device left unanswered, to agent.Options.BackoffMax
	// (10 s) with ±50 % jitter, and then re-pushes.
	reconnectGrace = 15*time.Second + recoveryGrace
)

// The faults of one Set that TestChaos adds for issue 34.
const (
	faultRetryable   = "device answers one Set with a retryable-looking code"
	faultHangPath    = "device hangs one client's Set past its deadline"
	faultCancelStorm = "cancel storm"
)

// retryableCodes are the codes a device answers one Set with in
// faultRetryable: each looks transient, none may stall other clients.
var retryableCodes = []string{"UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "CANCELLED", "ABORTED", "UNAUTHENTICATED"}

// setOutcome is one Set a client sent: its value, when it was sent and
// answered, its deadline, and the answer's code.
type setOutcome struct {
	value      string
	start, end time.Time
	deadline   time.Duration
	code       codes.Code
	cancelled  bool // the client cancelled it itself
	// unreachable: the sidecar refused it because its device was not
	// connected (proxy.ReasonDeviceUnreachable).
	unreachable bool
}

// outcomeOf completes o with the answer err.
func outcomeOf(o setOutcome, err error) setOutcome {
	o.end, o.code = time.Now(), status.Code(err)
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == proxy.ErrorDomain && info.GetReason() == proxy.ReasonDeviceUnreachable {
			o.unreachable = true
		}
	}
	return o
}

// faultWindow is when a fault of the system around the sidecar may make a
// Set fail.
type faultWindow struct {
	name     string
	from, to time.Time
}

// setLogCollector copies the device's Set log (GET /setlog) as the run
// goes, so that the log's ring does not drop records of a long run.
type setLogCollector struct {
	admin   string
	mu      sync.Mutex
	records map[uint64]testbed.SetRecord
	since   uint64 // every record up to it is answered
	errs    int
	stop    func()
}

func startSetLogCollector(t *testing.T, admin string) *setLogCollector {
	t.Helper()
	c := &setLogCollector{admin: admin, records: map[uint64]testbed.SetRecord{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			c.collect()
		}
	}()
	c.stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(c.stop)
	return c
}

// collect fetches the records after the last one known answered.
func (c *setLogCollector) collect() {
	c.mu.Lock()
	since := c.since
	c.mu.Unlock()
	resp, err := http.Get(fmt.Sprintf("%s/setlog?since=%d", c.admin, since))
	if err != nil {
		c.mu.Lock()
		c.errs++
		c.mu.Unlock()
		return
	}
	defer resp.Body.Close()
	var js []testbed.SetRecordJSON
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&js) != nil {
		c.mu.Lock()
		c.errs++
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	open := false
	for _, j := range js {
		r, err := j.Record()
		if err != nil {
			c.errs++
			continue
		}
		c.records[r.Seq] = r
		if !r.Answered {
			open = true
		}
		if !open && r.Seq > c.since {
			c.since = r.Seq
		}
	}
}

// final stops the collector, fetches the rest and returns every record
// by the values its request carries.
func (c *setLogCollector) final(t *testing.T) (byValue map[string][]testbed.SetRecord, n int) {
	t.Helper()
	c.stop()
	c.collect()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errs > 0 {
		t.Logf("set log: %d reads failed (retried)", c.errs)
	}
	if len(c.records) > 0 {
		if first := slices.Min(slices.Collect(maps.Keys(c.records))); first != 1 {
			t.Errorf("set log: the first record collected is #%d: the device's ring dropped records before they were read", first)
		}
	}
	byValue = map[string][]testbed.SetRecord{}
	for _, r := range c.records {
		for _, u := range slices.Concat(r.Request.GetReplace(), r.Request.GetUnionReplace(), r.Request.GetUpdate()) {
			if v := u.GetVal().GetStringVal(); v != "" {
				byValue[v] = append(byValue[v], r)
			}
		}
	}
	return byValue, len(c.records)
}

// answerChecks counts what checkAnswers found.
type answerChecks struct {
	sets, failed, late                                    int
	byDevice, byDeadline, byCancel, byWindow, byReconnect int
	unexplained                                           int
}

func (a answerChecks) String() string {
	return fmt.Sprintf("%d Sets, %d answered late; %d failed: %d by a fault the device injected into them, %d past their own deadline, %d cancelled by their client, %d during a fault of the system around the sidecar, %d refused while the sidecar reconnected after one, %d unexplained",
		a.sets, a.late, a.failed, a.byDevice, a.byDeadline, a.byCancel, a.byWindow, a.byReconnect, a.unexplained)
}

// checkAnswers checks every client's Sets (see the file's comment) against
// the device's Set log and the fault windows.
func checkAnswers(t *testing.T, outcomes []setOutcome, byValue map[string][]testbed.SetRecord, windows []faultWindow) answerChecks {
	t.Helper()
	var a answerChecks
	var unexplained []string
	for _, o := range outcomes {
		a.sets++
		if took := o.end.Sub(o.start); took > o.deadline+answerMargin {
			a.late++
			t.Errorf("Set of %q answered %v after it was sent: past its %v deadline + %v", o.value, took.Round(time.Millisecond), o.deadline, answerMargin)
		}
		if o.code == codes.OK {
			continue
		}
		a.failed++
		injected := false
		for _, r := range byValue[o.value] {
			injected = injected || r.Injected()
		}
		switch {
		case injected:
			a.byDevice++
		case o.cancelled && o.code == codes.Canceled:
			a.byCancel++
		case o.code == codes.DeadlineExceeded && o.end.Sub(o.start) >= o.deadline-100*time.Millisecond:
			a.byDeadline++
		case slices.ContainsFunc(windows, func(w faultWindow) bool { return o.start.Before(w.to) && o.end.After(w.from) }):
			a.byWindow++
		case o.unreachable && slices.ContainsFunc(windows, func(w faultWindow) bool {
			return o.start.Before(w.to.Add(reconnectGrace-recoveryGrace)) && o.end.After(w.from)
		}):
			a.byReconnect++
		default:
			a.unexplained++
			var recs []string
			for _, r := range byValue[o.value] {
				recs = append(recs, fmt.Sprintf("#%d %v faults %v cancelled %v", r.Seq, r.Code, r.Faults, r.Cancelled))
			}
			unexplained = append(unexplained, fmt.Sprintf("%q: %v after %v (sent %v), the device: %v",
				o.value, o.code, o.end.Sub(o.start).Round(time.Millisecond), o.start.Format("15:04:05.000"), recs))
		}
	}
	if len(unexplained) > 0 {
		t.Errorf("%d Sets failed that the device would have accepted (no fault injected into them, no fault around, not their own deadline or cancel):\n\t%s",
			len(unexplained), strings.Join(unexplained[:min(len(unexplained), 20)], "\n\t"))
	}
	return a
}

// cancelStorm sends n concurrent Sets through addr, each on its own
// connection, while the device holds every one of them delay (a delay
// armed on their interface), and cancels each at a random time in [0,
// 2×delay): many clients cancelling in-flight Sets. Each Set writes its
// own subinterface of interface "storm". It returns their outcomes.
func (c *chaos) cancelStorm(t *testing.T, addr string, n int, delay time.Duration, round int) []setOutcome {
	t.Helper()
	const stormIntf = "/interfaces/interface[name=storm]"
	c.admin(t, fmt.Sprintf("/faults/delay?path=%s&d=%v", url.QueryEscape(stormIntf), delay))
	defer c.admin(t, "/faults/clear")
	outs := make([]setOutcome, n)
	var wg sync.WaitGroup
	var cancelled atomic.Int64
	seeds := make([]uint64, n)
	for k := range seeds {
		seeds[k] = c.rng.Uint64()
	}
	for k := range n {
		// Its own connection, closed when the storm is over (not at
		// cleanup: the leak check counts the goroutines left).
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := gpb.NewGNMIClient(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seeds[k], 0))
			value := fmt.Sprintf("storm%d-%d", round, k)
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			after := time.Duration(rng.Int64N(int64(2 * delay)))
			var self atomic.Bool
			time.AfterFunc(after, func() { self.Store(true); cancel() })
			o := setOutcome{value: value, start: time.Now(), deadline: opTimeout}
			_, err := client.Set(ctx, &gpb.SetRequest{Update: []*gpb.Update{{Path: stormPath(k), Val: strVal(value)}}})
			o = outcomeOf(o, err)
			o.cancelled = self.Load()
			if o.code == codes.Canceled {
				cancelled.Add(1)
			}
			outs[k] = o
		}()
	}
	wg.Wait()
	c.faults[fmt.Sprintf("%s: Sets cancelled by their client", faultCancelStorm)] += int(cancelled.Load())
	return outs
}

func stormPath(k int) *gpb.Path {
	return &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "storm"}},
		{Name: "subinterfaces"}, {Name: "subinterface", Key: map[string]string{"index": fmt.Sprint(k)}}, {Name: "config"}, {Name: "description"}}}
}
