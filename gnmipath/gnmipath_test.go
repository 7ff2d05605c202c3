package gnmipath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// mustPath parses "/a/b[k=v]" or "origin:/a/...".
func mustPath(t testing.TB, s string) *gpb.Path {
	t.Helper()
	origin := ""
	if o, rest, ok := strings.Cut(s, ":"); ok && !strings.HasPrefix(s, "/") {
		origin, s = o, rest
	}
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	p.Origin = origin
	return p
}

// deep is a path of n elements.
func deep(n int) *gpb.Path {
	p := &gpb.Path{}
	for range n {
		p.Elem = append(p.Elem, &gpb.PathElem{Name: "a"})
	}
	return p
}

func TestString(t *testing.T) {
	keyed := func(v string) *gpb.Path {
		return &gpb.Path{Elem: []*gpb.PathElem{{Name: "a"}, {Name: "b", Key: map[string]string{"k": v}}, {Name: "c"}}}
	}
	tests := []struct {
		name string
		p    *gpb.Path
		want string
	}{
		{"root", &gpb.Path{}, "/"},
		{"origin", mustPath(t, "openconfig:/system"), "openconfig:/system"},
		{"target not rendered", &gpb.Path{Target: "dev", Elem: []*gpb.PathElem{{Name: "a"}}}, "/a"},
		{"keys sorted", mustPath(t, "/a[y=2][x=1]/b"), "/a[x=1][y=2]/b"},
		{"slash in a key", keyed("Ethernet1/1"), "/a/b[k=Ethernet1/1]/c"},
		{"double slash in a key", keyed("x//y"), "/a/b[k=x//y]/c"},
		{"dot-dot in a key", keyed("x/../y"), "/a/b[k=x/../y]/c"},
		{"escapes in a key", keyed(`x]\=`), `/a/b[k=x\]\\\=]/c`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.p); got != tt.want {
				t.Errorf("String(%v) = %q, want %q", tt.p, got, tt.want)
			}
		})
	}
}

func TestShort(t *testing.T) {
	keys := map[string]string{}
	for k := range 1000 {
		keys[fmt.Sprintf("k%04d", k)] = "v"
	}
	for _, tt := range []struct {
		name string
		p    *gpb.Path
		want string
	}{
		{"short", mustPath(t, "openconfig:/interfaces/interface[name=eth0]/config"), "openconfig:/interfaces/interface[name=eth0]/config"},
		{"deep", deep(100_000), strings.Repeat("/a", 16) + "..."},
		{"many keys", &gpb.Path{Elem: []*gpb.PathElem{{Name: "a", Key: keys}}}, "/a[k0000=v][k0001=v][k0002=v][k0003=v][k0004=v][k0005=v][k0006=v][k0007=v]..."},
		{"long name", &gpb.Path{Elem: []*gpb.PathElem{{Name: strings.Repeat("é", 1000)}}}, "/" + strings.Repeat("é", 32) + "..."},
		{"long in all", deep(16), strings.Repeat("/a", 16)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Short(tt.p); got != tt.want {
				t.Errorf("Short = %q, want %q", got, tt.want)
			}
		})
	}
	long := &gpb.Path{}
	for range 16 {
		long.Elem = append(long.Elem, &gpb.PathElem{Name: strings.Repeat("n", 60)})
	}
	if got := Short(long); len(got) > 200 || !strings.HasSuffix(got, "...") {
		t.Errorf("Short of 16 elements of 60 bytes = %q (%d bytes), want at most about 160 bytes ending in ...", got, len(got))
	}
}

func TestJoin(t *testing.T) {
	for _, tt := range []struct {
		name         string
		prefix, path *gpb.Path
		want         string
	}{
		{"no prefix", nil, mustPath(t, "/a/b"), "/a/b"},
		{"no path", mustPath(t, "/a"), nil, "/a"},
		{"elements appended", mustPath(t, "/a[k=1]"), mustPath(t, "/b/c"), "/a[k=1]/b/c"},
		{"prefix origin", mustPath(t, "oc:/a"), mustPath(t, "/b"), "oc:/a/b"},
		{"path origin", mustPath(t, "/a"), mustPath(t, "oc:/b"), "oc:/a/b"},
		{"prefix origin wins", mustPath(t, "oc:/a"), mustPath(t, "other:/b"), "oc:/a/b"},
		{"target dropped", &gpb.Path{Target: "dev", Elem: []*gpb.PathElem{{Name: "a"}}}, mustPath(t, "/b"), "/a/b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Join(tt.prefix, tt.path)
			if s := String(got); s != tt.want || got.GetTarget() != "" {
				t.Errorf("Join(%v, %v) = %v, want %s", tt.prefix, tt.path, got, tt.want)
			}
		})
	}
	// The result does not share the prefix's array: two joins with one
	// prefix keep their own last elements.
	base := &gpb.Path{Elem: make([]*gpb.PathElem, 1, 4)}
	base.Elem[0] = &gpb.PathElem{Name: "a"}
	x, y := Join(base, mustPath(t, "/x")), Join(base, mustPath(t, "/y"))
	if String(x) != "/a/x" || String(y) != "/a/y" {
		t.Errorf("two joins with one prefix: %s and %s, want /a/x and /a/y", String(x), String(y))
	}
}

