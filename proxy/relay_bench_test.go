package proxy_test

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// BenchmarkSubscribeRelay measures the Subscribe relay alone, against a
// device that costs next to nothing (frameDevice sending one prepared
// notification, the size of the simulated device's ON_CHANGE update of
// one leaf), through the sidecar and straight to the device. The client
// reads the notifications as bytes, so that the sidecar's share is all
// the difference between the two.
//
//   - stream: the device sends notifications as fast as the client reads
//     them; ns/op is per notification received.
//   - poll: the client polls and the device answers each poll with one
//     notification; ns/op is a round trip, and p50-µs and p99-µs its
//     distribution.
func BenchmarkSubscribeRelay(b *testing.B) {
	update := marshal(b, &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_Update{Update: &gpb.Notification{
		Timestamp: time.Now().UnixNano(),
		Update: []*gpb.Update{{
			Path: sidecartest.Path(b, "/interfaces/interface[name=eth3]/config/description"),
			Val:  sidecartest.StringVal("uplink to core-3"),
		}},
	}}})
	sync := marshal(b, &gpb.SubscribeResponse{Response: &gpb.SubscribeResponse_SyncResponse{SyncResponse: true}})
	poll := marshal(b, &gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Poll{Poll: &gpb.Poll{}}})
	dev := newFrameDevice(b, func(stream grpc.ServerStream, _ []byte) error {
		if err := stream.SendMsg(&wireMsg{sync}); err != nil {
			return err
		}
		for {
			var req wireMsg
			if err := stream.RecvMsg(&req); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if len(req.b) == 0 { // an empty request: stream until the client ends
				for stream.SendMsg(&wireMsg{update}) == nil {
				}
				return nil
			}
			if err := stream.SendMsg(&wireMsg{update}); err != nil {
				return err
			}
		}
	})
	sc := sidecartest.Start(b, sidecartest.Options{Target: dev.addr})
	sides := []struct{ name, addr string }{{"direct", dev.addr}, {"sidecar", sc.Addr}}
	first := marshal(b, frameRequest(b, gpb.SubscriptionList_POLL))

	// subscribe subscribes through addr and reads the sync.
	subscribe := func(b *testing.B, addr string) grpc.ClientStream {
		ctx, cancel := context.WithCancel(b.Context())
		b.Cleanup(cancel)
		stream, err := sidecartest.Conn(b, addr).NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, gpb.GNMI_Subscribe_FullMethodName, wireCall)
		if err != nil {
			b.Fatal(err)
		}
		if err := stream.SendMsg(&wireMsg{first}); err != nil {
			b.Fatal(err)
		}
		var resp wireMsg
		if err := stream.RecvMsg(&resp); err != nil {
			b.Fatalf("waiting for the sync: %v", err)
		}
		return stream
	}
	for _, side := range sides {
		b.Run("stream/"+side.name, func(b *testing.B) {
			stream := subscribe(b, side.addr)
			if err := stream.SendMsg(&wireMsg{}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(update)))
			b.ReportAllocs()
			for b.Loop() {
				var resp wireMsg
				if err := stream.RecvMsg(&resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, side := range sides {
		b.Run("poll/"+side.name, func(b *testing.B) {
			stream := subscribe(b, side.addr)
			var rtts []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if err := stream.SendMsg(&wireMsg{poll}); err != nil {
					b.Fatal(err)
				}
				var resp wireMsg
				if err := stream.RecvMsg(&resp); err != nil {
					b.Fatal(err)
				}
				rtts = append(rtts, time.Since(start))
			}
			slices.Sort(rtts)
			b.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(rtts[len(rtts)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}
