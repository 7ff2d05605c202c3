package testbed

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
)

// fastCasePaths are the leaves the random Sets of TestFastSetMatchesGeneralPath
// write, relative to an interface entry: the fast path takes most of them
// (strings, booleans, integers, the key, leaves in containers of the
// entry, some with a pattern or a range); the enumerations, the state leaf and the unknown ones send the
// Set down the general path.
var fastCasePaths = []string{
	"config/description", "config/mtu", "config/enabled", "config/name", "name",
	"hold-time/config/up", "hold-time/config/down", "ethernet/config/mac-address",
	"ethernet/switched-vlan/config/access-vlan", "routed-vlan/ipv4/config/mtu", "config/type", "config/loopback-mode",
	"state/description", "config/nope", "config",
}

// randomFastValue is a value for a leaf of fastCasePaths: usually of its
// type, sometimes of another type, out of range or a wrong key.
func randomFastValue(r *rand.Rand, rel, entry string) *gpb.TypedValue {
	s := func(v string) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: v}} }
	u := func(v uint64) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: v}} }
	if r.IntN(10) == 0 {
		switch r.IntN(4) {
		case 0:
			return s("wrong")
		case 1:
			return u(70000) // over uint16
		case 2:
			return &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: -1}}
		default:
			return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}
		}
	}
	switch rel {
	case "config/mtu":
		return u(uint64([]int{1500, 9000, 10, 65535}[r.IntN(4)]))
	case "routed-vlan/ipv4/config/mtu":
		return u(uint64([]int{1500, 67, 68}[r.IntN(3)])) // range 68..65535
	case "ethernet/switched-vlan/config/access-vlan":
		return u(uint64([]int{0, 1, 100, 4094, 4095}[r.IntN(5)])) // range 1..4094
	case "ethernet/config/mac-address":
		return s([]string{"00:11:22:33:44:55", "zz", "aa:bb:cc:dd:ee:ff"}[r.IntN(3)])
	case "config/enabled":
		return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: r.IntN(2) == 0}}
	case "config/name", "name":
		return s(entry)
	case "hold-time/config/up", "hold-time/config/down":
		return u(uint64(r.IntN(3)))
	case "config/type":
		return s("ethernetCsmacd")
	case "config/loopback-mode":
		return s("NONE")
	}
	return s([]string{"a", "b", "", "c"}[r.IntN(4)])
}

