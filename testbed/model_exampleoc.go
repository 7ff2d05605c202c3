package testbed

import (
	"errors"
	"reflect"
	"sort"
	"strings"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/exampleoc"
	"github.com/openconfig/ygot/ygot"
)

// model is everything the device needs from a generated ygot schema. It is
// the only place that knows about exampleoc, a generated snapshot that
// changes between ygot releases; swapping the schema means one new
// implementation of this interface.
type model interface {
	// NewRoot returns an empty configuration tree.
	NewRoot() ygot.ValidatedGoStruct
	// RootSchema is the schema entry of the tree's root.
	RootSchema() *yang.Entry
	// UnmarshalRoot reads RFC 7951 JSON of the whole tree.
	UnmarshalRoot(data []byte) (ygot.ValidatedGoStruct, error)
	// SetBootTime writes /system/state/boot-time (nanoseconds since the
	// epoch) into root's own copy of the containers on the way: root is
	// new, but they may be shared with a tree readers hold.
	SetBootTime(root ygot.ValidatedGoStruct, ns uint64)
	// BootTime reads /system/state/boot-time (0 if unset).
	BootTime(root ygot.ValidatedGoStruct) uint64
	// Models lists the YANG modules of the schema, for Capabilities.
	Models() []*gpb.ModelData
}

// exampleOCModel implements model with ygot's exampleoc package: OpenConfig,
// compressed, config preferred. Compressed struct tags still carry the full
// uncompressed path below each container ("config/description"), so the
// uncompressed paths clients send map onto the structs with ytypes.SetNode
// and GetNode as they are; only config-mirrored state leaves are absent
// (see configPathForState).
type exampleOCModel struct {
	schema *yang.Entry
	models []*gpb.ModelData
}

func newExampleOCModel() (*exampleOCModel, error) {
	// exampleoc unzips its schema once at init into SchemaTree; unzipping it
	// again per device (exampleoc.Schema) costs seconds under -race. The
	// tree is only read.
	root, ok := exampleoc.SchemaTree[reflect.TypeOf(exampleoc.Device{}).Name()]
	if !ok {
		return nil, errors.New("exampleoc schema has no root entry")
	}
	return &exampleOCModel{
		schema: root,
		models: modelsFromStructTags(reflect.TypeOf(exampleoc.Device{})),
	}, nil
}

func (m *exampleOCModel) NewRoot() ygot.ValidatedGoStruct { return &exampleoc.Device{} }

func (m *exampleOCModel) RootSchema() *yang.Entry { return m.schema }

func (m *exampleOCModel) UnmarshalRoot(data []byte) (ygot.ValidatedGoStruct, error) {
	root := &exampleoc.Device{}
	if err := exampleoc.Unmarshal(data, root); err != nil {
		return nil, err
	}
	return root, nil
}

func (m *exampleOCModel) SetBootTime(root ygot.ValidatedGoStruct, ns uint64) {
	// A copy of /system takes the new time: readers may hold the old one.
	d := root.(*exampleoc.Device)
	sys := &exampleoc.System{}
	if d.System != nil {
		*sys = *d.System
	}
	sys.BootTime = ygot.Uint64(ns)
	d.System = sys
}

func (m *exampleOCModel) BootTime(root ygot.ValidatedGoStruct) uint64 {
	return root.(*exampleoc.Device).GetSystem().GetBootTime()
}

func (m *exampleOCModel) Models() []*gpb.ModelData { return m.models }

// modelsFromStructTags collects the YANG module names found in the "module"
// struct tags of the generated structs. exampleoc is generated without model
// data (no ΓModelData), so revisions are unknown and left empty.
func modelsFromStructTags(root reflect.Type) []*gpb.ModelData {
	names := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			for _, alt := range strings.Split(f.Tag.Get("module"), "|") {
				for _, mod := range strings.Split(alt, "/") {
					if mod != "" {
						names[mod] = true
					}
				}
			}
			walk(f.Type)
		}
	}
	walk(root)
	out := make([]*gpb.ModelData, 0, len(names))
	for n := range names {
		org := "OpenConfig working group"
		switch {
		case strings.HasPrefix(n, "ietf-"):
			org = "IETF"
		case strings.HasPrefix(n, "iana-"):
			org = "IANA"
		}
		out = append(out, &gpb.ModelData{Name: n, Organization: org})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
