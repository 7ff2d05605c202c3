package main

// The sidecar's options: option files (--config) read the way gnmi-sidecar
// reads them (cmd/gnmi-sidecar/config.go), and every option parsed by the
// gnmi-sidecar binary itself.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults of the serve options deploycheck reasons about (gnmi-sidecar
// serve --help).
const (
	defaultListen          = "127.0.0.1:9339"
	defaultMetrics         = "127.0.0.1:9341"
	defaultShutdownTimeout = 10 * time.Second
)

// options is a sidecar option file.
type options struct {
	where  string // the file, or the object and key holding it
	keys   []string
	values map[string]option
}

type option struct {
	value string
	line  int
}

// at names the line of key in messages.
func (o *options) at(key string) string {
	if v, ok := o.values[key]; ok {
		return fmt.Sprintf("%s:%d", o.where, v.line)
	}
	return o.where
}

// args renders the options as serve's command line, --key=value each.
func (o *options) args() []string {
	var args []string
	for _, k := range o.keys {
		args = append(args, "--"+k+"="+o.values[k].value)
	}
	return args
}

// parseOptions parses an option file like gnmi-sidecar does: a mapping of
// flag names (without dashes) to a plain value or a list of plain values
// (comma-joined). It reports what the sidecar would refuse before looking
// at the flags; nil if the file is unusable.
func parseOptions(r *report, where string, data []byte) *options {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		r.errorf(where, "%v", err)
		return nil
	}
	o := &options{where: where, values: map[string]option{}}
	if len(doc.Content) == 0 {
		return o
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		r.errorf(fmt.Sprintf("%s:%d", where, root.Line), "want a mapping of option names to values")
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("%s:%d", where, key.Line)
		if _, dup := o.values[key.Value]; dup {
			r.errorf(at, "%s: set twice", key.Value)
			continue
		}
		if key.Value == "config" || key.Value == "help" {
			r.errorf(at, "%s: not an option of an option file", key.Value)
			continue
		}
		var value string
		switch val.Kind {
		case yaml.ScalarNode:
			if val.Tag == "!!null" {
				r.errorf(at, "%s: no value (write \"\" for an empty one)", key.Value)
				continue
			}
			value = val.Value
		case yaml.SequenceNode:
			var items []string
			for _, it := range val.Content {
				if it.Kind != yaml.ScalarNode {
					r.errorf(at, "%s: want a list of plain values", key.Value)
				}
				items = append(items, it.Value)
			}
			value = strings.Join(items, ",")
		default:
			r.errorf(at, "%s: want a plain value or a list, not a mapping", key.Value)
			continue
		}
		o.keys = append(o.keys, key.Value)
		o.values[key.Value] = option{value: value, line: key.Line}
	}
	return o
}

// flagChecker parses serve's command line the way gnmi-sidecar does.
type flagChecker interface {
	// parse returns nil if `gnmi-sidecar serve ARGS` parses, else the
	// first error, naming its flag when it can.
	parse(args []string) *flagError
}

type flagError struct {
	flag    string // without dashes; "" when the error names none
	unknown bool   // no such flag
	msg     string
}

// binaryFlags asks a gnmi-sidecar binary: `serve ARGS --help` parses every
// flag (names and values) and then only prints the help.
type binaryFlags struct {
	path string
}

var (
	unknownFlagRE = regexp.MustCompile(`unknown flag: --([^\s=]+)`)
	badValueRE    = regexp.MustCompile(`for "--([^"]+)" flag`)
	needsArgRE    = regexp.MustCompile(`flag needs an argument: --([^\s=]+)`)
)

func (b binaryFlags) parse(args []string) *flagError {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.path, append(append([]string{"serve"}, args...), "--help")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stderr.String()), "Error: "))
	if line, _, _ := strings.Cut(msg, "\n"); line != "" {
		msg = line
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || msg == "" {
		return &flagError{msg: fmt.Sprintf("%s serve ... --help: %v %s", b.path, err, msg)}
	}
	if m := unknownFlagRE.FindStringSubmatch(msg); m != nil {
		return &flagError{flag: m[1], unknown: true, msg: msg}
	}
	for _, re := range []*regexp.Regexp{badValueRE, needsArgRE} {
		if m := re.FindStringSubmatch(msg); m != nil {
			return &flagError{flag: m[1], msg: msg}
		}
	}
	return &flagError{msg: msg}
}

