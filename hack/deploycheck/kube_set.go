package main

// The manifests as a set: references between objects, and the sidecar's
// own rules for its StatefulSet.

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// graceMargin is how much longer than shutdown-timeout the sidecar needs to
// stop: after the timeout it waits up to a second more for the Sets still in
// flight, then stops the agent and closes the journal.
const graceMargin = 5 * time.Second

// index finds the manifests' objects by kind and name.
type index map[string]*object

func key(kind, name string) string { return kind + "/" + name }

func (idx index) configMap(name string) *corev1.ConfigMap {
	if o := idx[key("ConfigMap", name)]; o != nil {
		return o.obj.(*corev1.ConfigMap)
	}
	return nil
}

func (idx index) secret(name string) *corev1.Secret {
	if o := idx[key("Secret", name)]; o != nil {
		return o.obj.(*corev1.Secret)
	}
	return nil
}

// missing reports a reference to an object not in the manifests, unless
// the object is there but did not decode (reported already).
func (c *checker) missing(where, kind, name string) {
	if !c.broken[key(kind, name)] {
		c.r.errorf(where, "%s %s is not in the manifests", kind, name)
	}
}

// checkManifests checks the objects against each other and the sidecar's
// StatefulSets against its rules.
func (c *checker) checkManifests() {
	idx := index{}
	for _, o := range c.objects {
		k := key(o.kind, o.name)
		if prev := idx[k]; prev != nil {
			c.r.errorf(o.where(), "%s %s is also defined in %s", o.kind, o.name, prev.file)
			continue
		}
		idx[k] = o
	}
	for _, o := range c.objects {
		switch obj := o.obj.(type) {
		case *appsv1.StatefulSet:
			c.checkPodRefs(o, &obj.Spec.Template.Spec, idx)
			c.checkServiceName(o, obj, idx)
			for i := range obj.Spec.Template.Spec.Containers {
				if isSidecar(&obj.Spec.Template.Spec.Containers[i]) {
					c.checkSidecar(o, obj, i, idx)
				}
			}
		case *corev1.Service:
			c.checkServiceTargets(o, obj)
		}
	}
}

// brokenKind: an object of the kind (or of a kind deploycheck does not
// know) did not decode.
func (c *checker) brokenKind(kind string) bool {
	for k := range c.broken {
		if k == kind || strings.HasPrefix(k, kind+"/") || !strings.Contains(k, "/") {
			return true
		}
	}
	return false
}

