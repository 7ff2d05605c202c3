package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
)

// The costs of taking before-images from the device (docs/values.md,
// "Before-images: what the device held"): a Set's read of the device at a
// path the journal has not read (beforeImage), and the onboarding
// baseline of a configured device (baseline).

// beforeImageLeaf names the interface of the i-th Set of the beforeimage
// row: an entry the device holds and the sidecar's journal has not read.
func beforeImageLeaf(i int) string { return fmt.Sprintf("bi-%d", i) }

// beforeImageOthers is how many more leaves (bench0…) the devices of the
// beforeimage row hold, configuration no Set of the row touches.
const beforeImageOthers = 1000

// beforeImage: the cost of a before-image read. On a fresh rig (the
// in-process sidecar runs with sidecar.Config.Baseline off, as serve
// --baseline off) both devices are seeded straight, not through the
// sidecar, with cfg.sets interfaces bi-N holding a description, and
// beforeImageOthers more leaves. One client then Sets each bi-N's
// description once (outside the journal's read scopes: the sidecar Gets
// the device at /interfaces/interface[name=bi-N] before journaling the
// Set) and then again (inside them: no Get), on each side, in alternating
// blocks of 50; in blocks of their own, the same entries are read straight
// from the direct device with the Get the sidecar makes. The first row is
// the Set that reads, the second the Set that does not; the first's note
// gives their difference, the read's cost.
func (b *bencher) beforeImage(ctx context.Context) ([]row, error) {
	r, err := b.startRig(ctx)
	if err != nil {
		return nil, err
	}
	defer r.close()
	n := b.cfg.sets
	for _, s := range []*side{r.sidecar, r.direct} {
		if err := seedDevice(ctx, s.dev.Addr(), n); err != nil {
			return nil, err
		}
	}
	j := r.sidecar.sidecar.Journal()
	if j.Covered(benchLeafPath(beforeImageLeaf(0))) {
		return nil, fmt.Errorf("the journal has read %s before the row: no before-image read to measure", beforeImageLeaf(0))
	}
	var unread, read, directFirst, directAgain, directGet []time.Duration
	const block = 50
	for done := 0; done < n; done += block {
		k := min(block, n-done)
		for _, m := range []struct {
			c    gpb.GNMIClient
			into *[]time.Duration
			what string
		}{
			{r.sidecar.client, &unread, "sidecar, path not read"},
			{r.sidecar.client, &read, "sidecar, path read"},
			{r.direct.client, &directFirst, "direct, first Set"},
			{r.direct.client, &directAgain, "direct, Set again"},
		} {
			for i := done; i < done+k; i++ {
				d, err := setLeaf(ctx, m.c, beforeImageLeaf(i), fmt.Sprintf("%s %d", m.what, i))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", m.what, err)
				}
				*m.into = append(*m.into, d)
			}
		}
		for i := done; i < done+k; i++ {
			d, err := getEntry(ctx, r.direct.client, beforeImageLeaf(i))
			if err != nil {
				return nil, fmt.Errorf("direct Get: %w", err)
			}
			directGet = append(directGet, d)
		}
	}
	// Every Set that was to read did: its entry is a read scope now.
	for i := range n {
		if !j.Covered(benchLeafPath(beforeImageLeaf(i))) {
			return nil, fmt.Errorf("the journal has not read %s after its Set: no before-image read was measured", beforeImageLeaf(i))
		}
	}
	p50u, p50r := percentile(unread, 0.5), percentile(read, 0.5)
	first := newRow("Set p50, path not read yet (before-image Get)", "ms", "lower", ms(p50u), ms(percentile(directFirst, 0.5)))
	first.Note = fmt.Sprintf("each Set to an interface the device holds (seeded straight, with %d more leaves) and the journal has not read; "+
		"the same Sets again, path read: p50 %.3f ms; the read's cost: %.3f ms; "+
		"the sidecar's Get of the entry (/interfaces/interface[name=bi-N], CONFIG, JSON_IETF) straight to the direct device: p50 %.3f ms",
		beforeImageOthers, ms(p50r), ms(p50u-p50r), ms(percentile(directGet, 0.5)))
	again := newRow("Set p50, path already read", "ms", "lower", ms(p50r), ms(percentile(directAgain, 0.5)))
	return []row{first, again}, nil
}

// seedDevice Sets, straight on the device at addr, the interfaces bi-0…
// bi-(entries-1) with a description and beforeImageOthers leaves bench0….
func seedDevice(ctx context.Context, addr string, entries int) error {
	conn, err := dialInsecure(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	dev := gpb.NewGNMIClient(conn)
	if err := preload(ctx, dev, beforeImageOthers); err != nil {
		return err
	}
	for base := 0; base < entries; base += preloadBatch {
		req := &gpb.SetRequest{}
		for i := base; i < min(base+preloadBatch, entries); i++ {
			req.Update = append(req.Update, &gpb.Update{Path: benchLeafPath(beforeImageLeaf(i)), Val: benchStr("on the device")})
		}
		if _, err := dev.Set(ctx, req); err != nil {
			return fmt.Errorf("seeding the device: %w", err)
		}
	}
	return nil
}

// getEntry reads /interfaces/interface[name=NAME] as the sidecar's
// before-image read does (package devread) and returns how long it took.
func getEntry(ctx context.Context, c gpb.GNMIClient, name string) (time.Duration, error) {
	p := &gpb.Path{Elem: []*gpb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": name}}}}
	start := time.Now()
	if _, err := c.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{p}, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF}); err != nil {
		return 0, fmt.Errorf("gNMI Get %s: %w", name, err)
	}
	return time.Since(start), nil
}

