package main

// Kubernetes manifests: strict decoding into the API types, and the API
// server's validation of the fields the deployment uses.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// object is one decoded manifest document.
type object struct {
	file string
	doc  int // 1-based index of the document in the file
	kind string
	name string
	obj  any // *appsv1.StatefulSet, *corev1.Service, *corev1.ConfigMap or *corev1.Secret
}

// where names the object in messages.
func (o *object) where() string {
	if o.name == "" {
		return fmt.Sprintf("%s: document %d (%s)", o.file, o.doc, o.kind)
	}
	return fmt.Sprintf("%s: %s %s", o.file, o.kind, o.name)
}

// kinds are the kinds deploycheck knows, by apiVersion/kind.
var kinds = map[string]func() any{
	"apps/v1/StatefulSet": func() any { return &appsv1.StatefulSet{} },
	"v1/Service":          func() any { return &corev1.Service{} },
	"v1/ConfigMap":        func() any { return &corev1.ConfigMap{} },
	"v1/Secret":           func() any { return &corev1.Secret{} },
}

// notForTheSidecar explains the workload kinds the sidecar must not run as.
var notForTheSidecar = map[string]string{
	"Deployment": "a Deployment's rolling update starts the new pod before the old one stops: two sidecars on one journal; use a StatefulSet with one replica",
	"ReplicaSet": "use a StatefulSet with one replica: the journal takes one writer, and needs a claim that follows the pod",
	"DaemonSet":  "use a StatefulSet per device with one replica: the journal takes one writer, and needs a claim that follows the pod",
	"Pod":        "use a StatefulSet with one replica: a bare pod is not rescheduled, and its journal needs a claim that follows it",
}

// isManifest reports whether YAML data is Kubernetes manifests: whether its
// first non-empty document has apiVersion and kind.
func isManifest(data []byte) bool {
	docs, err := splitDocuments(data)
	if err != nil || len(docs) == 0 {
		return false
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(docs[0], &tm); err != nil {
		return false
	}
	return tm.APIVersion != "" && tm.Kind != ""
}

// splitDocuments splits a YAML stream into its non-empty documents.
func splitDocuments(data []byte) ([][]byte, error) {
	var docs [][]byte
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err == nil && string(j) == "null" {
			continue // only comments
		}
		docs = append(docs, doc)
	}
}

// decodeManifests decodes every document of f strictly into its API type.
func (c *checker) decodeManifests(f file) []*object {
	docs, err := splitDocuments(f.data)
	if err != nil {
		c.r.errorf(f.name, "%v", err)
	}
	var objs []*object
	for i, doc := range docs {
		where := fmt.Sprintf("%s: document %d", f.name, i+1)
		// YAMLToJSONStrict refuses duplicate keys, which plain YAML
		// decoding lets the last one win.
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			c.r.errorf(where, "%v", err)
			// What it was meant to be, so that references to it are not
			// reported again.
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if yaml.Unmarshal(doc, &meta) == nil {
				c.broken[key(meta.Kind, meta.Metadata.Name)] = true
			} else {
				c.broken["?"] = true
			}
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			c.r.errorf(where, "apiVersion and kind: %v", err)
			continue
		}
		if tm.APIVersion == "" || tm.Kind == "" {
			c.r.errorf(where, "apiVersion and kind are required")
			continue
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			c.broken[tm.Kind] = true
			if why, bad := notForTheSidecar[tm.Kind]; bad {
				c.r.errorf(where, "%s: %s", tm.Kind, why)
			} else {
				c.r.errorf(where, "%s %s: not a kind deploycheck knows (StatefulSet apps/v1, Service, ConfigMap, Secret v1): add it to hack/deploycheck", tm.APIVersion, tm.Kind)
			}
			continue
		}
		obj := newObj()
		// Case-sensitive, like the API server: an unknown or misspelt
		// field, a duplicate field or a wrong type is an error.
		strictErrs, err := kjson.UnmarshalStrict(j, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		o := &object{file: f.name, doc: i + 1, kind: tm.Kind, obj: obj}
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(j, &meta)
		o.name = meta.Metadata.Name
		if err != nil {
			c.r.errorf(o.where(), "%v", err)
		}
		for _, e := range strictErrs {
			c.r.errorf(o.where(), "%v", e)
		}
		if err != nil || len(strictErrs) > 0 {
			c.broken[key(o.kind, o.name)] = true
			continue
		}
		c.validateObject(o)
		objs = append(objs, o)
	}
	return objs
}

