package main

// Kubernetes manifests: the API machinery, the Pod Security Standards, and
// the sidecar's cross-checks.

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// graceMargin: after shutdown-timeout, Sets in flight get a second more, then the journal closes.
const graceMargin = 5 * time.Second

// manifests are the decoded objects of one run, by kind/name.
type manifests map[string]runtime.Object

// checkManifests decodes every document strictly (duplicate keys, unknown
// fields, wrong types), validates its metadata, then checks the set, which
// it returns.
func (c *checker) checkManifests(files []file) manifests {
	scheme := runtime.NewScheme()
	utilruntime.Must(errors.Join(corev1.AddToScheme(scheme), appsv1.AddToScheme(scheme), policyv1.AddToScheme(scheme), monitoringv1.AddToScheme(scheme)))
	dec := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Strict: true})
	set, where := manifests{}, map[runtime.Object]string{}
	for _, f := range files {
		rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(f.data)))
		for i := 1; ; i++ {
			doc, err := rd.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			j, jsonErr := yaml.YAMLToJSONStrict(doc)
			var obj runtime.Object
			if err = errors.Join(err, jsonErr); err == nil && string(j) == "null" {
				continue // comments only
			}
			if err == nil {
				obj, _, err = dec.Decode(j, nil, nil)
			}
			if err != nil || obj == nil {
				c.errorf(fmt.Sprintf("%s: document %d", f.name, i), "%v", err)
				continue
			}
			m, _ := meta.Accessor(obj)
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			where[obj] = fmt.Sprintf("%s: %s %s", f.name, kind, m.GetName())
			if prev, dup := set[kind+"/"+m.GetName()]; dup {
				c.errorf(where[obj], "also defined in %s", where[prev])
			}
			set[kind+"/"+m.GetName()] = obj
			nameFn, ok := map[string]apivalidation.ValidateNameFunc{"StatefulSet": apivalidation.NameIsDNSLabel, "Service": apivalidation.NameIsDNS1035Label}[kind]
			if !ok {
				nameFn = apivalidation.NameIsDNSSubdomain
			}
			if m.GetNamespace() == "" {
				m.SetNamespace("default") // left to kubectl -n
			}
			for _, e := range apivalidation.ValidateObjectMetaAccessor(m, true, nameFn, field.NewPath("metadata")) {
				c.errorf(where[obj], "%v", e)
			}
		}
	}
	for _, obj := range set {
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			c.checkStatefulSet(where[obj], o, set)
		case *appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.DaemonSet, *corev1.Pod:
			c.errorf(where[obj], "the sidecar runs in a StatefulSet with one replica: its journal takes one writer, on a claim that follows the pod")
		case *policyv1.PodDisruptionBudget:
			c.checkPDB(where[obj], o, set)
		}
	}
	return set
}

func isStatefulSet(obj runtime.Object) bool {
	_, ok := obj.(*appsv1.StatefulSet)
	return ok
}

// checkPDB: a budget that selects sidecars and lets a drain evict one: with
// one replica per device, minAvailable would block every drain.
func (c *checker) checkPDB(where string, p *policyv1.PodDisruptionBudget, set manifests) {
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil || sel.Empty() {
		c.errorf(where, "spec.selector: want the sidecars' labels (%v)", err)
		return
	}
	if p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable == nil {
		c.errorf(where, "want maxUnavailable, not minAvailable: each device has one sidecar, so minAvailable blocks node drains")
	}
	n, all := 0, 0
	for _, obj := range set {
		if s, ok := obj.(*appsv1.StatefulSet); ok {
			all++
			if sel.Matches(labels.Set(s.Spec.Template.Labels)) {
				n++
			}
		}
	}
	if n == 0 && all > 0 {
		c.errorf(where, "spec.selector %v selects no StatefulSet's pods", sel)
	}
}

