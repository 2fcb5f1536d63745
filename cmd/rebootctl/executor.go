package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/reboot"
)

// metaExecutor is the key of the executor's heartbeat and status in the
// plan store's meta bucket.
const metaExecutor = "executor"

// executorStatus is what the executor publishes in the store after every
// pass, and every interval during a long one: its heartbeat and where each
// busy server stands.
type executorStatus struct {
	Host     string        `json:"host"`
	PID      int           `json:"pid"`
	Started  time.Time     `json:"started"`
	At       time.Time     `json:"at"`
	Interval time.Duration `json:"interval"`
	State    string        `json:"state"`
	Self     string        `json:"self,omitempty"`
	// LastPass is the end of the last pass that had no error.
	LastPass  time.Time                `json:"last_pass,omitzero"`
	PassError string                   `json:"pass_error,omitempty"`
	Servers   []inventory.ServerStatus `json:"servers,omitempty"`
}

// lockedStore is the plan store as the executor uses it: opened for each
// read or write only, so that the store's lock is never held while the
// fleet is observed or acted on, and after any command that waits for
// the store (storewait.go); each open applies first the operators'
// commands recorded next to the store (cmdfile.go, env.waitStore), where
// a stop or cancel lands without waiting for the store.
type lockedStore struct{ e *env }

func (s lockedStore) with(f func(*plan.BoltStore) error) error {
	_, err := s.withNext(f)
	return err
}

// withNext is with, and what the open applied and saw: the side file's
// mark, and the epoch of other processes' writes (storeWrites).
func (s lockedStore) withNext(f func(*plan.BoltStore) error) (openMark, error) {
	if err := s.e.storeExists(); err != nil {
		return openMark{}, err
	}
	yieldToCommands(s.e.ctx, s.e.store)
	st, next, err := s.e.waitStoreNext()
	if err != nil {
		return openMark{}, err
	}
	defer st.Close()
	m := openMark{cmd: next, epoch: s.e.writes.opened(s.e.store)}
	defer s.e.writes.closing(s.e.store)
	return m, f(st)
}

// openMark is what one open of the store applied and saw.
type openMark struct {
	cmd   cmdMark
	epoch int64
}

// read is with for the pass's read of plan uuid's state before its jobs
// (plan.Executor reads the header, GetHead, before its first job and
// again when CommandPending says so): once it is read, the commands
// recorded up to the open, and every write of the store up to it, are in
// what was read (CommandPending). No other
// read marks the plan seen: the power-off check (Options.PlanCheck, run
// by the fleet's job workers concurrently with a pass) reads the plan
// through GetView, and a command it applied or saw is not in what the
// pass running then decided on, so it must stay pending for that pass.
func (s lockedStore) read(uuid string, f func(*plan.BoltStore) error) error {
	m, err := s.withNext(f)
	if err == nil {
		s.e.pending.saw(uuid, m.cmd)
		s.e.writes.saw(uuid, m.epoch)
	}
	return err
}

// Get reads the whole plan. It does not mark the plan seen
// (CommandPending): the pass reads the plan's header again before its
// first job (GetHead), and that read does.
func (s lockedStore) Get(ctx context.Context, uuid string) (p plan.Plan, err error) {
	err = s.with(func(st *plan.BoltStore) error { p, err = st.Get(ctx, uuid); return err })
	return p, err
}

func (s lockedStore) Create(ctx context.Context, p plan.Plan) error {
	return s.with(func(st *plan.BoltStore) error {
		if err := s.fence(ctx, st); err != nil {
			return err
		}
		return st.Create(ctx, p)
	})
}

func (s lockedStore) Put(ctx context.Context, p plan.Plan) error {
	return s.with(func(st *plan.BoltStore) error {
		if err := s.fence(ctx, st); err != nil {
			return err
		}
		return st.Put(ctx, p)
	})
}

func (s lockedStore) List(ctx context.Context) (ps []plan.Plan, err error) {
	err = s.with(func(st *plan.BoltStore) error { ps, err = st.List(ctx); return err })
	return ps, err
}

// ListHeads lists every plan's header only (plan.BoltStore.ListHeads).
func (s lockedStore) ListHeads(ctx context.Context) (vs []plan.View, err error) {
	err = s.with(func(st *plan.BoltStore) error { vs, err = st.ListHeads(ctx); return err })
	return vs, err
}