// validateObject runs the API server's checks of one object on its own.
func (c *checker) validateObject(o *object) {
	var errs field.ErrorList
	switch obj := o.obj.(type) {
	case *appsv1.StatefulSet:
		errs = validateMeta(&obj.ObjectMeta, apivalidation.NameIsDNSLabel)
		if len(obj.Name) > 52 {
			// The controller-revision-hash label of its pods is the name
			// and 11 more characters, and a label value takes 63.
			errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), obj.Name, 52))
		}
		errs = append(errs, validateStatefulSet(obj)...)
	case *corev1.Service:
		errs = validateMeta(&obj.ObjectMeta, apivalidation.NameIsDNS1035Label)
		errs = append(errs, validateService(obj)...)
	case *corev1.ConfigMap:
		errs = validateMeta(&obj.ObjectMeta, apivalidation.NameIsDNSSubdomain)
		errs = append(errs, validateConfigMap(obj)...)
	case *corev1.Secret:
		errs = validateMeta(&obj.ObjectMeta, apivalidation.NameIsDNSSubdomain)
		errs = append(errs, validateSecret(obj)...)
	}
	c.r.fields(o.where(), errs)
}

// validateMeta validates a namespaced object's metadata. The manifests
// leave the namespace to kubectl -n, so an empty one stands for any.
func validateMeta(meta *metav1.ObjectMeta, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	m := *meta
	if m.Namespace == "" {
		m.Namespace = "default"
	}
	return apivalidation.ValidateObjectMeta(&m, true, nameFn, field.NewPath("metadata"))
}

func validateStatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s.Spec.Replicas != nil && *s.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *s.Spec.Replicas, "must be greater than or equal to 0"))
	}
	if s.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
		if len(s.Spec.Selector.MatchLabels)+len(s.Spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(spec.Child("selector"), s.Spec.Selector, "empty selector is invalid for statefulset"))
		}
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err == nil && !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
			errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), s.Spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	switch s.Spec.PodManagementPolicy {
	case "", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.NotSupported(spec.Child("podManagementPolicy"), s.Spec.PodManagementPolicy, []string{string(appsv1.OrderedReadyPodManagement), string(appsv1.ParallelPodManagement)}))
	}
	switch s.Spec.UpdateStrategy.Type {
	case "", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType:
	default:
		errs = append(errs, field.NotSupported(spec.Child("updateStrategy", "type"), s.Spec.UpdateStrategy.Type, []string{string(appsv1.RollingUpdateStatefulSetStrategyType), string(appsv1.OnDeleteStatefulSetStrategyType)}))
	}
	if p := s.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		for name, v := range map[string]appsv1.PersistentVolumeClaimRetentionPolicyType{"whenDeleted": p.WhenDeleted, "whenScaled": p.WhenScaled} {
			if v != "" && v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				errs = append(errs, field.NotSupported(spec.Child("persistentVolumeClaimRetentionPolicy", name), v, []string{"Retain", "Delete"}))
			}
		}
	}
	claims := sets.New[string]()
	for i, t := range s.Spec.VolumeClaimTemplates {
		p := spec.Child("volumeClaimTemplates").Index(i)
		errs = append(errs, validateClaimTemplate(&t, p)...)
		if claims.Has(t.Name) {
			errs = append(errs, field.Duplicate(p.Child("metadata", "name"), t.Name))
		}
		claims.Insert(t.Name)
	}
	tmpl := spec.Child("template")
	errs = append(errs, metav1validation.ValidateLabels(s.Spec.Template.Labels, tmpl.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(s.Spec.Template.Annotations, tmpl.Child("metadata", "annotations"))...)
	if rp := s.Spec.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmpl.Child("spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	errs = append(errs, validatePodSpec(&s.Spec.Template.Spec, claims, tmpl.Child("spec"))...)
	return errs
}

var accessModes = []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)}

func validateClaimTemplate(t *corev1.PersistentVolumeClaim, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Name == "" {
		errs = append(errs, field.Required(p.Child("metadata", "name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(t.Name) {
			errs = append(errs, field.Invalid(p.Child("metadata", "name"), t.Name, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, p.Child("metadata", "labels"))...)
	sp := p.Child("spec")
	if len(t.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(sp.Child("accessModes"), "at least 1 access mode is required"))
	}
	for i, m := range t.Spec.AccessModes {
		if !sets.New(accessModes...).Has(string(m)) {
			errs = append(errs, field.NotSupported(sp.Child("accessModes").Index(i), m, accessModes))
		}
	}
	storage, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		errs = append(errs, field.Required(sp.Child("resources", "requests", "storage"), ""))
	} else if storage.Sign() <= 0 {
		errs = append(errs, field.Invalid(sp.Child("resources", "requests", "storage"), storage.String(), "must be greater than zero"))
	}
	return errs
}

var protocols = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}

func validateProtocol(p corev1.Protocol, path *field.Path) field.ErrorList {
	if p == "" || sets.New(protocols...).Has(string(p)) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, p, protocols)}
}

