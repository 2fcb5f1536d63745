package remediation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// movedWorld is machines m<i> that move between hosts h<j> (spare hosts
// included, a host re-used by another machine), under a reboot
// controller on a fake clock, with BMCs that refuse power-ons for as
// long as a fault is kept on, and paused writers whose stale requests
// of a machine land on the hosts it moved from.
type movedWorld struct {
	t       *rapid.T
	ctx     context.Context
	clk     *fake.Clock
	c       *fake.Cluster
	hosts   *fake.RebootHosts
	powers  map[string]*fake.Power
	refuse  map[string]bool
	hostOf  map[string]string
	onSince map[string]time.Time
	broken  map[string]bool
	bad     map[string]time.Time
	reboots *reboot.Reconciler
	rem     *remediation.Reconciler
	nm, nh  int
	limit   int
	errs    []string
	// lastReq is, per host, the last reboot request seen on it (the one a
	// power-off of it is for); strays are the values paused writers
	// landed, found those a pass of their Machine could read (on a host
	// its state or admission names) before it ran.
	lastReq map[string]string
	strays  map[string]bool
	found   map[string]bool
}

// requests returns each host's reboot request value ("" if none).
func (w *movedWorld) requests() map[string]string {
	out := map[string]string{}
	for _, h := range w.hostNames() {
		hh, _ := w.hosts.Get(w.ctx, h)
		out[h] = hh.Annotations[remediation.RebootAnnotation]
		if out[h] != "" {
			w.lastReq[h] = out[h]
		}
	}
	return out
}

// owner returns the machine a request value names ("" if none).
func owner(v string) string {
	var r struct{ Machine string }
	if json.Unmarshal([]byte(v), &r) != nil {
		return ""
	}
	return strings.TrimPrefix(r.Machine, "uid-")
}

// taken reports whether host h is off by ground truth, or has a reboot
// request on it, and whose request it is for (lastReq).
func (w *movedWorld) taken(h string, reqs map[string]string) (bool, string) {
	if reqs[h] == "" && w.powers[h].HardwareOn() {
		return false, ""
	}
	return true, w.lastReq[h]
}

// names returns the hosts machine m's state (or, once it is gone, its
// admission) names: a pass of m reads a request of its there.
func (w *movedWorld) names(m string) []string {
	if rec, err := w.c.Get(w.ctx, m); err == nil {
		return tracked(rec.State)
	}
	adm, _ := w.c.GetAdmissions(w.ctx)
	out := []string{adm.Requests[m].Host}
	mem := adm.Members[m]
	out = append(out, mem.PrevHost)
	for _, e := range mem.EarlierHosts {
		out = append(out, e.Host)
	}
	return out
}

// pass runs m's remediation pass and checks, by ground truth, what a
// request it writes adds: (a) no request of m's is written to a host
// while another host is off (or requested) for a request of m's (a move,
// a retry, a new attempt: one admission counts one host); (b) a newly
// admitted m's request leaves at most the limit's count of machines with
// a host off (or requested) for their requests, counting strays a pass
// of their machine has found (one not found yet the controller cannot
// know of).
func (w *movedWorld) pass(m string) error {
	before := w.requests()
	for _, h := range w.names(m) {
		if v := before[h]; v != "" && w.strays[v] && owner(v) == m {
			w.found[v] = true
		}
	}
	adm, _ := w.c.GetAdmissions(w.ctx)
	was := adm.Has(m)
	_, err := w.rem.Reconcile(w.ctx, m)
	after := w.requests()
	for _, h := range w.hostNames() {
		v := after[h]
		if v == "" || v == before[h] || w.strays[v] || owner(v) != m {
			continue
		}
		for _, x := range w.hostNames() {
			if t, by := w.taken(x, before); x != h && t && owner(by) == m {
				w.t.Fatalf("%s's pass wrote a request on %s while %s was off or requested for a request of %s's (%q, truth %v)%s",
					m, h, x, m, by, w.powers[x].Truth(), w.describe())
			}
		}
		if was {
			continue
		}
		holders := map[string]bool{m: true}
		for _, x := range w.hostNames() {
			if t, by := w.taken(x, before); t && x != h && by != "" && (!w.strays[by] || w.found[by]) {
				holders[owner(by)] = true
			}
		}
		if len(holders) > w.limit {
			w.t.Fatalf("%s admitted and wrote a request on %s while hosts were off or requested for %d other machines' requests, over the limit %d: %v%s",
				m, h, len(holders)-1, w.limit, holders, w.describe())
		}
	}
	return err
}

