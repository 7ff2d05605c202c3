package sidecar_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// syncBuffer is a bytes.Buffer safe for Run's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestNewRun starts a sidecar on a free port in front of the simulated
// device, sends a Set through it, and stops it by ending Run's context.
func TestNewRun(t *testing.T) {
	dev := testbed.StartT(t, testbed.Options{Logger: discardLogger()})
	var stdout syncBuffer
	s, err := sidecar.New(sidecar.Config{
		Target:         dev.Addr(),
		JournalDir:     t.TempDir(),
		JournalNoSync:  true,
		Listen:         "127.0.0.1:0",
		MetricsAddr:    "127.0.0.1:0",
		BackoffInitial: 5 * time.Millisecond,
		BackoffMax:     50 * time.Millisecond,
		Logger:         discardLogger(),
		Stdout:         &stdout,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, port, _ := net.SplitHostPort(s.Addr()); port == "0" || port == "" {
		t.Fatalf("Addr() = %q, want the bound port", s.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	}
	want := "gnmi-sidecar listening on " + s.Addr() + "\ngnmi-sidecar metrics on " + s.MetricsAddr() + "\n"
	if got := stdout.String(); got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}

	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	path := &gpb.Path{Elem: []*gpb.PathElem{
		{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth0"}},
		{Name: "config"}, {Name: "description"},
	}}
	setCtx, setCancel := context.WithTimeout(ctx, 20*time.Second)
	defer setCancel()
	for !s.Agent().Status().Connected {
		if setCtx.Err() != nil {
			t.Fatal("the agent did not connect to the device")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = gpb.NewGNMIClient(conn).Set(setCtx, &gpb.SetRequest{Update: []*gpb.Update{{
		Path: path, Val: &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "through the sidecar"}},
	}}})
	if err != nil {
		t.Fatalf("Set: %v", err)
	}
	leaves, err := dev.ConfigLeaves()
	if err != nil {
		t.Fatal(err)
	}
	if got := leaves["/interfaces/interface[name=eth0]/config/description"].GetStringVal(); got != "through the sidecar" {
		t.Errorf("the device holds %q after the Set", got)
	}
	c, err := s.Journal().Configuration(setCtx)
	if err != nil {
		t.Fatal(err)
	}
	if c.GetLastIndex() != 1 {
		t.Errorf("the journal's last index is %d, want 1", c.GetLastIndex())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after ctx ended: %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if _, err := net.Dial("tcp", s.Addr()); err == nil {
		t.Error("still listening after Run returned")
	}
}

// TestNewRefuses checks that New names the Config field it cannot work
// with, and releases what it acquired.
func TestNewRefuses(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	valid := func(journalDir string) sidecar.Config {
		return sidecar.Config{Target: "127.0.0.1:1", JournalDir: journalDir, JournalNoSync: true,
			Listen: "127.0.0.1:0", Logger: discardLogger()}
	}
	for _, tc := range []struct {
		name      string
		edit      func(*sidecar.Config)
		wantField string
		wantErr   string
	}{
		{"no target", func(c *sidecar.Config) { c.Target = "" }, "Target", "required"},
		{"no journal directory", func(c *sidecar.Config) { c.JournalDir = "" }, "JournalDir", "required"},
		{"no listen address", func(c *sidecar.Config) { c.Listen = "" }, "Listen", "required"},
		{"negative message size", func(c *sidecar.Config) { c.MaxRecvMsgSize = -1 }, "MaxRecvMsgSize", "positive"},
		{"metrics address without port", func(c *sidecar.Config) { c.MetricsAddr = "localhost" }, "MetricsAddr", "missing port"},
		{"listen address in use", func(c *sidecar.Config) { c.Listen = busy.Addr().String() }, "Listen", "address already in use"},
		{"metrics address in use", func(c *sidecar.Config) { c.MetricsAddr = busy.Addr().String() }, "MetricsAddr", "address already in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := valid(dir)
			tc.edit(&cfg)
			s, err := sidecar.New(cfg)
			var fe *sidecar.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.wantField || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New: %v (sidecar %v); want a FieldError about %s saying %q", err, s, tc.wantField, tc.wantErr)
			}
			// Whatever New opened is closed: the journal opens again.
			second, err := sidecar.New(valid(dir))
			if err != nil {
				t.Fatalf("New after the refusal: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := second.Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}
