package main

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
)

func TestParseRefusedEncoding(t *testing.T) {
	for _, tc := range []struct {
		in   string
		enc  gpb.Encoding
		code codes.Code
		bad  bool
	}{
		{in: "PROTO", enc: gpb.Encoding_PROTO, code: codes.Unimplemented},
		{in: "json", enc: gpb.Encoding_JSON, code: codes.Unimplemented},
		{in: "JSON_IETF:INVALID_ARGUMENT", enc: gpb.Encoding_JSON_IETF, code: codes.InvalidArgument},
		{in: "PROTO:3", enc: gpb.Encoding_PROTO, code: codes.InvalidArgument},
		{in: "ASCII", bad: true},
		{in: "PROTO:OK", bad: true},
		{in: "PROTO:NOPE", bad: true},
	} {
		enc, code, err := parseRefusedEncoding(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
			continue
		}
		if err != nil || enc != tc.enc || code != tc.code {
			t.Errorf("%q: %v %v %v, want %v %v", tc.in, enc, code, err, tc.enc, tc.code)
		}
	}
}
