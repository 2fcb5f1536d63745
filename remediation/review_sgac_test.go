package remediation_test

import (
	"context"
	"fmt"
	"github.com/rebootkit/rebootkit/power"
	"maps"
	"pgregory.net/rapid"
	"slices"
	"strings"

	"github.com/rebootkit/rebootkit/fake"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReviewSgac_HeldEscapeHatchReAdmits: da43706 leaves "a BMC stuck
// Transitioning on a host that is on holds one admission" as a
// documented trade-off whose way out is ErrHostHeld's (and doc.go's)
// advice: "once you have checked the host is on ..., removing the
// Machine's name from the admission record releases it". h0's BMC reads
// Transitioning for ever and refuses power-offs (hardware on: ground
// truth), m0's Node is Ready again, its attempt fails. A person checks h0
// is on (it is) and removes m0 from the admission record (Machines,
// Requests, Members). m1 fails later on a healthy host and must be
// admitted (limit 1, one Machine remediating at most).
func TestReviewSgac_HeldEscapeHatchReAdmits(t *testing.T) {
	for _, tc := range []struct {
		withPower, nameOnly bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		withPower := tc.withPower
		t.Run(fmt.Sprintf("power=%v/nameOnly=%v", tc.withPower, tc.nameOnly), func(t *testing.T) {
			w := newSgaaWorld(t, withPower)
			stuckOff := false
			w.powers["h0"] = fake.NewPower(w.clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
				if c.Op == fake.OpOff && stuckOff {
					return fake.Fault{Kind: fake.FaultFailed}
				}
				return fake.Fault{}
			}})
			w.c.SetNodeReady("m0", false)
			w.c.SetNeedsRemediation("m0", true)
			var stuckAt time.Time
			for i := 0; i < 1080; i++ { // 3 h of 10 s steps
				if stuckAt.IsZero() {
					if hh, _ := w.hosts.Get(w.ctx, "h0"); hh.Annotations[remediation.RebootAnnotation] != "" {
						*w.stuck["h0"], stuckOff = true, true
						stuckAt = w.clk.Now()
					}
				}
				w.step(10 * time.Second)
				if !w.powers["h0"].HardwareOn() {
					t.Fatalf("premise: h0 went off")
				}
				if stuckAt.IsZero() {
					continue
				}
				switch w.clk.Now().Sub(stuckAt) {
				case 2 * time.Minute:
					w.c.SetNodeReady("m0", true) // the host was never off: the Node is back
					w.c.SetNeedsRemediation("m0", false)
				case 30 * time.Minute:
					adm, _ := w.c.GetAdmissions(w.ctx)
					if !adm.Has("m0") {
						t.Fatalf("premise: m0 released already")
					}
				case 31 * time.Minute:
					// The person's way out: h0 checked on, m0's name removed.
					adm, _ := w.c.GetAdmissions(w.ctx)
					adm.Machines = slices.DeleteFunc(slices.Clone(adm.Machines), func(m string) bool { return m == "m0" })
					if !tc.nameOnly { // else only from Machines, as kubectl edit of the list would
						adm.Requests = maps.Clone(adm.Requests)
						delete(adm.Requests, "m0")
						adm.Members = maps.Clone(adm.Members)
						delete(adm.Members, "m0")
					}
					if err := w.c.PutAdmissions(w.ctx, adm); err != nil {
						t.Fatal(err)
					}
				case 35 * time.Minute:
					w.c.SetNodeReady("m1", false)
					w.c.SetNeedsRemediation("m1", true)
				}
				if adm, _ := w.c.GetAdmissions(w.ctx); w.clk.Now().Sub(stuckAt) > 35*time.Minute && adm.Has("m1") {
					return
				}
			}
			if stuckAt.IsZero() {
				t.Fatal("premise: m0's request never written")
			}
			adm, _ := w.c.GetAdmissions(w.ctx)
			rec0, _ := w.c.Get(w.ctx, "m0")
			rec1, _ := w.c.Get(w.ctx, "m1")
			t.Fatalf("%v after h0's BMC stuck, m0's name removed by hand at 31m (h0 on throughout by ground truth): admissions %v, m1 never admitted; m0 %s %q; m1 %s %q",
				w.clk.Now().Sub(stuckAt), adm.Machines, rec0.State.Phase, rec0.State.Message, rec1.State.Phase, rec1.State.Message)
		})
	}
}

