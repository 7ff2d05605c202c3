package trace

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// FuzzParsePath checks that parsePath reads back what gnmipath.String
// renders: a path parsed from any string renders as a string that parses
// to the same path. Only names, key names and origins that gnmipath.String can
// render unambiguously are checked (it escapes key values only), and key
// values holding both "]" and "/" are left out: ygot's parser splits
// elements at a "/" after an escaped "]".
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/interfaces/interface[name=eth0]/config/mtu",
		"openconfig:/system/config/hostname",
		"/",
		"/a[k=x//y]/b",
		"/a[k=x/../y]/b",
		"/a[k=./b]",
		`/a[k=x\]y][l=\\]`,
		`/a[k=x\=y]`,
		"/a[b=1][a=2]/c",
		"o:a/b",
		"/a//b",
		"/a[k=v",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePath(s)
		if err != nil || !plainPath(p) {
			return
		}
		rendered := gnmipath.String(p)
		again, err := parsePath(rendered)
		if err != nil {
			t.Fatalf("%q parses to %v, rendered %q, which does not parse: %v", s, p, rendered, err)
		}
		if !proto.Equal(again, p) {
			t.Fatalf("%q parses to %v, rendered %q, which parses to %v", s, p, rendered, again)
		}
	})
}

// plainPath reports whether p's origin, names and key names hold none of
// the characters with a meaning in a path string, and its key values are
// not ones ygot's parser splits.
func plainPath(p *gnmi.Path) bool {
	const special = `/[]=\: `
	if strings.ContainsAny(p.GetOrigin(), special) {
		return false
	}
	for _, e := range p.GetElem() {
		if e.GetName() == "" || strings.ContainsAny(e.GetName(), special) {
			return false
		}
		for k, v := range e.GetKey() {
			if strings.ContainsAny(k, special) || strings.Contains(v, "]") && strings.Contains(v, "/") {
				return false
			}
		}
	}
	return true
}

// FuzzRead reads a trace file from the fuzzer's bytes and checks it: a
// malformed trace is an error naming its line; a trace that reads keeps
// every line through a write and a read; and checking it (at quiescence
// too, and its applied values against themselves) does not panic.
func FuzzRead(f *testing.F) {
	f.Add(encode(f, lifecycle(f).lines))
	f.Add([]byte(`{"seq":1,"action":"Open","term":0,"conn":0}` + "\n" + `{"seq":2,"act`))
	f.Add([]byte(`{"seq":1,"action":"CompleteApply","index":1,"values":[{"path":"/a[k=x//y]","index":1,"value":{"stringVal" : "x"}}]}`))
	f.Add([]byte(`{"seq":1,"action":"CompleteApply","index":1,"values":[{"path":"a","index":1,"value":{"jsonVal":"e30="}},{"path":"/b","deleted":true}]}`))
	f.Add([]byte(`{"action":"x","time":"2024-01-02T03:04:05.5+01:00","values":[{"value":null}]}` + "\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := Read(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "trace: line ") {
				t.Fatalf("Read: %v, want an error naming the line", err)
			}
			return
		}
		again, err := Read(bytes.NewReader(encode(t, lines)))
		if err != nil {
			t.Fatalf("Read of the lines written back: %v", err)
		}
		if diff := cmp.Diff(asWritten(lines), again, cmp.Transformer("compact", compactJSON)); diff != "" {
			t.Fatalf("lines written back and read (-read +again):\n%s", diff)
		}
		r := Check(lines)
		r.CheckQuiescent()
		values, err := r.AppliedValues()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "trace: ") {
				t.Fatalf("AppliedValues: %v, want an error starting with trace:", err)
			}
			return
		}
		if len(values) != len(r.Applied) {
			t.Fatalf("AppliedValues returned %d values for %d applied paths", len(values), len(r.Applied))
		}
		CheckApplied(r.Applied, values)
	})
}

// asWritten is lines as a Tracer's encoding keeps them: empty lists are
// left out.
func asWritten(lines []Line) []Line {
	out := slices.Clone(lines)
	for n := range out {
		if len(out[n].Aborted) == 0 {
			out[n].Aborted = nil
		}
		if len(out[n].Values) == 0 {
			out[n].Values = nil
		}
	}
	return out
}

// compactJSON is raw JSON as encoding/json writes it back.
func compactJSON(m json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		return string(m)
	}
	return buf.String()
}
