package testbed

import (
	"reflect"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
)

// TestWatcherCares checks which Sets a subscription is told about: only
// those that touched a top-level field (and, for a list, an entry) its path
// can reach. Telling too few loses ON_CHANGE updates; telling all costs a
// diff of every Set.
func TestWatcherCares(t *testing.T) {
	m, err := newExampleOCModel()
	if err != nil {
		t.Fatal(err)
	}
	rootType := reflect.TypeOf(m.NewRoot()).Elem()
	field := func(name string) int {
		f, ok := rootType.FieldByName(name)
		if !ok {
			t.Fatalf("root has no field %s", name)
		}
		return f.Index[0]
	}
	entry := func(keys ...string) *touched {
		tc := &touched{whole: map[int]bool{}, entries: map[int][]reflect.Value{}}
		for _, k := range keys {
			tc.entries[field("Interface")] = append(tc.entries[field("Interface")], reflect.ValueOf(k))
		}
		return tc
	}
	system := &touched{whole: map[int]bool{field("System"): true}, entries: map[int][]reflect.Value{}}
	for _, tc := range []struct {
		sub     string
		touched *touched
		want    bool
	}{
		{"/", entry("eth0"), true},
		{"/interfaces", entry("eth0"), true},
		{"/interfaces/interface[name=eth0]/config/description", entry("eth0"), true},
		{"/interfaces/interface[name=eth0]/state/description", entry("eth0"), true},
		{"/interfaces/interface[name=eth1]", entry("eth0"), false},
		{"/interfaces/interface[name=eth1]", entry("eth0", "eth1"), true},
		{"/interfaces/interface[name=*]/config", entry("eth0"), true},
		{"/interfaces/interface", entry("eth0"), true},
		{"/*/interface[name=eth0]", entry("eth0"), true},
		{"/...", entry("eth0"), true},
		{"/system/state/boot-time", entry("eth0"), false},
		{"/system/state/boot-time", system, true},
		{"/interfaces", system, false},
		{"/system/state/boot-time", nil, true},
	} {
		p, err := ygot.StringToStructuredPath(tc.sub)
		if err != nil {
			t.Fatal(err)
		}
		w := &watcher{subs: []subscription{{path: p, mode: gpb.SubscriptionMode_ON_CHANGE}}}
		if got := w.cares(rootType, tc.touched); got != tc.want {
			t.Errorf("subscription %s, touched %+v: cares = %v, want %v", tc.sub, tc.touched, got, tc.want)
		}
	}
}
