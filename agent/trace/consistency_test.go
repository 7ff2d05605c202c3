package trace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

func mustPath(t testing.TB, s string) *gnmi.Path {
	t.Helper()
	p, err := parsePath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	return p
}

func pv(t testing.TB, path string, index uint64, v *gnmi.TypedValue) *journal.PathValue {
	t.Helper()
	return &journal.PathValue{Path: mustPath(t, path), Index: index, Value: v}
}

func deleted(t testing.TB, path string, index uint64) *journal.PathValue {
	t.Helper()
	return &journal.PathValue{Path: mustPath(t, path), Index: index, Deleted: true}
}

func uintVal(n uint64) *gnmi.TypedValue {
	return &gnmi.TypedValue{Value: &gnmi.TypedValue_UintVal{UintVal: n}}
}

func jsonVal(s string) *gnmi.TypedValue {
	return &gnmi.TypedValue{Value: &gnmi.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

// checkMessages fails unless there is one violation per wanted substring,
// in order, each of property Consistency.
func checkMessages(t *testing.T, got []Violation, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d violations, want %d:\n%s", len(got), len(want), render(got))
	}
	for n, v := range got {
		if v.Property != PropertyConsistency || !strings.Contains(v.Message, want[n]) {
			t.Errorf("violation %d is %v, want a Consistency violation containing %q", n, v, want[n])
		}
	}
}

func TestCheckApplied(t *testing.T) {
	tests := []struct {
		name    string
		model   func(t testing.TB) []Value
		journal func(t testing.TB) []*journal.PathValue
		want    []string
	}{
		{
			name: "same values and tombstones",
			model: func(t testing.TB) []Value {
				return []Value{val(t, "/a", 1, "x"), tomb("/b", 2), val(t, "openconfig:/c[k=v]/d", 3, "y")}
			},
			journal: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, "/a", 1, strVal("x")), deleted(t, "/b", 2), pv(t, "openconfig:/c[k=v]/d", 3, strVal("y"))}
			},
		},
		{
			name:    "tombstone dropped by retention",
			model:   func(testing.TB) []Value { return []Value{tomb("/b", 2)} },
			journal: func(testing.TB) []*journal.PathValue { return nil },
		},
		{
			name:    "different value",
			model:   func(t testing.TB) []Value { return []Value{val(t, "/a", 1, "x")} },
			journal: func(t testing.TB) []*journal.PathValue { return []*journal.PathValue{pv(t, "/a", 1, strVal("y"))} },
			want:    []string{`applied value at /a: the trace implies "x", the journal holds "y"`},
		},
		{
			name:    "value from another proposal",
			model:   func(t testing.TB) []Value { return []Value{val(t, "/a", 1, "x")} },
			journal: func(t testing.TB) []*journal.PathValue { return []*journal.PathValue{pv(t, "/a", 2, strVal("x"))} },
			want:    []string{"applied value at /a: the trace implies the value from proposal 1, the journal holds it from proposal 2"},
		},
		{
			name:    "tombstone from another proposal",
			model:   func(testing.TB) []Value { return []Value{tomb("/a", 2)} },
			journal: func(t testing.TB) []*journal.PathValue { return []*journal.PathValue{deleted(t, "/a", 3)} },
			want:    []string{"applied value at /a: the trace deleted it in proposal 2, the journal in proposal 3"},
		},
		{
			name:    "value missing from the journal",
			model:   func(t testing.TB) []Value { return []Value{val(t, "/a", 1, "x"), val(t, "/b", 1, "x")} },
			journal: func(t testing.TB) []*journal.PathValue { return []*journal.PathValue{deleted(t, "/b", 1)} },
			want: []string{
				`applied value at /a: the trace implies "x" from proposal 1, the journal holds none`,
				`applied value at /b: the trace implies "x" from proposal 1, the journal holds none`,
			},
		},
		{
			name:    "value the trace never wrote",
			model:   func(testing.TB) []Value { return []Value{tomb("/a", 1)} },
			journal: func(t testing.TB) []*journal.PathValue { return []*journal.PathValue{pv(t, "/a", 2, strVal("x"))} },
			want:    []string{`applied value at /a: the trace implies none, the journal holds "x" from proposal 2`},
		},
		{
			name:    "trace value that does not decode",
			model:   func(testing.TB) []Value { return []Value{{Path: "/a", Index: 1, Value: []byte(`{"nope":1}`)}} },
			journal: func(t testing.TB) []*journal.PathValue { return []*journal.PathValue{pv(t, "/a", 1, strVal("x"))} },
			want:    []string{"the trace's value at /a does not decode"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := make(map[string]Value)
			for _, v := range tt.model(t) {
				model[v.Path] = v
			}
			checkMessages(t, CheckApplied(model, tt.journal(t)), tt.want)
		})
	}
}

