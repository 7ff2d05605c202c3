package drift_test

// Tests of the Watcher in a whole sidecar (sidecartest.Start: the
// simulated device, a journal on disk, the agent, the proxy), the device
// changed behind the sidecar's back by a gNMI client of its own address.

import (
	"context"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// within is the bound: drift is reported, and reverted, within 5 s.
const within = 5 * time.Second

// device is a gNMI client of the simulated device itself, behind the
// sidecar's back.
type device struct {
	t *testing.T
	c gpb.GNMIClient
}

func onDevice(t *testing.T, s *sidecartest.Sidecar) device {
	return device{t: t, c: sidecartest.Dial(t, s.Target)}
}

func (d device) set(req *gpb.SetRequest) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.c.Set(ctx, req); err != nil {
		d.t.Fatalf("Set on the device: %v", err)
	}
}

func (d device) update(path string, v *gpb.TypedValue) {
	d.t.Helper()
	d.set(&gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(d.t, path), Val: v}}})
}

// waitRecords waits until the watcher's drifted paths are want, and
// returns them and how long that took.
func waitRecords(t *testing.T, w *drift.Watcher, want ...string) ([]drift.Record, time.Duration) {
	t.Helper()
	start := time.Now()
	var recs []drift.Record
	sidecartest.Eventually(t, within, fmt.Sprintf("drifted paths %v", want), func() bool {
		recs = w.Records()
		got := recPaths(recs)
		return strings.Join(got, " ") == strings.Join(want, " ")
	})
	return recs, time.Since(start)
}

// TestWatcherReports: values changed, deleted and re-created on the
// device behind the sidecar's back are reported within 5 s, each as the
// kind of drift it is, with the journal's and the device's values; putting
// the journal's values back clears them.
func TestWatcherReports(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	s.MustSet(t, sidecartest.UpdateRequest(t, eth1+"/config/description", sidecartest.StringVal("gone soon")))
	s.MustSet(t, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, eth1)}})
	// Every subtree compared once: the sidecar's own Sets are no drift.
	sidecartest.Eventually(t, within, "a first comparison", func() bool { return s.Drift.Status().Checks > 0 })
	dev := onDevice(t, s)

	dev.update(eth0Desc, sidecartest.StringVal("hacked"))
	recs, took := waitRecords(t, s.Drift, eth0Desc)
	t.Logf("a changed value reported after %v", took)
	if r := recs[0]; r.Kind != drift.Changed || drift.Text(r.Journal) != "uplink" || drift.Text(r.Device) != "hacked" || r.Index != 1 || r.Since.IsZero() {
		t.Errorf("record %+v", r)
	}

	dev.update(eth1+"/config/description", sidecartest.StringVal("back"))
	recs, took = waitRecords(t, s.Drift, eth0Desc, eth1)
	t.Logf("a re-created entry reported after %v", took)
	if r := recs[1]; r.Kind != drift.Recreated || r.Journal != nil || drift.Text(r.Device) != "(exists)" {
		t.Errorf("record %+v", r)
	}

	dev.set(&gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, eth0)}})
	recs, _ = waitRecords(t, s.Drift, eth0, eth1)
	if r := recs[0]; r.Kind != drift.Missing || r.Device != nil {
		t.Errorf("record %+v", r)
	}
	if st := s.Drift.Status(); st.Paths != 2 || st.Detected != 3 || st.Mode != drift.ModeOnChange || st.WatchError != "" {
		t.Errorf("status %+v", st)
	}

	dev.update(eth0Desc, sidecartest.StringVal("uplink"))
	dev.set(&gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, eth1)}})
	waitRecords(t, s.Drift)
	diffs, _, err := s.Drift.Diff(context.Background(), nil)
	if err != nil || len(diffs) != 0 {
		t.Errorf("Diff after the repair: %v, %v", wants(diffs), err)
	}
}

// testbedSchema is the simulated device's YANG schema, as make run gives
// it to the sidecar.
func testbedSchema(t *testing.T) *leaves.Schema { return testbed.SchemaT(t) }

