package main

// Clients of the crash and chaos tests: writers that each own one leaf and
// write values naming themselves and a sequence number (and roll their own
// changes back), a monitor of the device's own Subscribe stream, and the
// checks that no acknowledged change was lost or undone out of order.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// deviceEvent is one change of an interface description the device
// reported on its own Subscribe stream.
type deviceEvent struct {
	at    int64 // the device's notification timestamp
	intf  string
	value string
}

// deviceMonitor records every description change of the device, from a
// STREAM/ON_CHANGE subscription made directly to it. With resubscribe, a
// broken stream (the device restarted) is subscribed again; otherwise it
// is an error for waitFor.
type deviceMonitor struct {
	mu      sync.Mutex
	events  []deviceEvent
	err     error
	more    chan struct{}
	streams int // subscriptions made
}

func startDeviceMonitor(t *testing.T, dev gpb.GNMIClient) *deviceMonitor {
	t.Helper()
	return startMonitor(t, dev, false)
}

func startMonitor(t *testing.T, dev gpb.GNMIClient, resubscribe bool) *deviceMonitor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &deviceMonitor{more: make(chan struct{})}
	synced := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		first := true
		for ctx.Err() == nil {
			err := m.subscribe(ctx, dev, func() {
				if first {
					first = false
					close(synced)
				}
			})
			if ctx.Err() != nil {
				return
			}
			if !resubscribe || first {
				m.mu.Lock()
				m.err = err
				m.mu.Unlock()
				return
			}
			select { // the device is restarting: try again shortly
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	select {
	case <-synced:
	case <-done:
		t.Fatalf("device subscription ended before its sync_response: %v", m.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no sync_response from the device subscription")
	}
	return m
}

// subscribe runs one subscription until it breaks, calling synced at its
// sync_response.
func (m *deviceMonitor) subscribe(ctx context.Context, dev gpb.GNMIClient, synced func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := dev.Subscribe(ctx)
	if err != nil {
		return err
	}
	err = stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: &gpb.SubscriptionList{
		Mode:         gpb.SubscriptionList_STREAM,
		Subscription: []*gpb.Subscription{{Path: &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}}}, Mode: gpb.SubscriptionMode_ON_CHANGE}},
	}}})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.streams++
	m.mu.Unlock()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if resp.GetSyncResponse() {
			synced()
			continue
		}
		n := resp.GetUpdate()
		var evs []deviceEvent
		for _, u := range n.GetUpdate() {
			elems := append(append([]*gpb.PathElem(nil), n.GetPrefix().GetElem()...), u.GetPath().GetElem()...)
			if len(elems) != 4 || elems[1].GetName() != "interface" || elems[3].GetName() != "description" {
				continue
			}
			v, err := scalar(u.GetVal())
			if err != nil {
				v = "unreadable: " + err.Error()
			}
			evs = append(evs, deviceEvent{at: n.GetTimestamp(), intf: elems[1].GetKey()["name"], value: v})
		}
		m.mu.Lock()
		m.events = append(m.events, evs...)
		close(m.more)
		m.more = make(chan struct{})
		m.mu.Unlock()
	}
}

// waitFor waits until the device reported intf's description = value.
func (m *deviceMonitor) waitFor(t *testing.T, intf, value string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		m.mu.Lock()
		for _, e := range m.events {
			if e.intf == intf && e.value == value {
				m.mu.Unlock()
				return
			}
		}
		more, err := m.more, m.err
		m.mu.Unlock()
		if err != nil {
			t.Fatalf("device subscription: %v", err)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("the device never reported %s description %q", intf, value)
		}
	}
}

func (m *deviceMonitor) snapshot() []deviceEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]deviceEvent(nil), m.events...)
}

// opCounts counts one kind of operation of a writer.
type opCounts struct {
	sent, acked int
	errs        map[codes.Code]int // the operations not acknowledged, by code
}

func (c *opCounts) add(o opCounts) {
	c.sent += o.sent
	c.acked += o.acked
	if c.errs == nil {
		c.errs = map[codes.Code]int{}
	}
	for code, n := range o.errs {
		c.errs[code] += n
	}
}

