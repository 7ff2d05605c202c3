package main

// systemd units: systemd-analyze verify and security when installed; read
// by hand only for ExecStart=, whose options the binary parses.

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// securityThreshold caps systemd-analyze security's exposure (0-100; it prints tenths).
const securityThreshold = 20

// checkUnit checks a gnmi-sidecar service unit. verify wants the binary of
// ExecStart= to exist: it checks a copy that runs the -sidecar binary.
func (c *checker) checkUnit(f file) {
	var argv []string
	for _, l := range strings.Split(strings.ReplaceAll(string(f.data), "\\\n", " "), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "ExecStart="); ok {
			argv = strings.Fields(v)
		}
	}
	if len(argv) < 2 || filepath.Base(strings.TrimLeft(argv[0], "-@:+!")) != "gnmi-sidecar" || argv[1] != "serve" {
		c.errorf(f.name, "ExecStart=: want gnmi-sidecar serve and its options")
		return
	}
	c.checkFlags(argv[2:], f.name+": ExecStart=")
	sa, err := exec.LookPath("systemd-analyze")
	bin, _ := filepath.Abs(c.sidecar)
	if err != nil || c.sidecar == "" {
		fmt.Printf("deploycheck: %s: systemd-analyze not run: it needs systemd-analyze installed and -sidecar\n", f.name)
		return
	}
	dir, err := os.MkdirTemp("", "deploycheck-unit-")
	if err != nil {
		c.errorf(f.name, "systemd-analyze: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	unit := filepath.Join(dir, filepath.Base(f.name))
	exe := strings.TrimLeft(argv[0], "-@:+!")
	if err := os.WriteFile(unit, bytes.ReplaceAll(f.data, []byte(exe), []byte(bin)), 0o644); err != nil {
		c.errorf(f.name, "systemd-analyze: %v", err)
		return
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, sa, append(args, "--man=no", unit)...).CombinedOutput()
		return strings.TrimSpace(strings.ReplaceAll(string(out), dir+"/", "")), err
	}
	if out, err := run("verify", "--generators=no"); out != "" || err != nil {
		c.errorf(f.name, "systemd-analyze verify: %s", cmp.Or(out, fmt.Sprint(err)))
	}
	if out, err := run("security", "--offline=yes", "--threshold="+strconv.Itoa(securityThreshold)); err != nil {
		lines := strings.Split(out, "\n")
		c.errorf(f.name, "systemd-analyze security (threshold %.1f): %s", float64(securityThreshold)/10, lines[len(lines)-1])
	}
}
