package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The repository's deployment files, which the tests break one way at a
// time.
const (
	deployDir  = "../../deploy"
	dockerfile = "../../Dockerfile"
)

// fakeFlags parses serve's command line like pflag does, from a list of
// flags and their types: the tests do not need a gnmi-sidecar binary
// (make lint runs deploycheck with the real one).
type fakeFlags map[string]string

var serveFlags = fakeFlags{
	"listen": "string", "target": "string", "journal-dir": "string", "config": "string",
	"persistent-device": "bool", "queue-when-disconnected": "bool", "master-arbitration": "bool",
	"device-tls": "bool", "device-ca": "string", "device-cert": "string", "device-key": "string",
	"device-server-name": "string", "device-skip-verify": "bool", "device-username": "string",
	"device-password-file": "string", "trace": "string", "apply-timeout": "duration",
	"shutdown-timeout": "duration", "log-level": "string", "log-format": "string",
	"tls-cert": "string", "tls-key": "string", "tls-client-ca": "string", "insecure": "bool",
	"authz-file": "string", "metrics": "string", "reflection": "bool",
}

func (f fakeFlags) parse(args []string) *flagError {
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		typ, ok := f[name]
		if !ok {
			return &flagError{flag: name, unknown: true, msg: "unknown flag: --" + name}
		}
		if !hasValue && typ != "bool" {
			if i+1 == len(args) {
				return &flagError{flag: name, msg: "flag needs an argument: --" + name}
			}
			i++
			value = args[i]
		}
		var err error
		switch {
		case typ == "bool" && hasValue:
			_, err = strconv.ParseBool(value)
		case typ == "duration":
			_, err = time.ParseDuration(value)
		}
		if err != nil {
			return &flagError{flag: name, msg: `invalid argument "` + value + `" for "--` + name + `" flag: ` + err.Error()}
		}
	}
	return nil
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
	for _, want := range []string{"kubernetes/statefulset.yaml", "kubernetes/service.yaml", "kubernetes/configmap.yaml", "kubernetes/secret.yaml", "systemd/gnmi-sidecar.service", "systemd/gnmi-sidecar@.service", "config.yaml"} {
		if _, ok := files[want]; !ok {
			t.Fatalf("deploy/%s is missing", want)
		}
	}
	return files
}

// run checks the files with the fake flags, without systemd-analyze.
func run(files map[string]string) *report {
	c := newChecker()
	c.flags = serveFlags
	var in []file
	for _, name := range sortedKeys(files) {
		in = append(in, file{name: "deploy/" + name, data: []byte(files[name])})
	}
	c.check(in)
	return c.r
}

func sortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