// validatePodSpec validates the pod template: containers, their ports,
// environment, mounts, probes and resources, and the volumes. claims are
// the StatefulSet's volume claim templates, which containers mount like
// volumes.
func validatePodSpec(spec *corev1.PodSpec, claims sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *spec.TerminationGracePeriodSeconds, "must be greater than or equal to 0"))
	}
	if sc := spec.SecurityContext; sc != nil {
		sp := p.Child("securityContext")
		errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, sp)...)
		if sc.FSGroup != nil {
			for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
				errs = append(errs, field.Invalid(sp.Child("fsGroup"), *sc.FSGroup, msg))
			}
		}
		if sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy != corev1.FSGroupChangeAlways && *sc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch {
			errs = append(errs, field.NotSupported(sp.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy, []string{string(corev1.FSGroupChangeAlways), string(corev1.FSGroupChangeOnRootMismatch)}))
		}
		errs = append(errs, validateSeccomp(sc.SeccompProfile, sp.Child("seccompProfile"))...)
	}

	volumes := sets.New[string]()
	for i, v := range spec.Volumes {
		vp := p.Child("volumes").Index(i)
		errs = append(errs, validateVolume(&v, vp)...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		if claims.Has(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "also a volume claim template's name: the claim would hide it"))
		}
		volumes.Insert(v.Name)
	}
	mountable := volumes.Union(claims)

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	names := sets.New[string]()
	for i := range spec.Containers {
		cp := p.Child("containers").Index(i)
		ctr := &spec.Containers[i]
		if names.Has(ctr.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), ctr.Name))
		}
		names.Insert(ctr.Name)
		errs = append(errs, validateContainer(ctr, mountable, cp)...)
	}
	return errs
}

func validateIDs(user, group *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(p.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(p.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

func validateSeccomp(s *corev1.SeccompProfile, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	switch s.Type {
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		if s.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(p.Child("localhostProfile"), *s.LocalhostProfile, "can only be set for type Localhost")}
		}
	case corev1.SeccompProfileTypeLocalhost:
		if s.LocalhostProfile == nil || *s.LocalhostProfile == "" {
			return field.ErrorList{field.Required(p.Child("localhostProfile"), "required for type Localhost")}
		}
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), s.Type, []string{"RuntimeDefault", "Localhost", "Unconfined"})}
	}
	return nil
}

// volumeSources counts the sources a volume sets (the API wants one).
func volumeSources(v *corev1.VolumeSource) []string {
	var set []string
	rv := reflect.ValueOf(v).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			set = append(set, strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return set
}

func validateVolume(v *corev1.Volume, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), v.Name, msg))
		}
	}
	switch src := volumeSources(&v.VolumeSource); len(src) {
	case 0:
		errs = append(errs, field.Required(p, "must specify a volume type"))
	case 1:
	default:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type: "+strings.Join(src, ", ")))
	}
	if cm := v.ConfigMap; cm != nil {
		if cm.Name == "" {
			errs = append(errs, field.Required(p.Child("configMap", "name"), ""))
		}
		errs = append(errs, validateItems(cm.Items, cm.DefaultMode, p.Child("configMap"))...)
	}
	if s := v.Secret; s != nil {
		if s.SecretName == "" {
			errs = append(errs, field.Required(p.Child("secret", "secretName"), ""))
		}
		errs = append(errs, validateItems(s.Items, s.DefaultMode, p.Child("secret"))...)
	}
	return errs
}

func validateMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateItems(items []corev1.KeyToPath, mode *int32, p *field.Path) field.ErrorList {
	errs := validateMode(mode, p.Child("defaultMode"))
	for i, it := range items {
		ip := p.Child("items").Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		errs = append(errs, validateLocalPath(it.Path, ip.Child("path"))...)
		errs = append(errs, validateMode(it.Mode, ip.Child("mode"))...)
	}
	return errs
}

// validateLocalPath: relative, non-empty, no "..".
func validateLocalPath(s string, p *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(p, "")}
	case path.IsAbs(s):
		return field.ErrorList{field.Invalid(p, s, "must be a relative path")}
	case strings.Contains("/"+s+"/", "/../"):
		return field.ErrorList{field.Invalid(p, s, "must not contain '..'")}
	}
	return nil
}

