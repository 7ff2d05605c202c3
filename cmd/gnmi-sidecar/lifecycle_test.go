package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// TestSIGTERMDuringSets stops the sidecar with SIGTERM while clients keep
// sending Sets to a device that takes 20 ms per Set: it must exit 0, and
// every Set it acknowledged must be on the device; Sets it did not get to
// stay journaled and reach the device on the next run.
func TestSIGTERMDuringSets(t *testing.T) {
	const clients = 6
	s := startStack(t, []string{"--set-delay", "20ms"}, nil)

	writers, total, stopWriters := startWriters(t, s.sidecar.addr, clients)

	poll(t, 20*time.Second, "30 acknowledged Sets", func() (bool, string) {
		n := total.Load()
		return n >= 30, fmt.Sprintf("%d acknowledged", n)
	})
	s.stopWith(t, syscall.SIGTERM, 20*time.Second)
	stopWriters()

	// With the sidecar stopped: every acknowledged Set is on the device.
	check := func(when string) {
		t.Helper()
		for _, w := range writers {
			last := 0
			if len(w.acked) > 0 {
				last = w.acked[len(w.acked)-1].seq
			}
			v, ok := mustGetLeaf(t, s.devClient, descPath(w.intf))
			seq, err := w.seqOf(v)
			switch {
			case !ok && last > 0:
				t.Errorf("%s: client %d: the device has no %s description; last acknowledged %q", when, w.k, w.intf, w.value(last))
			case !ok:
			case err != nil:
				t.Errorf("%s: client %d: %v", when, w.k, err)
			case seq < last:
				t.Errorf("%s: client %d: the device holds %q, older than the acknowledged %q: an acknowledged Set was lost", when, w.k, v, w.value(last))
			case seq > w.sent:
				t.Errorf("%s: client %d: the device holds %q, never sent", when, w.k, v)
			}
		}
	}
	check("after SIGTERM")

	// The next run applies whatever stayed journaled, and the trace of
	// both runs (a graceful stop loses no line) passes the checker.
	s.startSidecar(t, "127.0.0.1:0")
	s.waitQuiescent(t, 20*time.Second, nil)
	cfg, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	s.waitQuiescent(t, 5*time.Second, cfg)
	check("after the restart")
	var acked int
	for _, w := range writers {
		acked += len(w.acked)
		t.Logf("client %d: %d sent, %d acknowledged, errors %v", w.k, w.sent, len(w.acked), w.errs)
	}
	t.Logf("%d Sets acknowledged in all", acked)
}

// TestServeRefusesBadJournal: a journal directory that is locked by
// another process, cannot be created, or is corrupt stops gnmi-sidecar at
// start-up with a non-zero exit and one line saying what is wrong.
func TestServeRefusesBadJournal(t *testing.T) {
	sidecarBin, _ := binaries(t)

	locked := t.TempDir()
	j, err := journal.Open(locked, journal.Options{NoSync: true, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })

	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	corrupt := t.TempDir()
	j2, err := journal.Open(corrupt, journal.Options{NoSync: true, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := j2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, "MANIFEST"), []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"locked by another process", locked, []string{locked, "in use by another gnmi-sidecar"}},
		{"cannot be created", filepath.Join(file, "journal"), []string{"--journal-dir", "not a directory"}},
		{"corrupt", corrupt, []string{corrupt, "manifest"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, sidecarBin, "serve", "--target", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--journal-dir", c.dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("gnmi-sidecar serve: %v; want a non-zero exit (stderr %q)", err, stderr.String())
			}
			if ctx.Err() != nil {
				t.Fatal("gnmi-sidecar did not stop by itself")
			}
			if stdout.Len() > 0 {
				t.Errorf("it printed %q before failing", stdout.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 {
				t.Errorf("stderr has %d lines, want one:\n%s", len(lines), stderr.String())
			}
			for _, want := range c.want {
				if !strings.Contains(strings.ToLower(lines[len(lines)-1]), strings.ToLower(want)) {
					t.Errorf("error line %q does not mention %q", lines[len(lines)-1], want)
				}
			}
		})
	}
}
