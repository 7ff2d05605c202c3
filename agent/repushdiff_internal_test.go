package agent

import (
	"fmt"
	"slices"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// TestReadPlan: the re-push reads the parent of coalesceAt or more read
// scopes once, and every other scope as it is.
func TestReadPlan(t *testing.T) {
	path := func(s string) *gpb.Path {
		p, err := ygot.StringToStructuredPath(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var scopes []*gpb.Path
	for n := range coalesceAt {
		scopes = append(scopes, path(fmt.Sprintf("/interfaces/interface[name=e%d]", n)))
	}
	for n := range coalesceAt - 1 {
		scopes = append(scopes, path(fmt.Sprintf("/network-instances/network-instance[name=n%d]", n)))
	}
	scopes = append(scopes, path("/system/config/hostname"), path("/system"), path("/acl"))
	slices.SortFunc(scopes, func(a, b *gpb.Path) int { return slices.Compare(journal.PathKey(a), journal.PathKey(b)) })
	var got []string
	for _, p := range readPlan(scopes) {
		got = append(got, gnmipath.String(p))
	}
	want := []string{"/acl", "/interfaces"}
	for n := range coalesceAt - 1 {
		want = append(want, fmt.Sprintf("/network-instances/network-instance[name=n%d]", n))
	}
	want = append(want, "/system")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("readPlan =\n%q\nwant\n%q", got, want)
	}
}
