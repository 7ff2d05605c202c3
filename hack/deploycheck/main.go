// Command deploycheck validates gnmi-sidecar's deployment files, offline:
//
//   - Kubernetes manifests: every document decoded strictly into the
//     Kubernetes API's own Go types (k8s.io/api), so that an unknown or
//     misspelt field, a wrong type, a duplicate key or a bad quantity fails;
//     then checked the way the API server validates the fields they use
//     (names, labels, selectors, ports, probes, volumes, resources), against
//     each other (the StatefulSet's Service, the ConfigMaps and Secrets it
//     mounts, the keys it reads from them) and against the sidecar's rules
//     (one replica, the journal on the claim, TLS, probes and Prometheus on
//     the right listeners, the grace period);
//   - the sidecar's option files (--config), in a ConfigMap or on their own,
//     and the systemd units' command lines: every option is parsed by the
//     gnmi-sidecar binary itself (-sidecar), units also by systemd-analyze
//     verify and security when it is installed;
//   - the Dockerfile: its Go version against go.mod's.
//
// Usage:
//
//	deploycheck [-sidecar BIN] [-systemd-analyze auto|on|off] PATH...
//
// A PATH is a file or a directory (walked). YAML files with apiVersion and
// kind are manifests; all the manifests of one run are one set, whose
// references must resolve within it. Other YAML files are option files, or
// authorization files when their name contains "authz". *.service files are
// systemd units; a file named Dockerfile is checked against the go.mod next
// to it. Problems go to stderr, one a line; the exit status is 1 if any is
// an error.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	sidecar := flag.String("sidecar", "", "gnmi-sidecar binary: parse every option of the manifests, option files and units with it (none: options are not checked)")
	analyze := flag.String("systemd-analyze", "auto", "run systemd-analyze verify and security on units: auto (when installed, and -sidecar is given), on, off")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: deploycheck [-sidecar BIN] [-systemd-analyze auto|on|off] PATH...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *analyze != "auto" && *analyze != "on" && *analyze != "off" {
		fmt.Fprintf(os.Stderr, "deploycheck: -systemd-analyze %q: want auto, on or off\n", *analyze)
		os.Exit(2)
	}
	c := newChecker()
	if *sidecar != "" {
		bin, err := filepath.Abs(*sidecar)
		if err == nil {
			_, err = os.Stat(bin)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "deploycheck: -sidecar: %v\n", err)
			os.Exit(2)
		}
		c.flags = binaryFlags{path: bin}
		c.sidecar = bin
	}
	c.analyze = *analyze
	files, err := collect(flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploycheck: %v\n", err)
		os.Exit(2)
	}
	c.checkFiles(files)
	c.r.print(os.Stderr)
	fmt.Printf("deploycheck: %s\n", c.summary())
	if c.r.errors() > 0 {
		os.Exit(1)
	}
}

// collect expands directories into the files under them (hidden ones
// skipped), in lexical order.
func collect(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && path != p {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}