// GetView reads the view's bytes with the file locked (plan.BoltStore.ReadView)
// and decodes them after letting it go: an operator's command waits for
// the read only, not for the decoding of the reboots in flight. Like Get,
// it does not mark the plan seen (CommandPending): the pass's GetView and
// the power-off check's (concurrent with a pass) both use it.
func (s lockedStore) GetView(ctx context.Context, uuid string) (plan.View, error) {
	var r plan.ViewRead
	if err := s.with(func(st *plan.BoltStore) (err error) { r, err = st.ReadView(ctx, uuid); return err }); err != nil {
		return plan.View{}, err
	}
	return r.View()
}

// PutView encodes the view's changed reboots (plan.EncodeView) before
// locking the file for the write.
func (s lockedStore) PutView(ctx context.Context, v plan.View) error {
	v, err := plan.EncodeView(v)
	if err != nil {
		return err
	}
	return s.with(func(st *plan.BoltStore) error {
		if err := s.fence(ctx, st); err != nil {
			return err
		}
		return st.PutView(ctx, v)
	})
}

// GetHead reads a plan's header alone (plan.HeadStore): what the
// executor's pass reads before its first job, every 16 jobs it creates
// and whenever CommandPending says so, so the store's lock is held for
// one small read, not a whole-plan decode. It is the one read that marks
// the plan seen (read): only the pass calls it.
func (s lockedStore) GetHead(ctx context.Context, uuid string) (v plan.View, err error) {
	err = s.read(uuid, func(st *plan.BoltStore) error { v, err = st.GetHead(ctx, uuid); return err })
	return v, err
}

// PutHead writes a plan's header alone (plan.HeadStore).
func (s lockedStore) PutHead(ctx context.Context, h plan.View) error {
	return s.with(func(st *plan.BoltStore) error {
		if err := s.fence(ctx, st); err != nil {
			return err
		}
		return st.PutHead(ctx, h)
	})
}

// CommandPending reports whether an operator's command of plan uuid may
// have landed after this executor's pass last read the plan's state
// (GetHead; plan.CommandStore): one recorded in FILE.commands since,
// whoever applied it (a power-off check's read included), or a write of
// the store by another process since (a command applied to the store
// directly: storeWrites). Before every job the executor creates: two
// stats, and a read of FILE.commands only when it changed.
func (s lockedStore) CommandPending(_ context.Context, uuid string) (bool, error) {
	if s.e.writes.since(s.e.store, uuid) {
		return true, nil
	}
	return s.e.pending.pending(s.e.store, uuid)
}

var (
	_ plan.CommandStore = lockedStore{}
	_ plan.ViewStore    = lockedStore{}
	_ plan.HeadStore    = lockedStore{}
)

// jobLive says whether a plan (as v shows it) still runs job: its reboot
// is in its job step and the plan has not ended, or it waits for the
// services after the power cycle. powerOff asks the stricter question of
// the first power-off: job step, plan not ended.
func jobLive(v plan.View, job string, powerOff bool) (bool, string) {
	for _, r := range v.Reboots {
		if r.JobUUID != job {
			continue
		}
		switch {
		case r.Step == plan.StepJob && !v.State.Finished():
			return true, ""
		case r.Step == plan.StepServices && !powerOff:
			return true, ""
		case r.Step == plan.StepJob:
			return false, fmt.Sprintf("plan %s is %s", v.UUID, v.State)
		case r.Step == plan.StepCancelJob || r.Step == plan.StepFailed:
			why := fmt.Sprintf("plan %s gave up on this reboot", v.UUID)
			if r.Error != "" {
				why += ": " + r.Error
			}
			return false, why
		}
		return false, fmt.Sprintf("plan %s no longer runs this job (step %s)", v.UUID, r.Step)
	}
	return false, fmt.Sprintf("plan %s no longer runs this job", v.UUID)
}

