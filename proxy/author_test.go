package proxy

import (
	"strings"
	"testing"
)

func TestPrintableAuthor(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"alice", "alice"},
		{"a\nb\x00c", "a\uFFFDb\uFFFDc"},
		{strings.Repeat("x", 300), strings.Repeat("x", 256) + "…"},
		{strings.Repeat("é", 200), strings.Repeat("é", 128) + "…"},
	} {
		if got := printable(tt.in, maxAuthorBytes); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
