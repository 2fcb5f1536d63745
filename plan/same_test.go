package plan

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestSameViewSeesEveryField mutates, through reflection, every exported
// field of a View (its Plan, every field of a Reboot and of its Phases,
// the Index, the positions, the members) one at a time and asserts that
// sameView sees the change: the executor writes a pass only when sameView
// says the decision changed something, so a field it missed would be a
// lost write. A field added later is mutated here without anyone
// remembering it; a field of a kind this test cannot mutate fails it.
func TestSameViewSeesEveryField(t *testing.T) {
	newView := func() reflect.Value {
		v := reflect.New(reflect.TypeFor[View]()).Elem()
		fillValue(t, v)
		return v
	}
	if a, b := newView(), newView(); !sameView(a.Interface().(View), b.Interface().(View)) {
		t.Fatal("two views filled alike are not the same")
	}
	n := 0
	mutations(t, reflect.TypeFor[View](), func(r reflect.Value) reflect.Value { return r }, "View", func(name string, mutate func(reflect.Value)) {
		n++
		a, b := newView(), newView()
		mutate(b)
		if sameView(a.Interface().(View), b.Interface().(View)) {
			t.Errorf("%s changed, sameView says the views are the same (a lost write)", name)
		}
		if sameView(b.Interface().(View), a.Interface().(View)) {
			t.Errorf("%s changed, sameView (reversed) says the views are the same", name)
		}
	})
	if n < 60 {
		t.Fatalf("only %d mutations: the walk missed fields", n)
	}
}

// TestSameRebootSeesEveryField is TestSameViewSeesEveryField for one
// reboot record (sameReboot, which the stores use to tell which records
// to write).
func TestSameRebootSeesEveryField(t *testing.T) {
	newReboot := func() reflect.Value {
		v := reflect.New(reflect.TypeFor[Reboot]()).Elem()
		fillValue(t, v)
		return v
	}
	if a, b := newReboot(), newReboot(); !sameReboot(a.Interface().(Reboot), b.Interface().(Reboot)) {
		t.Fatal("two reboots filled alike are not the same")
	}
	mutations(t, reflect.TypeFor[Reboot](), func(r reflect.Value) reflect.Value { return r }, "Reboot", func(name string, mutate func(reflect.Value)) {
		a, b := newReboot(), newReboot()
		mutate(b)
		if sameReboot(a.Interface().(Reboot), b.Interface().(Reboot)) || sameReboot(b.Interface().(Reboot), a.Interface().(Reboot)) {
			t.Errorf("%s changed, sameReboot says the reboots are the same", name)
		}
	})
}

var timeType = reflect.TypeFor[time.Time]()