func TestAppliedValues(t *testing.T) {
	r := &Report{Applied: map[string]Value{
		"/a":                     val(t, "/a", 1, "x"),
		"openconfig:/c[k=v]/d":   val(t, "openconfig:/c[k=v]/d", 2, "y"),
		"/interfaces/interface":  tomb("/interfaces/interface", 3),
		`/e[k=with\]bracket]/f`:  val(t, `/e[k=with\]bracket]/f`, 4, "z"),
		"/system/config/domain0": tomb("/system/config/domain0", 0),
	}}
	got, err := r.AppliedValues()
	if err != nil {
		t.Fatal(err)
	}
	if vs := CheckApplied(r.Applied, got); len(vs) != 0 {
		t.Errorf("CheckApplied of the trace's own values:\n%s", render(vs))
	}
	want := []*journal.PathValue{
		pv(t, "/a", 1, strVal("x")),
		pv(t, `/e[k=with\]bracket]/f`, 4, strVal("z")),
		deleted(t, "/interfaces/interface", 3),
		deleted(t, "/system/config/domain0", 0),
		pv(t, "openconfig:/c[k=v]/d", 2, strVal("y")),
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("AppliedValues (-want +got):\n%s", diff)
	}
}

func TestCheckDevice(t *testing.T) {
	const (
		eth0 = "/interfaces/interface[name=eth0]"
		eth1 = "/interfaces/interface[name=eth1]"
	)
	// keys are the list key leaves the device creates with an interface.
	keys := func(intf, name string) map[string]*gnmi.TypedValue {
		return map[string]*gnmi.TypedValue{intf + "/name": strVal(name), intf + "/config/name": strVal(name)}
	}
	tests := []struct {
		name    string
		applied func(t testing.TB) []*journal.PathValue
		device  map[string]*gnmi.TypedValue
		want    []string
	}{
		{
			name: "device holds the applied values and list keys",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{
					pv(t, eth0+"/config/mtu", 1, uintVal(1500)),
					pv(t, eth0+"/config/description", 2, strVal("uplink")),
					pv(t, eth0+"/subinterfaces/subinterface[index=0]/config/description", 2, strVal("untagged")),
				}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{
				eth0 + "/config/mtu":                                             uintVal(1500),
				eth0 + "/config/description":                                     strVal("uplink"),
				eth0 + "/subinterfaces/subinterface[index=0]/index":              uintVal(0),
				eth0 + "/subinterfaces/subinterface[index=0]/config/index":       uintVal(0),
				eth0 + "/subinterfaces/subinterface[index=0]/config/description": strVal("untagged"),
			}),
		},
		{
			name: "applied value missing from the device",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, eth0+"/config/mtu", 1, uintVal(1500))}
			},
			device: keys(eth0, "eth0"),
			want:   []string{eth0 + "/config/mtu: the device has no value, the applied value is uint 1500 from proposal 1"},
		},
		{
			name: "device holds another value",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, eth0+"/config/mtu", 1, uintVal(1500))}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(9000)}),
			want:   []string{eth0 + "/config/mtu: the device has uint 9000, the applied value is uint 1500 from proposal 1"},
		},
		{
			name: "device holds the value with another type",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, eth0+"/config/mtu", 1, uintVal(1500))}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": strVal("1500")}),
			want:   []string{eth0 + `/config/mtu: the device has "1500", the applied value is uint 1500`},
		},
		{
			name: "JSON leaves and list entries, recorded leaf by leaf",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{
					pv(t, eth0, 1, jsonVal("{}")),
					pv(t, eth0+"/config/mtu", 1, jsonVal("1500")),
					pv(t, eth0+"/config/description", 1, jsonVal(`"uplink"`)),
					pv(t, eth1, 2, jsonVal("{}")), // an entry with nothing but its keys
				}
			},
			device: merge(keys(eth0, "eth0"), keys(eth1, "eth1"), map[string]*gnmi.TypedValue{
				eth0 + "/config/mtu":         uintVal(1500),
				eth0 + "/config/description": strVal("uplink"),
			}),
		},
		{
			name: "device holds another value than a JSON leaf",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, eth0, 1, jsonVal("{}")), pv(t, eth0+"/config/mtu", 1, jsonVal("1500"))}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(9000)}),
			want:   []string{eth0 + "/config/mtu: the device has uint 9000, the applied value is JSON_IETF 1500 from proposal 1"},
		},
		{
			name: "list entry missing from the device",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, eth1, 2, jsonVal("{}"))}
			},
			device: keys(eth0, "eth0"),
			want:   []string{eth1 + ": the device has no such list entry, the applied values create it (proposal 2)"},
		},
		{
			name: "leaf left under a tombstone",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{deleted(t, eth1, 2)}
			},
			device: merge(keys(eth1, "eth1"), map[string]*gnmi.TypedValue{eth1 + "/config/mtu": uintVal(9000)}),
			want:   []string{eth1 + "/config/mtu: the device has uint 9000, but the applied values delete " + eth1 + " (proposal 2)"},
		},
		{
			name: "leaf left under a tombstone of a whole list",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{deleted(t, "/interfaces/interface", 2)}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(9000)}),
			want:   []string{"but the applied values delete /interfaces/interface (proposal 2)"},
		},
		{
			name: "later value under an earlier tombstone",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{deleted(t, "/interfaces", 1), pv(t, eth0+"/config/mtu", 2, uintVal(1500))}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(1500)}),
		},
		{
			name: "value replacing its subtree in the same proposal",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{deleted(t, eth0+"/config", 3), pv(t, eth0+"/config/mtu", 3, uintVal(1500))}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(1500)}),
		},
		{
			name: "JSON value holds leaves, a newer tombstone removes one",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{
					pv(t, "/interfaces", 1, jsonVal(`{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500,"description":"x"}}]}`)),
					deleted(t, eth0+"/config/mtu", 2),
				}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{
				eth0 + "/config/mtu":         uintVal(1500),
				eth0 + "/config/description": strVal("x"),
			}),
			want: []string{eth0 + "/config/mtu: the device has uint 1500, but the applied values delete " + eth0 + "/config/mtu (proposal 2)"},
		},
		{
			name:    "leaf no applied value accounts for",
			applied: func(testing.TB) []*journal.PathValue { return nil },
			device:  map[string]*gnmi.TypedValue{"/system/config/hostname": strVal("r1")},
			want:    []string{`/system/config/hostname: the device has "r1", which no applied value accounts for`},
		},
		{
			name: "key leaf with another value than its key",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, eth0+"/config/mtu", 1, uintVal(1500))}
			},
			device: merge(keys(eth0, "eth1"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(1500)}),
			want:   []string{eth0 + "/config/name: the device has", eth0 + "/name: the device has"},
		},
		{
			name: "openconfig origin is the device's",
			applied: func(t testing.TB) []*journal.PathValue {
				return []*journal.PathValue{pv(t, "openconfig:"+eth0+"/config/mtu", 1, uintVal(1500))}
			},
			device: merge(keys(eth0, "eth0"), map[string]*gnmi.TypedValue{eth0 + "/config/mtu": uintVal(1500)}),
		},
		{
			name:    "device path that does not parse",
			applied: func(testing.TB) []*journal.PathValue { return nil },
			device:  map[string]*gnmi.TypedValue{"interfaces": strVal("x")},
			want:    []string{`device leaf "interfaces": path "interfaces" is not absolute`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkMessages(t, CheckDevice(tt.applied(t), tt.device), tt.want)
		})
	}
}

