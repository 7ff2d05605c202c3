package proxy

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/peer"
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

// TestPeerAddrIsTheHost: the author of a client without a name is its
// address without the port, written as the address's own String writes
// it, for every kind of TCP address and for others.
func TestPeerAddrIsTheHost(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 4711}, "127.0.0.1"},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 1}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 4711}, "::1"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 4711, Zone: "eth0"}, "fe80::1%eth0"},
		{&net.UnixAddr{Name: "/run/sidecar.sock", Net: "unix"}, "/run/sidecar.sock"},
	}
	for _, tt := range tests {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: tt.addr})
		if got := peerAddr(ctx); got != tt.want {
			t.Errorf("peerAddr(%v) = %q, want %q", tt.addr, got, tt.want)
		}
		if host, _, err := net.SplitHostPort(tt.addr.String()); err == nil && host != tt.want {
			t.Errorf("%v: the host of its String is %q, this table says %q", tt.addr, host, tt.want)
		}
	}
}
