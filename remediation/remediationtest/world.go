package remediationtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// world is StateMachine's simulated cluster over the stores under test:
// machines m<i> on hosts h<i> with nodes m<i>, a reboot reconciler driving
// fake power, kubelets, a health checker, and the remediation reconcilers
// (the one under test and a second one).
type world struct {
	t        *rapid.T
	ctx      context.Context
	clk      *fake.Clock
	stores   Stores
	machines remediation.MachineStore
	hosts    *fake.RebootHosts
	powers   map[string]*fake.Power
	reboots  *reboot.Reconciler
	rem      *remediation.Reconciler
	rem2     *remediation.Reconciler // a second reconciler (another worker or process)
	cfg      remediation.Config
	limit    remediation.MaxUnhealthy
	nested   string // a machine the second reconciler reconciles at the next write
	inNested bool
	n        int
	boot     time.Duration
	onSince  map[string]time.Time
	broken   map[string]bool // node fails while its host is on
	forever  map[string]bool // a power cycle does not help
	crashOn  int             // fail the remediator's n-th store call from now (0: never)
	calls    int
	// flaky, if set, fails each store write of the remediators with
	// probability 1/flakyRate (the liveness check's fault that never stops).
	flaky     *rand.Rand
	flakyRate int
	mhcAfter  time.Duration // the health checker's timeout
	badSince  map[string]time.Time
	lastNR    map[string]bool
	failures  []string
	// beforeFence is called before a node is deleted or tainted.
	beforeFence func(node string)
}

func newWorld(t *rapid.T, newStores NewStores, n int, cfg remediation.Config, limit remediation.MaxUnhealthy, pcs []fake.PowerConfig) (*world, error) {
	s := &world{t: t, ctx: context.Background(), clk: fake.NewClock(time.Time{}), powers: map[string]*fake.Power{}, n: n,
		boot: 30 * time.Second, onSince: map[string]time.Time{}, broken: map[string]bool{}, forever: map[string]bool{},
		mhcAfter: 40 * time.Second, badSince: map[string]time.Time{}, lastNR: map[string]bool{}}
	var hs []reboot.Host
	var ms []remediation.Machine
	var ns []remediation.Node
	for i := 0; i < n; i++ {
		h, m := fmt.Sprintf("h%d", i), fmt.Sprintf("m%d", i)
		hs = append(hs, reboot.Host{Name: h, Online: true})
		s.powers[h] = fake.NewPower(s.clk.Real, pcs[i])
		ms = append(ms, remediation.Machine{Name: m, UID: "uid-" + m, NodeName: m, ControlPlane: i == 0, HasControllerOwner: i%2 == 1})
		ns = append(ns, remediation.Node{Exists: true, Name: m, UID: "node-" + m, Ready: true,
			Labels: map[string]string{"role": "worker", "zone": "z" + h}, Annotations: map[string]string{"note": "keep"}})
		s.onSince[h] = s.clk.Now().Add(-time.Hour)
	}
	st, err := newStores(ms, ns)
	if err != nil {
		return nil, err
	}
	if st.World == nil {
		if st.Close != nil {
			st.Close()
		}
		return nil, errors.New("remediationtest: StateMachine needs Stores.World")
	}
	if st.SingleRecord {
		cfg.OutOfService = true // a single record cannot lose its node
	}
	s.stores, s.machines = st, st.Machines
	s.hosts = fake.NewRebootHosts(hs...)
	// The adversary BMCs may say Off up to fake.MaxEarlyOff before the
	// hardware is off (fake.DrawReport): the reboot controller is configured
	// for it, as reboot's assumption A1 asks of its users.
	s.reboots = &reboot.Reconciler{Hosts: s.hosts, Now: s.clk.Now, Monotonic: s.clk.Monotonic,
		Power:  func(h string) (power.Controller, error) { return s.powers[h], nil },
		Config: reboot.Config{OffSettle: fake.MaxEarlyOff}}
	s.cfg, s.limit = cfg, limit
	s.rem = s.remediator()
	s.rem2 = s.remediator()
	return s, nil
}

// interlope runs the second reconciler's whole pass, if one is armed,
// between the first one's read and its write.
func (s *world) interlope() {
	if m := s.nested; m != "" && !s.inNested {
		s.nested, s.inNested = "", true
		s.reconcileWith(s.rem2, m)
		s.inNested = false
	}
}

