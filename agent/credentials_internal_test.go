package agent

import (
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestReleaseCredentialsKeepsAnothersHold: a proposal journaled again after
// a shared transaction failed releases the metadata it held under its
// earlier index only if that index still holds its own, not another
// client's that took the index meanwhile, even an equal one.
func TestReleaseCredentialsKeepsAnothersHold(t *testing.T) {
	a := &Agent{creds: map[uint64]metadata.MD{}}
	mine := metadata.Pairs("username", "alice")
	theirs := metadata.Pairs("username", "alice") // equal, but another request's
	a.holdCredentials(5, theirs)
	a.releaseCredentials(5, mine)
	if got := a.credentials(5); got == nil {
		t.Fatal("releasing my hold of 5 dropped another request's")
	}
	a.holdCredentials(6, mine)
	a.releaseCredentials(6, mine)
	if got := a.credentials(6); got != nil {
		t.Fatalf("my hold of 6 was not released: %v", got)
	}
}

func TestSameCredentials(t *testing.T) {
	alice := metadata.Pairs("username", "alice", "password", "a")
	for _, tc := range []struct {
		name string
		x, y metadata.MD
		want bool
	}{
		{"equal", alice, metadata.Pairs("password", "a", "username", "alice"), true},
		{"both none", nil, metadata.MD{}, true},
		{"other password", alice, metadata.Pairs("username", "alice", "password", "b"), false},
		{"other key, same count", alice, metadata.Pairs("username", "alice", "x-token", "a"), false},
		{"one more key", alice, metadata.Pairs("username", "alice", "password", "a", "x", "y"), false},
		{"repeated value", metadata.Pairs("k", "1", "k", "2"), metadata.Pairs("k", "1"), false},
	} {
		if got := sameCredentials(tc.x, tc.y); got != tc.want {
			t.Errorf("%s: sameCredentials = %v, want %v", tc.name, got, tc.want)
		}
	}
}
