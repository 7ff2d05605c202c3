package main

// The Dockerfile, parsed by BuildKit's own Dockerfile frontend (the parser
// and the instruction-level build checks of `docker build --check`): its
// syntax, then its Go version against go.mod's, and a final image that runs
// gnmi-sidecar as a non-root user.

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

var (
	goDirectiveRE = regexp.MustCompile(`(?m)^go\s+(\d+)\.(\d+)`)
	goTagRE       = regexp.MustCompile(`^(\d+)\.(\d+)`)
	argRefRE      = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)
)

// checkDockerfile checks a Dockerfile against the go.mod next to it.
func (c *checker) checkDockerfile(f file, gomod []byte) {
	at := func(loc []parser.Range) string {
		if len(loc) == 0 {
			return f.name
		}
		return fmt.Sprintf("%s:%d", f.name, loc[0].Start.Line)
	}
	res, err := parser.Parse(bytes.NewReader(f.data))
	if err != nil {
		c.r.errorf(f.name, "%v", err)
		return
	}
	for _, w := range res.Warnings {
		where := f.name
		if w.Location != nil {
			where = at([]parser.Range{*w.Location})
		}
		c.r.errorf(where, "%s", w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		c.r.errorf(at(loc), "build check %s: %s", rule, msg)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		c.r.errorf(f.name, "%v", err)
		return
	}
	if len(stages) == 0 {
		c.r.errorf(f.name, "no FROM")
		return
	}

	m := goDirectiveRE.FindSubmatch(gomod)
	if m == nil {
		c.r.errorf(f.name, "go.mod has no go directive")
		return
	}
	goVersion := string(m[1]) + "." + string(m[2])
	args := map[string]string{} // the ARGs before the first FROM, for FROM
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				args[kv.Key] = *kv.Value
			}
		}
	}
	golang := false
	for _, s := range stages {
		image := argRefRE.ReplaceAllStringFunc(s.BaseName, func(ref string) string {
			return args[argRefRE.FindStringSubmatch(ref)[1]]
		})
		repo, tag, _ := strings.Cut(image, ":")
		if repo != "golang" && repo != "docker.io/library/golang" && repo != "library/golang" {
			continue
		}
		golang = true
		switch t := goTagRE.FindStringSubmatch(tag); {
		case t == nil:
			c.r.errorf(at(s.Location), "FROM %s: pin the Go release of go.mod (golang:%s)", image, goVersion)
		case t[1]+"."+t[2] != goVersion:
			c.r.errorf(at(s.Location), "FROM %s: Go %s.%s, go.mod says go %s: build with golang:%s (ARG GO_VERSION)", image, t[1], t[2], goVersion, goVersion)
		}
	}
	if !golang {
		c.r.errorf(f.name, "no golang build stage: build the binary from source with go.mod's Go (golang:%s)", goVersion)
	}

	final := stages[len(stages)-1]
	var user *instructions.UserCommand
	var entrypoint *instructions.EntrypointCommand
	for _, cmd := range final.Commands {
		switch cmd := cmd.(type) {
		case *instructions.UserCommand:
			user = cmd
		case *instructions.EntrypointCommand:
			entrypoint = cmd
		}
	}
	switch {
	case user == nil && !strings.HasSuffix(final.BaseName, ":nonroot"):
		c.r.errorf(f.name, "the final image runs as root: USER 65532:65532 (numeric, so that Kubernetes' runAsNonRoot can check it)")
	case user == nil:
	case strings.Split(user.User, ":")[0] == "root" || strings.Split(user.User, ":")[0] == "0":
		c.r.errorf(at(user.Location()), "USER %s: the final image runs as root", user.User)
	case !regexp.MustCompile(`^\d+(:\d+)?$`).MatchString(user.User):
		c.r.warnf(at(user.Location()), "USER %s: not numeric: Kubernetes' runAsNonRoot cannot check it without runAsUser", user.User)
	}
	switch {
	case entrypoint == nil:
		c.r.errorf(f.name, "the final image has no ENTRYPOINT: want [\"/usr/local/bin/gnmi-sidecar\"]")
	case entrypoint.PrependShell:
		c.r.errorf(at(entrypoint.Location()), "ENTRYPOINT: want the exec form [\"/usr/local/bin/gnmi-sidecar\"]: the shell form needs a shell (distroless has none) and keeps SIGTERM from the sidecar")
	}
}
