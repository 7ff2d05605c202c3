package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// deployDir holds the repository's deployment files, which the tests break
// one way at a time.
const deployDir = "../../deploy"

// sidecar is a gnmi-sidecar built from the repository by TestMain: the
// options are parsed by the real binary, as make lint does. sidecarDev is
// the same with the developer commands (demo: serve in front of an
// in-process simulated device).
var sidecar, sidecarDev string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deploycheck-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecar = filepath.Join(dir, "gnmi-sidecar")
	build := exec.Command("go", "build", "-o", sidecar, "./cmd/gnmi-sidecar")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building gnmi-sidecar: %v\n%s", err, out)
		os.Exit(1)
	}
	sidecarDev = filepath.Join(dir, "gnmi-sidecar-dev")
	build = exec.Command("go", "build", "-tags", "devtools", "-o", sidecarDev, "./cmd/gnmi-sidecar")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building gnmi-sidecar (devtools): %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// readDeploy reads the repository's deploy/ files, by path relative to it.
func readDeploy(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(deployDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(deployDir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"helm/gnmi-sidecar/Chart.yaml", "systemd/gnmi-sidecar.service", "systemd/gnmi-sidecar@.service", "config.yaml"} {
		if _, ok := files[want]; !ok {
			t.Fatalf("deploy/%s is missing", want)
		}
	}
	// The chart's files are checked by rendering it (TestChart); here its
	// render for its own values.yaml (device leaf1) stands for them.
	for name := range files {
		if strings.HasPrefix(name, "helm/") {
			delete(files, name)
		}
	}
	files[manifest] = renderDefault(t)
	return files
}

// manifest is the name of the chart's render (values.yaml) in readDeploy's files.
const manifest = "kubernetes/gnmi-sidecar.yaml"

// renderDefault renders the chart for its values.yaml with the Helm SDK.
func renderDefault(t *testing.T) string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := renderChart(ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		b.WriteString("---\n# Source: " + f.name + "\n")
		b.Write(f.data)
		b.WriteString("\n")
	}
	return b.String()
}

const chartDir = deployDir + "/helm/gnmi-sidecar"

// run checks the files (named by their path in deploy/) and returns the
// problems found.
func run(files map[string]string) []string {
	c := &checker{sidecar: sidecar}
	var in []file
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		in = append(in, file{name: "deploy/" + name, data: []byte(files[name])})
	}
	c.check(in)
	return c.problems
}

// The repository's files pass.
func TestRepositoryFiles(t *testing.T) {
	if problems := run(readDeploy(t)); len(problems) > 0 {
		t.Errorf("deploy/ has problems:\n%s", strings.Join(problems, "\n"))
	}
}

// edit is a change to one file of deploy/: old (which must be there)
// replaced by new, or new appended when old is empty.
type edit struct {
	file, old, new string
}

