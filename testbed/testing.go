package testbed

import (
	"context"
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// StartT starts a device on 127.0.0.1:0 for a test and stops it when the
// test ends. A persistent device without a StateFile keeps its
// configuration in memory across Stop/Start.
func StartT(t testing.TB, opts Options) *Device {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatalf("testbed.New: %v", err)
	}
	if err := d.Start(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatalf("testbed.Start: %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// SchemaT returns the simulated device's own YANG, loaded as the sidecar
// loads --yang (make run gives it the same files).
func SchemaT(t testing.TB) *leaves.Schema {
	t.Helper()
	dev, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := dev.WriteYANG(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	schema, err := leaves.LoadYANG(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return schema
}
