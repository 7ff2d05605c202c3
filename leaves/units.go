package leaves

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/value"
	"google.golang.org/protobuf/proto"
)

// jsonBytes returns the JSON text of a JSON or JSON_IETF value (nil for
// other encodings).
func jsonBytes(v *gpb.TypedValue) []byte {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_JsonVal:
		return x.JsonVal
	case *gpb.TypedValue_JsonIetfVal:
		return x.JsonIetfVal
	}
	return nil
}

// IsMarker reports whether a unit's value is a marker: the JSON object {}
// recording that a list entry or container exists.
func IsMarker(v *gpb.TypedValue) bool {
	b := jsonBytes(v)
	return b != nil && bytes.Equal(bytes.TrimSpace(b), []byte("{}"))
}

// IsLeafList reports whether a unit's value is a whole leaf-list (a
// leaflist TypedValue or a JSON array). A re-push or rollback sends it as
// a Replace, so the leaf-list ends up exactly so whether the device merges
// leaf-lists on Update or replaces them.
func IsLeafList(v *gpb.TypedValue) bool {
	if v.GetLeaflistVal() != nil {
		return true
	}
	b := bytes.TrimSpace(jsonBytes(v))
	return len(b) > 0 && b[0] == '['
}

// Equal reports whether two unit values mean the same value: a scalar
// TypedValue and the JSON text of the same value are equal (uint_val 1500,
// JSON 1500 and JSON_IETF "1500"), as are a leaf-list and the JSON array of
// its elements, and JSON objects whose members are. Two TypedValues that
// are not JSON are equal only if they are the same, type included.
func Equal(a, b *gpb.TypedValue) bool {
	if proto.Equal(a, b) {
		return true
	}
	if jsonBytes(a) == nil && jsonBytes(b) == nil {
		return false // two TypedValues of their own types: they differ
	}
	av, aok := generic(a)
	bv, bok := generic(b)
	return aok && bok && sameGeneric(av, bv)
}

// generic turns a value into JSON-like Go values: strings, *big.Rat for
// numbers, bools, nil, []any, map[string]any.
func generic(v *gpb.TypedValue) (any, bool) {
	if b := jsonBytes(v); b != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, false
		}
		return normalizeJSON(x), true
	}
	if ll := v.GetLeaflistVal(); ll != nil {
		out := make([]any, len(ll.GetElement()))
		for n, e := range ll.GetElement() {
			x, ok := generic(e)
			if !ok {
				return nil, false
			}
			out[n] = x
		}
		return out, true
	}
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal, true
	case *gpb.TypedValue_BoolVal:
		return x.BoolVal, true
	case *gpb.TypedValue_IntVal:
		return new(big.Rat).SetInt64(x.IntVal), true
	case *gpb.TypedValue_UintVal:
		return new(big.Rat).SetUint64(x.UintVal), true
	case *gpb.TypedValue_DoubleVal:
		r, ok := new(big.Rat).SetString(strconv.FormatFloat(x.DoubleVal, 'g', -1, 64))
		return r, ok
	case *gpb.TypedValue_FloatVal, *gpb.TypedValue_DecimalVal:
		// Deprecated encodings, still sent: compared as float32, as the
		// gnmi value package reads them.
		f, err := value.ToScalar(v)
		if err != nil {
			return nil, false
		}
		r, ok := new(big.Rat).SetString(fmt.Sprint(f))
		return r, ok
	}
	s, err := value.ToScalar(v)
	if err != nil {
		return nil, false
	}
	return s, true
}

func normalizeJSON(x any) any {
	switch v := x.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(v.String()); ok {
			return r
		}
		return v.String()
	case []any:
		for n := range v {
			v[n] = normalizeJSON(v[n])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, m := range v {
			out[Name(k)] = normalizeJSON(m)
		}
		return out
	}
	return x
}

// sameGeneric compares two generic values; a number equals a string
// holding it (JSON_IETF writes 64-bit integers and decimals as strings).
func sameGeneric(a, b any) bool {
	switch x := a.(type) {
	case *big.Rat:
		switch y := b.(type) {
		case *big.Rat:
			return x.Cmp(y) == 0
		case string:
			r, ok := new(big.Rat).SetString(y)
			return ok && x.Cmp(r) == 0
		}
		return false
	case string:
		switch y := b.(type) {
		case string:
			return sameKey(x, y)
		case *big.Rat:
			return sameGeneric(y, x)
		}
		return false
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for n := range x {
			if !sameGeneric(x[n], y[n]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameGeneric(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}
