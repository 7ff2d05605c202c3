package agent_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

var (
	simSeeds = flag.Int("sim.seeds", 200, "randomized simulation: how many seeds to run")
	simFirst = flag.Uint64("sim.first", 1, "randomized simulation: first seed")
	simSeed  = flag.Uint64("sim.seed", 0, "randomized simulation: run only this seed (replay)")
	simSteps = flag.Int("sim.steps", 30, "randomized simulation: mean number of random actions per seed")
)

// TestSimulation runs random interleavings of proposals, rollbacks,
// commit-confirmed changes (confirmed, cancelled or left to expire), device
// restarts, dropped connections, rejections, hangs and sidecar restarts
// against the real agent, journal and simulated device. At quiescence the
// trace must pass the checker (Order, Sequential, rollback order, terms,
// Liveness) and the device must hold exactly the journal's applied values.
func TestSimulation(t *testing.T) {
	first, n := *simFirst, uint64(*simSeeds)
	if *simSeed != 0 {
		first, n = *simSeed, 1
	}
	start := time.Now()
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay: go test -race ./agent -run 'TestSimulation/seed=%d$' -sim.seed=%d -v", seed, seed)
				}
			})
			simulate(t, seed)
		})
	}
	t.Cleanup(func() { t.Logf("%d seeds in %v", n, time.Since(start).Round(time.Millisecond)) })
}

// sim is one seed's run.
type sim struct {
	t   *testing.T
	rng *rand.Rand
	r   *rig
	log []string // what happened, printed on failure
}

func simulate(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	persistent := rng.IntN(5) == 0
	opts := agent.Options{
		Persistent:   persistent,
		Fencing:      rng.IntN(2) == 0,
		ApplyTimeout: 300 * time.Millisecond, // ends an injected hang
	}
	s := &sim{t: t, rng: rng}
	s.r = newRig(t, testbed.Options{Persistent: persistent}, opts)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (persistent=%v fencing=%v) actions:\n%v", seed, persistent, opts.Fencing, s.log)
		}
	})

	steps := *simSteps/2 + rng.IntN(*simSteps+1)
	for range steps {
		s.step()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
	}
	s.r.dev.ClearFaults()
	s.note("quiesce")
	s.r.waitQuiescent()
	s.r.verify()
	s.checkCommittedEqualsApplied()
}

func (s *sim) note(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

// step takes one random action.
func (s *sim) step() {
	r, rng := s.r, s.rng
	switch n := rng.IntN(100); {
	case n < 24:
		ops := s.randomOps()
		p, err := r.j.ProposeChange(context.Background(), ops)
		if err != nil && !errors.Is(err, journal.ErrGuard) { // a commit-confirmed is outstanding
			s.t.Fatalf("ProposeChange: %v", err)
		}
		r.a.Notify()
		s.note("propose %d (%d ops): %v", p.GetIndex(), len(ops), err)
	case n < 32:
		ops := s.randomOps()
		p, err := r.a.ProposeChange(context.Background(), journal.Sender{}, ops)
		if err != nil && !errors.Is(err, journal.ErrGuard) {
			s.t.Fatalf("Agent.ProposeChange: %v", err)
		}
		s.note("propose through the agent %d (%d ops): %v", p.GetIndex(), len(ops), err)
	case n < 38:
		s.burst()
	case n < 42:
		ops := s.randomOps()
		id := fmt.Sprintf("c%d", rng.IntN(1000))
		d := time.Duration(rng.IntN(300)) * time.Millisecond
		p, err := r.j.ProposeConfirmedChange(context.Background(), journal.Sender{}, ops, id, time.Now().Add(d))
		if err != nil && !errors.Is(err, journal.ErrGuard) {
			s.t.Fatalf("ProposeConfirmedChange: %v", err)
		}
		r.a.Notify()
		s.note("commit-confirmed %s %d (%d ops, %v): %v", id, p.GetIndex(), len(ops), d, err)
	case n < 45:
		rec, err := r.j.CommitConfirm(context.Background())
		if err == nil {
			if rng.IntN(2) == 0 {
				_, err = r.j.ConfirmCommit(context.Background(), rec.GetId())
				s.note("confirm %s: %v", rec.GetId(), err)
			} else {
				_, err = r.j.CancelCommit(context.Background(), rec.GetId())
				s.note("cancel %s: %v", rec.GetId(), err)
			}
			r.a.Notify()
		}
	case n < 55:
		i, err := r.j.NewestRollbackable(context.Background())
		if err == nil {
			err = r.rollback(i)
		}
		s.note("rollback %d: %v", i, err)
	case n < 62:
		s.note("restart device")
		r.restartDevice()
	case n < 68:
		s.note("drop connections")
		r.dev.DropConnections()
	case n < 75:
		code := []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound}[rng.IntN(3)]
		s.note("reject next set: %v", code)
		r.dev.RejectNextSets(1, code)
	case n < 80:
		s.note("reject next set: Unavailable")
		r.dev.RejectNextSets(1, codes.Unavailable)
	case n < 84:
		s.note("hang next set")
		r.dev.HangNextSet()
	case n < 90:
		s.note("restart sidecar")
		r.restartSidecar()
	default:
		d := time.Duration(rng.IntN(15)) * time.Millisecond
		s.note("sleep %v", d)
		time.Sleep(d)
	}
}

