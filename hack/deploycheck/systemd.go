package main

// systemd units: the command line (parsed by the gnmi-sidecar binary), the
// journal in the unit's state directory, credentials, stopping; then
// systemd-analyze verify and security when installed.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// securityThreshold is the highest overall exposure systemd-analyze
// security may give a unit (its 0-100 scale; it prints it divided by ten).
const securityThreshold = 20

// unitEntry is one Key=Value of a unit file.
type unitEntry struct {
	section, key, value string
	line                int
}

// parseUnit reads a unit file's entries: comments dropped, continued lines
// (a trailing backslash) joined with a space.
func parseUnit(data []byte) ([]unitEntry, error) {
	var entries []unitEntry
	section := ""
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		l := strings.TrimSpace(lines[i])
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if next != "" && (next[0] == '#' || next[0] == ';') {
				continue // a comment inside a continued line
			}
			l = strings.TrimSuffix(l, "\\") + " " + next
		}
		if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
			section = l[1 : len(l)-1]
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want Key=Value: %q", start, l)
		}
		entries = append(entries, unitEntry{section, strings.TrimSpace(k), strings.TrimSpace(v), start})
	}
	return entries, nil
}

// splitCommand splits a command line into words: whitespace-separated,
// with "double" and 'single' quotes.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseTimespan parses a systemd time span ("30s", "1min 30s", "90").
func parseTimespan(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"": time.Second, "us": time.Microsecond, "usec": time.Microsecond, "ms": time.Millisecond, "msec": time.Millisecond,
		"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	}
	re := regexp.MustCompile(`^\s*(\d+)\s*([a-z]*)`)
	var total time.Duration
	rest := s
	for strings.TrimSpace(rest) != "" {
		m := re.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("%q: not a time span", s)
		}
		u, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("%q: unknown unit %q", s, m[2])
		}
		n, _ := strconv.Atoi(m[1])
		total += time.Duration(n) * u
		rest = rest[len(m[0]):]
	}
	return total, nil
}

var credentialRE = regexp.MustCompile(`(?:%d|\$\{CREDENTIALS_DIRECTORY\}|\$CREDENTIALS_DIRECTORY)/([^/\s]+)`)

