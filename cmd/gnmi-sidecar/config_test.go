package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// serveFlags is serve's flag set, for config tests.
func serveFlags(t *testing.T) *pflag.FlagSet {
	t.Helper()
	return newServeCommand(&bytes.Buffer{}, &bytes.Buffer{}).Flags()
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sidecar.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFile(t *testing.T) {
	for _, c := range []struct {
		name    string
		file    string
		args    []string          // command-line flags besides --config
		want    map[string]string // flag values afterwards
		wantErr []string          // substrings of the error
	}{{
		name: "every kind of value",
		file: "listen: 127.0.0.1:1234\ntarget: 10.0.0.1:57400\napply-timeout: 5s\nqueue-when-disconnected: true\nlog-level: debug\n",
		want: map[string]string{"listen": "127.0.0.1:1234", "target": "10.0.0.1:57400", "apply-timeout": "5s",
			"queue-when-disconnected": "true", "log-level": "debug", "journal-dir": "./data"},
	}, {
		name: "drift detection",
		file: "drift-policy: revert\ndrift-interval: 3s\n",
		want: map[string]string{"drift-policy": "revert", "drift-interval": "3s"},
	}, {
		name: "the command line overrides the file",
		file: "listen: 127.0.0.1:1234\njournal-dir: /var/lib/a\n",
		args: []string{"--listen", "127.0.0.1:5678"},
		want: map[string]string{"listen": "127.0.0.1:5678", "journal-dir": "/var/lib/a"},
	}, {
		name: "an empty file changes nothing",
		file: "",
		want: map[string]string{"listen": "127.0.0.1:9339"},
	}, {
		name:    "an unknown key",
		file:    "listen: 127.0.0.1:1234\nlisten-adress: 0.0.0.0:1\n",
		wantErr: []string{":2:", "listen-adress", "unknown option"},
	}, {
		name:    "an invalid duration",
		file:    "apply-timeout: soon\n",
		wantErr: []string{":1:", "apply-timeout", "soon"},
	}, {
		name:    "an invalid boolean",
		file:    "persistent-device: perhaps\n",
		wantErr: []string{"persistent-device", "perhaps"},
	}, {
		name:    "a mapping value",
		file:    "listen:\n  host: 127.0.0.1\n",
		wantErr: []string{"listen", "not a mapping"},
	}, {
		name:    "a key set twice",
		file:    "listen: a:1\nlisten: b:2\n",
		wantErr: []string{"listen", "set twice"},
	}, {
		name:    "no value",
		file:    "target:\n",
		wantErr: []string{"target", "no value"},
	}, {
		name:    "config itself",
		file:    "config: other.yaml\n",
		wantErr: []string{"config", "unknown option"},
	}, {
		name:    "not a mapping",
		file:    "- listen\n",
		wantErr: []string{"want a mapping"},
	}, {
		name:    "not YAML",
		file:    "listen: [unclosed\n",
		wantErr: []string{"sidecar.yaml"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			fs := serveFlags(t)
			path := writeConfig(t, c.file)
			if err := fs.Parse(append([]string{"--config", path}, c.args...)); err != nil {
				t.Fatal(err)
			}
			err := applyConfigFile(fs)
			if len(c.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want one mentioning %q", c.wantErr)
				}
				for _, s := range c.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range c.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestServeRefusesBadConfigFile: a bad file stops serve at start-up, with
// the key named, before it listens or opens the journal.
func TestServeRefusesBadConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, "journal-dir: "+filepath.Join(dir, "journal")+"\nshutdown-timeout: forever\n")
	var stdout, stderr bytes.Buffer
	root := newRootCommand(&stdout, &stderr)
	root.SetArgs([]string{"serve", "--config", path, "--target", "127.0.0.1:1"})
	root.SetOut(&stderr)
	root.SetErr(&stderr)
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "shutdown-timeout") {
			t.Fatalf("serve with a bad config file: %v, want an error naming shutdown-timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve with a bad config file is still running")
	}
	if stdout.Len() > 0 {
		t.Errorf("serve printed %q before refusing its configuration", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "journal")); !os.IsNotExist(err) {
		t.Errorf("the journal directory was created despite the bad configuration (%v)", err)
	}
}