// checkFlags has every flag of args parsed by c.flags and reports each one
// refused. where names the place of a flag in messages.
func (c *checker) checkFlags(args []string, where func(flag string) string) {
	if c.flags == nil {
		return
	}
	for range len(args) + 1 {
		fe := c.flags.parse(args)
		if fe == nil {
			return
		}
		if fe.flag == "" {
			c.r.errorf(where(""), "gnmi-sidecar serve refuses the options: %s", fe.msg)
			return
		}
		c.r.errorf(where(fe.flag), "gnmi-sidecar serve refuses it: %s", fe.msg)
		args = dropFlag(args, fe.flag)
	}
}

// dropFlag removes --name (and its separate value) or --name=value from args.
func dropFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--"+name {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
			continue
		}
		if strings.HasPrefix(a, "--"+name+"=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// parseArgs reads serve's flags from a command line (after "serve"): name
// to value, "true" for a flag without a value. serve takes no positional
// arguments, so a word after a flag is its value.
func parseArgs(args []string) map[string]string {
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		a, ok := strings.CutPrefix(args[i], "--")
		if !ok || a == "" {
			continue
		}
		if name, value, ok := strings.Cut(a, "="); ok {
			flags[name] = value
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			flags[a] = args[i+1]
			i++
			continue
		}
		flags[a] = "true"
	}
	return flags
}

// checkOptionFile checks an option file on its own (not in a ConfigMap).
func (c *checker) checkOptionFile(o *options) {
	c.checkFlags(o.args(), func(flag string) string { return o.at(flag) })
	for _, k := range []string{"listen", "metrics"} {
		if v, ok := o.values[k]; ok {
			if _, _, err := splitAddr(v.value); err != nil {
				c.r.errorf(o.at(k), "%s: %v", k, err)
			}
		}
	}
	if v, ok := o.values["journal-dir"]; ok && !path.IsAbs(v.value) {
		c.r.errorf(o.at("journal-dir"), "journal-dir %q: relative to whatever directory the sidecar starts in; give an absolute path", v.value)
	}
}

// shutdownTimeout is an option file's shutdown-timeout, or the default.
func shutdownTimeout(o *options) time.Duration {
	if o != nil {
		if v, ok := o.values["shutdown-timeout"]; ok {
			if d, err := time.ParseDuration(v.value); err == nil {
				return d
			}
		}
	}
	return defaultShutdownTimeout
}

// splitAddr splits a listen address into host and numeric port.
func splitAddr(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if _, err := fmt.Sscanf(p, "%d", &port); err != nil || port < 1 || port > 65535 || fmt.Sprint(port) != p {
		return "", 0, fmt.Errorf("%q: want a port number from 1 to 65535", p)
	}
	return host, port, nil
}

// isLoopback: "localhost", 127.0.0.0/8 or ::1 (as the sidecar decides).
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isAnyAddress: every address of the host (or pod).
func isAnyAddress(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// authzFile mirrors the authorization file (--authz-file, docs/security.md).
type authzFile struct {
	Users map[string]struct {
		Role         string `yaml:"role"`
		PasswordHash string `yaml:"password_hash"`
	} `yaml:"users"`
	Certificates map[string]struct {
		Role string `yaml:"role"`
	} `yaml:"certificates"`
	DefaultRole string `yaml:"default_role"`
}

var roles = map[string]bool{"read": true, "write": true, "admin": true}

// checkAuthz checks an authorization file; it returns the number of users
// (with password hashes) it lists.
func checkAuthz(r *report, where string, data []byte) int {
	var f authzFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		r.errorf(where, "authorization file: %v", err)
		return 0
	}
	for name, u := range f.Users {
		if !roles[u.Role] {
			r.errorf(where, "users.%s.role %q: want read, write or admin", name, u.Role)
		}
		if !strings.HasPrefix(u.PasswordHash, "$2a$") && !strings.HasPrefix(u.PasswordHash, "$2b$") && !strings.HasPrefix(u.PasswordHash, "$2y$") {
			r.errorf(where, "users.%s.password_hash: want a bcrypt hash ($2a$..., $2b$... or $2y$...)", name)
		}
	}
	for cn, e := range f.Certificates {
		if !roles[e.Role] {
			r.errorf(where, "certificates.%s.role %q: want read, write or admin", cn, e.Role)
		}
	}
	if f.DefaultRole != "" && !roles[f.DefaultRole] {
		r.errorf(where, "default_role %q: want read, write or admin", f.DefaultRole)
	}
	if len(f.Users) == 0 && len(f.Certificates) == 0 && f.DefaultRole == "" {
		r.errorf(where, "grants no role to anyone: list users or certificates, or set default_role")
	}
	return len(f.Users)
}