func (e *env) executor(args []string) int {
	fs := flag.NewFlagSet("rebootctl executor", flag.ContinueOnError)
	commonFlags(fs, e)
	jsonFlag(fs, e, "log as JSON lines (log/slog's JSON handler) instead of text")
	state := fs.String("state", "", "the fleet state file: jobs and power bookkeeping (default: the store's path + \".fleet\";\n"+
		"never opened through a symbolic link)")
	interval := fs.Duration("interval", 5*time.Second, "time between passes")
	passTimeout := fs.Duration("pass-timeout", 5*time.Minute, "the longest one pass over the running plans may take: each plan gets an equal share of what\n"+
		"is left of it, a plan cut short the time the others left unused, and each call to the fleet\n"+
		"at most a quarter of its plan's share while others wait after it, and half of the pass (a call\n"+
		"that does not answer in time is asked again, after the others, by the next pass)")
	drain := fs.Duration("drain-timeout", 15*time.Minute, "a job must have drained its server this long after it started")
	jobTimeout := fs.Duration("job-timeout", time.Hour, "a reboot job must have power-cycled its server this long after it was created")
	retention := fs.Duration("job-retention", time.Hour, "how long an ended job stays in the fleet state file once its plan has recorded its end")
	services := fs.Duration("services-timeout", time.Hour, "a rebooted server's health check must pass this long after its power cycle")
	soft := fs.Duration("soft-timeout", 3*time.Minute, "how long a soft shutdown may take before a hard power-off")
	shutdownMax := fs.Duration("shutdown-max", 0, "the longest a server takes to shut down after a power-off its BMC accepted\n"+
		"(OS shutdown, firmware or OS updates applied at shutdown, the power's own delay); 0: twice\n"+
		"--soft-timeout (6m by default). Too short, and a shutdown that ends later leaves its server off\n"+
		"for good (its job gave up, nothing watches it any more); a longer value only keeps such a\n"+
		"server counted offline longer. At least --soft-timeout. It also bounds how long after its\n"+
		"reboot command the executor's own server counts offline while its new boot is not seen")
	stale := fs.Duration("stale-reads", 30*time.Second, "how long a BMC may report the power state from before a change")
	poll := fs.Duration("poll", time.Second, "how often a job checks its server")
	self := fs.String("self", "", "the inventory server this executor runs on (hostname or UUID), or \"none\"\n(default: the server whose hostname is this machine's); it is never powered off\nthrough its BMC, only rebooted through its own reboot command")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (host:port), at /metrics")
	verbose := fs.Bool("v", false, "log every job step and every power command sent to a BMC (with its answer)")
	if _, code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *interval <= 0 {
		// A non-positive interval stops the pass loop's ticker and makes
		// other executors judge the lease by badLeaseInterval
		// (TestReview37ac_NonPositiveIntervalPanicsExecutor).
		fmt.Fprintf(e.errw, "rebootctl executor: --interval %s must be positive\n", *interval)
		return exitUsage
	}
	if *passTimeout <= 0 {
		fmt.Fprintf(e.errw, "rebootctl executor: --pass-timeout %s must be positive\n", *passTimeout)
		return exitUsage
	}
	if *shutdownMax < 0 {
		fmt.Fprintf(e.errw, "rebootctl executor: --shutdown-max %s is negative; give 0 for twice --soft-timeout\n", *shutdownMax)
		return exitUsage
	}
	if *shutdownMax > 0 && *shutdownMax < *soft {
		// A soft shutdown may take --soft-timeout before the hard
		// power-off: a server still shutting down would be taken for
		// settled (its slot freed) before its power-off lands.
		fmt.Fprintf(e.errw, "rebootctl executor: --shutdown-max %s is shorter than --soft-timeout %s (a soft shutdown may take that long before the hard power-off); "+
			"give --shutdown-max at least %s, or 0 for twice --soft-timeout\n", *shutdownMax, *soft, *soft)
		return exitUsage
	}
	inv, err := inventory.Load(e.inventory)
	if err != nil {
		return e.fail(err)
	}
	// A store that does not exist is never created here (a typo, or
	// another directory, must not look like an empty store): say so, and
	// wait for plan create to make it.
	for said := false; ; said = true {
		err := e.storeExists()
		if err == nil {
			break
		}
		if !said {
			fmt.Fprintf(e.errw, "rebootctl executor: %v; waiting for it\n", err)
		}
		select {
		case <-e.ctx.Done():
			return exitOK
		case <-time.After(*interval):
		}
	}
	selfUUID, maybeSelf, err := resolveSelf(e.ctx, inv, *self)
	if err != nil {
		fmt.Fprintf(e.errw, "rebootctl executor: %v\n", err)
		return exitUsage
	}
	if *state == "" {
		*state = e.store + ".fleet"
	}
	// Neither file is another user's that any user could have made first.
	for _, f := range [][2]string{{e.store, "the plan store"}, {*state, "the fleet state file"}} {
		if err := executorOwns(f[0], f[1]); err != nil {
			fmt.Fprintf(e.errw, "rebootctl executor: %v\n", err)
			return exitError
		}
	}
	// Each open judges the file it opened, as above (a name may be
	// swapped between that look and an open).
	e.checkStore = executorOwnsFile("the plan store")
	logger := executorLogger(e.errw, *verbose, e.json)
	m := newMetrics()
	store := lockedStore{e}
	host, _ := os.Hostname()
	named := serverNames(inv)
	e.named = named
	if err := refuseMaybeSelf(e.ctx, store, inv, maybeSelf, host); err != nil {
		fmt.Fprintf(e.errw, "rebootctl executor: %v\n", err)
		return exitError
	}
	// One live executor per plan store, whatever state file or path it
	// was given: claimed before the fleet resumes any job. The fleet
	// state file is named in the lease by its ID (kept in it; "" for a
	// file not made yet, or made by an older rebootctl), and again, with
	// the ID the open found or gave, once it is open (Options.Claim).
	me := lease{ID: newLeaseID(), Host: host, PID: os.Getpid(), State: canonicalPath(*state), Started: time.Now().UTC(), Interval: *interval}
	stateID, err := inventory.ReadFleetIdentity(*state, executorOwnsFile("the fleet state file"))
	if err != nil && !errors.Is(err, inventory.ErrLocked) {
		return e.fail(err)
	}
	// (another executor's open file: its lease refuses this one, below)
	me.StateID, me.Gen, me.prevGen = stateID.ID, stateID.Gen, stateID.PrevGen
	if _, err := os.Lstat(*state); errors.Is(err, os.ErrNotExist) {
		me.StateID = "new:" + me.ID // a file made now: no lease's file, whatever its host and path
	}
	hold := &leaseHolder{store: store, me: me}
	if err := hold.claim(e.ctx, time.Now().UTC()); err != nil {
		fmt.Fprintf(e.errw, "rebootctl executor: %v\n", err)
		return exitError
	}
	// Plan store writes of this executor land only while the store's
	// lease is its own (lockedStore.fence).
	e.leaseID = me.ID
	// Given up on return, after the fleet's deferred Close (defers run
	// last first): nothing of this executor acts any more. What its fleet
	// state file still owes is read before the Close (finalOwed).
	var finalOwed []inventory.Owed
	defer func() { release(e.store, e.checkStore, hold.lease(), finalOwed) }()
	refused := false
	fleet, err := inventory.OpenFleet(inv, *state, inventory.Options{
		Claim: func(id inventory.FleetIdentity) error {
			if l := hold.lease(); id.ID == l.StateID && id.Gen == l.Gen && id.PrevGen == l.prevGen {
				return nil
			}
			hold.identify(id) // made now, given its ID now, or not the file read before
			if err := hold.claim(e.ctx, time.Now().UTC()); err != nil {
				refused = true
				return err
			}
			return nil
		},
		Reboot:      reboot.Config{SoftTimeout: *soft, StaleReads: *stale},
		ShutdownMax: *shutdownMax,
		JobTimeout:  *jobTimeout, ServicesTimeout: *services, JobRetention: *retention, Poll: *poll, Logger: logger, Self: selfUUID, MaybeSelf: maybeSelf,
		OnBMCError: m.bmcError,
		CheckFile:  executorOwnsFile("the fleet state file"),
		PlanCheck: func(ctx context.Context, planUUID, jobUUID string) (bool, string, error) {
			if err := holds(ctx, store, me); err != nil {
				return false, "", err // no power-off unless this executor still holds the store
			}
			v, err := store.GetView(ctx, planUUID)
			if errors.Is(err, plan.ErrNotFound) {
				return false, "its plan " + planUUID + " no longer exists", nil
			}
			if err != nil {
				return false, "", err
			}
			ok, why := jobLive(v, jobUUID, true)
			return ok, why, nil
		}})
	if refused {
		fmt.Fprintf(e.errw, "rebootctl executor: %v\n", err)
		return exitError
	}
	if err != nil {
		return e.fail(err)
	}
	defer fleet.Close()
	hold.open(fleet)
	defer func() { finalOwed = hold.owed() }() // before the Close
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return e.fail(fmt.Errorf("--metrics-addr: %w", err))
		}
		srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(e.errw, "rebootctl executor: metrics at http://%s/metrics\n", ln.Addr())
	}
	cfg := plan.Config{DrainTimeout: *drain, JobTimeout: *jobTimeout, ServicesTimeout: *services}
	st := executorStatus{Host: host, PID: os.Getpid(), Started: time.Now().UTC(), Interval: *interval, State: *state, Self: selfUUID}
	selfName := "none"
	if s, ok := inv.Server(selfUUID); ok {
		selfName = s.Hostname
	}
	fmt.Fprintf(e.errw, "rebootctl executor: store %s, fleet state %s, %d server(s), running on server %s; resuming running plans\n", e.store, *state, len(inv.Servers), selfName)
	if len(maybeSelf) > 0 {
		var names []string
		for _, id := range maybeSelf {
			if s, ok := inv.Server(id); ok {
				names = append(names, s.Hostname)
			}
		}
		fmt.Fprintf(e.errw, "rebootctl executor: WARNING: cannot tell whether this machine is one of %s (hostname %q matches none; their names do not resolve to its addresses): "+
			"their reboots are refused; give --self SERVER or --self none\n", clean(strings.Join(names, ", ")), clean(host))
	}
	// publish writes the heartbeat and where each busy server stands;
	// during a pass too (beatDuring), with the lease renewed.
	var stMu sync.Mutex
	publish := func() {
		stMu.Lock()
		s := st
		stMu.Unlock()
		s.At = time.Now().UTC()
		s.Servers, _ = fleet.Status()
		if raw, err := json.Marshal(s); err == nil {
			if err := store.with(func(s *plan.BoltStore) error { return s.PutMeta(e.ctx, metaExecutor, raw) }); err != nil && !errors.Is(err, context.Canceled) {
				logger.Warn("heartbeat not written", "error", err.Error())
			}
		}
	}
	for {
		start := time.Now()
		// No pass without the lease: one that cannot be renewed stops the
		// executor when another executor holds the store or its fleet
		// state file is not the store's (leaseLost), and skips the pass
		// otherwise (the store cannot be read: the next interval tries
		// again).
		if err := hold.renew(e.ctx, start.UTC()); err != nil {
			if leaseLost(err) {
				fmt.Fprintf(e.errw, "rebootctl executor: stopping: %v\n", err)
				return exitError
			}
			if e.ctx.Err() == nil {
				msg := named.Replace(err.Error())
				logger.Warn("lease not renewed: no pass until it is (nothing started, nothing recorded)", "error", msg)
				stMu.Lock()
				st.PassError = "lease not renewed: " + msg
				stMu.Unlock()
			}
		} else if err := e.leasedPass(hold, start, *interval, logger, publish, func(ctx context.Context) error {
			return e.passAll(ctx, fleet, store, cfg, logger, m, *passTimeout)
		}); leaseLost(err) {
			fmt.Fprintf(e.errw, "rebootctl executor: stopping: %v\n", err)
			return exitError
		} else {
			stMu.Lock()
			if err != nil && !errors.Is(err, context.Canceled) {
				msg := named.Replace(err.Error())
				logger.Warn("pass failed", "error", msg)
				st.PassError = msg
			} else if err == nil {
				st.PassError = ""
				st.LastPass = time.Now().UTC()
				m.passOK(st.LastPass)
			}
			stMu.Unlock()
			m.passDuration(time.Since(start))
		}
		publish()
		select {
		case <-e.ctx.Done():
			fmt.Fprintln(e.errw, "rebootctl executor: stopping; jobs resume at the next start")
			return exitOK
		case <-time.After(*interval):
		}
	}
}