// TestWatcherOwnSetsAreNotDrift: 200 Sets of JSON lists and containers,
// Replaces and Deletes, from four clients at once in rounds of 40 with a
// pause between them, with the watcher on: the sidecar's own writes never
// show as drift, though the watcher compared the device with the journal
// meanwhile; a change behind the sidecar's back right after still does.
func TestWatcherOwnSetsAreNotDrift(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Schema: testbedSchema(t)})
	// The subtrees the Sets write, watched before they start.
	s.MustSet(t, &gpb.SetRequest{Update: []*gpb.Update{
		{Path: sidecartest.Path(t, "/interfaces"), Val: ietf(`{"interface":[{"name":"eth0","config":{"name":"eth0"}}]}`)},
		{Path: sidecartest.Path(t, "/system/config"), Val: ietf(`{"hostname":"start"}`)}}})
	sidecartest.Eventually(t, within, "the first comparisons", func() bool { return s.Drift.Status().Checks >= 2 })
	before := s.Drift.Status().Checks
	const clients, rounds, perRound = 4, 5, 10
	set := func(c, n int) error {
		intf := fmt.Sprintf("eth%d", c*10+n%5)
		var req *gpb.SetRequest
		switch n % 5 {
		case 0, 1:
			req = &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces"),
				Val: ietf(fmt.Sprintf(`{"interface":[{"name":%q,"config":{"name":%q,"description":"c%d-%d","mtu":%d}}]}`, intf, intf, c, n, 1500+n))}}}
		case 2:
			req = &gpb.SetRequest{Replace: []*gpb.Update{{Path: sidecartest.Path(t, "/interfaces/interface[name="+intf+"]/config"),
				Val: ietf(fmt.Sprintf(`{"name":%q,"description":"r%d"}`, intf, n))}}}
		case 3:
			req = &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, "/system/config"),
				Val: ietf(fmt.Sprintf(`{"hostname":"h%d-%d","login-banner":"b%d"}`, c, n, n))}}}
		default:
			req = &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, fmt.Sprintf("/interfaces/interface[name=eth%d]", c*10+(n+1)%5))}}
		}
		if _, err := s.Set(t, req); err != nil {
			return fmt.Errorf("client %d, Set %d: %w", c, n, err)
		}
		if n >= rounds/2*perRound && n%5 == 0 {
			// In the later rounds, whole subtrees are compared while
			// Sets go on; in the first ones, only what the device
			// notifies is looked at.
			s.Drift.CheckNow()
		}
		if st := s.Drift.Status(); st.Detected > 0 {
			return fmt.Errorf("drift reported during the Sets: %v", recPaths(s.Drift.Records()))
		}
		return nil
	}
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for c := range clients {
			wg.Go(func() {
				for n := round * perRound; n < (round+1)*perRound; n++ {
					if err := set(c, n); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// A pause, longer than the debounce, for the watcher to compare
		// the notified changes at rest.
		time.Sleep(3 * drift.DefaultDebounce / 2)
	}
	during, notes := s.Drift.Status().Checks-before, s.Drift.Status().Notes
	if during == 0 || notes == 0 {
		t.Fatalf("the watcher compared %d subtrees and looked at %d notifications during the Sets: the test proves nothing", during, notes)
	}
	checks := s.Drift.Status().Checks
	s.Drift.CheckNow()
	sidecartest.Eventually(t, within, "a comparison after the Sets", func() bool { return s.Drift.Status().Checks > checks })
	if st := s.Drift.Status(); st.Detected != 0 || st.Paths != 0 {
		t.Fatalf("drift reported: %+v %v", st, recPaths(s.Drift.Records()))
	}
	t.Logf("%d comparisons, %d notifications looked at during the Sets", during, notes)
	diffs, _, err := s.Drift.Diff(context.Background(), nil)
	if err != nil || len(diffs) != 0 {
		t.Fatalf("Diff after the Sets: %v, %v", wants(diffs), err)
	}

	onDevice(t, s).update("/system/config/hostname", sidecartest.StringVal("theirs"))
	waitRecords(t, s.Drift, "/system/config/hostname")
}

// TestWatcherDeviceRestart: a device that restarts empty is re-pushed by
// the agent; meanwhile it lacks the whole configuration, which is not
// drift: nothing is reported, and the device is compared again after.
func TestWatcherDeviceRestart(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	s.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", sidecartest.StringVal("r1")))
	sidecartest.Eventually(t, within, "a first comparison", func() bool { return s.Drift.Status().Checks >= 2 })
	repushes := s.Agent.Status().Repushes
	for range 3 {
		before := s.Drift.Status().Checks
		s.Dev.Stop()
		if err := s.Dev.Start(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		sidecartest.Eventually(t, 20*time.Second, "the re-push and a comparison after it", func() bool {
			return s.Agent.Status().Repushes > repushes && s.Drift.Status().Checks > before
		})
		repushes = s.Agent.Status().Repushes
	}
	if st := s.Drift.Status(); st.Detected != 0 {
		t.Fatalf("drift reported across device restarts: %+v %v", st, recPaths(s.Drift.Records()))
	}
	s.WantDeviceLeaf(t, eth0Desc, sidecartest.StringVal("uplink"))
}

// TestWatcherRevert: with the revert policy, the device holds the
// journal's value again within 5 s of a change behind the sidecar's back,
// for a changed value, a deleted entry and a re-created one.
func TestWatcherRevert(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{DriftPolicy: drift.PolicyRevert})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	s.MustSet(t, sidecartest.UpdateRequest(t, eth1+"/config/description", sidecartest.StringVal("x")))
	s.MustSet(t, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, eth1)}})
	sidecartest.Eventually(t, within, "a first comparison", func() bool { return s.Drift.Status().Checks > 0 })
	dev := onDevice(t, s)

	start := time.Now()
	dev.update(eth0Desc, sidecartest.StringVal("hacked"))
	waitDevice(t, s, eth0Desc, sidecartest.StringVal("uplink"))
	t.Logf("a changed value reverted after %v", time.Since(start))

	dev.set(&gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, eth0)}})
	waitDevice(t, s, eth0Desc, sidecartest.StringVal("uplink"))

	dev.update(eth1+"/config/description", sidecartest.StringVal("back"))
	waitDevice(t, s, eth1+"/config/description", nil)

	waitRecords(t, s.Drift)
	if st := s.Drift.Status(); st.Reverts != 3 || st.Detected != 3 {
		t.Errorf("status %+v: want 3 paths detected and reverted", st)
	}
}

