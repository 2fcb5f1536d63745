package racecheck

import "reflect"

// Same reports whether a and b are one handle given twice: the same
// pointer (to a value of non-zero size) or channel behind both. A kit's second handle must be a
// second client, connection or open of the same storage; the same handle
// again runs every writer through one process's handle, and the race
// cannot catch a store atomic only within one process. Handles of other
// kinds (values such as a struct naming a directory, which may be a
// second open each call) are never Same.
func Same(a, b any) bool {
	if a == nil || b == nil {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	switch va.Kind() {
	case reflect.Pointer:
		// Go may give every zero-size allocation one address: two
		// handles with no data of their own are not known to be one.
		return va.Type().Elem().Size() != 0 && va.Pointer() == vb.Pointer()
	case reflect.Chan:
		return va.Pointer() == vb.Pointer()
	}
	return false
}
