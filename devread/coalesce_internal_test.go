package devread

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// TestReadPlan: a coalesced read reads the parent of CoalesceAt or more
// paths once, and every other path as it is (a path with a wildcard
// included), whatever their order.
func TestReadPlan(t *testing.T) {
	path := func(s string) *gpb.Path {
		p, err := ygot.StringToStructuredPath(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var scopes []*gpb.Path
	for n := range CoalesceAt {
		scopes = append(scopes, path(fmt.Sprintf("/interfaces/interface[name=e%d]", n)))
	}
	for n := range CoalesceAt - 1 {
		scopes = append(scopes, path(fmt.Sprintf("/network-instances/network-instance[name=n%d]", n)))
	}
	for n := range CoalesceAt {
		scopes = append(scopes, path(fmt.Sprintf("/qos/queues/queue[name=*]/config/q%d", n)))
	}
	scopes = append(scopes, path("/system/config/hostname"), path("/system"), path("/acl"))
	rand.Shuffle(len(scopes), func(i, j int) { scopes[i], scopes[j] = scopes[j], scopes[i] })
	var got []string
	plan, wide := readPlan(scopes)
	for _, p := range plan {
		got = append(got, gnmipath.String(p))
	}
	if len(wide) != 1 || gnmipath.String(wide[0]) != "/interfaces" {
		t.Errorf("wide = %v, want /interfaces", wide)
	}
	want := []string{"/acl", "/interfaces"}
	for n := range CoalesceAt {
		want = append(want, fmt.Sprintf("/qos/queues/queue[name=*]/config/q%d", n))
	}
	for n := range CoalesceAt - 1 {
		want = append(want, fmt.Sprintf("/network-instances/network-instance[name=n%d]", n))
	}
	want = append(want, "/system")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("readPlan =\n%q\nwant\n%q", got, want)
	}
}
