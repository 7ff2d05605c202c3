package testbed

import "reflect"

// reflectNil reports whether v holds a nil pointer, map, slice or interface.
func reflectNil(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
