package agent

import (
	"fmt"
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// BenchmarkBatchChanges: 64 one-leaf proposals, ready together, packed
// into one southbound Set (with the overlap checks).
func BenchmarkBatchChanges(b *testing.B) {
	var ps []*journal.Proposal
	for i := range uint64(64) {
		ps = append(ps, withOps(i+1, opOf(b, journal.OpUpdate, fmt.Sprintf("/interfaces/interface[name=eth%d]/config/mtu", i), "1500")))
	}
	b.ReportAllocs()
	for b.Loop() {
		batch, err := batchChanges(ps, 3<<20, nil)
		if err != nil || batch.size() != len(ps) {
			b.Fatalf("batchChanges: %d proposals, %v", batch.size(), err)
		}
	}
}

// BenchmarkChangeRequest: a journaled proposal of 10 operations turned
// into its southbound Set.
func BenchmarkChangeRequest(b *testing.B) {
	var ops []*journal.Op
	for i := range 10 {
		ops = append(ops, opOf(b, journal.OpUpdate, fmt.Sprintf("/interfaces/interface[name=eth%d]/config/description", i), `"uplink"`))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := changeRequest(ops); err != nil {
			b.Fatal(err)
		}
	}
}
