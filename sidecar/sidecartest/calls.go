package sidecartest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// callTimeout bounds each call the Sidecar's helpers make; tests finish
// far sooner.
const callTimeout = 20 * time.Second

// Set sends req through the proxy, bounded to 20 s, asking for the
// sidecar's receipt (an empty sidecar extension) unless req carries the
// sidecar's extension already: its reply carries the Response extension
// tests read. A test of what a client that does not ask gets uses Client.
func (s *Sidecar) Set(t testing.TB, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return s.Client.Set(ctx, AskReceipt(req))
}

// AskReceipt returns req with an empty sidecar extension added, unless it
// carries one: the sidecar then puts its receipt (the Response extension)
// in the reply.
func AskReceipt(req *gpb.SetRequest) *gpb.SetRequest {
	for _, e := range req.GetExtension() {
		if e.GetRegisteredExt().GetId() == gnmi_ext.ExtensionID_EID_EXPERIMENTAL {
			return req
		}
	}
	out := proto.CloneOf(req)
	out.Extension = append(out.Extension, &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: gnmi_ext.ExtensionID_EID_EXPERIMENTAL}}})
	return out
}

// MustSet is Set failing the test on an error.
func (s *Sidecar) MustSet(t testing.TB, req *gpb.SetRequest) *gpb.SetResponse {
	t.Helper()
	resp, err := s.Set(t, req)
	if err != nil {
		t.Fatalf("Set through the proxy: %v", err)
	}
	return resp
}

// Settle waits until the journal records every Set acknowledged so far
// (agent.Agent.Settle): call it before reading the journal directly.
func (s *Sidecar) Settle(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := s.Agent.Settle(ctx); err != nil {
		t.Fatalf("waiting for the journal to record the acknowledged Sets: %v", err)
	}
}

// LastIndex returns the journal's newest proposal index, once settled.
func (s *Sidecar) LastIndex(t testing.TB) uint64 {
	t.Helper()
	s.Settle(t)
	c, err := s.Journal.Configuration(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c.GetLastIndex()
}

// Proposal returns journaled proposal i, once settled.
func (s *Sidecar) Proposal(t testing.TB, i uint64) *journal.Proposal {
	t.Helper()
	s.Settle(t)
	p, err := s.Journal.Proposal(t.Context(), i)
	if err != nil {
		t.Fatalf("journal.Proposal(%d): %v", i, err)
	}
	return p
}

// OutstandingCommit returns the journal's outstanding commit-confirmed,
// once settled; nil if there is none.
func (s *Sidecar) OutstandingCommit(t testing.TB) *journal.CommitConfirm {
	t.Helper()
	s.Settle(t)
	rec, err := s.Journal.CommitConfirm(t.Context())
	if errors.Is(err, journal.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// WantDeviceLeaf checks that the device holds want at the configuration
// leaf path (nil: nothing), reporting a mismatch with t.Errorf.
func (s *Sidecar) WantDeviceLeaf(t testing.TB, path string, want *gpb.TypedValue) {
	t.Helper()
	got, ok := DeviceLeaves(t, s.Dev)[path]
	switch {
	case want == nil && ok:
		t.Errorf("device holds %v at %s, want nothing", got, path)
	case want != nil && !ok:
		t.Errorf("device holds nothing at %s, want %v", path, want)
	case want != nil && !proto.Equal(got, want):
		t.Errorf("device holds %v at %s, want %v", got, path, want)
	}
}

// Subscribe opens a Subscribe stream through the proxy, living as long as
// ctx, and sends req on it.
func (s *Sidecar) Subscribe(t testing.TB, ctx context.Context, req *gpb.SubscribeRequest) gpb.GNMI_SubscribeClient {
	t.Helper()
	stream, err := s.Client.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe through the proxy: %v", err)
	}
	// io.EOF: the stream has already ended; Recv returns its status.
	if err := stream.Send(req); err != nil && err != io.EOF {
		t.Fatalf("sending the subscription: %v", err)
	}
	return stream
}

// SubscribeToEnd sends the subscription req on c and collects every
// response until the stream ends, bounded to 20 s; it returns them with
// the status the stream ended with (nil: io.EOF). An error opening the
// stream or sending req fails the test.
func SubscribeToEnd(t testing.TB, c gpb.GNMIClient, req *gpb.SubscribeRequest) ([]*gpb.SubscribeResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	stream, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	var out []*gpb.SubscribeResponse
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp)
	}
}

// SubscribeOnce runs the ONCE subscription req on c to its end
// (SubscribeToEnd) and returns the responses; an error ending the stream
// fails the test.
func SubscribeOnce(t testing.TB, c gpb.GNMIClient, req *gpb.SubscribeRequest) []*gpb.SubscribeResponse {
	t.Helper()
	out, err := SubscribeToEnd(t, c, req)
	if err != nil {
		t.Fatalf("ONCE subscription ended with %v after %d responses", err, len(out))
	}
	return out
}
