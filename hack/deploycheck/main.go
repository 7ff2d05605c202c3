// Command deploycheck checks gnmi-sidecar's deployment files offline, with
// the tools that own each format: Kubernetes manifests (YAML with an
// apiVersion, one set per run) decoded strictly and validated by the API
// machinery and the Pod Security Standards (restricted), then cross-checked
// for the sidecar; the sidecar's options (option files, ConfigMaps, args,
// ExecStart=) parsed by the gnmi-sidecar binary (-sidecar); systemd units
// checked by systemd-analyze verify and security.
//
// Usage: deploycheck [-sidecar BIN] PATH... (files, or directories walked).
// Problems go to stderr, one a line, and make the exit status 1.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	sidecar := flag.String("sidecar", "", "gnmi-sidecar binary that parses every option and that systemd-analyze verify runs (none: neither is checked)")
	metricsFrom := flag.String("metrics-from", "", "a running sidecar's metrics address (host:port): every metric the rules and dashboards name must be among its /metrics")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: deploycheck [-sidecar BIN] PATH...")
		os.Exit(2)
	}
	c := &checker{sidecar: *sidecar}
	var files []file
	for _, p := range flag.Args() {
		err := filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && isChart(name) {
				c.checkChart(name)
				return filepath.SkipDir
			}
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(name)
			files = append(files, file{name, data})
			return err
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "deploycheck: %v\n", err)
			os.Exit(2)
		}
	}
	c.check(files)
	for _, t := range c.timings {
		fmt.Println("deploycheck: chart", t)
	}
	if *metricsFrom != "" {
		c.checkExported(*metricsFrom)
	}
	slices.Sort(c.problems)
	for _, p := range c.problems {
		fmt.Fprintln(os.Stderr, p)
	}
	fmt.Printf("deploycheck: %d files, %d problems\n", len(files), len(c.problems))
	if len(c.problems) > 0 {
		os.Exit(1)
	}
}

var manifestRE = regexp.MustCompile(`(?m)^apiVersion:`)

// file is one input: its name (for messages) and content.
type file struct {
	name string
	data []byte
}

// checker runs the checks of one invocation and collects their problems.
type checker struct {
	sidecar  string // the gnmi-sidecar binary; "" skips the option checks
	problems []string
	timings  []string            // each chart render: objects, render and check time
	metrics  map[string][]string // metric names the rules and dashboards use, to where
}

func (c *checker) errorf(where, format string, a ...any) {
	c.problems = append(c.problems, where+": "+fmt.Sprintf(format, a...))
}

// check classifies the files and checks them; the manifests as one set.
func (c *checker) check(files []file) {
	var manifests []file
	for _, f := range files {
		switch base := filepath.Base(f.name); {
		case strings.HasSuffix(base, ".service"):
			c.checkUnit(f)
		case !strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml"), strings.Contains(base, "authz"):
		case manifestRE.Match(f.data):
			manifests = append(manifests, f)
		default:
			c.parseOptions(f.name, f.data)
		}
	}
	c.checkManifests(manifests)
}
