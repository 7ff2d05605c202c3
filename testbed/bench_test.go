package testbed_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// BenchmarkSet measures one client's Set of one leaf straight to the device
// (the baseline the sidecar's Set latency is compared with), at several
// configuration sizes. Each interface holds 3 config leaves.
func BenchmarkSet(b *testing.B) {
	for _, interfaces := range []int{30, 3000, 33334} {
		b.Run(fmt.Sprintf("leaves=%d", interfaces*3), func(b *testing.B) {
			d := testbed.StartT(b, testbed.Options{})
			c := dialB(b, d.Addr())
			var list []map[string]any
			for i := 0; i < interfaces; i++ {
				name := fmt.Sprintf("eth%d", i)
				list = append(list, map[string]any{"name": name, "config": map[string]any{"name": name, "description": "bench"}})
			}
			js, _ := json.Marshal(map[string]any{"openconfig-interfaces:interfaces": map[string]any{"interface": list}})
			if _, err := c.Set(b.Context(), &gpb.SetRequest{Replace: []*gpb.Update{{Path: &gpb.Path{}, Val: jsonIETF(string(js))}}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := &gpb.SetRequest{Update: []*gpb.Update{upd(b, eth0Desc, str(fmt.Sprintf("v%d", i)))}}
				if _, err := c.Set(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSetNewLeaves measures the shape of a re-push or a preload: a
// Set of 2,000 leaves, each in a new interface entry, straight to a device
// that already holds 100,000 such leaves. leaves/s is the device's rate.
func BenchmarkSetNewLeaves(b *testing.B) {
	const batch, preloaded = 2000, 100_000
	d := testbed.StartT(b, testbed.Options{})
	c := dialB(b, d.Addr())
	next := 0
	request := func() *gpb.SetRequest {
		req := &gpb.SetRequest{Update: make([]*gpb.Update, 0, batch)}
		for range batch {
			req.Update = append(req.Update, &gpb.Update{Path: &gpb.Path{Elem: []*gpb.PathElem{
				{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": fmt.Sprintf("bench%d", next)}},
				{Name: "config"}, {Name: "description"},
			}}, Val: str("preloaded")})
			next++
		}
		return req
	}
	for next < preloaded {
		if _, err := c.Set(b.Context(), request()); err != nil {
			b.Fatal(err)
		}
	}
	reqs := make([]*gpb.SetRequest, b.N)
	for i := range reqs {
		reqs[i] = request()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Set(b.Context(), reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "leaves/s")
}

// BenchmarkSetAfterIdle measures one client's Set of one leaf straight to
// the device, back to back ("hot") and each right after the client's
// goroutine blocked in an fdatasync of a small write, as the sidecar's
// device Set always follows its journal's: the same round trip, from
// threads that went idle (docs/bench.md, "Where a Set's time goes"). It
// reports the median round trip, and the median fdatasync.
func BenchmarkSetAfterIdle(b *testing.B) {
	for _, afterSync := range []bool{false, true} {
		name := "hot"
		if afterSync {
			name = "after-fdatasync"
		}
		b.Run(name, func(b *testing.B) {
			d := testbed.StartT(b, testbed.Options{})
			c := dialB(b, d.Addr())
			f, err := os.CreateTemp(b.TempDir(), "sync")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			block := make([]byte, 512)
			var rtt, syncs []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if afterSync {
					start := time.Now()
					if _, err := f.Write(block); err != nil {
						b.Fatal(err)
					}
					if err := unix.Fdatasync(int(f.Fd())); err != nil {
						b.Fatal(err)
					}
					syncs = append(syncs, time.Since(start))
				}
				req := &gpb.SetRequest{Update: []*gpb.Update{upd(b, eth0Desc, str(fmt.Sprintf("v%d", i)))}}
				start := time.Now()
				if _, err := c.Set(b.Context(), req); err != nil {
					b.Fatal(err)
				}
				rtt = append(rtt, time.Since(start))
			}
			b.ReportMetric(float64(median(rtt).Microseconds()), "p50-µs/set")
			if afterSync {
				b.ReportMetric(float64(median(syncs).Microseconds()), "p50-µs/fdatasync")
			}
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