// isSidecar: a container of the gnmi-sidecar image.
func isSidecar(ctr *corev1.Container) bool {
	image := ctr.Image
	if i := strings.LastIndexAny(image, ":@"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return path.Base(image) == "gnmi-sidecar"
}

// checkPodRefs: the ConfigMaps, Secrets and keys the pod mounts or reads
// are in the set (unless optional).
func (c *checker) checkPodRefs(o *object, spec *corev1.PodSpec, idx index) {
	for _, v := range spec.Volumes {
		where := fmt.Sprintf("%s: volume %s", o.where(), v.Name)
		switch {
		case v.ConfigMap != nil:
			cm := idx.configMap(v.ConfigMap.Name)
			if cm == nil {
				if !isTrue(v.ConfigMap.Optional) {
					c.missing(where, "ConfigMap", v.ConfigMap.Name)
				}
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if _, ok := configMapValue(cm, it.Key); !ok && !isTrue(v.ConfigMap.Optional) {
					c.r.errorf(where, "ConfigMap %s has no key %q", cm.Name, it.Key)
				}
			}
		case v.Secret != nil:
			s := idx.secret(v.Secret.SecretName)
			if s == nil {
				if !isTrue(v.Secret.Optional) {
					c.missing(where, "Secret", v.Secret.SecretName)
				}
				continue
			}
			for _, it := range v.Secret.Items {
				if !secretKeys(s).Has(it.Key) && !isTrue(v.Secret.Optional) {
					c.r.errorf(where, "Secret %s has no key %q", s.Name, it.Key)
				}
			}
		}
	}
	for _, ctr := range spec.Containers {
		for _, e := range ctr.Env {
			if e.ValueFrom == nil {
				continue
			}
			where := fmt.Sprintf("%s: container %s: env %s", o.where(), ctr.Name, e.Name)
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil && !isTrue(ref.Optional) {
				if cm := idx.configMap(ref.Name); cm == nil {
					c.missing(where, "ConfigMap", ref.Name)
				} else if _, ok := configMapValue(cm, ref.Key); !ok {
					c.r.errorf(where, "ConfigMap %s has no key %q", ref.Name, ref.Key)
				}
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil && !isTrue(ref.Optional) {
				if s := idx.secret(ref.Name); s == nil {
					c.missing(where, "Secret", ref.Name)
				} else if !secretKeys(s).Has(ref.Key) {
					c.r.errorf(where, "Secret %s has no key %q", ref.Name, ref.Key)
				}
			}
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

func configMapValue(cm *corev1.ConfigMap, k string) ([]byte, bool) {
	if v, ok := cm.Data[k]; ok {
		return []byte(v), true
	}
	v, ok := cm.BinaryData[k]
	return v, ok
}

func secretValue(s *corev1.Secret, k string) ([]byte, bool) {
	if v, ok := s.StringData[k]; ok {
		return []byte(v), true
	}
	v, ok := s.Data[k]
	return v, ok
}

// checkServiceName: a StatefulSet's serviceName is a headless Service of
// the set that selects its pods (the pods' DNS names come from it).
func (c *checker) checkServiceName(o *object, s *appsv1.StatefulSet, idx index) {
	where := o.where() + ": spec.serviceName"
	if s.Spec.ServiceName == "" {
		c.r.errorf(where, "required: the headless Service that gives the pod its DNS name")
		return
	}
	so := idx[key("Service", s.Spec.ServiceName)]
	if so == nil {
		c.missing(where, "Service", s.Spec.ServiceName)
		return
	}
	svc := so.obj.(*corev1.Service)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		c.r.errorf(where, "Service %s is not headless (clusterIP: None): the pod gets no DNS name of its own", svc.Name)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
		c.r.errorf(where, "Service %s does not select the pods of %s (selector %v, pod labels %v)", svc.Name, s.Name, svc.Spec.Selector, s.Spec.Template.Labels)
	}
}

// checkServiceTargets: a Service selects pods of the set, on ports they
// declare.
func (c *checker) checkServiceTargets(o *object, svc *corev1.Service) {
	if len(svc.Spec.Selector) == 0 {
		return // endpoints managed by hand
	}
	var pods []*corev1.PodTemplateSpec
	for _, other := range c.objects {
		if s, ok := other.obj.(*appsv1.StatefulSet); ok && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
			pods = append(pods, &s.Spec.Template)
		}
	}
	if len(pods) == 0 {
		if !c.brokenKind("StatefulSet") {
			c.r.errorf(o.where(), "spec.selector %v selects no pod of the manifests", svc.Spec.Selector)
		}
		return
	}
	for i, port := range svc.Spec.Ports {
		target := port.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(port.Port)
		}
		for _, pod := range pods {
			if _, ok := podPort(&pod.Spec, target); !ok {
				c.r.errorf(o.where(), "spec.ports[%d].targetPort %s: no container of the selected pods declares it", i, target.String())
			}
		}
	}
}

// podPort finds a port (by name or number) among the pod's containers.
func podPort(spec *corev1.PodSpec, p intstr.IntOrString) (int32, bool) {
	for _, ctr := range spec.Containers {
		if n, ok := containerPort(&ctr, p); ok {
			return n, true
		}
	}
	return 0, false
}

// containerPort resolves a port (by name or number) among a container's.
func containerPort(ctr *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range ctr.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// mountFor finds the mount (the deepest) a path of the container is on;
// rel is the path within the volume.
func mountFor(ctr *corev1.Container, p string) (m *corev1.VolumeMount, rel string) {
	p = path.Clean(p)
	for i := range ctr.VolumeMounts {
		vm := &ctr.VolumeMounts[i]
		mp := path.Clean(vm.MountPath)
		if p != mp && !strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			continue
		}
		if m == nil || len(mp) > len(path.Clean(m.MountPath)) {
			m = vm
			rel = strings.TrimPrefix(strings.TrimPrefix(p, mp), "/")
			if vm.SubPath != "" {
				rel = path.Join(vm.SubPath, rel)
			}
		}
	}
	return m, rel
}

// fileOf is what a path of the container is.
type fileOf struct {
	mount    *corev1.VolumeMount
	volume   *corev1.Volume                // nil for a claim
	claim    *corev1.PersistentVolumeClaim // nil for a volume
	object   string                        // "ConfigMap NAME" or "Secret NAME", if from one
	owner    *object                       // that object, if in the manifests
	key      string                        // the key of the file in it
	secret   bool                          // from a Secret
	content  []byte                        // the content, if from an object of the set
	found    bool                          // content holds the file
	inSet    bool                          // the object is in the manifests
	isDir    bool                          // the path is the mount point itself
	relative string
}

// resolve says where a path of the sidecar container comes from.
func resolve(s *appsv1.StatefulSet, ctr *corev1.Container, idx index, p string) (fileOf, bool) {
	m, rel := mountFor(ctr, p)
	if m == nil {
		return fileOf{}, false
	}
	f := fileOf{mount: m, relative: rel, isDir: rel == "" && m.SubPath == ""}
	for i := range s.Spec.VolumeClaimTemplates {
		if s.Spec.VolumeClaimTemplates[i].Name == m.Name {
			f.claim = &s.Spec.VolumeClaimTemplates[i]
			return f, true
		}
	}
	for i := range s.Spec.Template.Spec.Volumes {
		if v := &s.Spec.Template.Spec.Volumes[i]; v.Name == m.Name {
			f.volume = v
		}
	}
	if f.volume == nil || f.isDir {
		return f, true
	}
	// The key a file of a ConfigMap or Secret volume comes from.
	keyFor := func(items []corev1.KeyToPath) (string, bool) {
		if len(items) == 0 {
			return rel, !strings.Contains(rel, "/")
		}
		for _, it := range items {
			if path.Clean(it.Path) == rel {
				return it.Key, true
			}
		}
		return "", false
	}
	switch v := f.volume; {
	case v.ConfigMap != nil:
		f.object = "ConfigMap " + v.ConfigMap.Name
		if cm := idx.configMap(v.ConfigMap.Name); cm != nil {
			f.inSet, f.owner = true, idx[key("ConfigMap", cm.Name)]
			if k, ok := keyFor(v.ConfigMap.Items); ok {
				f.key = k
				f.content, f.found = configMapValue(cm, k)
			}
		}
	case v.Secret != nil:
		f.object, f.secret = "Secret "+v.Secret.SecretName, true
		if sec := idx.secret(v.Secret.SecretName); sec != nil {
			f.inSet, f.owner = true, idx[key("Secret", sec.Name)]
			if k, ok := keyFor(v.Secret.Items); ok {
				f.key = k
				f.content, f.found = secretValue(sec, k)
			}
		}
	}
	return f, true
}

// secretOptions name files that hold secrets.
var secretOptions = map[string]bool{"tls-key": true, "device-key": true, "device-password-file": true}

// writtenOptions name paths the sidecar writes.
var writtenOptions = map[string]bool{"journal-dir": true, "trace": true}

// checkSidecar checks a gnmi-sidecar container of a StatefulSet: its
// command line and option file (parsed by the binary), where each file it
// names comes from, its listeners against ports, probes and Prometheus, the
// journal on the claim, the grace period, and its security context.
func (c *checker) checkSidecar(o *object, s *appsv1.StatefulSet, i int, idx index) {
	spec := &s.Spec.Template.Spec
	ctr := &spec.Containers[i]
	where := fmt.Sprintf("%s: container %s", o.where(), ctr.Name)

	if s.Spec.Replicas == nil || *s.Spec.Replicas != 1 {
		c.r.errorf(o.where()+": spec.replicas", "must be 1: one sidecar per journal (one StatefulSet per device)")
	}

	// The command line: the image's entrypoint is gnmi-sidecar.
	argv := ctr.Args
	if len(ctr.Command) > 0 {
		if path.Base(ctr.Command[0]) != "gnmi-sidecar" {
			c.r.errorf(where+": command", "%q: want the gnmi-sidecar binary (or no command: the image's entrypoint)", ctr.Command[0])
			return
		}
		argv = append(append([]string{}, ctr.Command[1:]...), ctr.Args...)
	}
	if len(argv) == 0 || argv[0] != "serve" {
		c.r.errorf(where+": args", "want serve and its options, got %q", argv)
		return
	}
	argv = argv[1:]
	c.checkFlags(argv, func(string) string { return where + ": args" })
	c.checkSecurity(o, spec, ctr, where)
	if _, ok := ctr.Resources.Requests[corev1.ResourceMemory]; !ok {
		c.r.errorf(where+": resources.requests.memory", "required: the scheduler must know what the sidecar needs")
	}
	if _, ok := ctr.Resources.Limits[corev1.ResourceMemory]; !ok {
		c.r.errorf(where+": resources.limits.memory", "required: bound the sidecar's memory")
	}
	if s.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		c.r.warnf(o.where()+": spec.template.metadata.annotations", "no prometheus.io/scrape: \"true\": Prometheus (annotation-based discovery) will not scrape the sidecar")
	}

	// The option file, from the ConfigMap (or Secret) mounted where
	// --config points. Without it, the checks of the options stop here.
	opts := map[string]string{}
	at := map[string]string{}
	flags := parseArgs(argv)
	if cfg, ok := flags["config"]; ok {
		f, mounted := resolve(s, ctr, idx, cfg)
		switch {
		case !mounted:
			c.r.errorf(where+": args", "--config %s: on no volume of the container", cfg)
			return
		case f.inSet && !f.found:
			c.r.errorf(where+": args", "--config %s: %s has no such key", cfg, f.object)
			return
		case !f.found:
			if !c.broken[strings.Replace(f.object, " ", "/", 1)] {
				c.r.warnf(where+": args", "--config %s: from %s, not in the manifests: the options are not checked", cfg, f.object)
			}
			return
		}
		of := parseOptions(c.r, fmt.Sprintf("%s: %s: data[%s]", f.owner.file, f.object, f.key), f.content)
		if of == nil {
			return
		}
		c.checkFlags(of.args(), func(flag string) string { return of.at(flag) })
		for _, k := range of.keys {
			opts[k], at[k] = of.values[k].value, of.at(k)
		}
	}
	for k, v := range flags { // the command line wins
		opts[k], at[k] = v, where+": args"
	}
	place := func(k string) string {
		if a, ok := at[k]; ok {
			return a
		}
		return where
	}

	// Files: on a volume; from an object of the set, a key it has.
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		v := opts[k]
		if k == "config" || !strings.HasPrefix(v, "/") {
			if strings.HasPrefix(v, "./") || strings.HasPrefix(v, "../") {
				c.r.errorf(place(k), "%s %s: relative to the image's working directory; give an absolute path on a volume", k, v)
			}
			continue
		}
		if k == "journal-dir" {
			continue // below
		}
		f, mounted := resolve(s, ctr, idx, v)
		switch {
		case !mounted:
			c.r.errorf(place(k), "%s %s: on no volume of the container (the image holds no such file)", k, v)
			continue
		case f.isDir:
			c.r.errorf(place(k), "%s %s: the mount point of volume %s, not a file in it", k, v, f.mount.Name)
		case f.inSet && !f.found:
			c.r.errorf(place(k), "%s %s: %s has no such key", k, v, f.object)
		}
		if writtenOptions[k] && (f.mount.ReadOnly || f.object != "") {
			c.r.errorf(place(k), "%s %s: the sidecar writes it, volume %s is read-only", k, v, f.mount.Name)
		}
		if secretOptions[k] && f.object != "" && !f.secret {
			c.r.errorf(place(k), "%s %s: from %s: a secret belongs in a Secret", k, v, f.object)
		}
		if k == "authz-file" && f.found {
			if users := checkAuthz(c.r, fmt.Sprintf("%s: %s: data[%s]", f.owner.file, f.object, f.key), f.content); users > 0 && !f.secret {
				c.r.errorf(place(k), "%s %s: lists users with password hashes: it belongs in a Secret, not %s", k, v, f.object)
			}
		}
	}

	// The journal: on the StatefulSet's claim, writable.
	if jd, ok := opts["journal-dir"]; !ok {
		c.r.errorf(where, "journal-dir is not set: set it to a directory on the volume claim (e.g. /var/lib/gnmi-sidecar/journal)")
	} else if f, mounted := resolve(s, ctr, idx, jd); !path.IsAbs(jd) || !mounted {
		c.r.errorf(place("journal-dir"), "journal-dir %s: not on a volume of the container", jd)
	} else if f.claim == nil {
		c.r.errorf(place("journal-dir"), "journal-dir %s: on volume %s, not on a volume claim template: the journal would not survive the pod", jd, f.mount.Name)
	} else if f.mount.ReadOnly {
		c.r.errorf(place("journal-dir"), "journal-dir %s: volume %s is mounted read-only", jd, f.mount.Name)
	}

	// The listeners.
	tls := opts["tls-cert"] != ""
	listen := valueOr(opts, "listen", defaultListen)
	gnmiPort := c.checkListener(ctr, place("listen"), "listen", listen)
	if host, _, err := splitAddr(listen); err == nil && !isLoopback(host) && !tls {
		if b, _ := strconv.ParseBool(valueOr(opts, "insecure", "false")); b {
			c.r.warnf(place("listen"), "listen %s: plaintext gNMI (insecure): anyone who reaches the pod can read and change the device's configuration", listen)
		} else {
			c.r.errorf(place("listen"), "listen %s without tls-cert: the sidecar refuses a non-loopback plaintext listener (serve TLS, or set insecure)", listen)
		}
	}
	metrics := valueOr(opts, "metrics", defaultMetrics)
	var metricsPort int32
	if metrics == "" {
		c.r.errorf(place("metrics"), "metrics \"\": off, but the readiness probe (/healthz) and Prometheus need the metrics listener")
	} else {
		metricsPort = c.checkListener(ctr, place("metrics"), "metrics", metrics)
	}
	if gnmiPort != 0 && gnmiPort == metricsPort {
		c.r.errorf(place("metrics"), "metrics %s: the same port as listen %s", metrics, listen)
	}

	// Probes: readiness from the health status on the metrics listener;
	// liveness not (an unreachable device is no reason for a restart).
	c.checkProbes(ctr, where, tls, gnmiPort, metricsPort)

	// Prometheus scrapes the metrics listener.
	if ann := s.Spec.Template.Annotations; ann["prometheus.io/scrape"] == "true" {
		if p := ann["prometheus.io/port"]; p != strconv.Itoa(int(metricsPort)) {
			c.r.errorf(o.where()+": spec.template.metadata.annotations", "prometheus.io/port %q: the metrics listener is %s", p, metrics)
		}
		if p, ok := ann["prometheus.io/path"]; ok && p != "/metrics" {
			c.r.errorf(o.where()+": spec.template.metadata.annotations", "prometheus.io/path %q: the metrics are at /metrics", p)
		}
	}

	// Stopping: SIGTERM, then shutdown-timeout for the Sets in flight.
	shutdown := defaultShutdownTimeout
	if v, ok := opts["shutdown-timeout"]; ok {
		if d, err := time.ParseDuration(v); err == nil {
			shutdown = d
		}
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if spec.TerminationGracePeriodSeconds != nil {
		grace = *spec.TerminationGracePeriodSeconds
	}
	if time.Duration(grace)*time.Second < shutdown+graceMargin {
		c.r.errorf(o.where()+": spec.template.spec.terminationGracePeriodSeconds", "%d: must exceed shutdown-timeout (%v) by %v at least, or the kubelet kills the sidecar before it closes its journal", grace, shutdown, graceMargin)
	}

	// The device password: from a file of a Secret, or $GNMI_SIDECAR_DEVICE_PASSWORD from one.
	for _, e := range ctr.Env {
		if e.Name != "GNMI_SIDECAR_DEVICE_PASSWORD" {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			c.r.errorf(where+": env "+e.Name, "the device password must come from a Secret (secretKeyRef), or better a file (device-password-file)")
		}
		if opts["device-password-file"] != "" {
			c.r.errorf(where+": env "+e.Name, "and device-password-file: the sidecar refuses both")
		}
	}
}

func valueOr(opts map[string]string, k, def string) string {
	if v, ok := opts[k]; ok {
		return v
	}
	return def
}

// checkListener: an address the kubelet, Services and Prometheus reach (not
// loopback), on a port the container declares. It returns the port.
func (c *checker) checkListener(ctr *corev1.Container, where, name, addr string) int32 {
	host, port, err := splitAddr(addr)
	if err != nil {
		c.r.errorf(where, "%s %s: %v", name, addr, err)
		return 0
	}
	switch {
	case isLoopback(host):
		c.r.errorf(where, "%s %s: loopback, out of reach of everything outside the pod (Services, probes, Prometheus); listen on 0.0.0.0:%d", name, addr, port)
	case !isAnyAddress(host):
		c.r.warnf(where, "%s %s: one address only, while the pod's address is not known in advance; listen on 0.0.0.0:%d (or [::]:%d)", name, addr, port, port)
	}
	if _, ok := containerPort(ctr, intstr.FromInt32(int32(port))); !ok {
		c.r.errorf(where, "%s %s: the container declares no port %d", name, addr, port)
	}
	return int32(port)
}

func (c *checker) checkProbes(ctr *corev1.Container, where string, tls bool, gnmiPort, metricsPort int32) {
	port := func(p intstr.IntOrString) int32 {
		n, _ := containerPort(ctr, p)
		return n
	}
	grpcTLS := func(name string, pr *corev1.Probe) {
		if pr != nil && pr.GRPC != nil && tls && pr.GRPC.Port == gnmiPort {
			c.r.errorf(where+": "+name, "a grpc probe on the TLS gNMI port fails: the kubelet's gRPC probe speaks plaintext only; probe /healthz on the metrics listener")
		}
	}
	grpcTLS("livenessProbe", ctr.LivenessProbe)
	grpcTLS("readinessProbe", ctr.ReadinessProbe)
	grpcTLS("startupProbe", ctr.StartupProbe)

	switch r := ctr.ReadinessProbe; {
	case r == nil:
		c.r.errorf(where+": readinessProbe", "required: ready means connected to the device with no re-push running (GET /healthz on the metrics listener)")
	case r.HTTPGet != nil:
		if port(r.HTTPGet.Port) != metricsPort || r.HTTPGet.Path != "/healthz" {
			c.r.errorf(where+": readinessProbe", "httpGet %s on port %s: want /healthz on the metrics listener (port %d)", r.HTTPGet.Path, r.HTTPGet.Port.String(), metricsPort)
		}
		if r.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			c.r.errorf(where+": readinessProbe", "scheme HTTPS: the metrics listener serves plain HTTP")
		}
	case r.TCPSocket != nil:
		c.r.warnf(where+": readinessProbe", "tcpSocket: ready as soon as the port is open, device or not; GET /healthz on the metrics listener tells")
	}
	switch l := ctr.LivenessProbe; {
	case l == nil:
		c.r.errorf(where+": livenessProbe", "required: tcpSocket on the gNMI port")
	case l.HTTPGet != nil && l.HTTPGet.Path == "/healthz":
		c.r.errorf(where+": livenessProbe", "/healthz fails while the device is unreachable: the kubelet would restart a healthy sidecar; use tcpSocket on the gNMI port")
	}
}