// baselineLog is what serve logs (--log-format json) when its onboarding
// baseline is journaled (proxy.Server.SyncFrom), and when its agent
// connects to the device.
type baselineLog struct {
	Time  time.Time `json:"time"`
	Msg   string    `json:"msg"`
	First uint64    `json:"first"`
	Last  uint64    `json:"last"`
	Units int       `json:"units"`
	Read  int64     `json:"read"` // ns: SyncFrom's start (waiting for the device synced) to the read's answer
	Took  int64     `json:"took"` // ns: the whole SyncFrom
}

const (
	baselineJournaledMsg = "baseline journaled"
	connectedMsg         = "connected to device"
)

// findLog returns the first of serve's JSON log lines whose message starts
// with msg.
func findLog(stderr, msg string) (baselineLog, bool) {
	for line := range strings.SplitSeq(stderr, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		var l baselineLog
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, msg) {
			return l, true
		}
	}
	return baselineLog{}, false
}

// baseline: the onboarding baseline of a configured device. A device is
// seeded straight with cfg.leaves leaves; serve (the child process, with
// --baseline auto, its default) starts on a new journal in front of it.
// The rows: from the child's start to the baseline journaled (the time of
// its "baseline journaled" log line; the note gives the child's CPU time
// until then, which a loaded machine does not stretch), split into the device read and the
// journaling as serve logs them, the read compared with the same Get
// straight to the device; and the child's RSS after it, once settled.
func (b *bencher) baseline(ctx context.Context) ([]row, error) {
	n := b.cfg.leaves
	dev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	defer dev.Stop()
	conn, err := dialInsecure(dev.Addr())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	direct := gpb.NewGNMIClient(conn)
	if err := preload(ctx, direct, n); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-baseline-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := b.startChild(ctx, dev.Addr(), dir, "--baseline", "auto", "--log-level", "info", "--log-format", "json")
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var done baselineLog
	var cpu time.Duration
	if err := benchPoll(ctx, 30*time.Minute, "the baseline journaled", func(context.Context) (bool, error) {
		var ok bool
		if done, ok = findLog(c.stderr.String(), baselineJournaledMsg); !ok {
			return false, nil
		}
		var err error
		cpu, err = c.cpu()
		return err == nil, err
	}); err != nil {
		return nil, fmt.Errorf("%w; stderr: %s", err, c.stderr.String())
	}
	total := done.Time.Sub(c.started)
	read, took := time.Duration(done.Read), time.Duration(done.Took)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(rssSettle):
	}
	mem, err := c.rss()
	if err != nil {
		return nil, err
	}
	// The same read straight from the device: the median of 3. The answer
	// exceeds gRPC's default 4 MiB; the sidecar takes up to 64 MiB from the
	// device.
	var gets []time.Duration
	for range 3 {
		start := time.Now()
		req := &gpb.GetRequest{Path: []*gpb.Path{{}}, Type: gpb.GetRequest_CONFIG, Encoding: gpb.Encoding_JSON_IETF}
		if _, err := direct.Get(ctx, req, grpc.MaxCallRecvMsgSize(64<<20)); err != nil {
			return nil, fmt.Errorf("gNMI Get / straight to the device: %w", err)
		}
		gets = append(gets, time.Since(start))
	}
	label := fmt.Sprintf("baseline of %d leaves", n)
	all := sidecarOnly(label+", start → journaled", "s", "lower", total.Seconds())
	all.Note = fmt.Sprintf("serve started on a new journal in front of a device holding them (seeded straight); %d units (leaves, list entries, leaf-lists) read and journaled as proposals %d–%d, tagged baseline; "+
		"serve's CPU time until then: %.1f s", done.Units, done.First, done.Last, cpu.Seconds())
	if conn, ok := findLog(c.stderr.String(), connectedMsg); ok {
		all.Note += fmt.Sprintf("; connected to the device %.3f s after the start", conn.Time.Sub(c.started).Seconds())
	}
	readRow := newRow(label+", device read", "s", "lower", read.Seconds(), percentile(gets, 0.5).Seconds())
	readRow.Note = "from the baseline's start (waiting until the device is connected and synced) to the answer of its Get of / (CONFIG, JSON_IETF); direct: the same Get straight to the device, median of 3"
	journaling := sidecarOnly(label+", journaling", "s", "lower", (took - read).Seconds())
	memRow := sidecarOnly(fmt.Sprintf("RSS of serve, after a baseline of %d leaves", n), "MB", "lower", mem.total)
	memRow.Note = mem.String()
	return []row{all, readRow, journaling, memRow}, nil
}