// waitDevice waits until the device holds want at the configuration leaf
// path (nil: nothing).
func waitDevice(t *testing.T, s *sidecartest.Sidecar, path string, want *gpb.TypedValue) {
	t.Helper()
	sidecartest.Eventually(t, within, fmt.Sprintf("the device to hold %v at %s", want, path), func() bool {
		got, ok := sidecartest.DeviceLeaves(t, s.Dev)[path]
		if want == nil {
			return !ok
		}
		return ok && proto.Equal(got, want)
	})
}

// TestWatcherRevertCap: a path changed again and again on the device is
// reverted 3 times, then only reported (capped): the device keeps the
// fourth change.
func TestWatcherRevertCap(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{DriftPolicy: drift.PolicyRevert})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	sidecartest.Eventually(t, within, "a first comparison", func() bool { return s.Drift.Status().Checks > 0 })
	dev := onDevice(t, s)
	for n := 1; n <= drift.DefaultRevertLimit; n++ {
		dev.update(eth0Desc, sidecartest.StringVal(fmt.Sprintf("fight-%d", n)))
		waitDevice(t, s, eth0Desc, sidecartest.StringVal("uplink"))
	}
	dev.update(eth0Desc, sidecartest.StringVal("fight-4"))
	var rec drift.Record
	sidecartest.Eventually(t, within, "the path capped", func() bool {
		recs := s.Drift.Records()
		if len(recs) == 1 {
			rec = recs[0]
		}
		return len(recs) == 1 && recs[0].Capped
	})
	if rec.Reverts != drift.DefaultRevertLimit || drift.Text(rec.Device) != "fight-4" {
		t.Errorf("record %+v", rec)
	}
	s.WantDeviceLeaf(t, eth0Desc, sidecartest.StringVal("fight-4"))
	if st := s.Drift.Status(); st.Reverts != drift.DefaultRevertLimit {
		t.Errorf("%d reverts, want %d", st.Reverts, drift.DefaultRevertLimit)
	}
}

