package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// soakClients Set soakClients leaves (one each) in the soak row;
// soakSlices is the number of slices its throughput is measured over.
const (
	soakClients = 16
	soakSlices  = 10
)

// soakSample is one slice of the soak row: its Sets/s, and the child's
// RSS and journal directory size at its end.
type soakSample struct {
	rate     float64
	rss      rss // MB
	dirBytes int64
}

// soak: cfg.soak Sets through serve (a child process, default options) by
// soakClients clients, each Setting its own leaf as fast as it can. The
// throughput of each 10 % slice, the RSS (sampled every rssSampleEvery
// too, for the peak) and the journal directory's size at each slice's end
// show whether the sidecar holds its first minute's rate and memory once
// retention runs: the row is the worst slice against the first.
func (b *bencher) soak(ctx context.Context) ([]row, error) {
	dev, err := b.startDevice(ctx)
	if err != nil {
		return nil, err
	}
	defer dev.Stop()
	dir, err := os.MkdirTemp("", "gnmi-sidecar-bench-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var extra []string
	if b.cfg.soakHeap != "" {
		extra = append(extra, "--pprof")
	}
	c, err := b.startChild(ctx, dev.Addr(), dir, extra...)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if err := waitConnected(ctx, c.client); err != nil {
		return nil, fmt.Errorf("%w; stderr: %s", err, c.stderr.String())
	}
	conns, closeConns, err := dialClients(&side{addr: c.addr}, soakClients)
	if err != nil {
		return nil, err
	}
	defer closeConns()

	peak, stopSampling := sampleRSS(c)
	defer stopSampling()
	var samples []soakSample
	perSlice := max(b.cfg.soak/soakSlices, soakClients)
	var sent atomic.Int64
	for slice := range soakSlices {
		start := time.Now()
		g, gctx := errgroup.WithContext(ctx)
		for i, conn := range conns {
			g.Go(func() error {
				for k := i; k < perSlice; k += soakClients {
					if _, err := setLeaf(gctx, conn, clientLeaf(i), fmt.Sprintf("v%d", sent.Add(1))); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, fmt.Errorf("slice %d: %w; stderr: %s", slice+1, err, tail(c.stderr.String()))
		}
		s := soakSample{rate: float64(perSlice) / time.Since(start).Seconds()}
		r, err := c.rss()
		if err != nil {
			return nil, err
		}
		s.rss = r
		if s.dirBytes, err = dirSize(dir); err != nil {
			return nil, err
		}
		samples = append(samples, s)
		if b.cfg.soakHeap != "" {
			if err := saveHeap(ctx, c, filepath.Join(b.cfg.soakHeap, fmt.Sprintf("soak-heap-%d.pb.gz", slice+1))); err != nil {
				return nil, err
			}
		}
		b.log.Info("soak slice", "slice", slice+1, "sets_per_s", s.rate, "rss_mb", s.rss.total, "rss_anon_mb", s.rss.anon, "dir_mb", float64(s.dirBytes)/(1<<20))
	}
	stopSampling()

	worst := samples[0]
	for _, s := range samples {
		if s.rate < worst.rate {
			worst = s
		}
	}
	ratio := worst.rate / samples[0].rate
	slow := sidecarOnly("soak: worst 10 % slice / first", "×", "higher", ratio).withTarget("≥ 0.8×", ratio >= 0.8)
	var rates, dirs []string
	for _, s := range samples {
		rates = append(rates, fmt.Sprintf("%.0f", s.rate))
		dirs = append(dirs, fmt.Sprintf("%.0f", float64(s.dirBytes)/(1<<20)))
	}
	warns := strings.Count(c.stderr.String(), "level=WARN")
	slow.Note = fmt.Sprintf("%d Sets, %d clients × own leaf; Sets/s per slice: %s; journal dir MB at each slice's end: %s; WARN lines from serve: %d",
		perSlice*soakSlices, soakClients, strings.Join(rates, " "), strings.Join(dirs, " "), warns)
	mem := sidecarOnly("soak: peak RSS", "MB", "lower", peak()).withTarget("≤ 60 MB", peak() <= 60)
	var rsss []string
	for _, s := range samples {
		rsss = append(rsss, fmt.Sprintf("%.0f (%.0f+%.0f)", s.rss.total, s.rss.anon, s.rss.file))
	}
	mem.Note = "RSS MB at each slice's end (anonymous+file-backed): " + strings.Join(rsss, " ")
	return []row{slow, mem}, nil
}

// rssSampleEvery is how often the soak row samples the child's RSS for its peak.
const rssSampleEvery = 200 * time.Millisecond

// sampleRSS samples c's RSS every rssSampleEvery until stop; peak returns
// the highest seen.
func sampleRSS(c *child) (peak func() float64, stop func()) {
	var mu sync.Mutex
	var high float64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(rssSampleEvery)
		defer t.Stop()
		for {
			if r, err := c.rss(); err == nil {
				mu.Lock()
				high = max(high, r.total)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	peak = func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return high
	}
	return peak, stop
}

// dirSize is the bytes the files under dir take on disk (Badger's files
// are sparse: their apparent size overstates it).
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += diskUsage(info)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("journal directory size: %w", err)
	}
	return total, nil
}

// tail is the last lines of a child's stderr, for an error message.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-5, 0):], "\n")
}

// diskUsage is the bytes a file takes on disk (its allocated blocks).
func diskUsage(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// saveHeap saves the child's heap profile (serve --pprof, after a GC) to file.
func saveHeap(ctx context.Context, c *child, file string) error {
	addr, err := c.metricsAddress(ctx)
	if err != nil {
		return err
	}
	if addr == "" {
		return errors.New("--soak-heap: serve printed no metrics address")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("--soak-heap: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("--soak-heap: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