// TestReviewSgac_RandomFaultsWalk: a rapid walk over the sgaa world (m0
// on h0, m1 on h1, storm guard limit 1) with BMC faults switched on and
// off at random (reading Transitioning, refusing power-ons, refusing
// power-offs), Nodes failing and coming back, and m0 deleted. Safety, by
// ground truth after every step: at most one host off (fake.Power
// HardwareOn) or carrying a remediation request. Liveness, once every
// fault is healed and every Node is Ready: every admission is released
// within 3 h (no host held for ever when its host is on and its BMC
// healthy).
func TestReviewSgac_RandomFaultsWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newSgaaWorld(t, rapid.Bool().Draw(rt, "power"))
		w.rem.Hosts.(*remediation.RebootAPIHosts).OwnerOnline = rapid.Bool().Draw(rt, "ownerOnline")
		offFail := map[string]bool{}
		ownerOff := map[string]bool{}
		lastM0 := ""
		setOnline := func(h string, on, release bool) {
			if err := w.hosts.Mutate(h, func(hh *reboot.Host) { hh.Online, hh.Unprovisioned = on, release && !on }); err != nil {
				rt.Fatal(err)
			}
		}
		taken := func() []string {
			var out []string
			for _, h := range []string{"h0", "h1"} {
				hh, _ := w.hosts.Get(w.ctx, h)
				on := w.powers[h].HardwareOn()
				if !hh.Online && !on {
					ownerOff[h] = true
				}
				if on {
					ownerOff[h] = false
				}
				if v, ok := hh.Annotations[remediation.RebootAnnotation]; ok && strings.Contains(v, "uid-m0") {
					lastM0 = v
				}
				if _, req := hh.Annotations[remediation.RebootAnnotation]; req || !on && !ownerOff[h] {
					out = append(out, h)
				}
			}
			return out
		}
		for _, h := range []string{"h0", "h1"} {
			h := h
			w.powers[h] = fake.NewPower(w.clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
				if c.Op == fake.OpOn && w.refuse[h] || c.Op == fake.OpOff && offFail[h] {
					return fake.Fault{Kind: fake.FaultFailed}
				}
				return fake.Fault{}
			}})
		}
		quiet := func(d time.Duration) {
			w.clk.Advance(d)
			for _, h := range []string{"h0", "h1"} {
				w.reboots.Reconcile(w.ctx, h)
			}
			for _, m := range []string{"m0", "m1"} {
				w.rem.Reconcile(w.ctx, m)
			}
		}
		deleted := false
		var log []string
		n := rapid.IntRange(1, 40).Draw(rt, "n")
		for i := 0; i < n; i++ {
			h := rapid.SampledFrom([]string{"h0", "h1"}).Draw(rt, "h")
			m := "m" + h[1:]
			act := rapid.IntRange(0, 9).Draw(rt, "act")
			switch act {
			case 0:
				*w.stuck[h] = !*w.stuck[h]
			case 1:
				w.refuse[h] = !w.refuse[h]
			case 2:
				offFail[h] = !offFail[h]
			case 3:
				w.c.SetNodeReady(m, false)
				w.c.SetNeedsRemediation(m, true)
			case 4:
				w.c.SetNodeReady(m, true)
				w.c.SetNeedsRemediation(m, false)
			case 5:
				if m == "m0" && !deleted {
					deleted = true
					w.c.Delete(w.ctx, "m0")
				}
			case 6:
				setOnline(h, false, false) // a blip begins
			case 7:
				setOnline(h, true, false)
			case 8:
				setOnline(h, false, true) // released for good (until act 7)
			case 9:
				// A late write of m0's last request (a stale writer), only
				// while m0 is gone and its admission still recorded, on
				// h0 (the only host m0 was ever mapped to: a write of its
				// elsewhere is found by no HostStore without a
				// RequestFinder, a documented limit).
				if adm, _ := w.c.GetAdmissions(w.ctx); deleted && adm.Has("m0") && lastM0 != "" {
					w.hosts.Mutate("h0", func(hh *reboot.Host) { // m0's only host
						hh.Annotations = maps.Clone(hh.Annotations)
						if hh.Annotations == nil {
							hh.Annotations = map[string]string{}
						}
						hh.Annotations[remediation.RebootAnnotation] = lastM0
					})
				}
			}
			log = append(log, fmt.Sprintf("%v act %d on %s", w.clk.Now().Format("15:04:05"), act, h))
			steps := rapid.IntRange(1, 60).Draw(rt, "steps")
			for j := 0; j < steps; j++ {
				quiet(10 * time.Second)
				if tk := taken(); len(tk) > 1 {
					adm, _ := w.c.GetAdmissions(w.ctx)
					rt.Fatalf("%v: hosts %v off or requested by ground truth (h0 on=%v, h1 on=%v), limit 1; admissions %v; log %v",
						w.clk.Now().Format("15:04:05"), tk, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), adm.Machines, log)
				}
			}
		}
		// Heal everything: BMCs healthy, Nodes Ready.
		for _, h := range []string{"h0", "h1"} {
			*w.stuck[h], w.refuse[h], offFail[h] = false, false, false
			setOnline(h, true, false)
			w.c.SetNodeReady("m"+h[1:], true)
			w.c.SetNeedsRemediation("m"+h[1:], false)
		}
		healed := w.clk.Now()
		for w.clk.Now().Sub(healed) < 3*time.Hour {
			quiet(10 * time.Second)
			if tk := taken(); len(tk) > 1 {
				rt.Fatalf("after heal: hosts %v off or requested by ground truth; log %v", tk, log)
			}
			if adm, _ := w.c.GetAdmissions(w.ctx); len(adm.Machines) == 0 && w.powers["h0"].HardwareOn() && w.powers["h1"].HardwareOn() {
				return
			}
		}
		adm, _ := w.c.GetAdmissions(w.ctx)
		rec0, _ := w.c.Get(w.ctx, "m0")
		hh0, _ := w.hosts.Get(w.ctx, "h0")
		hh1, _ := w.hosts.Get(w.ctx, "h1")
		rt.Fatalf("3h after every fault healed and every Node Ready: admissions %v (h0 on=%v, h1 on=%v); m0 %s %q; h0 %v %+v; h1 %v %+v; log %v",
			adm.Machines, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), rec0.State.Phase, rec0.State.Message, hh0.Annotations, hh0.Status, hh1.Annotations, hh1.Status, log)
	})
}

