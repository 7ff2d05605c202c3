package proxy

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// MaxCommentBytes bounds the comment a Set may carry in the sidecar
// extension (sidecarpb.Request.comment).
const MaxCommentBytes = 1024

// authorship names who sends the Set of ctx, and why: the requester and
// the comment of its sidecar extension, which must be at most
// MaxCommentBytes of UTF-8 without control characters other than tab.
func authorship(ctx context.Context, ext *sidecarpb.Request) (journal.Sender, error) {
	c := ext.GetComment()
	switch {
	case len(c) > MaxCommentBytes:
		return journal.Sender{}, status.Errorf(codes.InvalidArgument,
			"sidecar extension: the comment is %d bytes long; at most %d are kept", len(c), MaxCommentBytes)
	case !utf8.ValidString(c):
		return journal.Sender{}, status.Error(codes.InvalidArgument, "sidecar extension: the comment is not valid UTF-8")
	}
	for _, r := range c {
		if unicode.IsControl(r) && r != '\t' {
			return journal.Sender{}, status.Errorf(codes.InvalidArgument,
				"sidecar extension: the comment holds the control character %U; write it on one line", r)
		}
	}
	return journal.Sender{Author: requester(ctx), Comment: c}, nil
}

// Identity kinds, as authorization names them (package authz).
const (
	IdentityUser        = "user"
	IdentityCertificate = "certificate"
)

type authorizedKey struct{}

// authorized is the identity authorization accepted for an RPC.
type authorized struct{ kind, name string }

// WithAuthorized returns ctx naming the identity whose role authorization
// (--authz-file, package authz) accepted for the RPC of ctx: kind
// IdentityUser (a username whose password matched) or IdentityCertificate
// (the common name of the verified client certificate). The journal then
// names that identity as the author of what the RPC does: one rule for
// authorization and authorship (docs/security.md, "Identity").
func WithAuthorized(ctx context.Context, kind, name string) context.Context {
	return context.WithValue(ctx, authorizedKey{}, authorized{kind, name})
}

// requester names the client of ctx for the journal, by its most
// trustworthy identity (docs/security.md, "Identity"). With authorization
// on, the identity it accepted (WithAuthorized): a user whose password it
// verified by its username, over a shared certificate, or a certificate by
// its subject ("cert:CN=..."). Without, nothing verifies a username: the
// verified certificate's subject, else the username it sent, else its
// address. Never a password.
func requester(ctx context.Context) string {
	if a, ok := ctx.Value(authorizedKey{}).(authorized); ok {
		if a.kind == IdentityCertificate {
			if s := certificateSubject(ctx); s != "" {
				return s
			}
			return printable("cert:CN="+a.name, maxAuthorBytes)
		}
		return printable(a.name, maxAuthorBytes)
	}
	if s := certificateSubject(ctx); s != "" {
		return s
	}
	if u := metadata.ValueFromIncomingContext(ctx, "username"); len(u) == 1 && u[0] != "" {
		return printable(u[0], maxAuthorBytes)
	}
	if addr := peerAddr(ctx); addr != "" {
		return addr
	}
	return "unknown"
}

// certificateSubject is "cert:" and the subject of the client's verified
// certificate, "" without one.
func certificateSubject(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 && len(info.State.VerifiedChains[0]) > 0 {
			return subjectOf(info.State.VerifiedChains[0][0])
		}
	}
	return ""
}

// peerAddr is the host of the client of ctx, without its port (a new one
// on every connection: it would make one client many authors), "" if
// unknown.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if t, ok := p.Addr.(*net.TCPAddr); ok { // every Set's: spare formatting the port to cut it off
			return t.AddrPort().Addr().Unmap().String()
		}
		if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return host
		}
		return p.Addr.String()
	}
	return ""
}

func subjectOf(cert *x509.Certificate) string {
	return printable(fmt.Sprintf("cert:%s", cert.Subject.String()), maxAuthorBytes)
}

// maxAuthorBytes bounds the author recorded per proposal: a username a
// client sends may be as long as gRPC's headers allow.
const maxAuthorBytes = 256

// printable is s cut to at most max bytes (on a rune boundary, "…" added)
// with control characters replaced by U+FFFD: what tables, logs and the
// trace can show on one line.
func printable(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