// Each broken variant of the repository's files fails with the problems
// expected, and only those.
func TestBroken(t *testing.T) {
	const (
		sts  = manifest
		svc  = manifest
		cm   = manifest
		unit = "systemd/gnmi-sidecar.service"
	)
	tests := []struct {
		name     string
		edits    []edit
		want     []string // each in a problem
		analyzer bool     // needs systemd-analyze
	}{
		// Decoding: the API types, strictly.
		{name: "unknown field", edits: []edit{{sts, "runAsNonRoot: true", "runAsNonRoot: true\n        runAsNonroot: true"}},
			want: []string{`strict decoding error: unknown field "spec.template.spec.securityContext.runAsNonroot"`}},
		{name: "misspelt case", edits: []edit{{sts, "containerPort: 9341", "containerport: 9341"}},
			want: []string{`unknown field "spec.template.spec.containers[0].ports[1].containerport"`}},
		{name: "wrong type", edits: []edit{{sts, "replicas: 1", `replicas: "1"`}},
			want: []string{"cannot unmarshal string into Go struct field", "spec.replicas"}},
		{name: "duplicate key", edits: []edit{{sts, "  serviceName: gnmi-sidecar-leaf1", "  serviceName: gnmi-sidecar-leaf1\n  serviceName: gnmi-sidecar-leaf2"}},
			want: []string{`"serviceName" already set in map`}},
		{name: "bad quantity", edits: []edit{{sts, "memory: 150Mi", "memory: 150MB"}},
			want: []string{"quantities must match the regular expression"}},
		{name: "unknown kind", edits: []edit{{svc, "kind: Service", "kind: Ingress"}},
			want: []string{`no kind "Ingress" is registered for version "v1"`, `spec.serviceName "gnmi-sidecar-leaf1": want a headless Service`}},
		{name: "a Deployment", edits: []edit{{sts, "", "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: gnmi-sidecar\nspec:\n  template:\n    spec:\n      containers:\n        - name: gnmi-sidecar\n          image: gnmi-sidecar\n"}},
			want: []string{"Deployment gnmi-sidecar: the sidecar runs in a StatefulSet with one replica"}},

		// Metadata, as the API server validates it.
		{name: "bad name", edits: []edit{{sts, "kind: StatefulSet\nmetadata:\n  name: gnmi-sidecar-leaf1", "kind: StatefulSet\nmetadata:\n  name: gnmi_sidecar_leaf1"}},
			want: []string{`metadata.name: Invalid value: "gnmi_sidecar_leaf1"`}},
		{name: "bad label value", edits: []edit{{cm, "app.kubernetes.io/instance: gnmi-sidecar-leaf1", "app.kubernetes.io/instance: gnmi sidecar"}},
			want: []string{`metadata.labels: Invalid value: "gnmi sidecar"`}},
		{name: "an object twice", edits: []edit{{cm, "", "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gnmi-sidecar-leaf1\ndata: {}\n"}},
			want: []string{"ConfigMap gnmi-sidecar-leaf1: also defined in", `ConfigMap gnmi-sidecar-leaf1 has no key "config.yaml"`, "--config /etc/gnmi-sidecar/config/config.yaml: not a key"}},

		// The StatefulSet: selector, Service, Pod Security Standards, volumes.
		{name: "selector does not match the template", edits: []edit{{sts, "      labels:\n        app.kubernetes.io/name: gnmi-sidecar\n        app.kubernetes.io/instance: gnmi-sidecar-leaf1\n        app.kubernetes.io/part-of", "      labels:\n        app.kubernetes.io/name: gnmi-sidecar\n        app.kubernetes.io/instance: gnmi-sidecar-leaf2\n        app.kubernetes.io/part-of"}},
			want: []string{"spec.selector does not select the template's labels", `spec.serviceName "gnmi-sidecar-leaf1": want a headless Service`}},
		{name: "service not headless", edits: []edit{{svc, "  clusterIP: None\n", ""}},
			want: []string{`spec.serviceName "gnmi-sidecar-leaf1": want a headless Service (clusterIP: None)`}},
		{name: "no such Service", edits: []edit{{sts, "serviceName: gnmi-sidecar-leaf1", "serviceName: gnmi-sidecar"}},
			want: []string{`spec.serviceName "gnmi-sidecar": want a headless Service`}},
		{name: "root", edits: []edit{{sts, "runAsNonRoot: true", "runAsNonRoot: false"}, {sts, "runAsUser: 65532", "runAsUser: 0"}},
			want: []string{"Pod Security Standards (restricted): runAsNonRoot != true", "Pod Security Standards (restricted): runAsUser=0"}},
		{name: "privilege escalation", edits: []edit{{sts, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true"}},
			want: []string{"Pod Security Standards (restricted): allowPrivilegeEscalation != false"}},
		{name: "capabilities kept", edits: []edit{{sts, "            capabilities:\n              drop:\n                - ALL\n", ""}},
			want: []string{"Pod Security Standards (restricted): unrestricted capabilities"}},
		{name: "missing ConfigMap", edits: []edit{{sts, "name: gnmi-sidecar-leaf1\n            items", "name: gnmi-sidecar-leaf9\n            items"}},
			want: []string{"volume config: ConfigMap gnmi-sidecar-leaf9 is not in the manifests", "--config /etc/gnmi-sidecar/config/config.yaml: not a key"}},
		{name: "missing ConfigMap key", edits: []edit{{sts, "- key: config.yaml", "- key: config.yml"}},
			want: []string{`volume config: ConfigMap gnmi-sidecar-leaf1 has no key "config.yml"`, "--config /etc/gnmi-sidecar/config/config.yaml: not a key"}},

		// The sidecar's options, in the ConfigMap and the args.
		{name: "unknown option", edits: []edit{{cm, "log-format: json", "log-format: json\n    log-colour: auto"}},
			want: []string{"ConfigMap gnmi-sidecar-leaf1: /etc/gnmi-sidecar/config/config.yaml: gnmi-sidecar serve refuses the options: unknown flag: --log-colour"}},
		{name: "bad option value", edits: []edit{{cm, "shutdown-timeout: 20s", "shutdown-timeout: 20"}},
			want: []string{`refuses the options: invalid argument "20" for "--shutdown-timeout" flag`}},
		{name: "option twice", edits: []edit{{cm, "log-format: json", "log-format: json\n    log-format: text"}},
			want: []string{`mapping key "log-format" already defined`}},
		{name: "option without a value", edits: []edit{{cm, "log-format: json", "log-format:"}},
			want: []string{`log-format: no value (write "" for an empty one)`}},
		{name: "unknown option in args", edits: []edit{{sts, "- serve\n", "- serve\n            - --colour\n"}},
			want: []string{"container gnmi-sidecar: args: gnmi-sidecar serve refuses the options: unknown flag: --colour"}},
		{name: "a command", edits: []edit{{sts, "          args:\n", "          command: [/bin/sh]\n          args:\n"}},
			want: []string{"want the image's entrypoint (no command)"}},
		{name: "config not mounted", edits: []edit{{sts, "- /etc/gnmi-sidecar/config/config.yaml", "- /etc/gnmi-sidecar/conf/config.yaml"}},
			want: []string{"--config /etc/gnmi-sidecar/conf/config.yaml: not a key of a ConfigMap or Secret"}},

		// The sidecar's rules for its pod.
		{name: "two replicas", edits: []edit{{sts, "replicas: 1", "replicas: 2"}},
			want: []string{"spec.replicas 2: must be 1"}},
		{name: "journal not on the claim", edits: []edit{{cm, "journal-dir: /var/lib/gnmi-sidecar/journal", "journal-dir: /etc/gnmi-sidecar/config/journal"}},
			want: []string{`journal-dir "/etc/gnmi-sidecar/config/journal": not on a writable volume claim template`}},
		{name: "journal in the image", edits: []edit{{cm, "journal-dir: /var/lib/gnmi-sidecar/journal", "journal-dir: /data"}},
			want: []string{`journal-dir "/data": not on a writable volume claim template`}},
		{name: "journal read-only", edits: []edit{{sts, "mountPath: /var/lib/gnmi-sidecar\n", "mountPath: /var/lib/gnmi-sidecar\n              readOnly: true\n"}},
			want: []string{`journal-dir "/var/lib/gnmi-sidecar/journal": not on a writable volume claim template`}},
		{name: "loopback listener", edits: []edit{{cm, "listen: 0.0.0.0:9339", "listen: 127.0.0.1:9339"}},
			want: []string{"listen 127.0.0.1:9339: loopback"}},
		{name: "metrics left at its default", edits: []edit{{cm, "    metrics: 0.0.0.0:9341\n", ""}},
			want: []string{"metrics 127.0.0.1:9341: loopback"}},
		{name: "listener on an undeclared port", edits: []edit{{cm, "listen: 0.0.0.0:9339", "listen: 0.0.0.0:57400"}},
			want: []string{"listen 0.0.0.0:57400: the container declares no port 57400"}},
		{name: "probe on the wrong port", edits: []edit{{sts, "path: /healthz\n              port: metrics", "path: /healthz\n              port: gnmi"}},
			want: []string{"readinessProbe: want httpGet /healthz on the metrics listener (port 9341)"}},
		{name: "grace shorter than the shutdown", edits: []edit{{sts, "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 20"}},
			want: []string{"terminationGracePeriodSeconds 20: must exceed shutdown-timeout (20s)"}},

		// The systemd units and the option file.
		{name: "unit: unknown option", edits: []edit{{unit, "--config /etc", "--configuration /etc"}},
			want: []string{"gnmi-sidecar.service: ExecStart=: gnmi-sidecar serve refuses the options: unknown flag: --configuration"}},
		{name: "unit: not the sidecar", edits: []edit{{unit, "ExecStart=/usr/local/bin/gnmi-sidecar serve", "ExecStart=/usr/local/bin/gnmi-sidecar run"}},
			want: []string{"gnmi-sidecar.service: ExecStart=: want gnmi-sidecar serve and its options"}},
		{name: "unit: verify", analyzer: true, edits: []edit{{unit, "Type=simple", "Type=simpel"}},
			want: []string{"gnmi-sidecar.service: systemd-analyze verify: gnmi-sidecar.service:", "Failed to parse service type, ignoring: simpel"}},
		{name: "unit: security", analyzer: true, edits: []edit{{unit, "SystemCallFilter=@system-service\n", ""}, {unit, "PrivateUsers=yes\n", ""}, {unit, "CapabilityBoundingSet=\n", ""}, {unit, "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n", ""}, {unit, "ProtectSystem=strict\n", ""}, {unit, "PrivateDevices=yes\n", ""}},
			want: []string{"gnmi-sidecar.service: systemd-analyze security (threshold 2.0)"}},
		{name: "option file: unknown option", edits: []edit{{"config.yaml", "log-format: json", "log-format: json\nverbose: true"}},
			want: []string{"deploy/config.yaml: gnmi-sidecar serve refuses the options: unknown flag: --verbose"}},
		{name: "option file: not a mapping", edits: []edit{{"config.yaml", "target: leaf1", "- target: leaf1"}},
			want: []string{"deploy/config.yaml: yaml: "}},
	}
	_, noAnalyzer := exec.LookPath("systemd-analyze")
	base := readDeploy(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.analyzer && noAnalyzer != nil {
				t.Skip("systemd-analyze is not installed")
			}
			files := map[string]string{}
			for k, v := range base {
				files[k] = v
			}
			for _, e := range tt.edits {
				if e.old == "" {
					files[e.file] += e.new
					continue
				}
				if !strings.Contains(files[e.file], e.old) {
					t.Fatalf("deploy/%s does not contain %q", e.file, e.old)
				}
				files[e.file] = strings.Replace(files[e.file], e.old, e.new, 1)
			}
			problems := run(files)
			got := strings.Join(problems, "\n")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("no problem contains %q; got:\n%s", w, got)
				}
			}
			for _, p := range problems {
				if !slices.ContainsFunc(tt.want, func(w string) bool { return strings.Contains(p, w) }) {
					t.Errorf("unexpected problem: %s", p)
				}
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	got := parseArgs([]string{"--config", "/c.yaml", "--insecure", "--listen=:1", "--x"})
	want := map[string]string{"config": "/c.yaml", "insecure": "true", "listen": ":1", "x": "true"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
