package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

	writers, total, stopWriters := startWriters(t, s.sidecar.addr, clients, 0, rand.Uint64())

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
// another process, cannot be created, or whose files are damaged stops
// gnmi-sidecar at start-up with a non-zero exit and one line saying what is
// wrong, naming the damaged file.
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

	// Journals with a table, a value log entry (a 100 KiB value) and the
	// other files of Badger's, one of which is damaged.
	damaged := func(file string, damage func([]byte) []byte) (dir, name string) {
		dir = t.TempDir()
		j, err := journal.Open(dir, journal.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range []string{"small", strings.Repeat("x", 100<<10)} {
			p := leafPath(fmt.Sprintf("eth%d", k), "description")
			if _, err := j.ProposeChange(context.Background(), []*journal.Op{{Kind: journal.OpUpdate, Path: p,
				Values: []*journal.Leaf{{Path: p, Value: strVal(v)}}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		names, err := filepath.Glob(filepath.Join(dir, file))
		if err != nil || len(names) == 0 {
			t.Fatalf("no %s in the journal: %v", file, err)
		}
		name = names[0]
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, damage(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir, name
	}
	middle := func(b []byte) []byte {
		for k := len(b) / 2; k < len(b)/2+64 && k < len(b); k++ {
			b[k] ^= 0x5a
		}
		return b
	}
	zeroed := func(b []byte) []byte { return make([]byte, len(b)) }
	manifest, manifestFile := damaged("MANIFEST", func([]byte) []byte { return []byte("not a manifest") })
	table, tableFile := damaged("*.sst", middle)
	zeroTable, zeroTableFile := damaged("*.sst", zeroed)
	vlog, vlogFile := damaged("000001.vlog", middle)
	registry, registryFile := damaged("KEYREGISTRY", zeroed)

	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"locked by another process", locked, []string{locked, "in use by another gnmi-sidecar"}},
		{"cannot be created", filepath.Join(file, "journal"), []string{"--journal-dir", "not a directory"}},
		{"a MANIFEST that is not one", manifest, []string{manifestFile + " is damaged", "bad magic"}},
		{"a damaged table", table, []string{"table " + tableFile + " is damaged"}},
		{"a zeroed table", zeroTable, []string{"table " + zeroTableFile + " is damaged"}},
		{"a damaged value log", vlog, []string{vlogFile, "cannot be read", "journal is damaged"}},
		{"a damaged key registry", registry, []string{registryFile + " is damaged"}},
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
			// One line says what is wrong; Badger may have logged before it.
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			for _, l := range lines[:len(lines)-1] {
				if !strings.Contains(l, "level=") {
					t.Errorf("stderr has more than the error and log lines:\n%s", stderr.String())
					break
				}
			}
			for _, want := range c.want {
				if !strings.Contains(strings.ToLower(lines[len(lines)-1]), strings.ToLower(want)) {
					t.Errorf("error line %q does not mention %q", lines[len(lines)-1], want)
				}
			}
		})
	}
}