// checkSecurity: non-root, read-only root file system, no privilege
// escalation, no capabilities.
func (c *checker) checkSecurity(o *object, spec *corev1.PodSpec, ctr *corev1.Container, where string) {
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := ctr.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	nonRoot := isTrue(psc.RunAsNonRoot)
	if sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	user := psc.RunAsUser
	if sc.RunAsUser != nil {
		user = sc.RunAsUser
	}
	if !nonRoot {
		c.r.errorf(where+": securityContext", "runAsNonRoot: true is required (here or in the pod's)")
	}
	if user != nil && *user == 0 {
		c.r.errorf(where+": securityContext", "runAsUser 0 is root")
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		c.r.errorf(where+": securityContext", "readOnlyRootFilesystem: true is required: the sidecar writes its journal volume only")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		c.r.errorf(where+": securityContext", "allowPrivilegeEscalation: false is required")
	}
	if isTrue(sc.Privileged) {
		c.r.errorf(where+": securityContext", "privileged: the sidecar needs no privilege")
	}
	dropAll := false
	if sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			dropAll = dropAll || d == "ALL"
		}
		if len(sc.Capabilities.Add) > 0 {
			c.r.errorf(where+": securityContext.capabilities.add", "%v: the sidecar needs no capability", sc.Capabilities.Add)
		}
	}
	if !dropAll {
		c.r.errorf(where+": securityContext.capabilities", "drop: [ALL] is required")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		c.r.errorf(o.where()+": spec.template.spec", "hostNetwork, hostPID, hostIPC: the sidecar needs none")
	}
}