var resourceFields = []string{"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage"}

func validateContainer(ctr *corev1.Container, mountable sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ctr.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(ctr.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), ctr.Name, msg))
		}
	}
	if strings.TrimSpace(ctr.Image) == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	switch ctr.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), ctr.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}

	ports := map[string]int32{}
	numbers := sets.New[int32]()
	for i, port := range ctr.Ports {
		pp := p.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if _, dup := ports[port.Name]; dup {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			ports[port.Name] = port.ContainerPort
		}
		if numbers.Has(port.ContainerPort) {
			errs = append(errs, field.Duplicate(pp.Child("containerPort"), port.ContainerPort))
		}
		numbers.Insert(port.ContainerPort)
		errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
	}

	envs := sets.New[string]()
	for i, e := range ctr.Env {
		ep := p.Child("env").Index(i)
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, msg))
		}
		envs.Insert(e.Name)
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		vf, vp := e.ValueFrom, ep.Child("valueFrom")
		n := 0
		if vf.FieldRef != nil {
			n++
			if vf.FieldRef.FieldPath == "" {
				errs = append(errs, field.Required(vp.Child("fieldRef", "fieldPath"), ""))
			}
		}
		if vf.ResourceFieldRef != nil {
			n++
			if !sets.New(resourceFields...).Has(vf.ResourceFieldRef.Resource) {
				errs = append(errs, field.NotSupported(vp.Child("resourceFieldRef", "resource"), vf.ResourceFieldRef.Resource, resourceFields))
			}
			if cn := vf.ResourceFieldRef.ContainerName; cn != "" && cn != ctr.Name {
				errs = append(errs, field.Invalid(vp.Child("resourceFieldRef", "containerName"), cn, "another container (deploycheck checks one container's own resources only)"))
			}
		}
		if vf.ConfigMapKeyRef != nil {
			n++
			if vf.ConfigMapKeyRef.Name == "" || vf.ConfigMapKeyRef.Key == "" {
				errs = append(errs, field.Required(vp.Child("configMapKeyRef"), "name and key"))
			}
		}
		if vf.SecretKeyRef != nil {
			n++
			if vf.SecretKeyRef.Name == "" || vf.SecretKeyRef.Key == "" {
				errs = append(errs, field.Required(vp.Child("secretKeyRef"), "name and key"))
			}
		}
		if vf.FileKeyRef != nil {
			n++
		}
		if n != 1 {
			errs = append(errs, field.Invalid(vp, "", "must have exactly one source"))
		}
	}

	mounts := sets.New[string]()
	for i, m := range ctr.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !mountable.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		case !path.IsAbs(m.MountPath):
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		case mounts.Has(path.Clean(m.MountPath)):
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mounts.Insert(path.Clean(m.MountPath))
		if m.SubPath != "" {
			errs = append(errs, validateLocalPath(m.SubPath, mp.Child("subPath"))...)
		}
	}

	for name, probe := range map[string]*corev1.Probe{"livenessProbe": ctr.LivenessProbe, "readinessProbe": ctr.ReadinessProbe, "startupProbe": ctr.StartupProbe} {
		if probe != nil {
			errs = append(errs, validateProbe(probe, name, ports, p.Child(name))...)
		}
	}

	rp := p.Child("resources")
	for name, q := range ctr.Resources.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range ctr.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
		if limit, ok := ctr.Resources.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), q.String(), "must be less than or equal to "+string(name)+" limit of "+limit.String()))
		}
	}
	if sc := ctr.SecurityContext; sc != nil {
		errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, p.Child("securityContext"))...)
		errs = append(errs, validateSeccomp(sc.SeccompProfile, p.Child("securityContext", "seccompProfile"))...)
		if sc.Privileged != nil && *sc.Privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			errs = append(errs, field.Invalid(p.Child("securityContext"), "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
	}
	return errs
}

