package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// file is one input: its name (for messages) and content.
type file struct {
	name string
	data []byte
}

// checker runs the checks of one invocation.
type checker struct {
	r *report
	// flags parses sidecar options the way gnmi-sidecar serve does; nil
	// skips those checks.
	flags flagChecker
	// sidecar is the gnmi-sidecar binary (for systemd-analyze verify).
	sidecar string
	// analyze: run systemd-analyze ("auto", "on", "off").
	analyze  string
	lookPath func(string) (string, error)

	files   int
	objects []*object
	// broken are the objects that did not decode, by kind/name: references
	// to them are not reported again.
	broken      map[string]bool
	optionFiles []*options // option files on their own (not in a ConfigMap)
	units       []file
	dockerfiles int
	analyzed    int // units systemd-analyze checked
}

func newChecker() *checker {
	return &checker{r: &report{}, analyze: "off", lookPath: exec.LookPath, broken: map[string]bool{}}
}

// checkFiles reads and checks the files.
func (c *checker) checkFiles(names []string) {
	var files []file
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			c.r.errorf(name, "%v", err)
			continue
		}
		files = append(files, file{name, data})
	}
	c.check(files)
}

// check classifies the files and runs every check: each file on its own,
// then the manifests as a set, then the units (against the option files).
func (c *checker) check(files []file) {
	for _, f := range files {
		base := filepath.Base(f.name)
		switch {
		case base == "Dockerfile":
			c.files++
			c.dockerfiles++
			gomod := filepath.Join(filepath.Dir(f.name), "go.mod")
			data, err := os.ReadFile(gomod)
			if err != nil {
				c.r.errorf(f.name, "the go.mod next to it: %v", err)
				continue
			}
			c.checkDockerfile(f, data)
		case strings.HasSuffix(base, ".service"):
			c.files++
			c.units = append(c.units, f)
		case strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml"):
			c.files++
			switch {
			case isManifest(f.data):
				c.objects = append(c.objects, c.decodeManifests(f)...)
			case strings.Contains(base, "authz"):
				checkAuthz(c.r, f.name, f.data)
			default:
				if o := parseOptions(c.r, f.name, f.data); o != nil {
					c.checkOptionFile(o)
					c.optionFiles = append(c.optionFiles, o)
				}
			}
		}
	}
	c.checkManifests()
	for _, u := range c.units {
		c.checkUnit(u)
	}
}

func (c *checker) summary() string {
	kinds := map[string]int{}
	for _, o := range c.objects {
		kinds[o.kind]++
	}
	var objs []string
	for _, k := range []string{"StatefulSet", "Service", "ConfigMap", "Secret"} {
		if kinds[k] > 0 {
			objs = append(objs, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	s := fmt.Sprintf("%d files: %d Kubernetes objects (%s), %d option files, %d systemd units, %d Dockerfile",
		c.files, len(c.objects), strings.Join(objs, ", "), len(c.optionFiles), len(c.units), c.dockerfiles)
	if c.flags == nil {
		s += "; options not checked against a gnmi-sidecar binary (no -sidecar)"
	}
	if len(c.units) > 0 && c.analyzed < len(c.units) {
		s += fmt.Sprintf("; systemd-analyze checked %d of %d units (it needs systemd-analyze installed and -sidecar)", c.analyzed, len(c.units))
	}
	warnings := len(c.r.problems) - c.r.errors()
	return fmt.Sprintf("%s; %d errors, %d warnings", s, c.r.errors(), warnings)
}