// TestFastSetMatchesGeneralPath applies random Sets of leaves in interface
// entries (with, now and then, a JSON_IETF container or a delete of a leaf
// or an entry in the same Set) twice, with the fast path and without it, and checks that both
// give the same answer, the same tree and the same change notification
// (as ygot.Diff reports it).
func TestFastSetMatchesGeneralPath(t *testing.T) {
	m, err := newExampleOCModel()
	if err != nil {
		t.Fatal(err)
	}
	schema := m.RootSchema()
	fast := newFastSet(schema, m.NewRoot())
	r := rand.New(rand.NewPCG(1, 2))
	withFast, without := m.NewRoot(), m.NewRoot()
	fastTaken := 0
	const sets = 800
	for i := range sets {
		var ops []setOp
		for range 1 + r.IntN(4) {
			entry := fmt.Sprintf("eth%d", r.IntN(6))
			rel := fastCasePaths[r.IntN(len(fastCasePaths))]
			path := fmt.Sprintf("/interfaces/interface[name=%s]/%s", entry, rel)
			full, err := ygot.StringToStructuredPath(path)
			if err != nil {
				t.Fatal(err)
			}
			op := setOp{op: gpb.UpdateResult_UPDATE, path: full, full: full, val: randomFastValue(r, rel, entry), write: true}
			switch r.IntN(12) {
			case 0, 1, 2:
				op.op, op.clear = gpb.UpdateResult_REPLACE, true
			case 3:
				// What real clients send beside scalar leaves: a JSON_IETF
				// container, which the fast path leaves to the general one.
				cfg := fmt.Sprintf(`{"openconfig-interfaces:description":"j%d","openconfig-interfaces:mtu":%d}`, i, 1500+r.IntN(2))
				if op.path, err = ygot.StringToStructuredPath(fmt.Sprintf("/interfaces/interface[name=%s]/config", entry)); err != nil {
					t.Fatal(err)
				}
				op.full, op.val = op.path, &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(cfg)}}
			case 4:
				// A delete of the leaf, or of the whole entry (not of its
				// key alone: the device would keep the entry without it).
				if r.IntN(2) == 0 || rel == "name" || rel == "config/name" {
					if op.path, err = ygot.StringToStructuredPath(fmt.Sprintf("/interfaces/interface[name=%s]", entry)); err != nil {
						t.Fatal(err)
					}
					op.full = op.path
				}
				op.op, op.val, op.clear, op.write = gpb.UpdateResult_DELETE, nil, true, false
			}
			ops = append(ops, op)
		}
		desc := func() string {
			var out []string
			for _, o := range ops {
				out = append(out, fmt.Sprintf("%s %s = %s", opName(o.op), pathString(o.full), prototext.Format(o.val)))
			}
			return fmt.Sprint(out)
		}
		if refs, ok := entryRefs(withFast, ops); ok {
			if _, ok := fast.apply(withFast, ops, refs); ok {
				fastTaken++
			}
		}
		chF, errF := applyOps(schema, m.NewRoot, withFast, ops, true, fast)
		chG, errG := applyOps(schema, m.NewRoot, without, ops, true, nil)
		if status.Code(errF) != status.Code(errG) || fmt.Sprint(errF) != fmt.Sprint(errG) {
			t.Fatalf("Set %d %s: with the fast path %v, without %v", i, desc(), errF, errG)
		}
		if errF != nil {
			continue
		}
		if chG.fast != nil {
			t.Fatalf("Set %d: the general path took the fast one", i)
		}
		var nF, nG *gpb.Notification
		if chF.fast != nil {
			if nF, err = chF.fast.notification(); err != nil {
				t.Fatal(err)
			}
		} else {
			if nF, err = ygot.Diff(chF.touched.restrict(withFast), chF.scratch); err != nil {
				t.Fatal(err)
			}
		}
		if nG, err = ygot.Diff(chG.touched.restrict(without), chG.scratch); err != nil {
			t.Fatal(err)
		}
		withFast, without = chF.install(withFast), chG.install(without)
		if got, want := notificationText(nF), notificationText(nG); !slices.Equal(got, want) {
			t.Fatalf("Set %d %s: notification with the fast path\n%v\nwithout\n%v", i, desc(), got, want)
		}
		if d, err := ygot.Diff(without, withFast); err != nil || len(d.GetUpdate())+len(d.GetDelete()) > 0 {
			t.Fatalf("Set %d %s: the trees differ: %v %v", i, desc(), d, err)
		}
	}
	if err := validateTree(schema, withFast); err != nil {
		t.Fatalf("the fast path's tree fails validation: %v", err)
	}
	if fastTaken < sets/6 {
		t.Errorf("the fast path took only %d of the Sets", fastTaken)
	}
	t.Logf("fast path took %d of %d Sets", fastTaken, sets)
}

// notificationText is n's updates and deletes as sorted lines.
func notificationText(n *gpb.Notification) []string {
	var out []string
	for _, u := range n.GetUpdate() {
		out = append(out, "update "+pathString(u.GetPath())+" "+prototext.Format(u.GetVal()))
	}
	for _, p := range n.GetDelete() {
		out = append(out, "delete "+pathString(p))
	}
	slices.Sort(out)
	return out
}

// TestFastSetKeepsErrors: Sets the fast path leaves to the general path
// get its answers.
func TestFastSetKeepsErrors(t *testing.T) {
	m, err := newExampleOCModel()
	if err != nil {
		t.Fatal(err)
	}
	fast := newFastSet(m.RootSchema(), m.NewRoot())
	for _, tc := range []struct {
		path string
		val  *gpb.TypedValue
		code codes.Code
	}{
		{"/interfaces/interface[name=eth0]/routed-vlan/ipv4/config/mtu", &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 10}}, codes.InvalidArgument},
		{"/interfaces/interface[name=eth0]/ethernet/config/mac-address", &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "zz"}}, codes.InvalidArgument},
		{"/interfaces/interface[name=eth0]/config/mtu", &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "x"}}, codes.InvalidArgument},
		{"/interfaces/interface[name=eth0]/config/name", &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "eth1"}}, codes.InvalidArgument},
		{"/interfaces/interface[name=eth0]/config/nope", &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "x"}}, codes.NotFound},
		{"/interfaces/interface[nome=eth0]/config/description", &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "x"}}, codes.InvalidArgument},
	} {
		full, err := ygot.StringToStructuredPath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		ops := []setOp{{op: gpb.UpdateResult_UPDATE, path: full, full: full, val: tc.val, write: true}}
		if _, err := applyOps(m.RootSchema(), m.NewRoot, m.NewRoot(), ops, true, fast); status.Code(err) != tc.code {
			t.Errorf("%s = %v: %v, want %v", tc.path, tc.val, err, tc.code)
		}
	}
}