func (c opCounts) String() string {
	return fmt.Sprintf("%d sent, %d acknowledged, not acknowledged by code: %v", c.sent, c.acked, c.errs)
}

// writer is one client of the crash and chaos tests: it writes "c<K>-<seq>"
// to its own leaf, seq 1, 2, 3 ..., one operation at a time. With
// probability rollbackP, it takes a turn alone (turn: the other writers
// wait) to send a Set and roll it back, and sometimes the change before
// it too: only the newest change in effect can be rolled back.
//
// What the writer was told defines what the device must hold: its floor.
// An acknowledged Set of seq s raises the floor to s. An acknowledged
// rollback of the change that wrote s puts back what the leaf held before
// that change, which is at least the floor before s was acknowledged (the
// leaf may hold a value the writer sent later without an answer, journaled
// all the same); the floor goes back there from the moment the rollback is
// sent, and stays there unless the sidecar refuses the rollback (it then
// journaled nothing). Once a rollback of s is acknowledged, the leaf never
// holds s again.
type writer struct {
	k         int
	intf      string
	rollbackP float64
	rng       *rand.Rand
	turn      *sync.RWMutex // held shared for a Set, alone for a rollback

	sent   int   // highest seq sent (every seq up to it was sent once)
	acked  []ack // in order
	errs   map[codes.Code]int
	failed map[int]codes.Code // the code of each seq not acknowledged

	sets, rollbacks opCounts
	// outcomes are the writer's Sets: when sent and answered, and how.
	outcomes   []setOutcome
	effect     []inEffect    // acknowledged changes in effect, oldest first
	floors     []floorChange // the floor over time
	rolledBack []ack         // seqs whose rollback was acknowledged, and when

	nacked atomic.Int64
	// byCode counts the Sets not acknowledged by code, for reading while
	// the writer runs.
	byCode [codes.Unauthenticated + 1]atomic.Int64
}

type ack struct {
	seq int
	at  int64 // UnixNano when the client got OK
}

// inEffect is an acknowledged change: its seq and proposal index.
type inEffect struct {
	seq   int
	index uint64
}

// floorChange: from time at on, the leaf holds a seq ≥ floor.
type floorChange struct {
	at    int64
	floor int
}

func newWriter(k int, rollbackP float64, seed uint64) *writer {
	return &writer{k: k, intf: fmt.Sprintf("eth%d", k+1), rollbackP: rollbackP,
		rng:  rand.New(rand.NewPCG(seed, uint64(k))),
		errs: map[codes.Code]int{}, failed: map[int]codes.Code{},
		sets: opCounts{errs: map[codes.Code]int{}}, rollbacks: opCounts{errs: map[codes.Code]int{}}}
}

func (w *writer) value(seq int) string { return fmt.Sprintf("c%d-%d", w.k, seq) }

// seqOf parses a value this writer wrote.
func (w *writer) seqOf(v string) (int, error) {
	var k, seq int
	if _, err := fmt.Sscanf(v, "c%d-%d", &k, &seq); err != nil || k != w.k || w.value(seq) != v {
		return 0, fmt.Errorf("value %q was not written by client %d", v, w.k)
	}
	return seq, nil
}

// floor is the current floor.
func (w *writer) floor() int {
	if n := len(w.effect); n > 0 {
		return w.effect[n-1].seq
	}
	return 0
}

func (w *writer) setFloor(at int64) {
	w.floors = append(w.floors, floorChange{at: at, floor: w.floor()})
}

// floorAt is the floor at time at: the device must not show an older value
// after it.
func (w *writer) floorAt(at int64) int {
	i := sort.Search(len(w.floors), func(i int) bool { return w.floors[i].at >= at })
	if i == 0 {
		return 0
	}
	return w.floors[i-1].floor
}

// rolledBackBefore returns the seq, if any, equal to seq whose rollback was
// acknowledged before time at.
func (w *writer) rolledBackBefore(seq int, at int64) bool {
	for _, r := range w.rolledBack {
		if r.seq == seq && r.at < at {
			return true
		}
	}
	return false
}

