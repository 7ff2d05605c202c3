package main

// The sidecar's options, parsed by the gnmi-sidecar binary; option files
// read the way it reads --config (cmd/gnmi-sidecar/config.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// parseOptions reads an option file (a mapping of flag names to a plain
// value or a list, comma-joined; YAML refuses a key twice), reports what the
// sidecar would refuse, and has the binary parse the options (nil: unusable).
func (c *checker) parseOptions(where string, data []byte) map[string]string {
	var doc map[string]yaml.Node
	values := map[string]string{}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		c.errorf(where, "%v", err)
		return nil
	}
	var args []string
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		val := doc[key]
		var items []string
		err := val.Decode(&items)
		switch {
		case val.Kind == yaml.ScalarNode && val.Tag == "!!null":
			err = errors.New(`no value (write "" for an empty one)`)
		case val.Kind == yaml.ScalarNode:
			items, err = []string{val.Value}, nil
		case err != nil:
			err = errors.New("want a plain value or a list of plain values")
		}
		if err != nil {
			c.errorf(fmt.Sprintf("%s:%d", where, val.Line), "%s: %v", key, err)
			continue
		}
		values[key] = strings.Join(items, ",")
		args = append(args, "--"+key+"="+values[key])
	}
	c.checkFlags(args, where)
	return values
}

// checkFlags has `gnmi-sidecar serve ARGS --help` parse the options (it
// parses every flag and its value, then only prints its help) and reports
// the first one it refuses.
func (c *checker) checkFlags(args []string, where string) {
	var err error
	if c.sidecar != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.sidecar, append(append([]string{"serve"}, args...), "--help")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err = cmd.Run(); err != nil && stderr.Len() > 0 {
			// One line, "gnmi-sidecar: serve: <why> (see 'gnmi-sidecar serve --help')".
			msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
			msg = strings.TrimPrefix(strings.TrimPrefix(msg, "gnmi-sidecar: "), "serve: ")
			msg, _, _ = strings.Cut(msg, " (see '")
			err = errors.New(msg)
		}
	}
	if err != nil {
		c.errorf(where, "gnmi-sidecar serve refuses the options: %v", err)
	}
}

// parseArgs reads serve's flags: name to value ("true": none). serve takes
// no positional arguments, so a word after a flag is its value.
func parseArgs(args []string) map[string]string {
	flags := map[string]string{}
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
		} else if !hasValue {
			value = "true"
		}
		if strings.HasPrefix(a, "--") {
			flags[name] = value
		}
	}
	return flags
}
