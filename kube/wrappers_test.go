package kube

import (
	"reflect"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// extensions lists every optional interface a power.Controller may have
// that the reboot controller (or Powers) asks for by type assertion. A wrapper that
// drops one hides what the controller it wraps does (review 36 round 2:
// Async hid reboot.Toggler, so a soft power-off that presses the power
// button was taken for one that sets the power). Add new extension
// interfaces here.
var extensions = []reflect.Type{
	reflect.TypeFor[reboot.Toggler](),
	reflect.TypeFor[reboot.OnToggler](),
	reflect.TypeFor[power.Resetter](),
	reflect.TypeFor[power.CheckedOner](),
}

// TestWrappersForwardExtensions: every wrapper of a power.Controller in
// this package (LeaseGuard.Wrap, Async, noPowerOff, booked) implements every
// extension interface and answers as the controller it wraps, for a
// controller whose soft power-off is a press and one that has no
// TogglesOff.
func TestWrappersForwardExtensions(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	button := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft})
	plain := struct{ power.Controller }{fake.NewPower(clk.Real, fake.PowerConfig{})}
	guard := &LeaseGuard{}
	wrappers := map[string]func(power.Controller) power.Controller{
		"LeaseGuard.Wrap": guard.Wrap,
		"Async": func(pc power.Controller) power.Controller {
			a := &Async{Power: func(string) (power.Controller, error) { return pc, nil }}
			c, err := a.Controller("h")
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		"noPowerOff": func(pc power.Controller) power.Controller { return noPowerOff{Controller: pc, host: "h"} },
		"booked":     func(pc power.Controller) power.Controller { return booked{Controller: pc, host: "h"} },
		"Async(LeaseGuard.Wrap(noPowerOff))": func(pc power.Controller) power.Controller {
			a := &Async{Power: func(string) (power.Controller, error) { return guard.Wrap(noPowerOff{Controller: pc, host: "h"}), nil }}
			c, _ := a.Controller("h")
			return c
		},
	}
	all := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll})
	inners := map[string]power.Controller{"button": button, "all button": all, "no TogglesOff": plain}
	for wn, wrap := range wrappers {
		for in, inner := range inners {
			w := wrap(inner)
			for _, ext := range extensions {
				if !reflect.TypeOf(w).Implements(ext) {
					t.Errorf("%s drops %v", wn, ext)
				}
			}
			for _, m := range []power.Mode{power.ModeSoft, power.ModeHard} {
				want := togglesOff(inner, m)
				tg, ok := w.(reboot.Toggler)
				if got := ok && tg.TogglesOff(m); got != want {
					t.Errorf("%s around %s: TogglesOff(%v) = %v, the wrapped controller says %v", wn, in, m, got, want)
				}
			}
			if got, want := togglesOn(w), togglesOn(inner); got != want {
				t.Errorf("%s around %s: TogglesOn = %v, the wrapped controller says %v", wn, in, got, want)
			}
		}
	}
	if !togglesOff(button, power.ModeSoft) || togglesOff(plain, power.ModeSoft) || !togglesOn(all) || togglesOn(button) {
		t.Fatal("the inner controllers do not differ")
	}
}
