package remediation_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

var errCrash = errors.New("sim: crashed")

// sim is a small simulated cluster: machines m<i> on hosts h<i> with nodes
// n<i>, a reboot reconciler driving fake power controllers, kubelets that
// register a node some time after their host is on (unless broken), a
// health checker that marks machines whose node is missing or not ready,
// and the remediation reconciler under test.
type sim struct {
	ctx      context.Context
	clk      *fake.Clock
	cluster  *fake.Cluster
	hosts    *fake.RebootHosts
	powers   map[string]*fake.Power
	reboots  *reboot.Reconciler
	rem      *remediation.Reconciler
	rem2     *remediation.Reconciler // a second reconciler (another worker or process)
	cfg      remediation.Config
	limit    remediation.MaxUnhealthy
	nested   string // a Machine the second reconciler reconciles at the next write
	inNested bool
	n        int
	boot     time.Duration
	onSince  map[string]time.Time
	broken   map[string]bool // node fails while its host is on
	forever  map[string]bool // a power cycle does not help
	crashOn  int             // fail the remediator's n-th store call from now (0: never)
	calls    int
	mhcOff   map[string]bool // the health checker ignores this machine
	mhcAfter time.Duration   // the health checker's timeout
	badSince map[string]time.Time
	lastNR   map[string]bool
	failures []string
}

func newSim(n int, cfg remediation.Config, table bool, limit remediation.MaxUnhealthy) *sim {
	return newSimWith(n, cfg, table, limit, func(int) fake.PowerConfig { return fake.PowerConfig{Lag: 3 * time.Second} })
}

// newSimWith builds a simulation whose host i has power config pc(i).
func newSimWith(n int, cfg remediation.Config, table bool, limit remediation.MaxUnhealthy, pc func(int) fake.PowerConfig) *sim {
	s := &sim{ctx: context.Background(), clk: fake.NewClock(time.Time{}), cluster: fake.NewCluster(),
		powers: map[string]*fake.Power{}, n: n, boot: 30 * time.Second, onSince: map[string]time.Time{},
		broken: map[string]bool{}, forever: map[string]bool{}, mhcOff: map[string]bool{},
		mhcAfter: 40 * time.Second, badSince: map[string]time.Time{}, lastNR: map[string]bool{}}
	var hs []reboot.Host
	for i := 0; i < n; i++ {
		h, m, nd := fmt.Sprintf("h%d", i), fmt.Sprintf("m%d", i), fmt.Sprintf("n%d", i)
		hs = append(hs, reboot.Host{Name: h, Online: true})
		s.powers[h] = fake.NewPower(s.clk.Real, pc(i))
		s.cluster.AddMachine(remediation.Machine{Name: m, UID: "uid-" + m, NodeName: nd, ControlPlane: i == 0,
			HasControllerOwner: i%2 == 1})
		s.cluster.PutNode(remediation.Node{Name: nd, Ready: true, Labels: map[string]string{"role": "worker", "zone": "z" + h},
			Annotations: map[string]string{"note": "keep"}})
		s.onSince[h] = s.clk.Now().Add(-time.Hour)
	}
	s.hosts = fake.NewRebootHosts(hs...)
	// The adversary BMCs may say Off up to fake.MaxEarlyOff before the
	// hardware is off (fake.DrawReport): the reboot controller is configured
	// for it, as reboot's assumption A1 asks of its users.
	s.reboots = &reboot.Reconciler{Hosts: s.hosts, Now: s.clk.Now, Monotonic: s.clk.Monotonic, Logger: debugLogger(),
		Power:  func(h string) (power.Controller, error) { return s.powers[h], nil },
		Config: reboot.Config{OffSettle: fake.MaxEarlyOff}}
	s.cfg, s.limit = cfg, limit
	s.newRemediator(cfg, table, limit)
	s.rem2 = s.remediator(cfg, table, limit)
	s.cluster.SetInterloper(func(string) {
		// The second reconciler runs a whole pass between the first one's
		// read and its write.
		if m := s.nested; m != "" && !s.inNested {
			s.nested, s.inNested = "", true
			s.reconcileWith(s.rem2, m)
			s.inNested = false
		}
	})
	return s
}

