package reboot_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// FuzzParseAnnotations feeds arbitrary keys and values to the parser and
// the decision: nothing panics, every reboot annotation with a valid key
// yields exactly one request and an invalid key none (with a warning that
// names it), values come back unchanged, and Validate agrees with the
// warnings.
func FuzzParseAnnotations(f *testing.F) {
	for _, s := range [][2]string{
		{"reboot.metal3.io", ""},
		{"reboot.metal3.io", `{"mode":"hard"}`},
		{"reboot.metal3.io/key", "{'mode':'hard'}"},
		{"reboot.metal3.io/k", `{"mode":"soft","x":{"y":[1,2,null]}}`},
		{"reboot.metal3.io/", "\x00"},
		{"reboot.metal3.io/a.b", `{"mode":null}`},
		{"other", "x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		ann := map[string]string{key: value}
		reqs, warns := reboot.ParseAnnotations(ann, reboot.Policy{})
		if !reboot.IsRebootAnnotation(key) {
			if len(reqs) != 0 || len(warns) != 0 {
				t.Fatalf("non-reboot annotation %q parsed: %v %v", key, reqs, warns)
			}
			return
		}
		if err := reboot.Validate(key, ""); errors.Is(err, reboot.ErrInvalidKey) {
			// An invalid key never reboots nor holds the host.
			if len(reqs) != 0 || len(warns) == 0 || !errors.Is(warns[0], reboot.ErrInvalidKey) {
				t.Fatalf("invalid key %q parsed as %+v, warnings %v", key, reqs, warns)
			}
			d := reboot.Decide(reboot.Observed{Annotations: ann, Online: true, Power: power.StateOff, QuietFor: time.Hour}, fakeEpoch)
			if d.Status.Pending() || d.Phase == reboot.PhaseHeldOff {
				t.Fatalf("invalid key %q holds or reboots the host: %+v", key, d)
			}
			return
		}
		if len(reqs) != 1 || reqs[0].Value != value || reqs[0].Name != key {
			t.Fatalf("annotation %q=%q parsed as %+v", key, value, reqs)
		}
		if err := reboot.Validate(key, value); (err == nil) != (len(warns) == 0) {
			t.Fatalf("Validate says %v, parser warns %v", err, warns)
		}
		if reqs[0].Mode == power.ModeHard && !strings.Contains(value, "hard") {
			t.Fatalf("hard mode from %q", value)
		}
		for _, p := range []power.State{power.StateOn, power.StateOff, power.StateUnknown} {
			d := reboot.Decide(reboot.Observed{Annotations: ann, Online: true, Power: p}, fakeEpoch)
			if !d.Status.Pending() {
				t.Fatalf("request %q=%q did not start a reboot", key, value)
			}
		}
	})
}