// fillValue sets every exported field reachable from v to a value that is
// not its zero value (a pointer to a filled value, a slice and a map of
// one filled element), the same for every call.
func fillValue(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(t, v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillValue(t, v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillValue(t, k)
		fillValue(t, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	default:
		t.Fatalf("cannot fill a %s: teach fillValue and mutations", v.Type())
	}
}

// mutations calls yield with a name and a function that changes one
// thing in a filled value of type typ found at get(root): every exported
// field, recursively, with nil pointers, slices and maps, an element
// added or changed, a map key changed.
func mutations(t *testing.T, typ reflect.Type, get func(reflect.Value) reflect.Value, name string, yield func(string, func(reflect.Value))) {
	t.Helper()
	setZero := func(r reflect.Value) { v := get(r); v.Set(reflect.Zero(v.Type())) }
	switch typ.Kind() {
	case reflect.Struct:
		if typ == timeType {
			yield(name+" a nanosecond later", func(r reflect.Value) {
				v := get(r)
				v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Nanosecond)))
			})
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			mutations(t, f.Type, func(r reflect.Value) reflect.Value { return get(r).Field(i) }, name+"."+f.Name, yield)
		}
	case reflect.Pointer:
		yield(name+" nil", setZero)
		mutations(t, typ.Elem(), func(r reflect.Value) reflect.Value { return get(r).Elem() }, name, yield)
	case reflect.Slice:
		yield(name+" nil", setZero)
		yield(name+" one more", func(r reflect.Value) {
			v := get(r)
			e := reflect.New(typ.Elem()).Elem()
			fillValue(t, e)
			v.Set(reflect.Append(v, e))
		})
		mutations(t, typ.Elem(), func(r reflect.Value) reflect.Value { return get(r).Index(0) }, name+"[0]", yield)
	case reflect.Map:
		yield(name+" nil", setZero)
		// The one entry's key, then its value, mutated (a map's entries
		// are not addressable: copied, mutated and put back).
		for _, part := range []string{"key", "value"} {
			pt := typ.Key()
			if part == "value" {
				pt = typ.Elem()
			}
			mutations(t, pt, func(r reflect.Value) reflect.Value { return r }, name+" "+part, func(sub string, mutate func(reflect.Value)) {
				yield(sub, func(r reflect.Value) {
					m := get(r)
					it := m.MapRange()
					it.Next()
					k, e := reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem()
					k.Set(it.Key())
					e.Set(it.Value())
					if part == "key" {
						mutate(k)
					} else {
						mutate(e)
					}
					n := reflect.MakeMap(typ)
					n.SetMapIndex(k, e)
					m.Set(n)
				})
			})
		}
	case reflect.String:
		yield(name, func(r reflect.Value) { v := get(r); v.SetString(v.String() + "x") })
	case reflect.Bool:
		yield(name, func(r reflect.Value) { v := get(r); v.SetBool(!v.Bool()) })
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		yield(name, func(r reflect.Value) { v := get(r); v.SetInt(v.Int() + 1) })
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		yield(name, func(r reflect.Value) { v := get(r); v.SetUint(v.Uint() + 1) })
	case reflect.Float32, reflect.Float64:
		yield(name, func(r reflect.Value) { v := get(r); v.SetFloat(v.Float() + 1) })
	default:
		t.Fatalf("%s: cannot mutate a %s: teach fillValue and mutations", name, typ)
	}
}

// TestCloneSharesNoPointer checks, by reflection over every pointer of a
// filled Plan's reboots (their times and phases, and fields added later),
// that Clone copies what they point to: the executor compares a pass's
// output with its input, which it must never change through a shared
// pointer. Labels and the plan's policy are shared (nothing modifies
// them).
func TestCloneSharesNoPointer(t *testing.T) {
	p := reflect.New(reflect.TypeFor[Plan]()).Elem()
	fillValue(t, p)
	rs := p.FieldByName("Reboots")
	rs.Set(reflect.Append(rs, rs.Index(0))) // two reboots: Clone copies each into one allocation
	orig := p.Interface().(Plan)
	q := orig.Clone()
	var walk func(name string, a, b reflect.Value)
	walk = func(name string, a, b reflect.Value) {
		switch a.Kind() {
		case reflect.Pointer:
			if a.IsNil() {
				return
			}
			if a.Pointer() == b.Pointer() {
				t.Errorf("%s: the clone shares the pointer", name)
			}
			walk(name, a.Elem(), b.Elem())
		case reflect.Struct:
			for i := range a.NumField() {
				if f := a.Type().Field(i); f.IsExported() && f.Name != "Labels" {
					walk(name+"."+f.Name, a.Field(i), b.Field(i))
				}
			}
		case reflect.Slice:
			if a.Len() > 0 && a.Pointer() == b.Pointer() {
				t.Errorf("%s: the clone shares the slice", name)
			}
			for i := range a.Len() {
				walk(fmt.Sprintf("%s[%d]", name, i), a.Index(i), b.Index(i))
			}
		}
	}
	for _, f := range []string{"Reboots", "CreatedAt", "Commands"} {
		walk("Plan."+f, reflect.ValueOf(orig).FieldByName(f), reflect.ValueOf(q).FieldByName(f))
	}
	if !sameView(FullView(orig), FullView(q)) {
		t.Error("the clone differs from the plan")
	}
	// OwnReboots does to a copy of the reboots what Clone does to them.
	own := slices.Clone(orig.Reboots)
	OwnReboots(own)
	walk("OwnReboots", reflect.ValueOf(orig.Reboots), reflect.ValueOf(own))
	for i := range own {
		if !sameReboot(orig.Reboots[i], own[i]) {
			t.Errorf("OwnReboots changed reboot %d", i)
		}
	}
}
