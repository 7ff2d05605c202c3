package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	i := Read()
	if i.Version == "" || i.GoVersion != runtime.Version() {
		t.Fatalf("Read() = %+v: want a version and the toolchain's %s", i, runtime.Version())
	}
	if s := i.String(); !strings.HasPrefix(s, i.Version+" (") || !strings.Contains(s, runtime.Version()) {
		t.Errorf("String() = %q", s)
	}
}

func TestString(t *testing.T) {
	for _, tt := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.0", Revision: "1a2b3c4d5e6f7a8b", GoVersion: "go1.25.3"}, "v1.2.0 (commit 1a2b3c4d5e6f, go1.25.3)"},
		{Info{Version: "(devel)", Revision: "abc", Modified: true, GoVersion: "go1.25.3"}, "(devel) (commit abc, modified, go1.25.3)"},
		{Info{Version: "(devel)", GoVersion: "go1.25.3"}, "(devel) (go1.25.3)"},
	} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}