func (w *movedWorld) hostNames() []string {
	var out []string
	for j := 0; j < w.nh; j++ {
		out = append(out, fmt.Sprintf("h%d", j))
	}
	return out
}

// step advances the clock by d: kubelets and the health checker, then a
// pass of the reboot controller per host and of the remediation per
// machine.
func (w *movedWorld) step(d time.Duration) {
	w.clk.Advance(d)
	now := w.clk.Now()
	for _, h := range w.hostNames() {
		if !w.powers[h].HardwareOn() {
			w.onSince[h] = time.Time{}
		} else if w.onSince[h].IsZero() {
			w.onSince[h] = now
		}
	}
	for i := 0; i < w.nm; i++ {
		m := fmt.Sprintf("m%d", i)
		rec, err := w.c.Get(w.ctx, m)
		if err != nil {
			continue
		}
		h := w.hostOf[m]
		if !w.onSince[h].IsZero() && now.Sub(w.onSince[h]) < 30*time.Second {
			w.broken[m] = false // a power cycle of its host fixes it
		}
		up := h != "" && !w.onSince[h].IsZero() && now.Sub(w.onSince[h]) >= 30*time.Second && !w.broken[m]
		n := w.c.Node(m)
		switch {
		case up && !n.Exists:
			w.c.PutNode(remediation.Node{Name: m, UID: fmt.Sprintf("n-%s-%d", m, now.UnixNano()), Ready: true})
		case n.Exists && n.Ready != up:
			w.c.SetNodeReady(m, up)
		}
		if up {
			w.bad[m] = time.Time{}
		} else if w.bad[m].IsZero() {
			w.bad[m] = now
		} else if now.Sub(w.bad[m]) >= time.Minute && !rec.Machine.NeedsRemediation {
			w.c.SetNeedsRemediation(m, true)
		}
	}
	w.requests()
	for _, h := range w.hostNames() {
		if _, err := w.reboots.Reconcile(w.ctx, h); err != nil && !errors.Is(err, reboot.ErrConflict) {
			w.errs = append(w.errs, err.Error())
		}
	}
	for i := 0; i < w.nm; i++ {
		m := fmt.Sprintf("m%d", i)
		if err := w.pass(m); err != nil && !errors.Is(err, remediation.ErrNotFound) &&
			!errors.Is(err, remediation.ErrHostHeld) && !errors.Is(err, remediation.ErrConflict) {
			w.errs = append(w.errs, err.Error())
		}
	}
}

// tracked returns the hosts m's state reads for it: its request's host
// and the hosts it moved from.
func tracked(st remediation.State) []string {
	out := []string{st.Host}
	if st.PrevHost != "" {
		out = append(out, st.PrevHost)
	}
	for _, e := range st.EarlierHosts {
		out = append(out, e.Host)
	}
	return out
}

// accounted checks ground truth against the admission record: every
// host whose hardware is off (only remediation requests power hosts off
// here) is one an admitted machine's remediation holds: its request's
// host, or a host it moved from, as its state (or, once it is gone, its
// admission's recorded request and Member) names them.
func (w *movedWorld) accounted() {
	adm, err := w.c.GetAdmissions(w.ctx)
	if err != nil {
		w.t.Fatalf("GetAdmissions: %v", err)
	}
	held := map[string]bool{}
	for _, m := range adm.Machines {
		held[adm.Requests[m].Host] = true
		mem := adm.Members[m]
		held[mem.PrevHost] = true
		for _, e := range mem.EarlierHosts {
			held[e.Host] = true
		}
		if rec, err := w.c.Get(w.ctx, m); err == nil {
			for _, h := range tracked(rec.State) {
				held[h] = true
			}
		}
	}
	for _, h := range w.hostNames() {
		if !w.powers[h].HardwareOn() && !held[h] {
			w.t.Fatalf("host %s is off (ground truth %v) but no admitted machine's remediation holds it: admissions %v requests %v members %+v%s",
				h, w.powers[h].Truth(), adm.Machines, adm.Requests, adm.Members, w.describe())
		}
	}
}