// TestWatcherRevertRefused: a revert the device refuses makes the path out
// of sync with cause DRIFT (no longer drift: reported as out of sync, for
// resolve), and is not tried again.
func TestWatcherRevertRefused(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{DriftPolicy: drift.PolicyRevert})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	sidecartest.Eventually(t, within, "a first comparison", func() bool { return s.Drift.Status().Checks > 0 })
	onDevice(t, s).update(eth0Desc, sidecartest.StringVal("locked"))
	s.Dev.RejectNextSets(1, codes.InvalidArgument) // the revert's

	var rec *journal.OutOfSync
	sidecartest.Eventually(t, within, "the path out of sync", func() bool {
		recs, err := s.Journal.OutOfSync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 {
			rec = recs[0]
		}
		return len(recs) == 1
	})
	if rec.GetCause() != journal.CauseDrift || gnmipath.String(rec.GetValue().GetPath()) != eth0Desc ||
		codes.Code(rec.GetError().GetCode()) != codes.InvalidArgument {
		t.Errorf("out-of-sync record %v", rec)
	}
	waitRecords(t, s.Drift)
	sets := s.Dev.SetCount()
	checks := s.Drift.Status().Checks
	for range 2 {
		s.Drift.CheckNow()
		want := checks + 1
		sidecartest.Eventually(t, within, "another comparison", func() bool { return s.Drift.Status().Checks >= want })
		checks = want
	}
	if got := s.Dev.SetCount(); got != sets {
		t.Errorf("the device got %d more Sets: the refused revert was retried", got-sets)
	}
	if st := s.Drift.Status(); st.Paths != 0 || st.Reverts != 1 {
		t.Errorf("status %+v", st)
	}
	s.WantDeviceLeaf(t, eth0Desc, sidecartest.StringVal("locked"))
}

// TestWatcherAdopt: with the adopt policy, a change behind the sidecar's
// back is journaled as an adopted proposal authored "device", applied
// without a Set: the journal then holds the device's value, and the drift
// is gone.
func TestWatcherAdopt(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{DriftPolicy: drift.PolicyAdopt})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	s.MustSet(t, sidecartest.UpdateRequest(t, eth1+"/config/description", sidecartest.StringVal("x")))
	s.MustSet(t, &gpb.SetRequest{Delete: []*gpb.Path{sidecartest.Path(t, eth1)}})
	sidecartest.Eventually(t, within, "a first comparison", func() bool { return s.Drift.Status().Checks > 0 })
	last := s.LastIndex(t)
	sets := s.Dev.SetCount()
	dev := onDevice(t, s)
	dev.update(eth0Desc, sidecartest.StringVal("theirs"))
	dev.update(eth1+"/config/description", sidecartest.StringVal("theirs too"))

	sidecartest.Eventually(t, within, "the adoption applied and the drift gone", func() bool {
		return s.Drift.Status().Adoptions >= 2 && len(s.Drift.Records()) == 0
	})
	var adopted []*journal.Proposal
	for i := last + 1; i <= s.LastIndex(t); i++ {
		adopted = append(adopted, s.Proposal(t, i))
	}
	for _, p := range adopted {
		ch := p.GetChange()
		if !ch.GetAdopted() || ch.GetAuthor() != drift.Author || !strings.HasPrefix(ch.GetComment(), "drift adopted: /interfaces/") ||
			ch.GetApply() != journal.StatusComplete {
			t.Errorf("proposal %d: adopted %v, author %q, comment %q, apply %v", p.GetIndex(), ch.GetAdopted(), ch.GetAuthor(), ch.GetComment(), ch.GetApply())
		}
	}
	if len(adopted) == 0 {
		t.Fatal("no adopted proposal")
	}
	for path, want := range map[string]string{eth0Desc: "theirs", eth1 + "/config/description": "theirs too"} {
		var got *journal.PathValue
		err := s.Journal.Applied(context.Background(), sidecartest.Path(t, path), func(pv *journal.PathValue) error {
			got = pv
			return nil
		})
		if err != nil || got == nil || got.GetDeleted() || drift.Text(got.GetValue()) != want {
			t.Errorf("applied value at %s: %v, %v; want %q", path, got, err, want)
		}
	}
	if s.Dev.SetCount() != sets+2 {
		t.Errorf("the device got %d Sets, want only the 2 changes behind the sidecar's back", s.Dev.SetCount()-sets)
	}
	diffs, _, err := s.Drift.Diff(context.Background(), nil)
	if err != nil || len(diffs) != 0 {
		t.Errorf("Diff after the adoption: %v, %v", wants(diffs), err)
	}
}

