package agent

// Whose credentials a change's device Set carries (docs/security.md, "The
// credential model"): with a device account (Options.Username or
// Password), every RPC the agent makes carries it; without one, a client's
// change carries the client's own request metadata (credentials and custom
// headers), held in memory from the proposal until its apply finishes, and
// never journaled. Proposals of different clients' metadata never share a
// device Set. The sidecar's own Sets (re-push, rollback, revert) and a
// change whose client's metadata a restart lost carry none.

import (
	"context"
	"maps"
	"slices"

	"google.golang.org/grpc/metadata"
)

type credentialsKey struct{}

// WithCredentials returns ctx carrying md, the request metadata a change
// proposed with ctx (ProposeChange, ProposeConfirmedChange) sends the
// device with: the client's, as a direct client would have sent them. It
// is ignored when the agent has a device account.
func WithCredentials(ctx context.Context, md metadata.MD) context.Context {
	return context.WithValue(ctx, credentialsKey{}, md)
}

func credentialsFrom(ctx context.Context) metadata.MD {
	md, _ := ctx.Value(credentialsKey{}).(metadata.MD)
	return md
}

// deviceAccount reports whether the agent speaks to the device with its own
// account.
func (a *Agent) deviceAccount() bool { return a.opts.Username != "" || a.opts.Password != "" }

// holdCredentials keeps md for proposal i until its apply finishes.
func (a *Agent) holdCredentials(i uint64, md metadata.MD) {
	if a.deviceAccount() || len(md) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.creds[i] = md
}

// dropCredentials forgets the metadata of proposals up to i (finished).
func (a *Agent) dropCredentials(i uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.creds {
		if k <= i {
			delete(a.creds, k)
		}
	}
}

// credentials returns the metadata proposal i's device Set carries (nil:
// none of its client's).
func (a *Agent) credentials(i uint64) metadata.MD {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.creds[i]
}

// sameCredentials reports whether two proposals' metadata are the same
// identity: only then may they share a device Set.
func sameCredentials(x, y metadata.MD) bool {
	if len(x) != len(y) {
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(x)) {
		if !slices.Equal(x[k], y[k]) {
			return false
		}
	}
	return true
}
