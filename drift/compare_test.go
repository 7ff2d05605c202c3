package drift_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest/fixture"
)

// --- values ---

func str(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}
func uintv(n uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}}
}
func ietf(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}
func jsonv(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(s)}}
}
func ascii(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_AsciiVal{AsciiVal: s}}
}
func leafList(vs ...string) *gpb.TypedValue {
	ll := &gpb.ScalarArray{}
	for _, v := range vs {
		ll.Element = append(ll.Element, str(v))
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: ll}}
}

// applied builds journal values: val, tomb and marker.
func val(t *testing.T, path string, index uint64, v *gpb.TypedValue) *journal.PathValue {
	return &journal.PathValue{Path: fixture.Path(t, path), Index: index, Value: v}
}

func tomb(t *testing.T, path string, index uint64) *journal.PathValue {
	p := &gpb.Path{}
	if path != "/" {
		p = fixture.Path(t, path)
	}
	return &journal.PathValue{Path: p, Index: index, Deleted: true}
}

func marker(t *testing.T, path string, index uint64) *journal.PathValue {
	return val(t, path, index, ietf("{}"))
}

// update is one update of a device's Get answer: path and value.
type update struct {
	path string
	val  *gpb.TypedValue
}

// answer is a device's Get answer: one notification with prefix
// (origin:elems, "" for none) and updates relative to it.
func answer(t *testing.T, prefix string, ups ...update) []*gpb.Notification {
	n := &gpb.Notification{}
	if prefix != "" {
		origin, elems, _ := strings.Cut(prefix, ":")
		n.Prefix = &gpb.Path{Origin: origin}
		if elems != "/" && elems != "" {
			n.Prefix.Elem = fixture.Path(t, elems).GetElem()
		}
	}
	for _, u := range ups {
		p := &gpb.Path{}
		if u.path != "/" {
			p = fixture.Path(t, u.path)
		}
		n.Update = append(n.Update, &gpb.Update{Path: p, Val: u.val})
	}
	return []*gpb.Notification{n}
}

// want is a Diff as the tests spell it: path, kind, and the values' text
// ("" for none).
type want struct {
	Path, Kind, Journal, Device string
}

func wants(diffs []drift.Diff) []want {
	out := []want{}
	for _, d := range diffs {
		w := want{Path: gnmipath.String(d.Path), Kind: d.Kind.String()}
		if d.Journal != nil {
			w.Journal = drift.Text(d.Journal)
		}
		if d.Device != nil {
			w.Device = drift.Text(d.Device)
		}
		out = append(out, w)
	}
	return out
}

