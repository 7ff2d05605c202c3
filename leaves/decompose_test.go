package leaves

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/encoding/prototext"
)

func testSchema(t testing.TB) *Schema {
	t.Helper()
	s, err := LoadYANG([]string{"testdata/sidecar-test.yang"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustPath(t testing.TB, s string) *gpb.Path {
	t.Helper()
	origin := ""
	if o, rest, ok := strings.Cut(s, ":/"); ok {
		origin, s = o, "/"+rest
	}
	if s == "/" {
		return &gpb.Path{Origin: origin}
	}
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	p.Origin = origin
	return p
}

func ietf(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

func jsonV(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(s)}}
}

func strV(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

func uintV(u uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: u}}
}

// render shows units as "path = value" lines, values in prototext.
func render(w *Writes) (units, deletes []string) {
	for _, u := range w.Units {
		units = append(units, pathString(u.GetPath())+" = "+strings.Join(strings.Fields(prototext.Format(u.GetVal())), " "))
	}
	for _, d := range w.Deletes {
		deletes = append(deletes, pathString(d))
	}
	return units, deletes
}

func TestDecompose(t *testing.T) {
	schema := testSchema(t)
	learned := NewKeys(ListsOf(mustPath(t, "/interfaces/interface[name=x]/subinterfaces/subinterface[index=0]"))...)
	tests := []struct {
		name        string
		schema      bool
		keys        *Keys
		path        string
		val         *gpb.TypedValue
		wantUnits   []string
		wantDeletes []string
		wantErr     error
	}{
		{
			name: "scalar leaf", path: "/system/config/hostname", val: strV("h1"),
			wantUnits: []string{`/system/config/hostname = string_val: "h1"`},
		},
		{
			name: "JSON_IETF container merges leaf by leaf", path: "/system/config",
			val: ietf(`{"hostname":"h1","domain-name":"d1"}`),
			wantUnits: []string{
				`/system/config/domain-name = json_ietf_val: "\"d1\""`,
				`/system/config/hostname = json_ietf_val: "\"h1\""`,
			},
		},
		{
			name: "JSON keeps its encoding", path: "/system/config",
			val:       jsonV(`{"hostname":"h1"}`),
			wantUnits: []string{`/system/config/hostname = json_val: "\"h1\""`},
		},
		{
			name: "module prefixes dropped", path: "/openconfig-system:system",
			val:       ietf(`{"openconfig-system:config":{"openconfig-system:hostname":"h1"}}`),
			wantUnits: []string{`/system/config/hostname = json_ietf_val: "\"h1\""`},
		},
		{
			name: "numbers kept as written", path: "/interfaces/interface[name=eth0]/config",
			val: ietf(`{"mtu":1500,"description":"x"}`),
			wantUnits: []string{
				`/interfaces/interface[name=eth0] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth0]/config/description = json_ietf_val: "\"x\""`,
				`/interfaces/interface[name=eth0]/config/mtu = json_ietf_val: "1500"`,
			},
		},
		{
			name: "scalar under list entries implies their markers", path: "/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=3]/config/description",
			val: strV("d"),
			wantUnits: []string{
				`/interfaces/interface[name=eth0] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=3] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=3]/config/description = string_val: "d"`,
			},
		},
		{
			name: "JSON list at its parent, with schema", schema: true, path: "/interfaces",
			val: ietf(`{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}},{"name":"eth1","config":{"name":"eth1"}}]}`),
			wantUnits: []string{
				`/interfaces/interface[name=eth0] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth0]/config/mtu = json_ietf_val: "1500"`,
				`/interfaces/interface[name=eth0]/config/name = json_ietf_val: "\"eth0\""`,
				`/interfaces/interface[name=eth1] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth1]/config/name = json_ietf_val: "\"eth1\""`,
			},
		},
		{
			name: "nested JSON lists with learned keys, no schema", keys: learned, path: "/interfaces",
			val: ietf(`{"interface":[{"name":"eth0","subinterfaces":{"subinterface":[{"index":0,"config":{"description":"s"}}]}}]}`),
			wantUnits: []string{
				`/interfaces/interface[name=eth0] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=0] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=0]/config/description = json_ietf_val: "\"s\""`,
			},
		},
		{
			name: "JSON list without schema or learned keys", path: "/interfaces",
			val: ietf(`{"interface":[{"name":"eth0"}]}`), wantErr: ErrNeedSchema,
		},
		{
			name: "JSON array at the list path", schema: true, path: "/interfaces/interface",
			val:       ietf(`[{"name":"eth2"}]`),
			wantUnits: []string{`/interfaces/interface[name=eth2] = json_ietf_val: "{}"`},
		},
		{
			name: "multi-key list", schema: true, path: "/routes",
			val: ietf(`{"route":[{"prefix":"10.0.0.0/8","vrf":"red","next-hop":"1.1.1.1"}]}`),
			wantUnits: []string{
				`/routes/route[prefix=10.0.0.0/8][vrf=red] = json_ietf_val: "{}"`,
				`/routes/route[prefix=10.0.0.0/8][vrf=red]/next-hop = json_ietf_val: "\"1.1.1.1\""`,
			},
		},
		{
			name: "list entry path with its JSON", path: "/interfaces/interface[name=eth3]",
			val: ietf(`{"name":"eth3","config":{"mtu":9000}}`),
			wantUnits: []string{
				`/interfaces/interface[name=eth3] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=eth3]/config/mtu = json_ietf_val: "9000"`,
			},
		},
		{
			name: "key leaf contradicting the path", path: "/interfaces/interface[name=eth3]",
			val: ietf(`{"name":"eth4"}`), wantErr: ErrInvalid,
		},
		{
			name: "scalar key leaf folds into the entry", path: "/interfaces/interface[name=eth3]/name",
			val:       strV("eth3"),
			wantUnits: []string{`/interfaces/interface[name=eth3] = json_ietf_val: "{}"`},
		},
		{
			name: "numeric key leaf", path: "/interfaces/interface[name=e]/subinterfaces/subinterface[index=7]/index",
			val: uintV(7),
			wantUnits: []string{
				`/interfaces/interface[name=e] = json_ietf_val: "{}"`,
				`/interfaces/interface[name=e]/subinterfaces/subinterface[index=7] = json_ietf_val: "{}"`,
			},
		},
		{
			name: "list entry without its key", schema: true, path: "/interfaces",
			val: ietf(`{"interface":[{"config":{"mtu":1}}]}`), wantErr: ErrInvalid,
		},
		{
			name: "leaf-list whole, with schema", schema: true, path: "/system/config",
			val:       ietf(`{"search":["a.com","b.com"]}`),
			wantUnits: []string{`/system/config/search = json_ietf_val: "[\"a.com\",\"b.com\"]"`},
		},
		{
			name: "leaf-list whole, without schema", path: "/system/config",
			val:       ietf(`{"search":["a.com"]}`),
			wantUnits: []string{`/system/config/search = json_ietf_val: "[\"a.com\"]"`},
		},
		{
			name: "empty array without schema", path: "/system/config",
			val: ietf(`{"search":[]}`), wantErr: ErrNeedSchema,
		},
		{
			name: "empty array with schema", schema: true, path: "/system/config",
			val:       ietf(`{"search":[]}`),
			wantUnits: []string{`/system/config/search = json_ietf_val: "[]"`},
		},
		{
			name: "leaflist TypedValue", path: "/system/config/search",
			val:       &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{Element: []*gpb.TypedValue{strV("a")}}}},
			wantUnits: []string{`/system/config/search = leaflist_val: { element: { string_val: "a" } }`},
		},
		{
			name: "presence container, with schema", schema: true, path: "/system",
			val:       ietf(`{"ntp":{}}`),
			wantUnits: []string{`/system/ntp = json_ietf_val: "{}"`},
		},
		{
			name: "leaf under a presence container implies it", schema: true, path: "/system/ntp/server",
			val: strV("pool"),
			wantUnits: []string{
				`/system/ntp = json_ietf_val: "{}"`,
				`/system/ntp/server = string_val: "pool"`,
			},
		},
		{
			name: "empty container with schema is nothing", schema: true, path: "/system",
			val: ietf(`{"config":{}}`),
		},
		{
			name: "empty container without schema is a marker", path: "/system",
			val:       ietf(`{"ntp":{}}`),
			wantUnits: []string{`/system/ntp = json_ietf_val: "{}"`},
		},
		{
			name: "choice: one case deletes the others", schema: true, path: "/transport",
			val:         ietf(`{"udp-port":53}`),
			wantUnits:   []string{`/transport/udp-port = json_ietf_val: "53"`},
			wantDeletes: []string{"/transport/tcp-options", "/transport/tcp-port", "/transport/unix-socket"},
		},
		{
			name: "choice by path", schema: true, path: "/transport/unix-socket",
			val:         strV("/run/s"),
			wantUnits:   []string{`/transport/unix-socket = string_val: "/run/s"`},
			wantDeletes: []string{"/transport/tcp-options", "/transport/tcp-port", "/transport/udp-port"},
		},
		{
			name: "choice: two cases at once", schema: true, path: "/transport",
			val: ietf(`{"udp-port":53,"tcp-port":80}`), wantErr: ErrInvalid,
		},
		{
			name: "root with module-prefixed top level", schema: true, path: "/",
			val: ietf(`{"sidecar-test:system":{"config":{"hostname":"r"}},"sidecar-test:routes":{"route":[{"prefix":"p","vrf":"v"}]}}`),
			wantUnits: []string{
				`/routes/route[prefix=p][vrf=v] = json_ietf_val: "{}"`,
				`/system/config/hostname = json_ietf_val: "\"r\""`,
			},
		},
		{
			name: "origin kept", path: "openconfig:/system/config/hostname", val: strV("o"),
			wantUnits: []string{`openconfig:/system/config/hostname = string_val: "o"`},
		},
		{
			name: "invalid JSON", path: "/system/config", val: ietf(`{"a":`), wantErr: ErrInvalid,
		},
		{
			name: "mixed array", path: "/system/config", val: ietf(`{"a":[1,{"b":2}]}`), wantErr: ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *Schema
			if tt.schema {
				s = schema
			}
			got, err := NewDecomposer(s, tt.keys).Decompose(mustPath(t, tt.path), tt.val)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			units, deletes := render(got)
			if diff := cmp.Diff(tt.wantUnits, units); diff != "" {
				t.Errorf("units (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDeletes, deletes); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeedSchemaNamesPathAndOption(t *testing.T) {
	_, err := NewDecomposer(nil, nil).Decompose(mustPath(t, "/interfaces"), ietf(`{"interface":[{"name":"eth0"}]}`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"/interfaces/interface", "--yang"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestKeysLearn(t *testing.T) {
	k := NewKeys()
	if got := k.Learn(mustPath(t, "/a/b[x=1]/c/d[y=2][z=3]/e")); len(got) != 2 {
		t.Fatalf("learned %d lists, want 2", len(got))
	}
	if got := k.Learn(mustPath(t, "/a/b[x=9]/f")); len(got) != 0 {
		t.Fatalf("learned %v again", got)
	}
	// Fewer keys never replace more.
	k.Learn(mustPath(t, "/a/b[x=1]/c/d[y=2]"))
	keys, ok := k.lookup("", []string{"a", "b", "c", "d"})
	if !ok || fmt.Sprint(keys) != "[y z]" {
		t.Fatalf("keys of /a/b/c/d = %v, %v", keys, ok)
	}
	if _, ok := k.lookup("other", []string{"a", "b"}); ok {
		t.Fatal("a list of another origin is known")
	}
}

// TestKeysLearnAgain checks what a path teaches Keys that knows some
// lists: nothing when it names known lists by no more keys than known
// (whatever the entries, module prefixes or the default origin), and the
// lists it names by more keys, or that another origin or path holds.
func TestKeysLearnAgain(t *testing.T) {
	known := []string{"/a/b[x=1]/c/d[y=2][z=3]/e", "cli:/s[n=1]"}
	tests := []struct {
		path string
		want []string
	}{
		{"/a/b[x=9]/f", nil},
		{"/m:a/m:b[x=2]/m:c/m:d[y=1][z=1]", nil},
		{"openconfig:/a/b[x=3]", nil},
		{"/a/b[x=1]/c/d[y=2]", nil},
		{"/a/b[x=1][w=2]/g", []string{"/a/b[w,x]"}},
		{"other:/a/b[x=1]", []string{"other:/a/b[x]"}},
		{"/a/b[x=1]/c/d[y=2][z=3]/e/g[k=1]", []string{"/a/b/c/d/e/g[k]"}},
		{"/a/bb[x=1]", []string{"/a/bb[x]"}},
		{"cli:/s[n=2]/t", nil},
		{"/s[n=2]", []string{"/s[n]"}},
		{"/a/b/c", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			k := NewKeys()
			for _, p := range known {
				k.Learn(mustPath(t, p))
			}
			if got := listStrings(k.Learn(mustPath(t, tt.path))); !slices.Equal(got, tt.want) {
				t.Errorf("Learn(%s) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b *gpb.TypedValue
		want bool
	}{
		{uintV(1500), ietf("1500"), true},
		{uintV(1500), ietf(`"1500"`), true},
		{uintV(1500), ietf("1501"), false},
		{strV("x"), jsonV(`"x"`), true},
		{strV("ETHERNET"), ietf(`"openconfig-if-types:ETHERNET"`), true},
		{&gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}, ietf("true"), true},
		{&gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{Element: []*gpb.TypedValue{strV("a")}}}}, ietf(`["a"]`), true},
		{ietf(`{"a":1}`), jsonV(`{"m:a":1}`), true},
		{strV("1"), uintV(1), false},
		{strV("1"), ietf("1"), true},
		{strV("a"), strV("b"), false},
	}
	for _, tt := range tests {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestMarkerOncePerEntry: a JSON list naming an entry twice writes its
// marker once, whether the repeat comes among the first few markers of
// the walk (compared one by one) or after many (indexed by path).
func TestMarkerOncePerEntry(t *testing.T) {
	d := NewDecomposer(testSchema(t), nil)
	for _, names := range [][]int{
		{0, 1, 1, 2},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 10, 4},
	} {
		var entries []string
		for _, n := range names {
			entries = append(entries, fmt.Sprintf(`{"name":"eth%d","config":{"description":"d%d"}}`, n, n))
		}
		w, err := d.Decompose(mustPath(t, "/interfaces"), ietf(`{"interface":[`+strings.Join(entries, ",")+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		units, _ := render(w)
		markers := map[string]int{}
		for _, u := range units {
			if strings.HasSuffix(u, `= json_ietf_val: "{}"`) {
				markers[u]++
			}
		}
		distinct := map[int]bool{}
		for _, n := range names {
			distinct[n] = true
		}
		if len(markers) != len(distinct) {
			t.Errorf("entries %v: %d markers, want %d: %v", names, len(markers), len(distinct), markers)
		}
		for m, k := range markers {
			if k != 1 {
				t.Errorf("entries %v: marker %s written %d times, want once", names, m, k)
			}
		}
	}
}