// TestCheckDeviceOwnsUnjournaled: with --baseline off the journal holds
// only what the sidecar's Sets touched. The device's other leaves pass the
// check then, but a leaf the applied values delete or give another value
// still fails it.
func TestCheckDeviceOwnsUnjournaled(t *testing.T) {
	const (
		eth0 = "/interfaces/interface[name=eth0]"
		eth8 = "/interfaces/interface[name=eth8]"
	)
	device := map[string]*gnmi.TypedValue{
		eth0 + "/config/mtu":         uintVal(9000),
		eth0 + "/config/description": strVal("left by a delete"),
		eth8 + "/config/description": strVal("configured before the sidecar"),
		"/system/config/hostname":    strVal("also the device's own"),
	}
	applied := []*journal.PathValue{
		pv(t, eth0+"/config/mtu", 2, uintVal(1500)),
		deleted(t, eth0+"/config/description", 3),
	}
	tests := []struct {
		name  string
		owned bool
		want  []string
	}{
		{name: "every leaf must be accounted for", want: []string{
			eth0 + "/config/mtu: the device has uint 9000, the applied value is uint 1500",
			eth0 + "/config/description: the device has \"left by a delete\", but the applied values delete",
			eth8 + "/config/description: the device has \"configured before the sidecar\", which no applied value accounts for",
			"/system/config/hostname: the device has \"also the device's own\", which no applied value accounts for",
		}},
		{name: "the device owns what no applied value names", owned: true, want: []string{
			eth0 + "/config/mtu: the device has uint 9000, the applied value is uint 1500",
			eth0 + "/config/description: the device has \"left by a delete\", but the applied values delete",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := checkDevice(applied, device, nil, tt.owned)
			checkMessages(t, got, tt.want)
		})
	}
}

