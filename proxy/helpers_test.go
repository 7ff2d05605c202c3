package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// Paths of the simulated device used throughout.
const (
	descPath = "/interfaces/interface[name=eth0]/config/description"
	mtuPath  = "/interfaces/interface[name=eth0]/config/mtu"
	bootPath = "/system/state/boot-time"
)

// waitFor bounds every wait on a condition; tests finish far sooner.
const waitFor = 20 * time.Second

// waitProposal waits until done(proposal i of s's journal) holds.
func waitProposal(t testing.TB, s *sidecartest.Sidecar, i uint64, done func(*journal.Proposal) bool) *journal.Proposal {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	p, err := s.Agent.Wait(ctx, i, done)
	if err != nil {
		last, _ := s.Journal.Proposal(t.Context(), i)
		t.Fatalf("waiting for proposal %d: %v (last seen: %v)", i, err, last)
	}
	return p
}

// configValues is the journal's committed and applied values.
type configValues struct {
	Committed, Applied []*journal.PathValue
}

// journalValues returns s's journal's values, once settled.
func journalValues(t testing.TB, s *sidecartest.Sidecar) configValues {
	t.Helper()
	s.Settle(t)
	var v configValues
	collect := func(dst *[]*journal.PathValue) func(*journal.PathValue) error {
		return func(pv *journal.PathValue) error {
			*dst = append(*dst, pv)
			return nil
		}
	}
	if err := s.Journal.Committed(t.Context(), nil, collect(&v.Committed)); err != nil {
		t.Fatal(err)
	}
	if err := s.Journal.Applied(t.Context(), nil, collect(&v.Applied)); err != nil {
		t.Fatal(err)
	}
	return v
}

// --- requests and responses ---

// wantResponse checks a sidecar Response.
func wantResponse(t testing.TB, got, want *sidecarpb.Response) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("sidecar Response mismatch (-want +got):\n%s", diff)
	}
}

// detailResponse returns the sidecar Response carried as a status detail.
func detailResponse(t testing.TB, st *status.Status) *sidecarpb.Response {
	t.Helper()
	var out *sidecarpb.Response
	for _, d := range st.Details() {
		if r, ok := d.(*sidecarpb.Response); ok {
			if out != nil {
				t.Fatalf("status carries more than one sidecar Response: %v", st.Details())
			}
			out = r
		}
	}
	if out == nil {
		t.Fatalf("status %v carries no sidecar Response detail (details: %v)", st.Code(), st.Details())
	}
	return out
}