// volumeKeys: the ConfigMap or Secret a volume projects (""), its files' paths
// to keys (none: all, by name), its keys' content (nil: not in the set).
func (set manifests) volumeKeys(v *corev1.Volume) (object string, items []corev1.KeyToPath, data map[string][]byte) {
	switch {
	case v.ConfigMap != nil:
		if cm, ok := set["ConfigMap/"+v.ConfigMap.Name].(*corev1.ConfigMap); ok {
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
		}
		return "ConfigMap " + v.ConfigMap.Name, v.ConfigMap.Items, data
	case v.Secret != nil:
		if sec, ok := set["Secret/"+v.Secret.SecretName].(*corev1.Secret); ok {
			data = map[string][]byte{}
			maps.Copy(data, sec.Data)
			for k, s := range sec.StringData {
				data[k] = []byte(s)
			}
		}
		return "Secret " + v.Secret.SecretName, v.Secret.Items, data
	}
	return "", nil, nil
}

// checkStatefulSet: selector, headless Service, Pod Security Standards
// (restricted), mounted ConfigMaps and Secrets, gnmi-sidecar containers.
func (c *checker) checkStatefulSet(where string, s *appsv1.StatefulSet, set manifests) {
	tmpl := &s.Spec.Template
	for _, e := range metav1validation.ValidateLabels(tmpl.Labels, field.NewPath("spec", "template", "metadata", "labels")) {
		c.errorf(where, "%v", e)
	}
	if sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(labels.Set(tmpl.Labels)) {
		c.errorf(where, "spec.selector does not select the template's labels %v (%v)", tmpl.Labels, err)
	}
	svc, _ := set["Service/"+s.Spec.ServiceName].(*corev1.Service)
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
		c.errorf(where, "spec.serviceName %q: want a headless Service (clusterIP: None) of the manifests that selects the pods: it gives the pod its DNS name", s.Spec.ServiceName)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	utilruntime.Must(err)
	for _, r := range eval.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec) {
		if !r.Allowed {
			c.errorf(where, "Pod Security Standards (restricted): %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	for _, v := range tmpl.Spec.Volumes {
		object, items, data := set.volumeKeys(&v)
		// Secrets are created outside the manifests (kubectl, cert-manager):
		// checked only when they are among them.
		if object != "" && data == nil && v.Secret == nil {
			c.errorf(where, "volume %s: %s is not in the manifests", v.Name, object)
		}
		for _, it := range items {
			if _, ok := data[it.Key]; !ok && data != nil {
				c.errorf(where, "volume %s: %s has no key %q", v.Name, object, it.Key)
			}
		}
	}
	for i, ctr := range tmpl.Spec.Containers {
		if image, _, _ := strings.Cut(path.Base(ctr.Image), ":"); image == "gnmi-sidecar" {
			c.checkSidecar(fmt.Sprintf("%s: container %s", where, ctr.Name), s, &tmpl.Spec.Containers[i], set)
		}
	}
}

// containerPort resolves a port (name or number) among the containers' (0: none).
func containerPort(ctrs []corev1.Container, p intstr.IntOrString) int32 {
	for _, ctr := range ctrs {
		for _, cp := range ctr.Ports {
			if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// fileSource: the deepest mount a path is under (no name: none), and the
// ConfigMap or Secret of the set it is a key of, with its content (nil: none).
func fileSource(s *appsv1.StatefulSet, ctr *corev1.Container, set manifests, file string) (mount corev1.VolumeMount, object string, content []byte) {
	var rel string
	for _, m := range ctr.VolumeMounts {
		if r, under := strings.CutPrefix(path.Clean(file)+"/", path.Clean(m.MountPath)+"/"); under && len(m.MountPath) > len(mount.MountPath) {
			mount, rel = m, path.Join(m.SubPath, r)
		}
	}
	for _, v := range s.Spec.Template.Spec.Volumes {
		if obj, items, data := set.volumeKeys(&v); v.Name == mount.Name && obj != "" {
			key := map[bool]string{true: rel}[len(items) == 0]
			for _, it := range items {
				if path.Clean(it.Path) == rel {
					key = it.Key
				}
			}
			object, content = obj, data[key]
		}
	}
	return mount, object, content
}

// checkSidecar: options (parsed by the binary), the journal on the claim,
// listeners, probe and Prometheus on declared ports, the grace period.
func (c *checker) checkSidecar(where string, s *appsv1.StatefulSet, ctr *corev1.Container, set manifests) {
	if r := s.Spec.Replicas; r != nil && *r != 1 {
		c.errorf(where, "spec.replicas %d: must be 1: one sidecar per journal (one StatefulSet per device)", *r)
	}
	if len(ctr.Command) > 0 || len(ctr.Args) == 0 || ctr.Args[0] != "serve" {
		c.errorf(where, "want the image's entrypoint (no command) and args serve and its options")
		return
	}
	c.checkFlags(ctr.Args[1:], where+": args")
	args, opts := parseArgs(ctr.Args[1:]), map[string]string{}
	if cfg, ok := args["config"]; ok {
		_, object, content := fileSource(s, ctr, set, cfg)
		if content == nil {
			c.errorf(where, "--config %s: not a key of a ConfigMap or Secret of the manifests mounted there", cfg)
		}
		if opts = c.parseOptions(fmt.Sprintf("%s: %s: %s", where, object, cfg), content); content == nil || opts == nil {
			return
		}
	}
	maps.Copy(opts, args) // the command line wins
	mount, _, _ := fileSource(s, ctr, set, opts["journal-dir"])
	if !slices.ContainsFunc(s.Spec.VolumeClaimTemplates, func(t corev1.PersistentVolumeClaim) bool { return t.Name == mount.Name }) || mount.ReadOnly {
		c.errorf(where, "journal-dir %q: not on a writable volume claim template: the journal would not survive the pod", opts["journal-dir"])
	}
	// Listeners off loopback (serve's defaults are on it), on declared ports.
	port := func(name, def string) int32 {
		addr := cmp.Or(opts[name], def)
		host, p, err := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		switch {
		case err != nil:
			c.errorf(where, "%s %s: %v", name, addr, err)
		case host == "localhost" || net.ParseIP(host).IsLoopback():
			c.errorf(where, "%s %s: loopback, out of reach of Services, probes and Prometheus", name, addr)
		case containerPort([]corev1.Container{*ctr}, intstr.FromInt(n)) == 0:
			c.errorf(where, "%s %s: the container declares no port %d", name, addr, n)
		}
		return int32(n)
	}
	port("listen", "127.0.0.1:9339")
	metrics := port("metrics", "127.0.0.1:9341")
	if r := ctr.ReadinessProbe; r == nil || r.HTTPGet == nil || r.HTTPGet.Path != "/healthz" || containerPort([]corev1.Container{*ctr}, r.HTTPGet.Port) != metrics {
		c.errorf(where, "readinessProbe: want httpGet /healthz on the metrics listener (port %d): ready means connected to the device", metrics)
	}
	if ann := s.Spec.Template.Annotations; ann["prometheus.io/scrape"] == "true" && ann["prometheus.io/port"] != strconv.Itoa(int(metrics)) {
		c.errorf(where, "annotation prometheus.io/port %q: the metrics listener is on port %d", ann["prometheus.io/port"], metrics)
	}
	grace := ptr.Deref(s.Spec.Template.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)
	shutdown, err := time.ParseDuration(cmp.Or(opts["shutdown-timeout"], "10s"))
	if err == nil && time.Duration(grace)*time.Second < shutdown+graceMargin {
		c.errorf(where, "terminationGracePeriodSeconds %d: must exceed shutdown-timeout (%v) by %v, or the kubelet kills the sidecar before it closes its journal", grace, shutdown, graceMargin)
	}
}