func problems(r *report) string {
	var b strings.Builder
	for _, p := range r.problems {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// The repository's files pass, without a warning.
func TestRepositoryFiles(t *testing.T) {
	if r := run(readDeploy(t)); len(r.problems) > 0 {
		t.Errorf("deploy/ has problems:\n%s", problems(r))
	}
	c := newChecker()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	c.checkDockerfile(file{"Dockerfile", data}, gomod)
	if len(c.r.problems) > 0 {
		t.Errorf("Dockerfile has problems:\n%s", problems(c.r))
	}
}

// edit is a change to one file of deploy/: old (which must be there)
// replaced by new.
type edit struct {
	file, old, new string
}

// Each broken variant of the repository's files fails with the error
// expected, and only the errors expected.
func TestBroken(t *testing.T) {
	const (
		sts = "kubernetes/statefulset.yaml"
		svc = "kubernetes/service.yaml"
		cm  = "kubernetes/configmap.yaml"
		sec = "kubernetes/secret.yaml"
	)
	tests := []struct {
		name  string
		edits []edit
		want  []string // each in an error
	}{
		// Decoding: the API types, strictly.
		{"unknown field", []edit{{sts, "runAsNonRoot: true", "runAsNonRoot: true\n        runAsNonroot: true"}},
			[]string{`unknown field "spec.template.spec.securityContext.runAsNonroot"`}},
		{"misspelt case", []edit{{sts, "containerPort: 9341", "containerport: 9341"}},
			[]string{`unknown field "spec.template.spec.containers[0].ports[1].containerport"`}},
		{"wrong type", []edit{{sts, "replicas: 1", `replicas: "1"`}},
			[]string{"cannot unmarshal string into Go struct field", "spec.replicas"}},
		{"wrong type in a list", []edit{{sts, "- ReadWriteOnce", "- [ReadWriteOnce]"}},
			[]string{"cannot unmarshal array into Go struct field", "accessModes"}},
		{"duplicate key", []edit{{sts, "  serviceName: gnmi-sidecar-leaf1", "  serviceName: gnmi-sidecar-leaf1\n  serviceName: gnmi-sidecar-leaf2"}},
			[]string{`"serviceName" already set in map`}},
		{"bad quantity", []edit{{sts, "memory: 150Mi", "memory: 150MB"}},
			[]string{"quantities must match the regular expression"}},
		{"bad base64 in data", []edit{{sec, "type: Opaque\nstringData:", "type: Opaque\ndata:\n  extra: not base64!\nstringData:"}},
			[]string{"illegal base64 data"}},
		{"unknown kind", []edit{{svc, "kind: Service", "kind: Ingress"}},
			[]string{"v1 Ingress: not a kind deploycheck knows", "spec.serviceName: error: Service gnmi-sidecar-leaf1 is not in the manifests"}},
		{"a Deployment", []edit{{sts, "kind: StatefulSet", "kind: Deployment"}},
			[]string{"Deployment: a Deployment's rolling update starts the new pod before the old one stops"}},

		// The API server's validation.
		{"selector does not match the template", []edit{{sts, "      labels:\n        app.kubernetes.io/name: gnmi-sidecar\n        app.kubernetes.io/instance: gnmi-sidecar-leaf1\n      annotations:", "      labels:\n        app.kubernetes.io/name: gnmi-sidecar\n        app.kubernetes.io/instance: gnmi-sidecar-leaf2\n      annotations:"}},
			[]string{"`selector` does not match template `labels`", "does not select the pods of gnmi-sidecar-leaf1", "selects no pod of the manifests"}},
		{"bad name", []edit{{sts, "name: gnmi-sidecar-leaf1\n  labels", "name: gnmi_sidecar_leaf1\n  labels"}},
			[]string{"metadata.name: Invalid value: \"gnmi_sidecar_leaf1\""}},
		{"bad label value", []edit{{cm, "app.kubernetes.io/instance: gnmi-sidecar-leaf1", "app.kubernetes.io/instance: gnmi sidecar"}},
			[]string{"metadata.labels: Invalid value: \"gnmi sidecar\""}},
		{"probe on an undeclared port", []edit{{sts, "path: /healthz\n              port: metrics", "path: /healthz\n              port: metric"}},
			[]string{"readinessProbe.httpGet.port: Invalid value: \"metric\": not a port name of the container", "want /healthz on the metrics listener"}},
		{"request above limit", []edit{{sts, "memory: 300Mi", "memory: 100Mi"}},
			[]string{"resources.requests[memory]: Invalid value: \"150Mi\": must be less than or equal to memory limit of 100Mi"}},
		{"mount of no volume", []edit{{sts, "- name: device\n              mountPath", "- name: devices\n              mountPath"}},
			[]string{"volumeMounts[4].name: Not found: \"devices\""}},
		{"volume with two sources", []edit{{sts, "            defaultMode: 0440\n        - name: client-ca", "            defaultMode: 0440\n          emptyDir: {}\n        - name: client-ca"}},
			[]string{"may not specify more than 1 volume type: emptyDir, secret"}},
		{"no image", []edit{{sts, "image: registry.example.com/gnmi-sidecar:0.1.0", "image: \"\""}},
			[]string{"containers[0].image: Required value"}},
		{"tls Secret without key", []edit{{sec, "  tls.key: |", "  tls.pem: |"}},
			[]string{"data[tls.key]: Required value: a kubernetes.io/tls Secret needs it", "tls-key /etc/gnmi-sidecar/tls/tls.key: Secret gnmi-sidecar-leaf1-tls has no such key"}},

		// References between the objects.
		{"missing Secret", []edit{{sts, "secretName: gnmi-sidecar-leaf1-device", "secretName: gnmi-sidecar-leaf9-device"}},
			[]string{"volume device: error: Secret gnmi-sidecar-leaf9-device is not in the manifests"}},
		{"missing ConfigMap key", []edit{{sts, "- key: authz.yaml", "- key: authz.yml"}},
			[]string{"ConfigMap gnmi-sidecar-leaf1 has no key \"authz.yml\"", "authz-file /etc/gnmi-sidecar/config/authz.yaml: ConfigMap gnmi-sidecar-leaf1 has no such key"}},
		{"service not headless", []edit{{svc, "  clusterIP: None\n", ""}},
			[]string{"Service gnmi-sidecar-leaf1 is not headless"}},
		{"service on an undeclared port", []edit{{svc, "targetPort: metrics", "targetPort: metric"}},
			[]string{"spec.ports[1].targetPort metric: no container of the selected pods declares it"}},
		{"no serviceName Service", []edit{{sts, "serviceName: gnmi-sidecar-leaf1", "serviceName: gnmi-sidecar"}},
			[]string{"spec.serviceName: error: Service gnmi-sidecar is not in the manifests"}},
		{"an object twice", []edit{{sec, "name: gnmi-sidecar-leaf1-tls", "name: gnmi-sidecar-leaf1-device"}},
			[]string{"Secret gnmi-sidecar-leaf1-device is also defined in", "Secret gnmi-sidecar-leaf1-tls is not in the manifests"}},

		// The sidecar's options, in the ConfigMap.
		{"unknown option", []edit{{cm, "log-format: json", "log-format: json\n    log-colour: auto"}},
			[]string{"data[config.yaml]:24: error: gnmi-sidecar serve refuses it: unknown flag: --log-colour"}},
		{"bad option value", []edit{{cm, "shutdown-timeout: 20s", "shutdown-timeout: 20"}},
			[]string{`invalid argument "20" for "--shutdown-timeout" flag`}},
		{"option twice", []edit{{cm, "log-format: json", "log-format: json\n    log-format: text"}},
			[]string{"log-format: set twice"}},
		{"option without a value", []edit{{cm, "log-format: json", "log-format:"}},
			[]string{`log-format: no value (write "" for an empty one)`}},
		{"config not mounted", []edit{{sts, "- /etc/gnmi-sidecar/config/config.yaml", "- /etc/gnmi-sidecar/conf/config.yaml"}},
			[]string{"--config /etc/gnmi-sidecar/conf/config.yaml: on no volume of the container"}},
		{"journal not on the claim", []edit{{cm, "journal-dir: /var/lib/gnmi-sidecar/journal", "journal-dir: /etc/gnmi-sidecar/config/journal"}},
			[]string{"journal-dir /etc/gnmi-sidecar/config/journal: on volume config, not on a volume claim template"}},
		{"journal in the image", []edit{{cm, "journal-dir: /var/lib/gnmi-sidecar/journal", "journal-dir: /data"}},
			[]string{"journal-dir /data: not on a volume of the container"}},
		{"file not mounted", []edit{{cm, "device-ca: /etc/gnmi-sidecar/device/ca.crt", "device-ca: /etc/ssl/device-ca.crt"}},
			[]string{"device-ca /etc/ssl/device-ca.crt: on no volume of the container"}},
		{"key not in the Secret", []edit{{cm, "tls-key: /etc/gnmi-sidecar/tls/tls.key", "tls-key: /etc/gnmi-sidecar/tls/key.pem"}},
			[]string{"tls-key /etc/gnmi-sidecar/tls/key.pem: Secret gnmi-sidecar-leaf1-tls has no such key"}},
		{"secret in a ConfigMap", []edit{{cm, "device-password-file: /etc/gnmi-sidecar/device/password", "device-password-file: /etc/gnmi-sidecar/config/config.yaml"}},
			[]string{"device-password-file /etc/gnmi-sidecar/config/config.yaml: from ConfigMap gnmi-sidecar-leaf1: a secret belongs in a Secret"}},
		{"loopback listener", []edit{{cm, "listen: 0.0.0.0:9339", "listen: 127.0.0.1:9339"}},
			[]string{"listen 127.0.0.1:9339: loopback, out of reach of everything outside the pod"}},
		{"metrics left at its default", []edit{{cm, "    metrics: 0.0.0.0:9341\n", ""}},
			[]string{"metrics 127.0.0.1:9341: loopback"}},
		{"listener on an undeclared port", []edit{{cm, "listen: 0.0.0.0:9339", "listen: 0.0.0.0:57400"}},
			[]string{"listen 0.0.0.0:57400: the container declares no port 57400"}},
		{"plaintext", []edit{{cm, "    tls-cert: /etc/gnmi-sidecar/tls/tls.crt\n    tls-key: /etc/gnmi-sidecar/tls/tls.key\n    tls-client-ca: /etc/gnmi-sidecar/client-ca/ca.crt\n", ""}},
			[]string{"listen 0.0.0.0:9339 without tls-cert: the sidecar refuses"}},
		{"bad authz role", []edit{{cm, "role: read", "role: reader"}},
			[]string{`certificates.telemetry-collector.role "reader": want read, write or admin`}},
		{"authz users in a ConfigMap", []edit{{cm, "    certificates:\n      netops-automation:", "    users:\n      alice:\n        role: admin\n        password_hash: $2b$10$abcdefghijklmnopqrstuv\n    certificates:\n      netops-automation:"}},
			[]string{"lists users with password hashes: it belongs in a Secret"}},
		{"command line wins", []edit{{sts, "- /etc/gnmi-sidecar/config/config.yaml", "- /etc/gnmi-sidecar/config/config.yaml\n            - --journal-dir=/tmp/journal"}},
			[]string{"args: error: journal-dir /tmp/journal: not on a volume of the container"}},

		// The sidecar's rules for its pod.
		{"two replicas", []edit{{sts, "replicas: 1", "replicas: 2"}},
			[]string{"spec.replicas: error: must be 1"}},
		{"grace shorter than the shutdown", []edit{{sts, "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 20"}},
			[]string{"terminationGracePeriodSeconds: error: 20: must exceed shutdown-timeout (20s)"}},
		{"liveness on health", []edit{{sts, "livenessProbe:\n            tcpSocket:\n              port: gnmi", "livenessProbe:\n            httpGet:\n              path: /healthz\n              port: metrics"}},
			[]string{"/healthz fails while the device is unreachable: the kubelet would restart a healthy sidecar"}},
		{"grpc probe on TLS", []edit{{sts, "httpGet:\n              path: /healthz\n              port: metrics", "grpc:\n              port: 9339"}},
			[]string{"a grpc probe on the TLS gNMI port fails"}},
		{"no readiness probe", []edit{{sts, "          readinessProbe:\n            httpGet:\n              path: /healthz\n              port: metrics\n            periodSeconds: 5\n            timeoutSeconds: 2\n            failureThreshold: 2\n", ""}},
			[]string{"readinessProbe: error: required"}},
		{"scrape the wrong port", []edit{{sts, `prometheus.io/port: "9341"`, `prometheus.io/port: "9339"`}},
			[]string{`prometheus.io/port "9339": the metrics listener is 0.0.0.0:9341`}},
		{"writable root", []edit{{sts, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false"}},
			[]string{"readOnlyRootFilesystem: true is required"}},
		{"root", []edit{{sts, "runAsNonRoot: true", "runAsNonRoot: false"}, {sts, "runAsUser: 65532", "runAsUser: 0"}},
			[]string{"runAsNonRoot: true is required", "runAsUser 0 is root"}},
		{"password in the manifest", []edit{{sts, "          env:\n", "          env:\n            - name: GNMI_SIDECAR_DEVICE_PASSWORD\n              value: secret\n"}},
			[]string{"the device password must come from a Secret", "and device-password-file: the sidecar refuses both"}},
		{"no memory limit", []edit{{sts, "              cpu: \"1\"\n              memory: 300Mi\n", "              cpu: \"1\"\n"}},
			[]string{"resources.limits.memory: error: required"}},

		// The systemd units.
		{"unit: stop timeout", []edit{{"systemd/gnmi-sidecar@.service", "TimeoutStopSec=30s", "TimeoutStopSec=20s"}},
			[]string{"TimeoutStopSec 20s: must exceed shutdown-timeout (20s, deploy/config.yaml:29)"}},
		{"unit: journal outside the state directory", []edit{{"systemd/gnmi-sidecar@.service", "--journal-dir %S/gnmi-sidecar/%i", "--journal-dir /srv/%i"}},
			[]string{"--journal-dir /srv/%i: not the StateDirectory= (gnmi-sidecar/%i)"}},
		{"unit: credential not loaded", []edit{{"systemd/gnmi-sidecar.service", "LoadCredential=tls.key:", "LoadCredential=tls-key:"}},
			[]string{"ExecStart: %d/tls.key: no LoadCredential=tls.key:... gives it"}},
		{"unit: unknown option", []edit{{"systemd/gnmi-sidecar.service", "--config /etc", "--configuration /etc"}},
			[]string{"ExecStart: error: gnmi-sidecar serve refuses it: unknown flag: --configuration"}},
		{"unit: root", []edit{{"systemd/gnmi-sidecar.service", "DynamicUser=yes", "DynamicUser=no"}},
			[]string{"runs as root"}},
		{"unit: no restart", []edit{{"systemd/gnmi-sidecar.service", "Restart=on-failure\n", ""}},
			[]string{"Restart=: unset or no"}},
		{"unit: wrong type", []edit{{"systemd/gnmi-sidecar.service", "Type=simple", "Type=notify"}},
			[]string{"Type=notify: the sidecar is a simple service"}},
		{"option file: unknown option", []edit{{"config.yaml", "log-format: json", "log-format: json\nverbose: true"}},
			[]string{"deploy/config.yaml:31: error: gnmi-sidecar serve refuses it: unknown flag: --verbose"}},
	}
	base := readDeploy(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range base {
				files[k] = v
			}
			for _, e := range tt.edits {
				if !strings.Contains(files[e.file], e.old) {
					t.Fatalf("deploy/%s does not contain %q", e.file, e.old)
				}
				files[e.file] = strings.Replace(files[e.file], e.old, e.new, 1)
			}
			r := run(files)
			got := problems(r)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("no problem contains %q; got:\n%s", w, got)
				}
			}
			for _, p := range r.problems {
				expected := false
				for _, w := range tt.want {
					expected = expected || strings.Contains(p.String(), w)
				}
				if !expected {
					t.Errorf("unexpected problem: %s", p)
				}
			}
			if r.errors() == 0 {
				t.Errorf("no error")
			}
		})
	}
}