// TestReviewSgac_RandomFaultsMovesWalk: a rapid walk over the sgaa world (m0
// on h0, m1 on h1, storm guard limit 1) with BMC faults switched on and
// off at random (reading Transitioning, refusing power-ons, refusing
// power-offs), Nodes failing and coming back, and m0 deleted. Safety, by
// ground truth after every step: at most one host off (fake.Power
// HardwareOn) or carrying a remediation request. Liveness, once every
// fault is healed and every Node is Ready: every admission is released
// within 3 h (no host held for ever when its host is on and its BMC
// healthy).
func TestReviewSgac_RandomFaultsMovesWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, hostOf := newSgacWorld(t, rapid.Bool().Draw(rt, "power"))
		everOn := map[string]bool{"h0": true}
		w.rem.Hosts.(*remediation.RebootAPIHosts).OwnerOnline = rapid.Bool().Draw(rt, "ownerOnline")
		offFail := map[string]bool{}
		ownerOff := map[string]bool{}
		lastM0, lastM0Host := "", ""
		setOnline := func(h string, on, release bool) {
			if err := w.hosts.Mutate(h, func(hh *reboot.Host) { hh.Online, hh.Unprovisioned = on, release && !on }); err != nil {
				rt.Fatal(err)
			}
		}
		taken := func() []string {
			var out []string
			for _, h := range []string{"h0", "h1", "h2"} {
				hh, _ := w.hosts.Get(w.ctx, h)
				on := w.powers[h].HardwareOn()
				if !hh.Online && !on {
					ownerOff[h] = true
				}
				if on {
					ownerOff[h] = false
				}
				if v, ok := hh.Annotations[remediation.RebootAnnotation]; ok && strings.Contains(v, "uid-m0") {
					lastM0, lastM0Host = v, h
				}
				if _, req := hh.Annotations[remediation.RebootAnnotation]; req || !on && !ownerOff[h] {
					out = append(out, h)
				}
			}
			return out
		}
		for _, h := range []string{"h0", "h1", "h2"} {
			h := h
			w.powers[h] = fake.NewPower(w.clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
				if c.Op == fake.OpOn && w.refuse[h] || c.Op == fake.OpOff && offFail[h] {
					return fake.Fault{Kind: fake.FaultFailed}
				}
				return fake.Fault{}
			}})
		}
		quiet := func(d time.Duration) {
			w.clk.Advance(d)
			for _, h := range []string{"h0", "h1", "h2"} {
				w.reboots.Reconcile(w.ctx, h)
			}
			for _, m := range []string{"m0", "m1"} {
				w.rem.Reconcile(w.ctx, m)
			}
		}
		deleted := false
		var log []string
		n := rapid.IntRange(1, 40).Draw(rt, "n")
		for i := 0; i < n; i++ {
			h := rapid.SampledFrom([]string{"h0", "h1", "h2"}).Draw(rt, "h")
			m := rapid.SampledFrom([]string{"m0", "m1"}).Draw(rt, "m")
			act := rapid.IntRange(0, 10).Draw(rt, "act")
			switch act {
			case 0:
				*w.stuck[h] = !*w.stuck[h]
			case 1:
				w.refuse[h] = !w.refuse[h]
			case 2:
				offFail[h] = !offFail[h]
			case 3:
				w.c.SetNodeReady(m, false)
				w.c.SetNeedsRemediation(m, true)
			case 4:
				w.c.SetNodeReady(m, true)
				w.c.SetNeedsRemediation(m, false)
			case 5:
				if m == "m0" && !deleted {
					deleted = true
					w.c.Delete(w.ctx, "m0")
				}
			case 10:
				// m0 moves between h0 and h2 (its Machine re-pointed),
				// while it exists.
				if deleted {
					break
				}
				if hostOf["m0"] == "h0" {
					hostOf["m0"] = "h2"
				} else {
					hostOf["m0"] = "h0"
				}
				everOn[hostOf["m0"]] = true
			case 6:
				setOnline(h, false, false) // a blip begins
			case 7:
				setOnline(h, true, false)
			case 8:
				setOnline(h, false, true) // released for good (until act 7)
			case 9:
				// A late write of m0's last request (a stale writer), only
				// while m0 is gone and its admission still recorded, on
				// h0 (the only host m0 was ever mapped to: a write of its
				// elsewhere is found by no HostStore without a
				// RequestFinder, a documented limit).
				if adm, _ := w.c.GetAdmissions(w.ctx); deleted && adm.Has("m0") && lastM0 != "" && everOn[h] && h == lastM0Host {
					w.hosts.Mutate(h, func(hh *reboot.Host) { // a host m0 was mapped to
						hh.Annotations = maps.Clone(hh.Annotations)
						if hh.Annotations == nil {
							hh.Annotations = map[string]string{}
						}
						hh.Annotations[remediation.RebootAnnotation] = lastM0
					})
				}
			}
			log = append(log, fmt.Sprintf("%v act %d on %s/%s", w.clk.Now().Format("15:04:05"), act, h, m))
			steps := rapid.IntRange(1, 60).Draw(rt, "steps")
			for j := 0; j < steps; j++ {
				quiet(10 * time.Second)
				if tk := taken(); len(tk) > 1 {
					adm, _ := w.c.GetAdmissions(w.ctx)
					rt.Fatalf("%v: hosts %v off or requested by ground truth (h0 on=%v, h1 on=%v), limit 1; admissions %v; m0 on %s; log %v",
						w.clk.Now().Format("15:04:05"), tk, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), adm.Machines, hostOf["m0"], log)
				}
			}
		}
		// Heal everything: BMCs healthy, Nodes Ready.
		for _, h := range []string{"h0", "h1", "h2"} {
			*w.stuck[h], w.refuse[h], offFail[h] = false, false, false
			setOnline(h, true, false)
		}
		for _, m := range []string{"m0", "m1"} {
			w.c.SetNodeReady(m, true)
			w.c.SetNeedsRemediation(m, false)
		}
		healed := w.clk.Now()
		for w.clk.Now().Sub(healed) < 3*time.Hour {
			quiet(10 * time.Second)
			if tk := taken(); len(tk) > 1 {
				rt.Fatalf("after heal: hosts %v off or requested by ground truth; log %v", tk, log)
			}
			if adm, _ := w.c.GetAdmissions(w.ctx); len(adm.Machines) == 0 && w.powers["h0"].HardwareOn() && w.powers["h1"].HardwareOn() && w.powers["h2"].HardwareOn() {
				return
			}
		}
		adm, _ := w.c.GetAdmissions(w.ctx)
		rec0, _ := w.c.Get(w.ctx, "m0")
		hh0, _ := w.hosts.Get(w.ctx, "h0")
		hh1, _ := w.hosts.Get(w.ctx, "h1")
		rt.Fatalf("3h after every fault healed and every Node Ready: admissions %v (h0 on=%v, h1 on=%v); m0 %s %q; h0 %v %+v; h1 %v %+v; log %v",
			adm.Machines, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), rec0.State.Phase, rec0.State.Message, hh0.Annotations, hh0.Status, hh1.Annotations, hh1.Status, log)
	})
}