func (w *writer) run(c gpb.GNMIClient, stop *atomic.Bool, total *atomic.Int64) {
	for !stop.Load() {
		if w.rollbackP == 0 || w.rng.Float64() >= w.rollbackP {
			w.turn.RLock()
			w.set(c, total)
			w.turn.RUnlock()
			continue
		}
		w.turn.Lock()
		if w.set(c, total) {
			w.rollback(c)
			if w.rng.IntN(3) == 0 && len(w.effect) > 0 && w.effect[len(w.effect)-1].index != 0 {
				w.rollback(c)
			}
		}
		w.turn.Unlock()
	}
}

// opTimeout bounds each operation: long enough for a re-push after a
// fault, short enough to keep the clients going.
const opTimeout = 10 * time.Second

// set sends the next value and reports whether it was acknowledged.
func (w *writer) set(c gpb.GNMIClient, total *atomic.Int64) bool {
	w.sent++
	w.sets.sent++
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	start := time.Now()
	resp, err := setDesc(ctx, c, w.intf, w.value(w.sent))
	cancel()
	w.outcomes = append(w.outcomes, outcomeOf(setOutcome{value: w.value(w.sent), start: start, deadline: opTimeout}, err))
	if err == nil {
		now := time.Now().UnixNano()
		w.acked = append(w.acked, ack{w.sent, now})
		w.sets.acked++
		var index uint64
		if ext, err := responseExt(resp); err == nil && ext.GetPhase() == sidecarpb.Phase_PHASE_CHANGE {
			index = ext.GetIndex()
		}
		w.effect = append(w.effect, inEffect{seq: w.sent, index: index})
		w.setFloor(now)
		w.nacked.Add(1)
		total.Add(1)
		return true
	}
	code := status.Code(err)
	w.errs[code]++
	w.sets.errs[code]++
	w.failed[w.sent] = code
	if int(code) < len(w.byCode) {
		w.byCode[code].Add(1)
	}
	// The sidecar is down or not yet reconnected: back off a little
	// before the next value.
	time.Sleep(time.Duration(20+w.rng.IntN(40)) * time.Millisecond)
	return false
}

// rollback rolls back the writer's newest acknowledged change in effect.
// It is refused (FAILED_PRECONDITION) whenever another client's change came
// after it.
func (w *writer) rollback(c gpb.GNMIClient) {
	top := w.effect[len(w.effect)-1]
	if top.index == 0 {
		return // the response did not say which proposal (never so far)
	}
	w.rollbacks.sent++
	w.effect = w.effect[:len(w.effect)-1]
	w.setFloor(time.Now().UnixNano()) // from now on, the leaf may go back
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	_, err := c.Set(ctx, &gpb.SetRequest{Extension: []*gnmi_ext.Extension{rollbackExt(top.index)}})
	cancel()
	code := status.Code(err)
	switch code {
	case codes.OK:
		w.rollbacks.acked++
		w.rolledBack = append(w.rolledBack, ack{seq: top.seq, at: time.Now().UnixNano()})
		return
	case codes.FailedPrecondition, codes.NotFound, codes.InvalidArgument, codes.ResourceExhausted:
		if journaledRollback(err) {
			// The device refused it, but the journal took it (its paths
			// are out of sync): a re-push or a resolve may still put it
			// on the device. The floor stays lower.
			break
		}
		// Refused before anything was journaled: the change stays.
		w.effect = append(w.effect, top)
		w.setFloor(time.Now().UnixNano())
	default:
		// Unavailable, DeadlineExceeded, Aborted...: the rollback may be
		// journaled (and then takes effect): the floor stays lower.
	}
	w.rollbacks.errs[code]++
	time.Sleep(time.Duration(5+w.rng.IntN(20)) * time.Millisecond)
}

// journaledRollback reports whether err is the device's refusal of a
// rollback the journal recorded (its detail is the sidecar's Response in
// the rollback phase), not a refusal before anything was journaled.
func journaledRollback(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*sidecarpb.Response); ok && r.GetPhase() == sidecarpb.Phase_PHASE_ROLLBACK {
			return true
		}
	}
	return false
}