// Every unknown option is an error, and checking goes on after it.
func TestUnknownFlags(t *testing.T) {
	c := newChecker()
	c.flags = serveFlags
	c.checkFlags([]string{"--metrics=0.0.0.0:9341", "--journal-dir", "/x", "--bogus", "--listen=:1", "--colour", "auto"}, func(f string) string { return "here --" + f })
	got := problems(c.r)
	for _, want := range []string{
		"here --bogus: error: gnmi-sidecar serve refuses it: unknown flag: --bogus",
		"here --colour: error: gnmi-sidecar serve refuses it: unknown flag: --colour",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if c.r.errors() != 2 || len(c.r.problems) != 2 {
		t.Errorf("want 2 errors, got:\n%s", got)
	}
}

// binaryFlags reads the flag at fault from what gnmi-sidecar prints.
func TestBinaryFlags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gnmi-sidecar")
	// A stand-in for gnmi-sidecar: pflag's messages for the flags below.
	script := `#!/bin/sh
for a in "$@"; do
  case "$a" in
  --bogus*) echo 'Error: unknown flag: --bogus' >&2; exit 2;;
  --shutdown-timeout=2x) echo 'Error: invalid argument "2x" for "--shutdown-timeout" flag: time: unknown unit "x" in duration "2x"' >&2; exit 2;;
  --crash) echo 'panic: boom' >&2; exit 2;;
  esac
done
exit 0
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := binaryFlags{path: bin}
	if fe := b.parse([]string{"--listen=0.0.0.0:9339"}); fe != nil {
		t.Errorf("good flags: %+v", fe)
	}
	if fe := b.parse([]string{"--bogus=1"}); fe == nil || fe.flag != "bogus" || !fe.unknown {
		t.Errorf("unknown flag: %+v", fe)
	}
	if fe := b.parse([]string{"--shutdown-timeout=2x"}); fe == nil || fe.flag != "shutdown-timeout" || fe.unknown {
		t.Errorf("bad value: %+v", fe)
	}
	if fe := b.parse([]string{"--crash"}); fe == nil || fe.flag != "" || fe.msg != "panic: boom" {
		t.Errorf("other failure: %+v", fe)
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, gomod, old, new, want string
	}{
		{"go.mod moved on", "module m\n\ngo 1.27.1\n", "", "", "FROM golang:1.26: Go 1.26, go.mod says go 1.27"},
		{"unpinned", "module m\n\ngo 1.26.0\n", "golang:${GO_VERSION}", "golang:latest", "FROM golang:latest: pin the Go release of go.mod"},
		{"root", "module m\n\ngo 1.26.0\n", "USER 65532:65532", "USER root", "the final image runs as root"},
		{"shell entrypoint", "module m\n\ngo 1.26.0\n", `ENTRYPOINT ["/usr/local/bin/gnmi-sidecar"]`, "ENTRYPOINT /usr/local/bin/gnmi-sidecar", "ENTRYPOINT: want the exec form"},
		{"bad flag", "module m\n\ngo 1.26.0\n", "COPY --from=build --chown=65532:65532", "COPY --from=build --chwon=65532:65532", "unknown flag: --chwon"},
		{"build check", "module m\n\ngo 1.26.0\n", "AS build", "as Build", "build check FromAsCasing"},
		{"unknown instruction", "module m\n\ngo 1.26.0\n", "EXPOSE 9339 9341", "EXPOSES 9339 9341", "unknown instruction: EXPOSES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := string(data)
			if tt.old != "" {
				if !strings.Contains(d, tt.old) {
					t.Fatalf("Dockerfile does not contain %q", tt.old)
				}
				d = strings.Replace(d, tt.old, tt.new, 1)
			}
			c := newChecker()
			c.checkDockerfile(file{"Dockerfile", []byte(d)}, []byte(tt.gomod))
			got := problems(c.r)
			if !strings.Contains(got, tt.want) {
				t.Errorf("want an error with %q, got:\n%s", tt.want, got)
			}
		})
	}
}

func TestParseUnit(t *testing.T) {
	entries, err := parseUnit([]byte("[Service]\n# c\nExecStart=/bin/x \\\n  --a 1 \\\n  # inside\n  --b \"two words\"\nUser=x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].key != "ExecStart" || entries[0].line != 3 || entries[1].line != 7 {
		t.Fatalf("entries: %+v", entries)
	}
	words, err := splitCommand(entries[0].value)
	if err != nil || strings.Join(words, "|") != "/bin/x|--a|1|--b|two words" {
		t.Errorf("words %q, %v", words, err)
	}
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "90": 90 * time.Second, "1min 30s": 90 * time.Second, "2min": 2 * time.Minute} {
		if got, err := parseTimespan(in); err != nil || got != want {
			t.Errorf("parseTimespan(%q) = %v, %v; want %v", in, got, err, want)
		}
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
	if got := strings.Join(dropFlag([]string{"--a", "1", "--b=2", "--c", "--a=3"}, "a"), " "); got != "--b=2 --c" {
		t.Errorf("dropFlag: %q", got)
	}
}
