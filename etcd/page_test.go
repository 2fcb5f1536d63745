package etcd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// TestEncodePageIsJSON (issue 37, point 5): encodePage returns what
// encoding/json without HTML escaping (marshalPage) returns, byte for byte, for a reboot with every field set
// (found by reflection: a field added to plan.Reboot later is set here and
// fails the test until encodePage writes it), for that reboot with each
// field unset in turn (omitempty), and for strings and times that need
// escaping or another zone.
func TestEncodePageIsJSON(t *testing.T) {
	at := time.Date(2026, 11, 25, 23, 59, 58, 123456789, time.UTC)
	var full plan.Reboot
	fillReboot(t, reflect.ValueOf(&full).Elem(), at)
	pages := [][]plan.Reboot{nil, {}, {{}}, {full}}
	for i := range reflect.TypeFor[plan.Reboot]().NumField() {
		r := full
		f := reflect.ValueOf(&r).Elem().Field(i)
		f.Set(reflect.Zero(f.Type()))
		pages = append(pages, []plan.Reboot{r})
	}
	ph := *full.Phases
	ph.Drained, ph.On = nil, nil
	odd := full
	odd.Phases = &ph
	odd.ServerHostname, odd.Error, odd.Step = "<a&b>\"\\\x01\u2028é\xff", "line\nbreak\ttab", "wait_headnode"
	odd.Labels = map[string]string{"zone": "z1", "rack": "r<12>", "": "", "é": "\x7f"}
	for _, loc := range []*time.Location{time.Local, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -(23*3600 + 59*60)), time.FixedZone("", 45)} {
		tt := at.In(loc)
		odd.StartedAt, odd.CanceledAt, odd.Phases.Healthy = &tt, &tt, &tt
		pages = append(pages, []plan.Reboot{odd, full, {}})
	}
	whole := at.Truncate(time.Second)
	odd.StepSince = &whole
	pages = append(pages, []plan.Reboot{odd})
	for _, pg := range pages {
		want, err := marshalPage(pg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodePage(pg)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("encodePage differs from encoding/json without HTML escaping:\n got %s\nwant %s", got, want)
		}
	}
	// A time RFC 3339 cannot say is refused, as json.Marshal refuses it.
	for _, bad := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), at.In(time.FixedZone("", 24*3600))} {
		r := full
		r.DrainSince = &bad
		_, want := json.Marshal([]plan.Reboot{r})
		if _, err := encodePage([]plan.Reboot{r}); (err == nil) != (want == nil) {
			t.Errorf("time %v: encodePage error %v, json.Marshal error %v", bad, err, want)
		}
	}
}

// fillReboot sets every exported field reachable from v to a value that
// is not its zero value; times are at.
func fillReboot(t *testing.T, v reflect.Value, at time.Time) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(at))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillReboot(t, v.Field(i), at)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillReboot(t, v.Elem(), at)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range []string{"b", "a"} {
			e := reflect.New(v.Type().Elem()).Elem()
			fillReboot(t, e, at)
			m.SetMapIndex(reflect.ValueOf(k), e)
		}
		v.Set(m)
	case reflect.String:
		v.SetString(v.Type().Name() + "-value")
	case reflect.Bool:
		v.SetBool(true)
	default:
		t.Fatalf("cannot fill a %s: teach fillReboot and encodePage", v.Type())
	}
}

// TestWallOnlyEveryTime: wallOnly strips the monotonic reading of every
// time of a reboot, found by reflection (a time field added later
// included), as a read from etcd would.
func TestWallOnlyEveryTime(t *testing.T) {
	var r plan.Reboot
	fillReboot(t, reflect.ValueOf(&r).Elem(), time.Now())
	rs := []plan.Reboot{r}
	rs = plan.Plan{Reboots: rs}.Clone().Reboots
	wallOnly(rs)
	var walk func(name string, v reflect.Value)
	walk = func(name string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(name, v.Elem())
			}
		case reflect.Struct:
			if tm, ok := v.Interface().(time.Time); ok {
				if strings.Contains(tm.String(), "m=") {
					t.Errorf("%s keeps its monotonic reading", name)
				}
				return
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(name+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
		}
	}
	walk("Reboot", reflect.ValueOf(rs[0]))
	if !strings.Contains(r.StartedAt.String(), "m=") {
		t.Fatal("the test's times have no monotonic reading")
	}
}

// marshalPage is the reference encodePage must match: a page of reboot
// records encoded by encoding/json without HTML escaping.
func marshalPage(page []plan.Reboot) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(page); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