func (w *movedWorld) describe() string {
	out := ""
	recs, _ := w.c.List(w.ctx)
	for _, r := range recs {
		out += fmt.Sprintf("\n%s on %s: NR=%v %s attempt=%d host=%s prev=%s since=%v seen=%v earlier=%+v msg=%q", r.Machine.Name, w.hostOf[r.Machine.Name],
			r.Machine.NeedsRemediation, r.State.Phase, r.State.Attempt, r.State.Host, r.State.PrevHost, r.State.PrevHostSince, r.State.PrevHostSeen, r.State.EarlierHosts, r.State.Message)
	}
	for _, h := range w.hostNames() {
		hh, _ := w.hosts.Get(w.ctx, h)
		out += fmt.Sprintf("\n%s: on=%v refuse=%v annotations=%v", h, w.powers[h].HardwareOn(), w.refuse[h], hh.Annotations)
	}
	return out
}

// stray lands a paused writer's stale request of m's on h (unless h has
// a request on it).
func (w *movedWorld) stray(m, h string) {
	hh, _ := w.hosts.Get(w.ctx, h)
	if _, ok := hh.Annotations[remediation.RebootAnnotation]; ok {
		return
	}
	v := remediation.RebootValue("uid-"+m, w.clk.Now().Add(-time.Hour))
	w.strays[v] = true
	if err := w.hosts.Mutate(h, func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: v}
	}); err != nil {
		w.t.Fatalf("stray: %v", err)
	}
	w.requests()
}

// downgrade rewrites m's State and Member as a controller of the version
// before PrevHostSince and PrevHostSeen would (it drops them).
func (w *movedWorld) downgrade(m string) {
	if rec, err := w.c.Get(w.ctx, m); err == nil && rec.State.PrevHost != "" {
		st := rec.State
		st.PrevHostSince, st.PrevHostSeen = time.Time{}, time.Time{}
		if err := w.c.SaveState(w.ctx, m, rec.Version, st); err != nil {
			w.t.Fatalf("downgrade state: %v", err)
		}
	}
	a, _ := w.c.GetAdmissions(w.ctx)
	if mem, ok := a.Members[m]; ok && mem.PrevHost != "" {
		mem.PrevHostSince, mem.PrevHostSeen = time.Time{}, time.Time{}
		a.Members = maps.Clone(a.Members)
		a.Members[m] = mem
		if err := w.c.PutAdmissions(w.ctx, a); err != nil {
			w.t.Fatalf("downgrade admissions: %v", err)
		}
	}
}