func merge(ms ...map[string]*gnmi.TypedValue) map[string]*gnmi.TypedValue {
	out := make(map[string]*gnmi.TypedValue)
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestCoveringPaths(t *testing.T) {
	p := mustPath(t, "/a/b[k=v]/c[x=y]")
	var got []string
	for _, c := range coveringPaths(p) {
		got = append(got, gnmipath.String(c))
		if !journal.IsUnder(p, c) {
			t.Errorf("%s is not under %s", gnmipath.String(p), gnmipath.String(c))
		}
	}
	want := []string{"/", "/a", "/a/b[k=v]", "/a/b", "/a/b[k=v]/c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("coveringPaths (-want +got):\n%s", diff)
	}
}

// largeDevice returns a device of n interfaces (five leaves each, two of
// them list keys) and the applied values it should hold.
func largeDevice(t testing.TB, n int) ([]*journal.PathValue, map[string]*gnmi.TypedValue) {
	applied := []*journal.PathValue{deleted(t, "/interfaces", 1)}
	device := make(map[string]*gnmi.TypedValue, 5*n)
	for i := range n {
		name := fmt.Sprintf("eth%d", i)
		intf := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": name}}}}
		prefix, err := ygot.PathToString(intf)
		if err != nil {
			t.Fatal(err)
		}
		device[prefix+"/name"] = strVal(name)
		device[prefix+"/config/name"] = strVal(name)
		for leaf, v := range map[string]*gnmi.TypedValue{
			"/config/mtu": uintVal(1500), "/config/description": strVal("port " + name), "/config/type": strVal("ethernetCsmacd"),
		} {
			applied = append(applied, pv(t, prefix+leaf, uint64(2+i), v))
			device[prefix+leaf] = v
		}
	}
	return applied, device
}

func TestCheckDeviceLarge(t *testing.T) {
	applied, device := largeDevice(t, 1000)
	if vs := CheckDevice(applied, device); len(vs) != 0 {
		t.Errorf("%d violations, the first: %v", len(vs), vs[0])
	}
}

func BenchmarkCheckDevice(b *testing.B) {
	applied, device := largeDevice(b, 20_000) // 100,000 leaves
	for b.Loop() {
		CheckDevice(applied, device)
	}
}