// burst proposes two to eight changes at once through Agent.ProposeChange,
// as concurrent clients do, while the device is slowed down for a moment,
// so that the agent sends them in batches.
func (s *sim) burst() {
	r, rng := s.r, s.rng
	n := 2 + rng.IntN(7)
	batches := make([][]*journal.Op, n)
	for k := range batches {
		batches[k] = s.randomOps()
	}
	r.dev.SetDelay(time.Duration(1+rng.IntN(10)) * time.Millisecond)
	defer r.dev.SetDelay(0)
	results := make([]string, n)
	var wg sync.WaitGroup
	for k, ops := range batches {
		wg.Go(func() {
			p, err := r.a.ProposeChange(context.Background(), journal.Sender{}, ops)
			if err != nil && !errors.Is(err, journal.ErrGuard) {
				s.t.Errorf("Agent.ProposeChange: %v", err)
			}
			results[k] = fmt.Sprintf("%d (%d ops): %v", p.GetIndex(), len(ops), err)
		})
	}
	wg.Wait()
	s.note("burst of %d proposals: %v", n, results)
}

// randomOps draws one to three operations over a small tree, so changes
// overlap: descriptions and MTUs of four interfaces, leaf deletes and
// whole-entry deletes, and now and then a value the device refuses (a
// string for an MTU), which fails its proposal and, in a batch, makes the
// agent isolate it.
func (s *sim) randomOps() []*journal.Op {
	t, rng := s.t, s.rng
	var ops []*journal.Op
	for range 1 + rng.IntN(3) {
		intf := fmt.Sprintf("eth%d", rng.IntN(4))
		if rng.IntN(40) == 0 {
			ops = append(ops, updateOp(t, mtuPath(intf), str("not a number")))
			continue
		}
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			ops = append(ops, updateOp(t, descPath(intf), str(fmt.Sprintf("d%d", rng.IntN(1000)))))
		case 4, 5, 6:
			ops = append(ops, updateOp(t, mtuPath(intf), uintv(uint64(1280+rng.IntN(8000)))))
		case 7, 8:
			ops = append(ops, deleteOp(t, mtuPath(intf)))
		default:
			ops = append(ops, deleteOp(t, fmt.Sprintf("/interfaces/interface[name=%s]", intf)))
		}
	}
	return ops
}

// checkCommittedEqualsApplied: at quiescence nothing is committed that is
// not applied (a failure restored the committed values).
func (s *sim) checkCommittedEqualsApplied() {
	ctx := context.Background()
	values := func(read func(context.Context, *gpb.Path, func(*journal.PathValue) error) error) map[string]*journal.PathValue {
		out := map[string]*journal.PathValue{}
		if err := read(ctx, nil, func(pv *journal.PathValue) error {
			out[gnmipath.String(pv.GetPath())] = pv
			return nil
		}); err != nil {
			s.t.Fatal(err)
		}
		return out
	}
	committed, applied := values(s.r.j.Committed), values(s.r.j.Applied)
	for p, c := range committed {
		if a, ok := applied[p]; !ok || !proto.Equal(a, c) {
			s.t.Errorf("at quiescence %s is committed as %v but applied as %v", p, c, a)
		}
	}
	for p := range applied {
		if _, ok := committed[p]; !ok {
			s.t.Errorf("at quiescence %s is applied but not committed", p)
		}
	}
}