// TestMovedHostsStateMachine: the admission against ground truth, over
// time, while machines move between hosts (a second move, a host
// re-used by another machine), paused writers land stale requests of a
// machine on the hosts it moved from, BMCs refuse power-ons for a while
// (a host left off for such a request), attempts time out and are
// retried or fail, and an operator removes the mark (a failed
// remediation cleared to none). After every step: every host that is
// off is held by an admitted machine's remediation (review 40q: a retry,
// a second move, a failed remediation cleared, or another machine's
// power-off, released an admission while a host was off for a stray
// request). At the end, faults off and nothing moving: every host on and
// no admission left.
func TestMovedHostsStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		nm := rapid.IntRange(2, 3).Draw(t, "machines")
		w := &movedWorld{t: t, ctx: context.Background(), clk: fake.NewClock(time.Time{}), c: fake.NewCluster(),
			powers: map[string]*fake.Power{}, refuse: map[string]bool{}, hostOf: map[string]string{}, onSince: map[string]time.Time{},
			broken: map[string]bool{}, bad: map[string]time.Time{}, nm: nm, nh: nm + 2,
			lastReq: map[string]string{}, strays: map[string]bool{}, found: map[string]bool{}}
		w.limit = rapid.IntRange(1, 2).Draw(t, "limit")
		var readPower func(string) (power.Controller, error)
		if rapid.Bool().Draw(t, "power") {
			// Else RebootAPIHosts counts a host on only on the reboot
			// controller's confirmation (Status.OnConfirmed).
			readPower = func(h string) (power.Controller, error) { return w.powers[h], nil }
		}
		var hs []reboot.Host
		for _, h := range w.hostNames() {
			hs = append(hs, reboot.Host{Name: h, Online: true})
			h := h
			w.powers[h] = fake.NewPower(w.clk.Real, fake.PowerConfig{Lag: time.Duration(rapid.IntRange(0, 3).Draw(t, "lag")) * time.Second,
				Faults: func(c fake.Call) fake.Fault {
					if c.Op == fake.OpOn && w.refuse[h] {
						return fake.Fault{Kind: fake.FaultFailed}
					}
					return fake.Fault{}
				}})
			w.onSince[h] = w.clk.Now().Add(-time.Hour)
		}
		w.hosts = fake.NewRebootHosts(hs...)
		for i := 0; i < nm; i++ {
			m := fmt.Sprintf("m%d", i)
			w.hostOf[m] = fmt.Sprintf("h%d", i)
			w.c.AddMachine(remediation.Machine{Name: m, UID: "uid-" + m, NodeName: m, Cluster: "c", HasControllerOwner: i == 1})
			w.c.PutNode(remediation.Node{Name: m, UID: "n-" + m, Ready: true})
		}
		w.reboots = &reboot.Reconciler{Hosts: w.hosts, Now: w.clk.Now, Monotonic: w.clk.Monotonic,
			Power: func(h string) (power.Controller, error) { return w.powers[h], nil }}
		w.rem = &remediation.Reconciler{Machines: w.c, Nodes: w.c.Nodes(), Admissions: w.c, Now: w.clk.Now,
			Hosts: &remediation.RebootAPIHosts{Hosts: w.hosts, Now: w.clk.Now, Power: readPower, HostsMayVanish: true,
				HostOf: func(_ context.Context, m string) (string, error) {
					if w.hostOf[m] == "" {
						return "", remediation.ErrNotFound
					}
					return w.hostOf[m], nil
				}},
			Limit: remediation.MaxCount(w.limit),
			Config: remediation.Config{Timeout: time.Duration(rapid.IntRange(2, 6).Draw(t, "timeoutMin")) * time.Minute,
				RetryLimit: rapid.IntRange(-1, 2).Draw(t, "retries"), MinHealthyPeriod: 20 * time.Minute}}

		if rapid.Bool().Draw(t, "legacyStart") {
			// m0 as an earlier version left it: its remediation over, after
			// a move from a spare host (State and Member without
			// PrevHostSince / PrevHostSeen), admitted, and a stale request
			// of its on that host.
			t0 := w.clk.Now().Add(-time.Hour)
			spare := fmt.Sprintf("h%d", nm)
			rec, _ := w.c.Get(w.ctx, "m0")
			if err := w.c.SaveState(w.ctx, "m0", rec.Version, remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0,
				Host: "h0", PrevHost: spare, Finished: t0.Add(10 * time.Minute)}); err != nil {
				t.Fatalf("legacy state: %v", err)
			}
			a, _ := w.c.GetAdmissions(w.ctx)
			a.Machines = []string{"m0"}
			a.Requests = map[string]remediation.Request{"m0": {Value: remediation.RebootValue("uid-m0", t0), At: t0, Host: "h0"}}
			a.Members = map[string]remediation.Member{"m0": {Cluster: "c", Wrote: true, PrevHost: spare}}
			if err := w.c.PutAdmissions(w.ctx, a); err != nil {
				t.Fatalf("legacy admissions: %v", err)
			}
			w.stray("m0", spare)
		}

		steps := rapid.IntRange(10, 120).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			m := fmt.Sprintf("m%d", rapid.IntRange(0, nm-1).Draw(t, "m"))
			switch rapid.IntRange(0, 11).Draw(t, "action") {
			case 0:
				w.broken[m] = true
			case 1:
				// Re-provisioned on a host no other machine maps to (a
				// spare, or one another machine moved from).
				var free []string
				for _, h := range w.hostNames() {
					used := false
					for _, o := range w.hostOf {
						used = used || o == h
					}
					if !used {
						free = append(free, h)
					}
				}
				if len(free) > 0 {
					w.hostOf[m] = rapid.SampledFrom(free).Draw(t, "to")
				}
			case 2:
				// A paused writer's stale request of m lands on a host
				// its state reads as one it moved from, or on its own
				// host once its remediation is over.
				rec, err := w.c.Get(w.ctx, m)
				if err != nil {
					break
				}
				prev := tracked(rec.State)[1:]
				if (rec.State.Phase == remediation.PhaseDone || rec.State.Phase == remediation.PhaseFailed) && rec.State.Host != "" {
					prev = append(prev, rec.State.Host)
				}
				if len(prev) == 0 {
					break
				}
				w.stray(m, rapid.SampledFrom(prev).Draw(t, "strayOn"))
			case 10:
				// An operator deletes the Machine (its owner replaces it
				// by another name, or none): the gone path.
				// Not while a stale request of m's that no pass of m has
				// read is on a host: deleted then, nothing records that m
				// existed, and the request is an orphan only a sweep of
				// requests no Machine owns (the kube module's) removes.
				unread := slices.ContainsFunc(w.hostNames(), func(h string) bool {
					v := w.requests()[h]
					return w.strays[v] && !w.found[v] && owner(v) == m
				})
				if _, err := w.c.Get(w.ctx, m); err == nil && !unread && rapid.IntRange(0, 3).Draw(t, "delete") == 0 {
					if err := w.c.Delete(w.ctx, m); err != nil {
						t.Fatalf("delete %s: %v", m, err)
					}
					w.hostOf[m] = ""
				}
			case 11:
				// A controller of the earlier version (a rolling
				// upgrade) rewrites m's State and its admission's Member
				// without the fields it does not know.
				w.downgrade(m)
			case 3:
				h := rapid.SampledFrom(w.hostNames()).Draw(t, "refuse")
				w.refuse[h] = !w.refuse[h] // a BMC refusing power-ons, until it is fixed
			case 4:
				w.c.SetNeedsRemediation(m, false) // an operator removes the mark
			default:
				w.step(time.Duration(rapid.IntRange(5, 60).Draw(t, "dt")) * time.Second)
			}
			w.accounted()
		}

		// Faults off, nothing moves or lands: every host comes back on,
		// every admission goes.
		for h := range w.refuse {
			w.refuse[h] = false
		}
		for i := 0; i < 600; i++ {
			w.step(10 * time.Second)
			w.accounted()
			adm, _ := w.c.GetAdmissions(w.ctx)
			on := !slices.ContainsFunc(w.hostNames(), func(h string) bool { return !w.powers[h].HardwareOn() })
			if on && len(adm.Machines) == 0 {
				break
			}
		}
		adm, _ := w.c.GetAdmissions(w.ctx)
		for _, h := range w.hostNames() {
			if !w.powers[h].HardwareOn() {
				t.Fatalf("host %s left off once faults stopped; admissions %v%s", h, adm.Machines, w.describe())
			}
		}
		if len(adm.Machines) > 0 {
			recs, _ := w.c.List(w.ctx)
			inFlight := slices.ContainsFunc(recs, func(r remediation.MachineRecord) bool { return remediation.InFlight(r.State.Phase) })
			if !inFlight {
				t.Fatalf("admissions %v kept with every host on and nothing in flight%s", adm.Machines, w.describe())
			}
		}
		if len(w.errs) > 0 {
			t.Fatalf("errors: %v", w.errs)
		}
	})
}
