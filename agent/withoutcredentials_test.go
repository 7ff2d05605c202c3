package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/metadata"
)

func TestWithoutCredentials(t *testing.T) {
	md := metadata.MD{"username": {"carol"}, "password": {"pw"}, "authorization": {"Bearer x"},
		"x-custom": {"1"}, "x-tenant": {"blue", "red"}}
	want := metadata.MD{"x-custom": {"1"}, "x-tenant": {"blue", "red"}}
	got := WithoutCredentials(md)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithoutCredentials (-want +got):\n%s", diff)
	}
	got["x-custom"][0] = "changed"
	if md["x-custom"][0] != "1" {
		t.Error("WithoutCredentials shares its input's values")
	}
	if got := WithoutCredentials(metadata.MD{"username": {"carol"}}); got != nil {
		t.Errorf("credentials alone: %v, want nil", got)
	}
	a := &Agent{opts: Options{Username: "sidecar"}}
	if got := a.clientMetadata(md); len(got.Get("username")) > 0 || len(got.Get("x-custom")) != 1 {
		t.Errorf("with a device account: %v, want the custom headers alone", got)
	}
	a = &Agent{}
	if got := a.clientMetadata(md); len(got.Get("username")) != 1 {
		t.Errorf("without a device account: %v, want all of it", got)
	}
}
