package proxy_test

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

func arbitration(role string, high, low uint64) *gnmi_ext.Extension {
	ma := &gnmi_ext.MasterArbitration{ElectionId: &gnmi_ext.Uint128{High: high, Low: low}}
	if role != "" {
		ma.Role = &gnmi_ext.Role{Id: role}
	}
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{MasterArbitration: ma}}
}

// The sidecar arbitrates among its own clients as the gNMI master
// arbitration specification asks of a target, per role, and remembers the
// master across a restart.
func TestMasterArbitrationAmongClients(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	p := "/interfaces/interface[name=eth0]/config/description"
	steps := []struct {
		name  string
		req   *gpb.SetRequest
		code  codes.Code
		msg   string
		value string // the device's description after the step ("" = unchanged)
	}{
		{"first master", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("a"), arbitration("", 0, 5)), codes.OK, "", "a"},
		{"lower id refused", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("b"), arbitration("", 0, 3)), codes.PermissionDenied,
			"election_id 3 is lower than the current master's election_id 5 for the default role", ""},
		{"same id proceeds", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("c"), arbitration("", 0, 5)), codes.OK, "", "c"},
		{"new master announces itself with an empty Set", &gpb.SetRequest{Extension: []*gnmi_ext.Extension{arbitration("", 1, 0)}}, codes.OK, "", ""},
		{"old master refused", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("d"), arbitration("", 0, 5)), codes.PermissionDenied,
			"lower than the current master's election_id {high:1 low:0}", ""},
		{"another role has its own master", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("e"), arbitration("backup", 0, 1)), codes.OK, "", "e"},
		{"no extension proceeds", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("f")), codes.OK, "", "f"},
		{"no election id", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("g"), &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{
			MasterArbitration: &gnmi_ext.MasterArbitration{}}}), codes.InvalidArgument, "without election_id", ""},
	}
	for _, st := range steps {
		before := r.LastIndex(t)
		_, err := r.Set(t, st.req)
		if st.code == codes.OK {
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		} else {
			sidecartest.WantStatus(t, err, st.code, st.msg)
			if after := r.LastIndex(t); after != before {
				t.Errorf("%s: a refused Set was journaled (last index %d → %d)", st.name, before, after)
			}
		}
		if st.value != "" {
			r.WantDeviceLeaf(t, p, sidecartest.StringVal(st.value))
		}
	}
	if r.LastIndex(t) != 4 {
		t.Errorf("journal has %d proposals, want 4: the empty Set of a new master journals nothing", r.LastIndex(t))
	}
	id, err := r.Journal.ElectionID(t.Context(), "")
	if err != nil || id.GetHigh() != 1 {
		t.Errorf("journaled election id of the default role = %v, %v; want {high:1}", id, err)
	}
}