func (s *world) remediator() *remediation.Reconciler {
	return &remediation.Reconciler{
		Machines: crashMachines{s.stores.Machines, s}, Nodes: crashNodes{s.stores.Nodes, s},
		Hosts: crashHosts{&remediation.RebootAPIHosts{Hosts: s.hosts, Now: s.clk.Now,
			Power:  func(h string) (power.Controller, error) { return s.powers[h], nil },
			HostOf: func(_ context.Context, m string) (string, error) { return "h" + m[1:], nil }}, s},
		Admissions: crashAdmissions{s.stores.Admissions, s},
		Config:     s.cfg, Limit: s.limit, Now: s.clk.Now,
	}
}

func (s *world) reconcileWith(r *remediation.Reconciler, m string) {
	_, err := r.Reconcile(s.ctx, m)
	if err != nil && !errors.Is(err, errCrash) && !errors.Is(err, remediation.ErrConflict) && !errors.Is(err, remediation.ErrNotFound) {
		s.failures = append(s.failures, err.Error())
	}
}

func (s *world) crash() error {
	if s.flaky != nil && s.flaky.IntN(s.flakyRate) == 0 {
		return errCrash
	}
	if s.crashOn == 0 {
		return nil
	}
	s.calls++
	if s.calls == s.crashOn {
		s.crashOn, s.calls = 0, 0
		return errCrash
	}
	return nil
}

func (s *world) must(what string, err error) {
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

func (s *world) mark(m string, on bool) {
	s.must("World.SetNeedsRemediation "+m, s.stores.World.SetNeedsRemediation(s.ctx, m, on))
}

// node reads a node directly from the store (ground truth for the kit).
func (s *world) node(name string) remediation.Node {
	n, err := s.stores.Nodes.Get(s.ctx, name)
	s.must("Nodes.Get "+name, err)
	return n
}

// step advances the world by d: kubelets, health checker, then one pass
// of the reboot reconciler and of the remediator for every machine.
func (s *world) step(d time.Duration) {
	s.clk.Advance(d)
	now := s.clk.Now()
	for i := 0; i < s.n; i++ {
		h, m := fmt.Sprintf("h%d", i), fmt.Sprintf("m%d", i)
		if !s.powers[h].HardwareOn() { // the kubelet lives on the real hardware
			s.onSince[h] = time.Time{}
			if s.node(m).Exists {
				s.must("World.SetNodeReady", s.stores.World.SetNodeReady(s.ctx, m, false))
			}
		} else if s.onSince[h].IsZero() {
			s.onSince[h] = now
			if !s.forever[m] {
				s.broken[m] = false // a power cycle fixes it
			}
		}
		node := s.node(m)
		up := !s.onSince[h].IsZero() && now.Sub(s.onSince[h]) >= s.boot && !s.broken[m]
		switch {
		case up && !node.Exists:
			// The kubelet registers a fresh node, with some labels of its own.
			s.must("World.PutNode", s.stores.World.PutNode(s.ctx, remediation.Node{Exists: true, Name: m,
				UID: fmt.Sprintf("node-%s-%d", m, now.UnixNano()), Ready: true, Labels: map[string]string{"role": "worker-new"}}))
		case node.Exists && node.Ready != up:
			s.must("World.SetNodeReady", s.stores.World.SetNodeReady(s.ctx, m, up))
		}
		node = s.node(m)
		rec, err := s.machines.Get(s.ctx, m)
		if err != nil {
			continue // deleted for its owner to replace
		}
		if s.lastNR[m] && !rec.Machine.NeedsRemediation {
			// Like Cluster API's health check, the timeout runs from the
			// machine's last update: the remediator just updated it.
			s.badSince[m] = now
		}
		switch {
		case node.Exists && node.Ready:
			s.badSince[m] = time.Time{}
		case s.badSince[m].IsZero():
			s.badSince[m] = now
		case now.Sub(s.badSince[m]) >= s.mhcAfter:
			s.mark(m, true)
		}
		rec, _ = s.machines.Get(s.ctx, m)
		s.lastNR[m] = rec.Machine.NeedsRemediation
	}
	for i := 0; i < s.n; i++ {
		if _, err := s.reboots.Reconcile(s.ctx, fmt.Sprintf("h%d", i)); err != nil && !errors.Is(err, reboot.ErrConflict) {
			s.failures = append(s.failures, err.Error())
		}
	}
	for i := 0; i < s.n; i++ {
		s.reconcileWith(s.rem, fmt.Sprintf("m%d", i))
	}
}

// settled: no remediation in flight or able to start, every host on, no
// reboot annotation.
func (s *world) settled(limit remediation.MaxUnhealthy) bool {
	recs, _ := s.machines.List(s.ctx)
	fleet := make([]remediation.FleetMachine, len(recs))
	for i, r := range recs {
		fleet[i] = remediation.FleetMachine{Name: r.Machine.Name, ControlPlane: r.Machine.ControlPlane,
			Unhealthy: r.Machine.NeedsRemediation, Remediating: remediation.InFlight(r.State.Phase)}
	}
	for _, r := range recs {
		if remediation.InFlight(r.State.Phase) {
			return false
		}
		// A node that is back gets its backup restored by a later pass.
		if node := s.node(r.Machine.NodeName); node.Exists && node.Ready && r.State.Backup != nil {
			return false
		}
		if may, _ := remediation.MayStart(fleet, r.Machine.Name, limit); r.Machine.NeedsRemediation &&
			r.State.Phase != remediation.PhaseFailed && may {
			return false
		}
	}
	for i := 0; i < s.n; i++ {
		h, _ := s.hosts.Get(s.ctx, fmt.Sprintf("h%d", i))
		if _, ok := h.Annotations[remediation.RebootAnnotation]; ok || !s.powers[h.Name].HardwareOn() {
			return false
		}
	}
	return true
}

// maxOff is the most hosts whose hardware was off at once, at any time
// so far (ground truth: the fake powers' Truth), and when. A power-on at
// t runs at t, a power-off at t is off at t: changes at the same instant
// count the power-ons first.
func (s *world) maxOff() (int, time.Time) {
	type change struct {
		at   time.Time
		host string
		on   bool
	}
	var all []change
	for h, p := range s.powers {
		for _, tc := range p.Truth() {
			all = append(all, change{tc.At, h, tc.On})
		}
	}
	slices.SortStableFunc(all, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.on == b.on:
			return 0
		case a.on:
			return -1
		}
		return 1
	})
	off := map[string]bool{}
	most, when := 0, time.Time{}
	for _, c := range all {
		if c.on {
			delete(off, c.host)
		} else {
			off[c.host] = true
		}
		if len(off) > most {
			most, when = len(off), c.at
		}
	}
	return most, when
}

