// Package devread reads the device's configuration: what the sidecar's
// before-images, onboarding baseline, drift watcher, `diff` and `resolve`
// know of the device. Every caller reads through one Reader, so that a
// device that refuses some kinds of read is read the way it answers, and a
// device that cannot be read at all is reported as such, never taken for a
// device that holds nothing.
package devread

import (
	"context"
	"errors"
	"fmt"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Client is what a Reader reads the device with: a gNMI client
// (gpb.GNMIClient), or anything with its Get.
type Client interface {
	Get(ctx context.Context, in *gpb.GetRequest, opts ...grpc.CallOption) (*gpb.GetResponse, error)
}

// Reader reads the device's configuration. It is safe for concurrent use.
type Reader struct {
	dev Client
}

// New returns a Reader of dev.
func New(dev Client) *Reader { return &Reader{dev: dev} }

// ErrUnreadable is wrapped by every error of a device that could not be
// read: the caller knows nothing of the device's values (never "nothing
// there").
var ErrUnreadable = errors.New("the device's configuration cannot be read")

// Read returns the device's configuration at and under each path (of the
// gNMI target target, "" for none; ctx carries the credentials), as updates
// with full paths and no target, values as the device sent them. A path
// the device holds nothing at (NotFound, or an empty answer) contributes
// nothing. Errors wrap ErrUnreadable and are gRPC statuses: the device's
// code, or FailedPrecondition when it answers with a value outside the
// path it was asked for.
func (r *Reader) Read(ctx context.Context, target string, paths ...*gpb.Path) ([]*gpb.Update, error) {
	var out []*gpb.Update
	for _, p := range paths {
		values, err := r.read(ctx, target, p)
		if err != nil {
			return nil, err
		}
		out = append(out, values...)
	}
	return out, nil
}

func (r *Reader) read(ctx context.Context, target string, p *gpb.Path) ([]*gpb.Update, error) {
	req := &gpb.GetRequest{Prefix: gnmipath.TargetPrefix(target), Path: []*gpb.Path{p}, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF}
	resp, err := r.dev.Get(ctx, req)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, unreadable(status.Code(err), "reading the device's values at %s: %v", gnmipath.String(p), status.Convert(err).Message())
	}
	var out []*gpb.Update
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			full := gnmipath.Join(n.GetPrefix(), u.GetPath())
			full.Target = ""
			if !journal.IsUnder(full, p) {
				return nil, unreadable(codes.FailedPrecondition,
					"the device answered a Get of %s with a value at %s", gnmipath.String(p), gnmipath.String(full))
			}
			out = append(out, &gpb.Update{Path: full, Val: u.GetVal()})
		}
	}
	return out, nil
}

// unreadableError is a gRPC status that wraps ErrUnreadable.
type unreadableError struct{ st *status.Status }

func (e *unreadableError) Error() string              { return e.st.Message() }
func (e *unreadableError) GRPCStatus() *status.Status { return e.st }
func (e *unreadableError) Unwrap() error              { return ErrUnreadable }

func unreadable(code codes.Code, format string, args ...any) error {
	return &unreadableError{st: status.New(code, fmt.Sprintf(format, args...))}
}