// resolveSelf finds the server the executor runs on: --self (a hostname,
// a UUID, or "none"), else the server whose hostname is this machine's
// (case and domain aside), else the one whose hostname or health check
// host resolves to one of this machine's addresses. maybe lists the
// servers it cannot tell apart from this machine (see Inventory.Identify):
// the executor never powers them off and refuses their jobs.
func resolveSelf(ctx context.Context, inv inventory.Inventory, flagValue string) (self string, maybe []string, err error) {
	switch flagValue {
	case "none":
		return "", nil, nil
	case "":
		m := inventory.Machine{Resolved: map[string][]netip.Addr{}, MachineID: machineID()}
		m.Hostname, _ = os.Hostname()
		if ifs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range ifs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					m.Addrs = append(m.Addrs, p.Addr())
				}
			}
		}
		if self, maybe := inv.Identify(m); self != "" {
			return self, nil, nil // by hostname: no lookups
		} else if len(maybe) > 1 && m.Hostname != "" {
			// several hostnames match
			return "", maybe, nil
		}
		m.Resolved = lookupAll(ctx, inv)
		self, maybe := inv.Identify(m)
		return self, maybe, nil
	}
	s, ok := inv.Server(flagValue)
	if !ok {
		return "", nil, fmt.Errorf("--self %s: no such server in the inventory (give its hostname or UUID, or none)", flagValue)
	}
	return s.UUID, nil, nil
}