// rollbackExt is the sidecar's extension of a SYNC rollback of proposal
// index.
func rollbackExt(index uint64) *gnmi_ext.Extension {
	// A message of set fields only: Marshal cannot fail.
	msg, _ := proto.Marshal(&sidecarpb.Request{Rollback: &sidecarpb.Rollback{Index: index}})
	return registeredExt(gnmi_ext.ExtensionID_EID_EXPERIMENTAL, msg)
}

// startWriters starts n writers (client k writes interface eth<k+1>),
// each with its own connection to addr, rolling back with probability
// rollbackP (see writer). total counts the Sets acknowledged to all of
// them; stop stops them and waits (it is also a cleanup).
func startWriters(t *testing.T, addr string, n int, rollbackP float64, seed uint64) (writers []*writer, total *atomic.Int64, stop func()) {
	t.Helper()
	var stopped atomic.Bool
	total = new(atomic.Int64)
	var wg sync.WaitGroup
	turn := new(sync.RWMutex)
	for k := range n {
		w := newWriter(k, rollbackP, seed)
		w.turn = turn
		writers = append(writers, w)
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(c, &stopped, total)
		}()
	}
	stop = sync.OnceFunc(func() { stopped.Store(true); wg.Wait() })
	t.Cleanup(stop)
	return writers, total, stop
}

// refusals counts the writer's Sets that failed with code so far.
func (w *writer) refusals(code codes.Code) int64 { return w.byCode[code].Load() }

// lastAcked is the writer's newest acknowledged seq (0 if none).
func (w *writer) lastAcked() int {
	if len(w.acked) == 0 {
		return 0
	}
	return w.acked[len(w.acked)-1].seq
}

// checkFinal checks, once the writer stopped and the sidecar is quiescent,
// the value of the writer's leaf as c (the device, or the sidecar) holds
// it, named via: at least the floor, never a value rolled back, never a
// value not sent. It returns whether the check passed.
func (w *writer) checkFinal(t *testing.T, via string, c gpb.GNMIClient) bool {
	t.Helper()
	v, ok := mustGetLeaf(t, c, descPath(w.intf))
	floor := w.floor()
	if !ok {
		if floor != 0 {
			t.Errorf("client %d: %s has no %s description; the floor is %q", w.k, via, w.intf, w.value(floor))
			return false
		}
		return true
	}
	seq, err := w.seqOf(v)
	switch {
	case err != nil:
		t.Errorf("client %d: %s: %v", w.k, via, err)
	case seq < floor:
		t.Errorf("client %d: %s holds %q, older than %q (the last acknowledged value, after acknowledged rollbacks): an acknowledged Set was lost",
			w.k, via, v, w.value(floor))
	case seq > w.sent:
		t.Errorf("client %d: %s holds %q, never sent (last sent %d)", w.k, via, v, w.sent)
	case w.rolledBackBefore(seq, time.Now().UnixNano()):
		t.Errorf("client %d: %s holds %q, whose rollback was acknowledged", w.k, via, v)
	default:
		return true
	}
	return false
}

// checkEvents checks the device's changes of the writer's leaf, as the
// monitor saw them: once a value was acknowledged the device never showed
// an older one (a re-push may go back to the last applied value, which is
// at least the floor), and never showed a value after its rollback was
// acknowledged. It returns how many events it checked.
func (w *writer) checkEvents(t *testing.T, events []deviceEvent) int {
	t.Helper()
	n := 0
	for _, e := range events {
		if e.intf != w.intf {
			continue
		}
		n++
		seq, err := w.seqOf(e.value)
		if err != nil {
			t.Errorf("device event: %v", err)
			continue
		}
		at := time.Unix(0, e.at).Format(time.RFC3339Nano)
		if floor := w.floorAt(e.at); seq < floor {
			t.Errorf("client %d: device went back to %q at %v, after %q had been acknowledged (rollbacks considered)",
				w.k, e.value, at, w.value(floor))
		}
		if w.rolledBackBefore(seq, e.at) {
			t.Errorf("client %d: device showed %q at %v, after its rollback was acknowledged", w.k, e.value, at)
		}
	}
	return n
}