func TestRelative(t *testing.T) {
	got := Relative(mustPath(t, "oc:/a/b[k=1]/c"), mustPath(t, "/a/b[k=1]"))
	if diff := cmp.Diff(mustPath(t, "/c"), got, protocmp.Transform()); diff != "" {
		t.Errorf("Relative (-want +got):\n%s", diff)
	}
}

func TestMatchesOrUnder(t *testing.T) {
	for _, tt := range []struct {
		pattern, path string
		want          bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a", false},
		{"/a/b", "/a/c", false},
		{"/a/*/c", "/a/x/c/d", true},
		{"/a/*/c", "/a/c", false},
		{"/.../c", "/c", true},
		{"/.../c", "/a/b/c", true},
		{"/.../c", "/a/b", false},
		{"/a[k=*]/b", "/a[k=1]/b", true},
		{"/a[k=*]/b", "/a/b", false},
		{"/a/b", "/a[k=1]/b", true},
		{"/a[k=1]", "/a[k=2]", false},
		{"/", "/a", true},
	} {
		t.Run(tt.pattern+" "+tt.path, func(t *testing.T) {
			if got := MatchesOrUnder(mustPath(t, tt.pattern).GetElem(), mustPath(t, tt.path).GetElem()); got != tt.want {
				t.Errorf("MatchesOrUnder(%s, %s) = %v, want %v", tt.pattern, tt.path, got, tt.want)
			}
		})
	}
}

func TestWild(t *testing.T) {
	for _, tt := range []struct {
		e    *gpb.PathElem
		want bool
	}{
		{&gpb.PathElem{Name: "a"}, false},
		{&gpb.PathElem{Name: "a", Key: map[string]string{"k": "v"}}, false},
		{&gpb.PathElem{Name: AnyElem}, true},
		{&gpb.PathElem{Name: AnyDepth}, true},
		{&gpb.PathElem{Name: "a", Key: map[string]string{"k": AnyElem}}, true},
	} {
		if got := Wild(tt.e); got != tt.want {
			t.Errorf("Wild(%v) = %v, want %v", tt.e, got, tt.want)
		}
	}
}

func marshalMsg(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzMatchesOrUnder checks MatchesOrUnder on a pattern and a path decoded
// from the fuzzer's bytes (gnmi.Path in wire format) against its
// definition, matchesByBacktracking, for patterns with few AnyDepth (the
// definition takes time that grows combinatorially with their number).
func FuzzMatchesOrUnder(f *testing.F) {
	for _, pair := range [][2]string{
		{"/proposals/proposal[index=*]/state", "/proposals/proposal[index=7]/state/apply-status"},
		{"/.../apply-status", "/proposals/proposal[index=7]/state/apply-status"},
		{"/.../state/...", "/configuration/state"},
		{"/*/.../*/x/...", "/a/x/b/x"},
		{"/a/...", "/"},
		{"/a[k=1]/b", "/a[k=1][l=2]/b/c"},
		{"/.../a/...", "/b/a/a"},
	} {
		f.Add(marshalMsg(f, mustPath(f, pair[0])), marshalMsg(f, mustPath(f, pair[1])))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		pattern, path := &gpb.Path{}, &gpb.Path{}
		if proto.Unmarshal(a, pattern) != nil || proto.Unmarshal(b, path) != nil {
			return
		}
		anyDepths := 0
		for _, e := range pattern.GetElem() {
			if e.GetName() == AnyDepth {
				anyDepths++
			}
		}
		if anyDepths > 4 {
			return
		}
		got, want := MatchesOrUnder(pattern.GetElem(), path.GetElem()), matchesByBacktracking(pattern.GetElem(), path.GetElem())
		if got != want {
			t.Fatalf("MatchesOrUnder(%v, %v) = %v, want %v", pattern, path, got, want)
		}
	})
}

// matchesByBacktracking is MatchesOrUnder's definition: AnyDepth matches
// any number of elements, including none; any other pattern element
// matches one element; the path may go on below the pattern.
func matchesByBacktracking(pattern, path []*gpb.PathElem) bool {
	if len(pattern) == 0 {
		return true
	}
	if pattern[0].GetName() == AnyDepth {
		for skip := 0; skip <= len(path); skip++ {
			if matchesByBacktracking(pattern[1:], path[skip:]) {
				return true
			}
		}
		return false
	}
	return len(path) > 0 && elemMatches(pattern[0], path[0]) && matchesByBacktracking(pattern[1:], path[1:])
}