// validateProbe: one handler, its port declared (by name) or valid, sane
// thresholds.
func validateProbe(probe *corev1.Probe, name string, ports map[string]int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	h := probe.ProbeHandler
	if h.Exec != nil {
		n++
		if len(h.Exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h.HTTPGet != nil {
		n++
		errs = append(errs, validateProbePort(h.HTTPGet.Port, ports, p.Child("httpGet", "port"))...)
		if h.HTTPGet.Path != "" && !strings.HasPrefix(h.HTTPGet.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("httpGet", "path"), h.HTTPGet.Path, "must start with /"))
		}
		if s := h.HTTPGet.Scheme; s != "" && s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("httpGet", "scheme"), s, []string{"HTTP", "HTTPS"}))
		}
	}
	if h.TCPSocket != nil {
		n++
		errs = append(errs, validateProbePort(h.TCPSocket.Port, ports, p.Child("tcpSocket", "port"))...)
	}
	if h.GRPC != nil {
		n++
		for _, msg := range validation.IsValidPortNum(int(h.GRPC.Port)) {
			errs = append(errs, field.Invalid(p.Child("grpc", "port"), h.GRPC.Port, msg))
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(p, "", "must have exactly one handler (exec, httpGet, tcpSocket, grpc)"))
	}
	for fname, v := range map[string]int32{"initialDelaySeconds": probe.InitialDelaySeconds, "timeoutSeconds": probe.TimeoutSeconds, "periodSeconds": probe.PeriodSeconds, "successThreshold": probe.SuccessThreshold, "failureThreshold": probe.FailureThreshold} {
		if v < 0 {
			errs = append(errs, field.Invalid(p.Child(fname), v, "must be greater than or equal to 0"))
		}
	}
	if name != "readinessProbe" && probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateProbePort(port intstr.IntOrString, ports map[string]int32, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		if _, ok := ports[port.StrVal]; !ok {
			return field.ErrorList{field.Invalid(p, port.StrVal, "not a port name of the container")}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port.IntValue()) {
		errs = append(errs, field.Invalid(p, port.IntValue(), msg))
	}
	return errs
}

func validateService(s *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch s.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Spec.Type, []string{"ClusterIP", "NodePort", "LoadBalancer"}))
	}
	headless := s.Spec.ClusterIP == corev1.ClusterIPNone
	if headless && s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP {
		errs = append(errs, field.Invalid(spec.Child("clusterIP"), s.Spec.ClusterIP, "may only be None for type ClusterIP"))
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Spec.Selector, spec.Child("selector"))...)
	if len(s.Spec.Ports) == 0 && !headless {
		errs = append(errs, field.Required(spec.Child("ports"), ""))
	}
	names := sets.New[string]()
	for i, port := range s.Spec.Ports {
		pp := spec.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && port.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), "required when there is more than one port"))
		}
		if port.Name != "" {
			for _, msg := range validation.IsDNS1123Label(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(port.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
		}
		errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
		switch tp := port.TargetPort; {
		case tp.Type == intstr.String && tp.StrVal != "":
			for _, msg := range validation.IsValidPortName(tp.StrVal) {
				errs = append(errs, field.Invalid(pp.Child("targetPort"), tp.StrVal, msg))
			}
		case tp.Type == intstr.Int && tp.IntVal != 0:
			for _, msg := range validation.IsValidPortNum(int(tp.IntVal)) {
				errs = append(errs, field.Invalid(pp.Child("targetPort"), tp.IntVal, msg))
			}
		}
		if port.NodePort != 0 && (s.Spec.Type == "" || s.Spec.Type == corev1.ServiceTypeClusterIP) {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		}
	}
	return errs
}

func validateKeys(keys []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range keys {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
	}
	return errs
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := validateKeys(sets.List(sets.KeySet(cm.Data)), field.NewPath("data"))
	errs = append(errs, validateKeys(sets.List(sets.KeySet(cm.BinaryData)), field.NewPath("binaryData"))...)
	for k := range cm.BinaryData {
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"))
		}
	}
	return errs
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	errs := validateKeys(sets.List(sets.KeySet(s.Data)), field.NewPath("data"))
	errs = append(errs, validateKeys(sets.List(sets.KeySet(s.StringData)), field.NewPath("stringData"))...)
	keys := secretKeys(s)
	switch s.Type {
	case corev1.SecretTypeTLS:
		for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if !keys.Has(k) {
				errs = append(errs, field.Required(field.NewPath("data").Key(k), "a kubernetes.io/tls Secret needs it"))
			}
		}
	case corev1.SecretTypeBasicAuth:
		if !keys.Has(corev1.BasicAuthUsernameKey) && !keys.Has(corev1.BasicAuthPasswordKey) {
			errs = append(errs, field.Required(field.NewPath("data").Key(corev1.BasicAuthUsernameKey), "a kubernetes.io/basic-auth Secret needs username or password"))
		}
	}
	return errs
}

// secretKeys are a Secret's keys: data's and stringData's.
func secretKeys(s *corev1.Secret) sets.Set[string] {
	return sets.KeySet(s.Data).Union(sets.KeySet(s.StringData))
}