func testSchema(t *testing.T) *leaves.Schema {
	t.Helper()
	s, err := leaves.LoadYANG([]string{"testdata/drift-test.yang"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	eth0     = "/interfaces/interface[name=eth0]"
	eth0Desc = eth0 + "/config/description"
	eth0MTU  = eth0 + "/config/mtu"
	eth1     = "/interfaces/interface[name=eth1]"
)

// TestCompare covers every rule of Compare (docs/drift.md "What is
// drift"), with the device answering in each shape.
func TestCompare(t *testing.T) {
	schema := testSchema(t)
	interfaces := fixture.Path(t, "/interfaces")
	system := fixture.Path(t, "/system")
	// eth0 as the journal holds it after an Update of its description
	// and MTU.
	eth0Applied := func(desc string, mtu *gpb.TypedValue) []*journal.PathValue {
		return []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str(desc)), val(t, eth0MTU, 1, mtu)}
	}
	tests := []struct {
		name      string
		scope     *gpb.Path
		applied   []*journal.PathValue
		device    []*gpb.Notification
		outOfSync []*journal.OutOfSync
		schema    bool
		want      []want
	}{
		{
			name:    "in sync: JSON_IETF list from the device, values by meaning, module prefixes, key leaves",
			scope:   interfaces,
			applied: eth0Applied("uplink", uintv(1500)),
			device: answer(t, "", update{"/interfaces", ietf(`{"openconfig-interfaces:interface":[{"name":"eth0",
				"config":{"name":"eth0","description":"uplink","mtu":1500}}]}`)}),
		},
		{
			name:    "in sync: JSON (not IETF) container at the entry, number as a string",
			scope:   interfaces,
			applied: eth0Applied("uplink", ietf("1500")),
			device:  answer(t, "", update{eth0, jsonv(`{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":"1500"}}`)}),
		},
		{
			name:    "in sync: scalar leaves from the device, under a prefix with origin openconfig",
			scope:   interfaces,
			applied: eth0Applied("uplink", uintv(1500)),
			device: answer(t, "openconfig:"+eth0, update{"/config/description", str("uplink")},
				update{"/config/mtu", uintv(1500)}, update{"/name", str("eth0")}),
		},
		{
			name:    "a changed leaf",
			scope:   interfaces,
			applied: eth0Applied("uplink", uintv(1500)),
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[{"name":"eth0",
				"config":{"name":"eth0","description":"hacked","mtu":1500}}]}`)}),
			want: []want{{eth0Desc, "changed", "uplink", "hacked"}},
		},
		{
			name:    "a missing leaf",
			scope:   interfaces,
			applied: eth0Applied("uplink", uintv(1500)),
			device:  answer(t, "", update{"/interfaces", ietf(`{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}}]}`)}),
			want:    []want{{eth0Desc, "missing", "uplink", ""}},
		},
		{
			name:    "a missing list entry: one Diff, not one per leaf",
			scope:   interfaces,
			applied: eth0Applied("uplink", uintv(1500)),
			device:  nil, // NotFound
			want:    []want{{eth0, "missing", "(exists)", ""}},
		},
		{
			name:    "the device's own entries and leaves are not drift",
			scope:   interfaces,
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("uplink"))},
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[
				{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":9000,"enabled":true}},
				{"name":"eth9","config":{"name":"eth9","description":"theirs"}}]}`)}),
		},
		{
			name:    "a list entry the journal deleted, re-created: one Diff at the entry",
			scope:   interfaces,
			applied: append(eth0Applied("uplink", uintv(1500)), tomb(t, eth1, 2), tomb(t, eth1+"/config/description", 2)),
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[
				{"name":"eth0","config":{"name":"eth0","description":"uplink","mtu":1500}},
				{"name":"eth1","config":{"name":"eth1","description":"back"}}]}`)}),
			want: []want{{eth1, "recreated", "", "(exists)"}},
		},
		{
			name:  "after a Replace: a leaf the Replace removed is back; the key mirror and the values written with it are not drift",
			scope: interfaces,
			applied: []*journal.PathValue{marker(t, eth0, 1), tomb(t, eth0+"/config", 2), tomb(t, eth0MTU, 2),
				val(t, eth0Desc, 2, str("replaced"))},
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[
				{"name":"eth0","config":{"name":"eth0","description":"replaced","mtu":9000}}]}`)}),
			want: []want{{eth0MTU, "recreated", "", "9000"}},
		},
		{
			name:    "a value written after the tombstone accounts for the leaf",
			scope:   interfaces,
			applied: []*journal.PathValue{tomb(t, "/interfaces", 1), marker(t, eth0, 3), val(t, eth0Desc, 3, str("new"))},
			device:  answer(t, "", update{eth0Desc, str("new")}),
		},
		{
			name:    "a leaf the journal deleted, re-created, with its YANG default: drift without the schema",
			scope:   interfaces,
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("x")), tomb(t, eth0+"/config/enabled", 2)},
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[
				{"name":"eth0","config":{"name":"eth0","description":"x","enabled":true}}]}`)}),
			want: []want{{eth0 + "/config/enabled", "recreated", "", "true"}},
		},
		{
			name:    "the same with the schema: the device holds the default, not drift",
			scope:   interfaces,
			schema:  true,
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0Desc, 1, str("x")), tomb(t, eth0+"/config/enabled", 2)},
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[
				{"name":"eth0","config":{"name":"eth0","description":"x","enabled":true}}]}`)}),
		},
		{
			name:    "with the schema, a value other than the default is drift",
			scope:   interfaces,
			schema:  true,
			applied: []*journal.PathValue{marker(t, eth0, 1), tomb(t, eth0MTU, 2)},
			device:  answer(t, "", update{eth0, ietf(`{"name":"eth0","config":{"name":"eth0","mtu":"9000"}}`)}),
			want:    []want{{eth0MTU, "recreated", "", "9000"}},
		},
		{
			name:    "paths out of sync are reported already",
			scope:   interfaces,
			applied: eth0Applied("uplink", uintv(1500)),
			device:  answer(t, "", update{eth0, ietf(`{"name":"eth0","config":{"name":"eth0","description":"refused","mtu":1500}}`)}),
			outOfSync: []*journal.OutOfSync{{Value: val(t, eth0Desc, 1, str("uplink")),
				Cause: journal.CauseRollback}},
		},
		{
			name:    "state data under a tombstone is not drift ('state' containers without a schema)",
			scope:   interfaces,
			applied: []*journal.PathValue{tomb(t, "/interfaces", 1)},
			device:  answer(t, "", update{eth0 + "/state/counters/in-octets", uintv(7)}),
		},
		{
			name:    "state data with the schema: config false",
			scope:   interfaces,
			schema:  true,
			applied: []*journal.PathValue{marker(t, eth0, 1), tomb(t, eth0+"/counters", 1)},
			device:  answer(t, "", update{eth0, ietf(`{"name":"eth0","config":{"name":"eth0"},"counters":{"in-octets":"7"}}`)}),
		},
		{
			name:    "a list entry whose only leaves are state data is not the device's configuration",
			scope:   interfaces,
			applied: []*journal.PathValue{marker(t, eth0, 1)},
			device:  answer(t, "", update{eth0 + "/state/counters/in-octets", uintv(7)}),
			want:    []want{{eth0, "missing", "(exists)", ""}},
		},
		{
			name:    "a leaf-list: its elements in any order",
			scope:   system,
			applied: []*journal.PathValue{val(t, "/system/config/search", 1, ietf(`["a.example","b.example"]`))},
			device:  answer(t, "", update{"/system/config/search", leafList("b.example", "a.example")}),
		},
		{
			name:    "a leaf-list with other elements",
			scope:   system,
			applied: []*journal.PathValue{val(t, "/system/config/search", 1, leafList("a.example"))},
			device:  answer(t, "", update{"/system", ietf(`{"config":{"search":["a.example","c.example"]}}`)}),
			want:    []want{{"/system/config/search", "changed", `["a.example"]`, `["a.example","c.example"]`}},
		},
		{
			name:    "an opaque value is compared only at its own path",
			scope:   system,
			applied: []*journal.PathValue{val(t, "/system/config/hostname", 1, ascii("r1"))},
			device:  answer(t, "", update{"/system", ietf(`{"config":{"hostname":"r2"}}`)}),
		},
		{
			name:    "an opaque value the device answers at its path",
			scope:   fixture.Path(t, "/system/config/hostname"),
			applied: []*journal.PathValue{val(t, "/system/config/hostname", 1, ascii("r1"))},
			device:  answer(t, "", update{"/system/config/hostname", ascii("r2")}),
			want:    []want{{"/system/config/hostname", "changed", "r1", "r2"}},
		},
		{
			name:    "a presence container the device lost (with the schema)",
			scope:   system,
			schema:  true,
			applied: []*journal.PathValue{marker(t, "/system/ntp", 1), val(t, "/system/config/hostname", 1, str("r1"))},
			device:  answer(t, "", update{"/system", ietf(`{"config":{"hostname":"r1"}}`)}),
			want:    []want{{"/system/ntp", "missing", "(exists)", ""}},
		},
		{
			name:    "a presence container the device holds, empty",
			scope:   system,
			schema:  true,
			applied: []*journal.PathValue{marker(t, "/system/ntp", 1)},
			device:  answer(t, "", update{"/system", ietf(`{"ntp":{}}`)}),
		},
		{
			name:    "a list whose keys the journal does not know, beside managed leaves: the rest still compares",
			scope:   system,
			applied: []*journal.PathValue{val(t, "/system/config/hostname", 1, str("r1"))},
			device: answer(t, "", update{"/system", ietf(`{"config":{"hostname":"r2"},
				"aaa":{"server-groups":{"server-group":[{"name":"g1","config":{"name":"g1"}}]}}}`)}),
			want: []want{{"/system/config/hostname", "changed", "r1", "r2"}},
		},
		{
			name:    "such a list where the journal deleted it: drift at the list, as one value",
			scope:   system,
			applied: []*journal.PathValue{val(t, "/system/config/hostname", 1, str("r1")), tomb(t, "/system/aaa", 2)},
			device: answer(t, "", update{"/system", ietf(`{"config":{"hostname":"r1"},
				"aaa":{"server-groups":{"server-group":[{"name":"g1"}]}}}`)}),
			want: []want{{"/system/aaa/server-groups/server-group", "recreated", "", `[{"name":"g1"}]`}},
		},
		{
			name:    "a Replace of the root: everything else on the device is drift",
			scope:   interfaces,
			applied: []*journal.PathValue{tomb(t, "/", 1), marker(t, eth0, 1), val(t, eth0Desc, 1, str("only"))},
			device: answer(t, "", update{"/interfaces", ietf(`{"interface":[
				{"name":"eth0","config":{"name":"eth0","description":"only"}},
				{"name":"eth1","config":{"name":"eth1"}}]}`)}),
			want: []want{{eth1, "recreated", "", "(exists)"}},
		},
		{
			name:    "a device JSON value of a whole container against scalar journal leaves, with the root's origin",
			scope:   &gpb.Path{Origin: "openconfig", Elem: interfaces.GetElem()},
			applied: []*journal.PathValue{marker(t, eth0, 1), val(t, eth0MTU, 1, ietf("9000"))},
			device:  answer(t, "openconfig:/", update{"/interfaces/interface[name=eth0]/config", ietf(`{"mtu":9000,"name":"eth0"}`)}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s *leaves.Schema
			if tc.schema {
				s = schema
			}
			keys := leaves.NewKeys()
			for _, pv := range tc.applied {
				keys.Learn(pv.GetPath())
			}
			got := drift.Compare(drift.Input{Scope: tc.scope, Applied: tc.applied, Device: tc.device,
				OutOfSync: tc.outOfSync, Decomposer: leaves.NewDecomposer(s, keys)})
			if tc.want == nil {
				tc.want = []want{}
			}
			if diff := cmp.Diff(tc.want, wants(got)); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}