func (s *sim) remediator(cfg remediation.Config, table bool, limit remediation.MaxUnhealthy) *remediation.Reconciler {
	return &remediation.Reconciler{
		Machines: crashMachines{s.cluster, s}, Nodes: crashNodes{s.cluster.Nodes(), s},
		Hosts: crashHosts{&remediation.RebootAPIHosts{Hosts: s.hosts, Now: s.clk.Now,
			Power:  func(h string) (power.Controller, error) { return s.powers[h], nil },
			HostOf: func(_ context.Context, m string) (string, error) { return "h" + m[1:], nil }}, s},
		Admissions: crashAdmissions{s.cluster, s},
		Config:     cfg, Table: table, Limit: limit, Now: s.clk.Now, Logger: debugLogger(),
	}
}

// debugLogger logs to stderr when REBOOTKIT_SIM_DEBUG is set.
func debugLogger() *slog.Logger {
	if os.Getenv("REBOOTKIT_SIM_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func (s *sim) newRemediator(cfg remediation.Config, table bool, limit remediation.MaxUnhealthy) {
	s.rem = s.remediator(cfg, table, limit)
}

func (s *sim) reconcileWith(r *remediation.Reconciler, m string) {
	_, err := r.Reconcile(s.ctx, m)
	if err != nil && !errors.Is(err, errCrash) && !errors.Is(err, remediation.ErrConflict) && !errors.Is(err, remediation.ErrNotFound) {
		s.failures = append(s.failures, err.Error())
	}
}

func (s *sim) crash() error {
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

// step advances the world by d: kubelets, health checker, then one pass
// of the reboot reconciler and of the remediator for every machine.
func (s *sim) step(d time.Duration) {
	s.clk.Advance(d)
	now := s.clk.Now()
	for i := 0; i < s.n; i++ {
		h, m, nd := fmt.Sprintf("h%d", i), fmt.Sprintf("m%d", i), fmt.Sprintf("n%d", i)
		if !s.powers[h].HardwareOn() { // the kubelet lives on the real hardware
			s.onSince[h] = time.Time{}
			s.cluster.SetNodeReady(nd, false)
		} else if s.onSince[h].IsZero() {
			s.onSince[h] = now
			if !s.forever[m] {
				s.broken[m] = false // a power cycle fixes it
			}
		}
		node := s.cluster.Node(nd)
		up := !s.onSince[h].IsZero() && now.Sub(s.onSince[h]) >= s.boot && !s.broken[m]
		switch {
		case up && !node.Exists:
			// The kubelet registers a fresh node, with some labels of its own.
			s.cluster.PutNode(remediation.Node{Name: nd, Ready: true, Labels: map[string]string{"role": "worker-new"}})
		case node.Exists:
			s.cluster.SetNodeReady(nd, up)
		}
		node = s.cluster.Node(nd)
		rec, err := s.cluster.Get(s.ctx, m)
		if err != nil {
			continue // deleted for its owner to replace
		}
		if s.lastNR[m] && !rec.Machine.NeedsRemediation {
			// Like Cluster API's health check, the timeout runs from the
			// Machine's last update: the remediator just updated it.
			s.badSince[m] = now
		}
		switch {
		case node.Exists && node.Ready:
			s.badSince[m] = time.Time{}
		case s.badSince[m].IsZero():
			s.badSince[m] = now
		case !s.mhcOff[m] && now.Sub(s.badSince[m]) >= s.mhcAfter:
			s.cluster.SetNeedsRemediation(m, true)
		}
		rec, _ = s.cluster.Get(s.ctx, m)
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

type crashAdmissions struct {
	*fake.Cluster
	s *sim
}

func (c crashAdmissions) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.Cluster.PutAdmissions(ctx, a)
}

type crashMachines struct {
	*fake.Cluster
	s *sim
}

func (c crashMachines) SaveState(ctx context.Context, name, version string, st remediation.State) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.Cluster.SaveState(ctx, name, version, st)
}

func (c crashMachines) RemoveNeedsRemediation(ctx context.Context, name string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.Cluster.RemoveNeedsRemediation(ctx, name)
}

type crashNodes struct {
	*fake.ClusterNodes
	s *sim
}

func (c crashNodes) Delete(ctx context.Context, name, uid string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.ClusterNodes.Delete(ctx, name, uid)
}

func (c crashNodes) AddMetadata(ctx context.Context, name string, l, a map[string]string) error {
	if err := c.s.crash(); err != nil {
		return err
	}
	return c.ClusterNodes.AddMetadata(ctx, name, l, a)
}

type crashHosts struct {
	*remediation.RebootAPIHosts
	s *sim
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
