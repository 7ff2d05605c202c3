package main

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
)

// FuzzValueJSON renders a TypedValue decoded from the fuzzer's bytes as
// `journal show` does (Value's JSON and text). The JSON is valid, no
// longer than a multiple of the value's encoded size (the CLI shows
// values journaled from any client), and holds the value itself for
// strings, integers, booleans, finite doubles and decimals.
func FuzzValueJSON(f *testing.F) {
	for _, tv := range []*gpb.TypedValue{
		opsStr("eth0 \"uplink\"\x00\u2028"),
		uv(math.MaxUint64),
		iv(math.MinInt64),
		bv(false),
		{Value: &gpb.TypedValue_DoubleVal{DoubleVal: math.Inf(-1)}},
		{Value: &gpb.TypedValue_FloatVal{FloatVal: 1e-7}}, //lint:ignore SA1019 still rendered
		jv("{\n  \"mtu\": 9000\n}"),
		{Value: &gpb.TypedValue_JsonVal{JsonVal: []byte(`{"a":`)}},
		{Value: &gpb.TypedValue_BytesVal{BytesVal: []byte{0, 0xff}}},
		{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: &gpb.ScalarArray{Element: []*gpb.TypedValue{opsStr("a"), {}, jv("[1]")}}}},
		{Value: &gpb.TypedValue_DecimalVal{DecimalVal: &gpb.Decimal64{Digits: math.MinInt64, Precision: 19}}}, //lint:ignore SA1019 still rendered
		{Value: &gpb.TypedValue_DecimalVal{DecimalVal: &gpb.Decimal64{Digits: 5, Precision: 40}}},             //lint:ignore SA1019 still rendered
		{},
	} {
		b, err := proto.Marshal(tv)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tv := &gpb.TypedValue{}
		if proto.Unmarshal(data, tv) != nil {
			return
		}
		out := valueJSON(tv)
		if !json.Valid(out) {
			t.Fatalf("valueJSON(%v) = %s, not JSON", tv, out)
		}
		if limit := 32*proto.Size(tv) + 64; len(out) > limit {
			t.Fatalf("valueJSON(%v) has %d bytes, more than %d for a value of %d", tv, len(out), limit, proto.Size(tv))
		}
		_ = (&Value{TV: tv}).Text()
		if want, ok := jsonNumberOf(tv); ok {
			if got, ok := new(big.Rat).SetString(string(out)); !ok || got.Cmp(want) != 0 {
				t.Fatalf("valueJSON(%v) = %s, want the number %v", tv, out, want)
			}
		}
		if x, ok := tv.GetValue().(*gpb.TypedValue_DoubleVal); ok && !math.IsInf(x.DoubleVal, 0) && !math.IsNaN(x.DoubleVal) {
			if got, err := strconv.ParseFloat(string(out), 64); err != nil || got != x.DoubleVal {
				t.Fatalf("valueJSON(%v) = %s, want the number %v", tv, out, x.DoubleVal)
			}
		}
		var s string
		if x, ok := tv.GetValue().(*gpb.TypedValue_StringVal); ok && (json.Unmarshal(out, &s) != nil || s != x.StringVal) {
			t.Fatalf("valueJSON(%v) = %s, want the string %q", tv, out, x.StringVal)
		}
	})
}

// jsonNumberOf returns the number an integer or a decimal value holds.
func jsonNumberOf(tv *gpb.TypedValue) (*big.Rat, bool) {
	switch x := tv.GetValue().(type) {
	case *gpb.TypedValue_IntVal:
		return new(big.Rat).SetInt64(x.IntVal), true
	case *gpb.TypedValue_UintVal:
		return new(big.Rat).SetUint64(x.UintVal), true
	case *gpb.TypedValue_DecimalVal:
		d := x.DecimalVal //lint:ignore SA1019 still rendered
		if d.GetPrecision() > 1000 {
			return nil, false // the size check covers it
		}
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.GetPrecision())), nil)
		return new(big.Rat).SetFrac(big.NewInt(d.GetDigits()), scale), true
	}
	return nil, false
}