// checkUnit checks a gnmi-sidecar service unit.
func (c *checker) checkUnit(f file) {
	entries, err := parseUnit(f.data)
	if err != nil {
		c.r.errorf(f.name, "%v", err)
		return
	}
	get := func(section, k string) (unitEntry, bool) {
		var last unitEntry
		found := false
		for _, e := range entries {
			if e.section == section && e.key == k {
				last, found = e, true
			}
		}
		return last, found
	}
	at := func(e unitEntry) string { return fmt.Sprintf("%s:%d", f.name, e.line) }

	var execs []unitEntry
	credentials := map[string]bool{}
	for _, e := range entries {
		if e.section == "Service" && e.key == "ExecStart" {
			execs = append(execs, e)
		}
		if e.section == "Service" && (e.key == "LoadCredential" || e.key == "LoadCredentialEncrypted" || e.key == "SetCredential" || e.key == "SetCredentialEncrypted") {
			id, _, _ := strings.Cut(e.value, ":")
			credentials[id] = true
		}
	}
	if len(execs) != 1 {
		c.r.errorf(f.name, "want one ExecStart= in [Service], found %d", len(execs))
		return
	}
	ex := execs[0]
	argv, err := splitCommand(ex.value)
	if err != nil || len(argv) == 0 {
		c.r.errorf(at(ex), "ExecStart: %v", err)
		return
	}
	argv[0] = strings.TrimLeft(argv[0], "-@:+!")
	if path.Base(argv[0]) != "gnmi-sidecar" {
		c.r.errorf(at(ex), "ExecStart: %q: want the gnmi-sidecar binary", argv[0])
		return
	}
	if len(argv) < 2 || argv[1] != "serve" {
		c.r.errorf(at(ex), "ExecStart: want gnmi-sidecar serve and its options")
		return
	}
	args := argv[2:]
	c.checkFlags(args, func(string) string { return at(ex) + ": ExecStart" })
	flags := parseArgs(args)

	for _, m := range credentialRE.FindAllStringSubmatch(ex.value, -1) {
		if !credentials[m[1]] {
			c.r.errorf(at(ex), "ExecStart: %s: no LoadCredential=%s:... gives it", m[0], m[1])
		}
	}

	// The journal: in the unit's state directory, which ProtectSystem=
	// leaves writable.
	state, hasState := get("Service", "StateDirectory")
	switch jd, ok := flags["journal-dir"]; {
	case !hasState:
		c.r.errorf(f.name, "no StateDirectory=: the journal needs a directory systemd creates, owns to the service's user and keeps")
	case !ok:
		c.r.errorf(at(ex), "ExecStart: no --journal-dir: give the state directory (%%S/%s)", strings.Fields(state.value)[0])
	default:
		ok := false
		for _, d := range strings.Fields(state.value) {
			d, _, _ = strings.Cut(d, ":")
			ok = ok || jd == "%S/"+d || jd == "/var/lib/"+d || jd == "${STATE_DIRECTORY}" || jd == "$STATE_DIRECTORY"
		}
		if !ok {
			c.r.errorf(at(ex), "ExecStart: --journal-dir %s: not the StateDirectory= (%s): %%S/%s", jd, state.value, strings.Fields(state.value)[0])
		}
	}

	// Who runs it.
	dyn, _ := get("Service", "DynamicUser")
	user, hasUser := get("Service", "User")
	if b, _ := parseBool(dyn.value); !b && (!hasUser || user.value == "root" || user.value == "0") {
		c.r.errorf(f.name, "runs as root: set DynamicUser=yes (or User= a user of its own)")
	}
	if e, ok := get("Service", "Type"); ok && e.value != "simple" && e.value != "exec" {
		c.r.errorf(at(e), "Type=%s: the sidecar is a simple service (it does not fork nor notify)", e.value)
	}
	if e, ok := get("Service", "Restart"); !ok || e.value == "no" {
		c.r.errorf(f.name, "Restart=: unset or no, a sidecar that fails stays down; Restart=on-failure")
	}
	if e, ok := get("Service", "KillSignal"); ok && e.value != "SIGTERM" && e.value != "SIGINT" && e.value != "TERM" && e.value != "INT" {
		c.r.errorf(at(e), "KillSignal=%s: the sidecar stops cleanly on SIGTERM or SIGINT only", e.value)
	}

	// Stopping: TimeoutStopSec= beyond shutdown-timeout (of the command
	// line, else of the option files checked with the unit).
	shutdown, from := defaultShutdownTimeout, "the default"
	for _, o := range c.optionFiles {
		if d := shutdownTimeout(o); d > shutdown {
			shutdown, from = d, o.at("shutdown-timeout")
		}
	}
	if v, ok := flags["shutdown-timeout"]; ok {
		if d, err := time.ParseDuration(v); err == nil {
			shutdown, from = d, "ExecStart"
		}
	}
	stop := 90 * time.Second // DefaultTimeoutStopSec=
	where := f.name
	if e, ok := get("Service", "TimeoutStopSec"); ok {
		if d, err := parseTimespan(e.value); err != nil {
			c.r.errorf(at(e), "TimeoutStopSec: %v", err)
		} else {
			stop, where = d, at(e)
		}
	}
	if stop < shutdown+graceMargin {
		c.r.errorf(where, "TimeoutStopSec %v: must exceed shutdown-timeout (%v, %s) by %v at least, or systemd kills the sidecar before it closes its journal", stop, shutdown, from, graceMargin)
	}

	c.analyzeUnit(f, argv[0])
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "yes", "y", "true", "t", "on":
		return true, nil
	case "0", "no", "n", "false", "f", "off", "":
		return false, nil
	}
	return false, fmt.Errorf("%q: not a boolean", s)
}

// analyzeUnit runs systemd-analyze verify (any message is an error) and
// security (the exposure must stay under securityThreshold) on a copy of
// the unit whose ExecStart= runs the -sidecar binary (verify wants it to
// exist).
func (c *checker) analyzeUnit(f file, execPath string) {
	if c.analyze == "off" {
		return
	}
	sa, err := c.lookPath("systemd-analyze")
	if err != nil || c.sidecar == "" {
		if c.analyze == "on" {
			c.r.errorf(f.name, "systemd-analyze: needs systemd-analyze (%v) and -sidecar", err)
		}
		return
	}
	dir, err := os.MkdirTemp("", "deploycheck-unit-")
	if err != nil {
		c.r.errorf(f.name, "systemd-analyze: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	unit := filepath.Join(dir, filepath.Base(f.name))
	data := bytes.ReplaceAll(f.data, []byte(execPath), []byte(c.sidecar))
	if err := os.WriteFile(unit, data, 0o644); err != nil {
		c.r.errorf(f.name, "systemd-analyze: %v", err)
		return
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, sa, args...).CombinedOutput()
		return strings.TrimSpace(strings.ReplaceAll(string(out), dir+"/", "")), err
	}
	out, err := run("verify", "--man=no", "--generators=no", unit)
	if out != "" || err != nil {
		for _, l := range strings.Split(out, "\n") {
			c.r.errorf(f.name, "systemd-analyze verify: %s", l)
		}
		if out == "" {
			c.r.errorf(f.name, "systemd-analyze verify: %v", err)
		}
	}
	out, err = run("security", "--offline=yes", "--man=no", "--threshold="+strconv.Itoa(securityThreshold), unit)
	if err != nil {
		lines := strings.Split(out, "\n")
		c.r.errorf(f.name, "systemd-analyze security (threshold %.1f): %s", float64(securityThreshold)/10, lines[len(lines)-1])
	}
	c.analyzed++
}