// newSgacWorld: the sgaa world with a third host h2 that m0 may move to
// (hostOf, read by HostOf on every pass).
func newSgacWorld(t *testing.T, withPower bool) (*sgaaWorld, map[string]string) {
	w := newSgaaWorld(t, withPower)
	hostOf := map[string]string{"m0": "h0", "m1": "h1"}
	w.stuck["h2"] = new(bool)
	w.powers["h2"] = fake.NewPower(w.clk.Real, fake.PowerConfig{})
	ctl := func(h string) (power.Controller, error) { return sgaaStuck{w.powers[h], w.stuck[h]}, nil }
	w.hosts = fake.NewRebootHosts(reboot.Host{Name: "h0", Online: true}, reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true})
	w.reboots = &reboot.Reconciler{Hosts: w.hosts, Now: w.clk.Now, Monotonic: w.clk.Monotonic, Power: ctl}
	var readPower func(string) (power.Controller, error)
	if withPower {
		readPower = ctl
	}
	w.rem.Hosts = &remediation.RebootAPIHosts{Hosts: w.hosts, Now: w.clk.Now, Power: readPower, HostsMayVanish: true,
		HostOf: func(_ context.Context, m string) (string, error) { return hostOf[m], nil }}
	return w, hostOf
}

// TestReviewSgac_GoneNoTimeWalk: the record the branch's fixes are
// about, seeded as the sgab tests seed it: m0 is gone, its admission
// records a request without a time (a failed remediation cleared) on h0
// and an earlier version's Member that moved from h2 (no PrevHostSince).
// A rapid walk then lands late writes of m0's (a stale writer of an
// attempt of its, with that attempt's T) on h0 or h2 while the admission
// is recorded, switches BMC faults on and off, has h2 rebooted by
// someone else (a bare reboot request) and its owner blip, and fails m1.
// Safety by ground truth after every step: at most one Machine's hosts
// (m0: h0, h2; m1: h1) off (not by its owner, nor for someone else's
// bare reboot) or carrying a request. Liveness once healed:
// the admissions are all released within 3 h.
func TestReviewSgac_GoneNoTimeWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, _ := newSgacWorld(t, rapid.Bool().Draw(rt, "power"))
		offFail := map[string]bool{}
		ownerOff := map[string]bool{}
		bareOff := map[string]bool{} // off (or going) for someone else's bare reboot: not counted
		hosts := []string{"h0", "h1", "h2"}
		for _, h := range hosts {
			h := h
			w.powers[h] = fake.NewPower(w.clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
				if c.Op == fake.OpOn && w.refuse[h] || c.Op == fake.OpOff && offFail[h] {
					return fake.Fault{Kind: fake.FaultFailed}
				}
				return fake.Fault{}
			}})
		}
		quiet := func(d time.Duration) {
			w.clk.Advance(d)
			for _, h := range hosts {
				w.reboots.Reconcile(w.ctx, h)
			}
			for _, m := range []string{"m0", "m1"} {
				w.rem.Reconcile(w.ctx, m)
			}
		}
		// Some history first: h0 and h2 rebooted by someone else (bare).
		for _, h := range hosts {
			if rapid.Bool().Draw(rt, "history "+h) {
				w.hosts.Mutate(h, func(hh *reboot.Host) {
					hh.Annotations = map[string]string{reboot.Annotation: ""}
				})
				bareOff[h] = true
			}
		}
		for i := 0; i < 60; i++ {
			quiet(10 * time.Second)
		}
		if err := w.c.Delete(w.ctx, "m0"); err != nil {
			rt.Fatal(err)
		}
		attempt := w.clk.Now().Add(-time.Duration(rapid.IntRange(1, 120).Draw(rt, "attemptAgoMin")) * time.Minute)
		a, _ := w.c.GetAdmissions(w.ctx)
		a.Machines = []string{"m0"}
		a.Requests = map[string]remediation.Request{"m0": {Value: remediation.RebootValue("uid-m0", time.Time{}), Host: "h0"}}
		a.Members = map[string]remediation.Member{"m0": {Cluster: "c", Wrote: true, PrevHost: "h2"}}
		if err := w.c.PutAdmissions(w.ctx, a); err != nil {
			rt.Fatal(err)
		}
		taken := func() []string {
			var out []string
			for _, h := range hosts {
				hh, _ := w.hosts.Get(w.ctx, h)
				on := w.powers[h].HardwareOn()
				if !hh.Online && !on {
					ownerOff[h] = true
				}
				if _, bare := hh.Annotations[reboot.Annotation]; on && !bare {
					bareOff[h] = false
				}
				if on {
					ownerOff[h] = false
				}
				if _, req := hh.Annotations[remediation.RebootAnnotation]; req || !on && !ownerOff[h] && !bareOff[h] {
					out = append(out, h)
				}
			}
			return out
		}
		// Hosts h0 and h2 are both m0's (its own, and one it moved
		// from): the guard counts Machines, one admission for both.
		groups := func(tk []string) int {
			g := map[string]bool{}
			for _, h := range tk {
				g[map[string]string{"h0": "m0", "h2": "m0", "h1": "m1"}[h]] = true
			}
			return len(g)
		}
		var log []string
		n := rapid.IntRange(1, 30).Draw(rt, "n")
		for i := 0; i < n; i++ {
			h := rapid.SampledFrom(hosts).Draw(rt, "h")
			act := rapid.IntRange(0, 8).Draw(rt, "act")
			switch act {
			case 0:
				*w.stuck[h] = !*w.stuck[h]
			case 1:
				w.refuse[h] = !w.refuse[h]
			case 2:
				offFail[h] = !offFail[h]
			case 3:
				w.c.SetNodeReady("m1", false)
				w.c.SetNeedsRemediation("m1", true)
			case 4:
				w.c.SetNodeReady("m1", true)
				w.c.SetNeedsRemediation("m1", false)
			case 5:
				if err := w.hosts.Mutate(h, func(hh *reboot.Host) { hh.Online = !hh.Online }); err != nil {
					rt.Fatal(err)
				}
			case 6, 7:
				// m0's late write, while its admission is recorded, on
				// h0 or h2.
				if h == "h1" {
					h = "h0"
				}
				if adm, _ := w.c.GetAdmissions(w.ctx); adm.Has("m0") {
					w.hosts.Mutate(h, func(hh *reboot.Host) {
						hh.Annotations = maps.Clone(hh.Annotations)
						if hh.Annotations == nil {
							hh.Annotations = map[string]string{}
						}
						hh.Annotations[remediation.RebootAnnotation] = remediation.RebootValue("uid-m0", attempt)
					})
				}
			case 8:
				// Someone else reboots h (a bare request).
				w.hosts.Mutate(h, func(hh *reboot.Host) {
					hh.Annotations = maps.Clone(hh.Annotations)
					if hh.Annotations == nil {
						hh.Annotations = map[string]string{}
					}
					hh.Annotations[reboot.Annotation] = ""
				})
				bareOff[h] = true
			}
			log = append(log, fmt.Sprintf("%v act %d on %s", w.clk.Now().Format("15:04:05"), act, h))
			steps := rapid.IntRange(1, 60).Draw(rt, "steps")
			for j := 0; j < steps; j++ {
				quiet(10 * time.Second)
				if tk := taken(); groups(tk) > 1 {
					adm, _ := w.c.GetAdmissions(w.ctx)
					rt.Fatalf("%v: hosts %v off or requested by ground truth (on: h0 %v, h1 %v, h2 %v), limit 1; admissions %v; log %v",
						w.clk.Now().Format("15:04:05"), tk, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), w.powers["h2"].HardwareOn(), adm.Machines, log)
				}
			}
		}
		for _, h := range hosts {
			*w.stuck[h], w.refuse[h], offFail[h] = false, false, false
			w.hosts.Mutate(h, func(hh *reboot.Host) { hh.Online = true })
		}
		w.c.SetNodeReady("m1", true)
		w.c.SetNeedsRemediation("m1", false)
		healed := w.clk.Now()
		for w.clk.Now().Sub(healed) < 3*time.Hour {
			quiet(10 * time.Second)
			if tk := taken(); groups(tk) > 1 {
				rt.Fatalf("after heal: hosts %v off or requested by ground truth; log %v", tk, log)
			}
			if adm, _ := w.c.GetAdmissions(w.ctx); len(adm.Machines) == 0 && w.powers["h0"].HardwareOn() && w.powers["h1"].HardwareOn() && w.powers["h2"].HardwareOn() {
				return
			}
		}
		adm, _ := w.c.GetAdmissions(w.ctx)
		hh0, _ := w.hosts.Get(w.ctx, "h0")
		hh2, _ := w.hosts.Get(w.ctx, "h2")
		rt.Fatalf("3h after every fault healed: admissions %v (on: h0 %v, h1 %v, h2 %v); h0 %v %+v; h2 %v %+v; log %v",
			adm.Machines, w.powers["h0"].HardwareOn(), w.powers["h1"].HardwareOn(), w.powers["h2"].HardwareOn(), hh0.Annotations, hh0.Status, hh2.Annotations, hh2.Status, log)
	})
}