func (s *world) describe() string {
	out := ""
	recs, _ := s.machines.List(s.ctx)
	for _, r := range recs {
		h := "h" + r.Machine.Name[1:]
		hh, _ := s.hosts.Get(s.ctx, h)
		out += fmt.Sprintf("\n%s: NR=%v phase=%s attempt=%d canceled=%v power=%v annotations=%v node=%+v broken=%v forever=%v",
			r.Machine.Name, r.Machine.NeedsRemediation, r.State.Phase, r.State.Attempt, r.State.Canceled,
			s.powers[h].Current(), hh.Annotations, s.node(r.Machine.NodeName), s.broken[r.Machine.Name], s.forever[r.Machine.Name])
	}
	return out
}

// The reconcilers' handles: a crash may fail any write; the second
// reconciler runs between a read and the write of a State or of the
// admission record; a node is fenced only after beforeFence.

type crashAdmissions struct {
	remediation.AdmissionStore
	s *world
}

func (c crashAdmissions) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	c.s.interlope()
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.AdmissionStore.PutAdmissions(ctx, a)
}

type crashMachines struct {
	remediation.MachineStore
	s *world
}

func (c crashMachines) SaveState(ctx context.Context, name, version string, st remediation.State) error {
	c.s.interlope()
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.MachineStore.SaveState(ctx, name, version, st)
}

func (c crashMachines) RemoveNeedsRemediation(ctx context.Context, name string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.MachineStore.RemoveNeedsRemediation(ctx, name)
}

type crashNodes struct {
	remediation.NodeStore
	s *world
}

func (c crashNodes) Delete(ctx context.Context, name, uid string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	c.s.beforeFence(name)
	return c.NodeStore.Delete(ctx, name, uid)
}

func (c crashNodes) SetOutOfService(ctx context.Context, name string, on bool) error {
	if on {
		c.s.beforeFence(name)
	}
	return c.NodeStore.SetOutOfService(ctx, name, on)
}

func (c crashNodes) AddMetadata(ctx context.Context, name string, l, a map[string]string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.NodeStore.AddMetadata(ctx, name, l, a)
}

type crashHosts struct {
	*remediation.RebootAPIHosts
	s *world
}

func (c crashHosts) AddRebootAnnotation(ctx context.Context, m string, r remediation.Request) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.RebootAPIHosts.AddRebootAnnotation(ctx, m, r)
}

func (c crashHosts) RemoveRebootAnnotation(ctx context.Context, m string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.RebootAPIHosts.RemoveRebootAnnotation(ctx, m)
}

func (c crashHosts) RemoveRebootRequest(ctx context.Context, m string, r remediation.Request) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.RebootAPIHosts.RemoveRebootRequest(ctx, m, r)
}
