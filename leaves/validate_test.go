package leaves

import (
	"errors"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

func TestCheckWrite(t *testing.T) {
	s, err := LoadYANG([]string{"testdata/validate.yang"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ietf := func(v string) *gpb.TypedValue {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(v)}}
	}
	js := func(v string) *gpb.TypedValue {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(v)}}
	}
	str := func(v string) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: v}} }
	uint := func(v uint64) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: v}} }
	const cfg = "/box/config"
	for _, tt := range []struct {
		op, path string
		val      *gpb.TypedValue
		kind     error  // nil: accepted
		reason   string // in the error
	}{
		{cfg + "/mtu", cfg + "/mtu", ietf(`1500`), nil, ""},
		{cfg + "/mtu", cfg + "/mtu", uint(1500), nil, ""},
		{cfg + "/mtu", cfg + "/mtu", str("1500"), nil, ""},
		{cfg + "/mtu", cfg + "/mtu", ietf(`"abc"`), ErrInvalid, `"abc" is a string, not a number`},
		{cfg + "/mtu", cfg + "/mtu", ietf(`"1500"`), ErrInvalid, "a string, not a number"},
		{cfg + "/mtu", cfg + "/mtu", js(`"1500"`), nil, ""},
		{cfg + "/mtu", cfg + "/mtu", js(`"abc"`), ErrInvalid, "not an integer"},
		{cfg + "/mtu", cfg + "/mtu", str("abc"), ErrInvalid, `"abc" is not a number`},
		{cfg + "/mtu", cfg + "/mtu", ietf(`9217`), ErrInvalid, "out of its range 68..9216"},
		{cfg + "/mtu", cfg + "/mtu", uint(10), ErrInvalid, "out of its range"},
		{cfg + "/mtu", cfg + "/mtu", ietf(`true`), ErrInvalid, "not a number"},
		{cfg + "/counter", cfg + "/counter", ietf(`"18446744073709551615"`), nil, ""}, // RFC 7951: 64-bit as a string
		{cfg + "/counter", cfg + "/counter", ietf(`-1`), ErrInvalid, "out of its range"},
		{cfg + "/ratio", cfg + "/ratio", ietf(`"1.25"`), nil, ""},
		{cfg + "/ratio", cfg + "/ratio", ietf(`"x"`), ErrInvalid, "not a decimal number"},
		{cfg + "/enabled", cfg + "/enabled", ietf(`true`), nil, ""},
		{cfg + "/enabled", cfg + "/enabled", ietf(`"yes"`), ErrInvalid, "not true or false"},
		{cfg + "/speed", cfg + "/speed", ietf(`"SPEED_10G"`), nil, ""},
		{cfg + "/speed", cfg + "/speed", ietf(`"va:SPEED_10G"`), nil, ""},
		{cfg + "/speed", cfg + "/speed", ietf(`"SPEED_5G"`), ErrInvalid, "not one of its names"},
		{cfg + "/vlan", cfg + "/vlan", ietf(`10`), nil, ""},
		{cfg + "/vlan", cfg + "/vlan", ietf(`"ANY"`), nil, ""},
		{cfg + "/vlan", cfg + "/vlan", ietf(`5000`), ErrInvalid, "no type of the union accepts it"},
		{cfg + "/ports", cfg + "/ports", ietf(`[1,2,300]`), ErrInvalid, "300 is out of its range"},
		{cfg + "/ports", cfg + "/ports", ietf(`[1,2]`), nil, ""},
		{cfg + "/peer", cfg + "/peer", ietf(`"anything"`), nil, ""},
		{cfg, cfg + "/name", ietf(`"n"`), nil, ""},
		{cfg, cfg + "/nosuch", ietf(`"n"`), ErrInvalid, `member "nosuch"`},
		{cfg + "/nosuch", cfg + "/nosuch", ietf(`"n"`), ErrNotInSchema, `no node "nosuch" under /box/config`},
		{"/nosuch/x", "/nosuch/x", ietf(`"n"`), ErrNotInSchema, `no node "nosuch" at the top level`},
		{cfg + "/mtu", cfg + "/mtu/x", ietf(`1`), ErrInvalid, "is a leaf"},
		{"/box/state/uptime", "/box/state/uptime", ietf(`"1"`), ErrInvalid, "state data"},
		{"/box/port[id=1]", "/box/port[id=1]", ietf(`{}`), nil, ""},
		{"/box/port[nosuch=1]", "/box/port[nosuch=1]", ietf(`{}`), ErrInvalid, `no key "nosuch"`},
		{"/box/config[id=1]/mtu", "/box/config[id=1]/mtu", ietf(`1500`), ErrInvalid, "not a list"},
		{"cli:/box/config/mtu", "cli:/box/config/mtu", ietf(`"abc"`), nil, ""}, // another origin: not judged
	} {
		op, p := mustPath(t, tt.op), mustPath(t, tt.path)
		err := s.CheckWrite(op, p, tt.val)
		switch {
		case tt.kind == nil && err != nil:
			t.Errorf("%s = %v: %v, want it accepted", tt.path, tt.val, err)
		case tt.kind != nil && !errors.Is(err, tt.kind):
			t.Errorf("%s = %v: %v, want %v", tt.path, tt.val, err, tt.kind)
		case tt.kind != nil && !strings.Contains(err.Error(), tt.reason):
			t.Errorf("%s = %v: %q lacks %q", tt.path, tt.val, err, tt.reason)
		}
	}
	var nilSchema *Schema
	if err := nilSchema.CheckWrite(mustPath(t, cfg), mustPath(t, "/x/y"), ietf(`"abc"`)); err != nil {
		t.Errorf("no schema: %v, want everything accepted", err)
	}
}