// serverNames replaces each server's UUID with its hostname in the text
// operators read (pass errors): they know servers by hostname.
func serverNames(inv inventory.Inventory) *strings.Replacer {
	pairs := make([]string, 0, 2*len(inv.Servers))
	for _, s := range inv.Servers {
		if s.Hostname != "" && s.Hostname != s.UUID {
			pairs = append(pairs, s.UUID, s.Hostname)
		}
	}
	return strings.NewReplacer(pairs...)
}

// machineID returns this machine's machine ID (/etc/machine-id, else
// D-Bus's copy), "" if neither reads.
func machineID() string {
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if raw, err := os.ReadFile(p); err == nil && len(raw) < 100 {
			if id := strings.TrimSpace(string(raw)); id != "" {
				return id
			}
		}
	}
	return ""
}

// refuseMaybeSelf refuses to start (an error naming the plans and the
// servers, and the fix) while a running or stopped plan has a reboot not
// ended of a server this executor cannot tell apart from its own machine:
// its job would be refused for ever and hold the plan.
func refuseMaybeSelf(ctx context.Context, store lockedStore, inv inventory.Inventory, maybe []string, host string) error {
	if len(maybe) == 0 {
		return nil
	}
	plans, err := store.List(ctx)
	if err != nil {
		return err
	}
	var lines []string
	for _, p := range plans {
		if !p.Unfinished() {
			continue
		}
		var names []string
		for _, r := range p.Reboots {
			if r.Step.Ended() || !slices.Contains(maybe, r.ServerUUID) {
				continue
			}
			name := r.ServerUUID
			if s, ok := inv.Server(name); ok {
				name = s.Hostname
			}
			names = append(names, name)
		}
		if len(names) > 0 {
			lines = append(lines, fmt.Sprintf("plan %s reboots %s", p.UUID, strings.Join(names, ", ")))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%s, and this machine (hostname %q) may be one of them: its hostname matches none and their names do not resolve to its addresses, so it cannot tell; "+
		"give --self SERVER (or --self none if it is none of them), or the servers' machine_id in the inventory", clean(strings.Join(lines, "; ")), clean(host))
}

// lookupAll resolves every name of the inventory's servers (hostnames,
// health check hosts), 16 at a time, each within 3 s; a name that does
// not resolve is left out.
func lookupAll(ctx context.Context, inv inventory.Inventory) map[string][]netip.Addr {
	names := map[string]bool{}
	for _, s := range inv.Servers {
		for _, n := range s.Names() {
			names[n] = true
		}
	}
	out := map[string][]netip.Addr{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			as, err := net.DefaultResolver.LookupNetIP(cctx, "ip", n)
			if err != nil {
				return
			}
			mu.Lock()
			out[n] = as
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// passAll runs one pass of every unfinished plan (the store locked for
// each read and write only, never while the fleet is observed or acted
// on), each plan with its share of timeout (plan.Turns), then ends the
// jobs their plans no longer run.
func (e *env) passAll(ctx context.Context, fleet *inventory.Fleet, store lockedStore, cfg plan.Config, logger *slog.Logger, m *metrics, timeout time.Duration) error {
	if e.named == nil {
		e.named = strings.NewReplacer()
	}
	var abandoned []byte
	if err := store.with(func(s *plan.BoltStore) (err error) { abandoned, err = s.GetMeta(ctx, metaAbandoned); return err }); err != nil {
		return err
	}
	// Every abandon is applied before any plan runs: one of a server the
	// inventory no longer lists is skipped (said once); any other that
	// cannot be applied ends the pass before any plan runs (retried at
	// the next pass), so that no plan starts a reboot of a server the
	// operator gave up on.
	aerr := applyAbandoned(fleet, abandoned, func(server string, a abandonRecord) {
		key := server + "\x00" + a.Plan
		if e.skippedAbandons[key] {
			return
		}
		if e.skippedAbandons == nil {
			e.skippedAbandons = map[string]bool{}
		}
		e.skippedAbandons[key] = true
		logger.Warn(clean(abandonSkippedText(server, a)))
	})
	if aerr != nil {
		return aerr
	}
	// The plans' headers only: a pass reads the reboots of the plans it
	// runs (their views), never every reboot of every plan ever stored.
	plans, lerr := store.ListHeads(ctx)
	exec := &plan.Executor{Fleet: fleet, Store: store, Config: cfg, Now: time.Now, Logger: logger}
	views := map[string]plan.View{}
	failed := map[string]bool{}
	var perr error
	var turns []plan.Turn
	for _, p := range plans {
		if !passes(p) {
			views[p.UUID] = p // no job of it runs: its header says all
			continue
		}
		turns = append(turns, plan.Turn{UUID: p.UUID, Acts: p.Acts()})
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Each plan has its own share of the pass (plan.Turns): a plan whose
	// fleet call hangs never starves the others, and a plan cut short
	// runs last in a next pass, with everything the others left.
	errs, err := e.turns.Run(pctx, turns, func(error) bool { return ctx.Err() != nil },
		func(ctx context.Context, uuid string) error {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			v, err := exec.Pass(ctx, uuid)
			if err == nil {
				views[uuid] = v
			}
			return err
		})
	if err != nil {
		return context.Cause(ctx)
	}
	for i, err := range errs {
		uuid := turns[i].UUID
		if err != nil && !errors.Is(err, plan.ErrConflict) {
			logger.Warn("plan pass failed", "plan", uuid, "error", e.named.Replace(err.Error()))
			perr = err
		}
		if err != nil {
			failed[uuid] = true
			delete(views, uuid)
		}
	}
	m.observe(plans, views, lerr)
	if ctx.Err() != nil {
		return context.Cause(ctx) // the lease was lost: the fleet's jobs are left as they are
	}
	if err := fleet.Sync(ctx, func(j inventory.JobRecord) (bool, bool, string) {
		if failed[j.Plan] {
			return false, false, ""
		}
		v, ok := views[j.Plan]
		if !ok {
			// Not listed: gone, unless the list itself failed.
			return lerr == nil, false, "its plan " + j.Plan + " no longer exists"
		}
		live, why := jobLive(v, j.UUID, false)
		return true, live, why
	}); err != nil {
		return err
	}
	// The jobs whose reboots their plans have recorded as ended leave the
	// fleet state file (after its retention), so that it and every pass
	// stay the size of the reboots in flight.
	if _, err := fleet.Prune(func(j inventory.JobRecord) bool {
		return jobNeeded(views, failed, lerr, j)
	}); err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	return perr
}

// passes says whether a pass runs the plan: it is unfinished and was run.
func passes(p plan.View) bool { return p.Unfinished() && p.State != plan.StateCreated }

// jobNeeded says whether a plan may still look at an ended job: its plan
// could not be read this pass (failed, or the list failed), or its reboot
// of that job has not ended (a plan whose reboot has ended never creates
// or reads that job again; what show and report say of it is in the plan
// store). A plan that is gone needs nothing.
func jobNeeded(views map[string]plan.View, failed map[string]bool, listErr error, j inventory.JobRecord) bool {
	if listErr != nil || failed[j.Plan] {
		return true
	}
	v, ok := views[j.Plan]
	if !ok {
		return false
	}
	for _, r := range v.Reboots {
		if r.JobUUID == j.UUID && !r.Step.Ended() {
			return true
		}
	}
	return false
}

// executorLogger is the executor's log: Warn and above, Info too with -v
// (every job step and power command); JSON lines with --json.
func executorLogger(w io.Writer, verbose, asJSON bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelWarn}
	if verbose {
		opts.Level = slog.LevelInfo
	}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
