package drift_test

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

// TestExplained: the cheap first look at a device notification lets
// through (needs a Get) exactly what the journal's values do not explain.
func TestExplained(t *testing.T) {
	schema := testSchema(t)
	tests := []struct {
		name    string
		note    drift.Note
		applied []*journal.PathValue
		schema  bool
		want    bool
	}{
		{name: "the journal's value (the sidecar's own Set), by meaning",
			note:    drift.Note{Path: fixture.Path(t, eth0MTU), Value: uintv(1500)},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0MTU, 1, ietf("1500"))}, want: true},
		{name: "another value than the journal's",
			note:    drift.Note{Path: fixture.Path(t, eth0Desc), Value: str("hacked")},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("uplink"))}, want: false},
		{name: "a leaf the journal never wrote, nothing deleted above it",
			note:    drift.Note{Path: fixture.Path(t, eth0+"/config/enabled"), Value: jsonv("true")},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("uplink"))}, want: true},
		{name: "a leaf under a journal tombstone",
			note:    drift.Note{Path: fixture.Path(t, eth1+"/config/description"), Value: str("back")},
			applied: []*journal.PathValue{tomb(t, eth1, 2)}, want: false},
		{name: "a leaf under a tombstone, written again after it",
			note:    drift.Note{Path: fixture.Path(t, eth1+"/config/description"), Value: str("new")},
			applied: []*journal.PathValue{tomb(t, "/interfaces", 2), val(t, eth1+"/config/description", 3, str("new"))}, want: true},
		{name: "the key mirror of an entry the journal holds",
			note:    drift.Note{Path: fixture.Path(t, eth0+"/config/name"), Value: str("eth0")},
			applied: []*journal.PathValue{tomb(t, "/interfaces", 1), val(t, eth0Desc, 2, str("x"))}, want: true},
		{name: "the key leaf of an entry the journal deleted",
			note:    drift.Note{Path: fixture.Path(t, eth1+"/name"), Value: str("eth1")},
			applied: []*journal.PathValue{tomb(t, eth1, 2)}, want: false},
		{name: "a YANG default under a tombstone, with the schema",
			note:    drift.Note{Path: fixture.Path(t, eth0MTU), Value: uintv(1500)},
			applied: []*journal.PathValue{marker(t, eth0, 1), tomb(t, eth0MTU, 2)}, schema: true, want: true},
		{name: "the same without the schema",
			note:    drift.Note{Path: fixture.Path(t, eth0MTU), Value: uintv(1500)},
			applied: []*journal.PathValue{marker(t, eth0, 1), tomb(t, eth0MTU, 2)}, want: false},
		{name: "state data",
			note:    drift.Note{Path: fixture.Path(t, "/system/state/boot-time"), Value: uintv(7)},
			applied: []*journal.PathValue{tomb(t, "/system", 1)}, want: true},
		{name: "a deletion where the journal holds nothing live",
			note:    drift.Note{Path: fixture.Path(t, eth1)},
			applied: []*journal.PathValue{tomb(t, eth1, 2), tomb(t, eth1+"/config/description", 2)}, want: true},
		{name: "a deletion of what the journal holds",
			note:    drift.Note{Path: fixture.Path(t, eth0)},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("uplink"))}, want: false},
		{name: "a deletion of a leaf the journal holds",
			note:    drift.Note{Path: fixture.Path(t, eth0Desc)},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("uplink"))}, want: false},
		{name: "a JSON object: a subtree, compared with a Get",
			note:    drift.Note{Path: fixture.Path(t, eth0+"/config"), Value: ietf(`{"description":"uplink"}`)},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("uplink"))}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s *leaves.Schema
			if tc.schema {
				s = schema
			}
			got := drift.Explained(tc.note, lookup(tc.applied, tc.note.Path), s)
			if got != tc.want {
				t.Errorf("Explained = %v, want %v", got, tc.want)
			}
		})
	}
}

// lookup answers Explained's reads from applied, as the journal would.
func lookup(applied []*journal.PathValue, p *gpb.Path) drift.Lookup {
	byKey := map[string]*journal.PathValue{}
	for _, pv := range applied {
		byKey[string(journal.PathKey(pv.GetPath()))] = pv
	}
	var l drift.Lookup
	for _, q := range drift.NotePaths(p) {
		l.At = append(l.At, byKey[string(journal.PathKey(q))])
	}
	l.LiveUnder = func(q *gpb.Path) (bool, error) {
		for _, pv := range applied {
			if !pv.GetDeleted() && journal.IsUnder(pv.GetPath(), q) {
				return true, nil
			}
		}
		return false, nil
	}
	return l
}