// TestWatcherPolls: a device that refuses ON_CHANGE subscriptions is
// compared with a Get every interval instead (mode poll), and drift is
// still seen.
func TestWatcherPolls(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Device: testbed.Options{RefuseOnChange: true}, DriftInterval: 300 * time.Millisecond})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	sidecartest.Eventually(t, within, "polling", func() bool {
		st := s.Drift.Status()
		return st.Mode == drift.ModePoll && st.Checks > 0
	})
	onDevice(t, s).update(eth0Desc, sidecartest.StringVal("hacked"))
	_, took := waitRecords(t, s.Drift, eth0Desc)
	t.Logf("reported after %v, polling every 300ms", took)
	if st := s.Drift.Status(); st.WatchError != "" || st.Mode != drift.ModePoll {
		t.Errorf("status %+v", st)
	}
}

// refusingDevice is a device that refuses the watcher: every Get and
// Subscribe fails with Unauthenticated.
type refusingDevice struct {
	mu    sync.Mutex
	calls int
}

func (d *refusingDevice) refuse() error {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	return status.Error(codes.Unauthenticated, "no credentials")
}

func (d *refusingDevice) Get(context.Context, *gpb.GetRequest, ...grpc.CallOption) (*gpb.GetResponse, error) {
	return nil, d.refuse()
}

func (d *refusingDevice) Subscribe(context.Context, ...grpc.CallOption) (gpb.GNMI_SubscribeClient, error) {
	return nil, d.refuse()
}

// TestWatcherRefused: a device that refuses the watcher (no credentials)
// is reported in the status, and tried again with a growing backoff, not
// in a hot loop.
func TestWatcherRefused(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{DriftPolicy: drift.PolicyOff})
	s.MustSet(t, sidecartest.UpdateRequest(t, eth0Desc, sidecartest.StringVal("uplink")))
	dev := &refusingDevice{}
	w, err := drift.New(drift.Options{Device: dev, Journal: s.Journal, Agent: s.Agent, BackoffInitial: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Logger: sidecartest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	sidecartest.Eventually(t, within, "the watch error", func() bool {
		return strings.Contains(w.Status().WatchError, "no credentials")
	})
	time.Sleep(time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	dev.mu.Lock()
	calls := dev.calls
	dev.mu.Unlock()
	// 20 ms doubling to 200 ms (±50 %) allows at most a dozen tries in a
	// second; a hot loop makes thousands.
	if calls > 20 {
		t.Errorf("%d tries within about a second", calls)
	}
	if st := w.Status(); st.Checks != 0 || st.Mode != drift.ModeOnChange {
		t.Errorf("status %+v", st)
	}
}

// TestLargeComparisonReturnsItsMemory: a comparison of 2,000 or more of
// the journal's values forces a GC when done (debug.FreeOSMemory), so that
// the heap goal it raised does not keep its garbage resident while the
// sidecar idles. Counted with the runtime's count of forced GCs: another
// test forcing one at the same time could only hide a regression, never
// fail this one.
func TestLargeComparisonReturnsItsMemory(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	req := &gpb.SetRequest{}
	for n := range 1000 {
		req.Update = append(req.Update, &gpb.Update{
			Path: sidecartest.Path(t, fmt.Sprintf("/interfaces/interface[name=big%d]/config/description", n)),
			Val:  sidecartest.StringVal("x"),
		})
	}
	s.MustSet(t, req)
	forced := func() uint64 {
		sample := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	before := forced()
	onDevice(t, s).update("/interfaces/interface[name=big7]/config/description", sidecartest.StringVal("hacked"))
	// Not within: this test is about the comparison's end, not its speed.
	sidecartest.Eventually(t, time.Minute, "the changed description reported", func() bool { return len(s.Drift.Records()) == 1 })
	if after := forced(); after == before {
		t.Errorf("no GC was forced by the comparison of the 1,000 entries (forced GCs: %d before and after)", before)
	}
}
