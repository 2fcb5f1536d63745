package inventory

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrLocked: the fleet state file is open in another process.
var ErrLocked = errors.New("inventory: the fleet state file is open in another process")

// ErrServerBusy: CreateJob was asked for a server that has a live reboot
// job already (one live job per server).
var ErrServerBusy = errors.New("inventory: the server has a live reboot job")

// Options tune a Fleet.
type Options struct {
	// Reboot configures the power decisions (soft timeout, stale reads).
	Reboot reboot.Config
	// JobTimeout: a job whose server's power-off has not been accepted
	// this long after the job was created is cancelled (it never powers
	// the server off afterwards). Give the plan's job timeout. Default 1h.
	JobTimeout time.Duration
	// ServicesTimeout: a job whose server's health check does not pass
	// this long after its power cycle fails (the server is left drained).
	// Give the plan's services timeout. Default 1h.
	ServicesTimeout time.Duration
	// HealthTTL: how long a health result is reused. Default 2s.
	HealthTTL time.Duration
	// Poll: how often a job and its server are looked at. Default 1s.
	Poll time.Duration
	// CallTimeout bounds every BMC call (connect included). Default 30s.
	CallTimeout time.Duration
	// Logger gets a line per job step (Info) and the BMC errors (Warn,
	// at most one a minute per server and class).
	Logger *slog.Logger
	// Controller, if set, replaces the BMC adapters (tests).
	Controller func(ctx context.Context, s Server) (power.Controller, error)
	// Self is the UUID of the server this executor runs on, "" if it runs
	// on none of the inventory's servers. Its jobs never power it off
	// through its BMC: it reboots through its own reboot command and the
	// job confirms the new boot by its boot ID (see the package doc).
	Self string
	// BootID returns this machine's boot ID (default: the Linux kernel's,
	// /proc/sys/kernel/random/boot_id).
	BootID func() (string, error)
	// PlanCheck, if set, is asked right before the first power-off of a
	// reboot is sent: does plan planUUID still run job jobUUID (the plan
	// has not ended and the job's reboot is still in its job step)? No
	// answer, or no, and nothing is powered off; "no" cancels the job
	// (why says why).
	PlanCheck func(ctx context.Context, planUUID, jobUUID string) (live bool, why string, err error)
	// OnBMCError, if set, is called for every BMC error with its class
	// (metrics).
	OnBMCError func(class string)
	// Health, if set, replaces the inventory's health checks (tests).
	Health func(ctx context.Context, s Server) error
	// Now and Monotonic are the clocks (default: the system's).
	Now       func() time.Time
	Monotonic func() time.Duration

	// manual: no goroutines; tests step the fleet (stepServer).
	manual bool
	// crash, if set, is asked at each step boundary; true kills the fleet
	// there (tests).
	crash func(point string) bool
	// command, if set, replaces running drain, undrain and reboot
	// commands (tests).
	command func(ctx context.Context, argv []string) error
}

// Fleet is a plan.Fleet over an inventory: a reboot job drains its
// server, asks the reboot package for a soft power cycle with its own
// keyed request (falling back to hard after Reboot.SoftTimeout), releases
// it once the server is fenced on evidence, waits until the server reads
// on again, waits for the health check, and undrains. Jobs are idempotent
// by job UUID and kept in a bbolt state file, so a restarted executor
// resumes them. See the package doc for the guarantees.
type Fleet struct {
	inv  Inventory
	opts Options
	db   *bolt.DB
	now  func() time.Time
	mono func() time.Duration

	hosts *boltHosts
	rec   *reboot.Reconciler
	start time.Duration // monotonic time at open

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	workers  map[string]bool   // servers with a goroutine
	pokes    map[string]bool   // servers kicked while their goroutine ran
	liveJob  map[string]string // server UUID -> its live job
	pool     *power.Pool
	health   map[string]healthResult
	probing  map[string]bool
	reads    map[string]reading       // last power reading per server
	lastCmd  map[string]time.Duration // monotonic time of the last power command sent
	lastErr  map[string]BMCError      // last error recorded per server
	logged   map[string]time.Duration // server+class -> last Warn (monotonic)
	dead     bool                     // killed by a test's crash point
	probeSem chan struct{}
}

type healthResult struct {
	ok bool
	at time.Time
}

// reading is a power state read and when the read started.
type reading struct {
	state power.State
	at    time.Duration
}

var (
	bucketJobs  = []byte("jobs")
	bucketHosts = []byte("hosts")
)

var errKilled = errors.New("inventory: fleet killed (test)")

// OpenFleet opens (or creates) the fleet state file at path and resumes
// every job that had not ended, and the power bookkeeping of every server
// whose power cycle has not settled.
func OpenFleet(inv Inventory, path string, opts Options) (*Fleet, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("inventory: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketHosts} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = time.Hour
	}
	if opts.ServicesTimeout <= 0 {
		opts.ServicesTimeout = time.Hour
	}
	if opts.HealthTTL <= 0 {
		opts.HealthTTL = 2 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Monotonic == nil {
		t0 := time.Now()
		opts.Monotonic = func() time.Duration { return time.Since(t0) }
	}
	if opts.BootID == nil {
		opts.BootID = linuxBootID
	}
	f := &Fleet{inv: inv, opts: opts, db: db, now: opts.Now, mono: opts.Monotonic,
		workers: map[string]bool{}, pokes: map[string]bool{}, liveJob: map[string]string{},
		health:  map[string]healthResult{},
		probing: map[string]bool{}, reads: map[string]reading{}, lastCmd: map[string]time.Duration{},
		lastErr: map[string]BMCError{}, logged: map[string]time.Duration{}, probeSem: make(chan struct{}, 32)}
	f.start = f.mono()
	// The Pool measures back-off and idleness only: give it the monotonic
	// clock, so that a wall clock stepped back (NTP) never leaves a BMC
	// backing off for as long as the step.
	monoEpoch := time.Unix(0, 0)
	f.pool = power.NewPool(power.PoolConfig{CallTimeout: opts.CallTimeout, ConnectTimeout: opts.CallTimeout, Logger: opts.Logger,
		Now: func() time.Time { return monoEpoch.Add(f.mono()) }})
	f.hosts = &boltHosts{db: db}
	f.rec = &reboot.Reconciler{Hosts: f.hosts, Power: f.power, Now: f.now, Config: opts.Reboot, Monotonic: f.mono}
	if opts.Logger != nil && opts.Logger.Enabled(context.Background(), slog.LevelDebug) {
		f.rec.Logger = withHostnames(opts.Logger, inv)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	jobs, err := f.Jobs()
	if err != nil {
		f.pool.Close()
		db.Close()
		return nil, err
	}
	for _, j := range jobs {
		if !j.Over() {
			f.liveJob[j.Server] = j.UUID
		}
	}
	var keep []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			var h hostRecord
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("inventory: host %s: %w", k, err)
			}
			if h.needsKeeping() {
				keep = append(keep, string(k))
			}
			return nil
		})
	}); err != nil {
		f.pool.Close()
		db.Close()
		return nil, err
	}
	for s := range f.liveJob {
		f.kick(s)
	}
	for _, s := range keep {
		f.kick(s)
	}
	return f, nil
}

func linuxBootID() (string, error) {
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(raw)), nil
}

// Close stops the goroutines (the jobs and the power bookkeeping stay
// recorded and resume at the next OpenFleet) and closes the state file
// and the BMC sessions.
func (f *Fleet) Close() error {
	f.cancel()
	f.wg.Wait()
	_ = f.pool.Close()
	return f.db.Close()
}

var _ plan.Fleet = (*Fleet)(nil)

// Jobs returns every job recorded.
func (f *Fleet) Jobs() ([]JobRecord, error) {
	var out []JobRecord
	err := f.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var j JobRecord
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("inventory: job %s: %w", k, err)
			}
			out = append(out, j)
			return nil
		})
	})
	return out, err
}

func (f *Fleet) job(id string) (JobRecord, bool, error) {
	var j JobRecord
	var ok bool
	err := f.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketJobs).Get([]byte(id))
		if raw == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(raw, &j)
	})
	return j, ok, err
}

// update changes job id in one transaction (fsynced before it returns).
func (f *Fleet) update(id string, change func(*JobRecord) error) (JobRecord, error) {
	var j JobRecord
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		raw := b.Get([]byte(id))
		if raw == nil {
			return fmt.Errorf("inventory: no job %s", id)
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return err
		}
		if err := change(&j); err != nil {
			return err
		}
		out, err := json.Marshal(j)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), out)
	})
	return j, err
}

// CreateJob implements plan.Fleet: it records the job (once per UUID) and
// starts it. It refuses (ErrServerBusy) a job for a server that has
// another live job.
func (f *Fleet) CreateJob(_ context.Context, a plan.Action) error {
	s, ok := f.inv.Server(a.Server)
	if !ok {
		return fmt.Errorf("inventory: no server %s", a.Server)
	}
	created := false
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b.Get([]byte(a.JobUUID)) != nil {
			return nil // idempotent
		}
		if other, busy := f.liveJob[s.UUID]; busy && other != a.JobUUID {
			return fmt.Errorf("%w: %s has job %s; job %s of plan %s waits for it to end", ErrServerBusy, s.Hostname, other, a.JobUUID, a.PlanUUID)
		}
		now := f.now()
		raw, err := json.Marshal(JobRecord{UUID: a.JobUUID, Server: s.UUID, Plan: a.PlanUUID, State: JobCreated, Created: now, StateAt: now})
		if err != nil {
			return err
		}
		created = true
		return b.Put([]byte(a.JobUUID), raw)
	})
	if err != nil {
		return err
	}
	if created {
		f.liveJob[s.UUID] = a.JobUUID
		f.infof("job created", "job", a.JobUUID, "server", s.Hostname, "plan", a.PlanUUID)
	}
	f.kickLocked(s.UUID)
	return nil
}

// CancelJob implements plan.Fleet. A cancelled job never powers its
// server off unless a power-off of its reboot may already have been
// accepted; then it brings the server back on and ends.
func (f *Fleet) CancelJob(_ context.Context, a plan.Action) error {
	return f.cancelJob(a.JobUUID, "cancelled by its plan")
}

func (f *Fleet) cancelJob(id, why string) error {
	j, ok, err := f.job(id)
	if err != nil || !ok || j.Over() || j.Cancel {
		return err // no such job: nothing to cancel
	}
	j, err = f.update(id, func(j *JobRecord) error {
		if j.Over() || j.Cancel {
			return nil
		}
		j.Cancel, j.CancelReason = true, why
		return nil
	})
	if err != nil {
		return err
	}
	f.infof("job cancelled", "job", id, "reason", why)
	f.kick(j.Server)
	return nil
}

// Sync ends the jobs their plans no longer run: tracked is asked about
// every live job; known and not live cancels it (why says why). Call it
// after the passes with what the plans say, so that no job outlives its
// plan's view of it.
func (f *Fleet) Sync(_ context.Context, tracked func(j JobRecord) (known, live bool, why string)) error {
	jobs, err := f.Jobs()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Over() || j.Cancel {
			continue
		}
		if known, live, why := tracked(j); known && !live {
			if err := f.cancelJob(j.UUID, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// FreezeShard and UnfreezeShard: an inventory fleet has no shard.
func (f *Fleet) FreezeShard(context.Context) error { return nil }

// UnfreezeShard: see FreezeShard.
func (f *Fleet) UnfreezeShard(context.Context) error { return nil }

// powerBusy: job states in which the server may be off because of the job.
func powerBusy(state string) bool {
	switch state {
	case JobRequesting, JobRebooting, JobWithdrawing, JobSelfReboot:
		return true
	}
	return false
}

// Observe implements plan.Fleet: the plan's servers (down while their
// health check fails, a job may power them off, or a power cycle of the
// fleet has not settled), and the jobs. It never waits for a health check
// or a BMC: checks run in the background and their last results count (a
// server never checked counts as down).
func (f *Fleet) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}, HeadnodeServicesUp: true, ShardHealthy: true}
	busy := map[string]JobRecord{}
	hosts := map[string]hostRecord{}
	err := f.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			var h hostRecord
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("inventory: host %s: %w", k, err)
			}
			hosts[string(k)] = h
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var j JobRecord
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("inventory: job %s: %w", k, err)
			}
			if !j.Over() {
				busy[j.Server] = j
			}
			o := plan.JobObs{Exists: true, Started: j.Started != nil, Drained: j.Drained != nil,
				Finished: j.Finished != nil && j.State != JobFailed && j.State != JobCancelled,
				Failed:   j.State == JobFailed, Cancelled: j.State == JobCancelled, Error: j.Error}
			if h := hosts[j.Server]; !j.Over() && o.Error == "" && h.LastError.Job == j.UUID {
				o.Error = h.LastError.Text()
			}
			if j.Started != nil {
				o.StartedAt = *j.Started
			}
			if j.Finished != nil {
				o.FinishedAt = *j.Finished
			}
			// For the plan's report: drained, fenced off, read on
			// again after the power cycle, health check passing.
			o.Phases = plan.Phases{Drained: j.Drained, Off: j.PoweredOff, On: poweredOn(j, hosts[j.Server]), Healthy: j.Healthy}
			obs.Jobs[j.UUID] = o
			return nil
		})
	})
	if err != nil {
		return plan.Observations{}, err
	}
	var servers []Server
	for _, r := range p.Reboots {
		if s, ok := f.inv.Server(r.ServerUUID); ok {
			servers = append(servers, s)
		}
	}
	head, hasHead := f.headnode()
	if hasHead {
		servers = append(servers, head)
	}
	healthy := f.healthOf(ctx, servers)
	for _, r := range p.Reboots {
		s, ok := f.inv.Server(r.ServerUUID)
		if !ok {
			continue // not in the inventory: unknown, counts as offline
		}
		j, isBusy := busy[s.UUID]
		h := hosts[s.UUID]
		down := !healthy[s.UUID] || isBusy && powerBusy(j.State) || h.Watch && !h.Settled || h.Status.Pending()
		obs.Servers[s.UUID] = plan.ServerObs{Down: down, ServicesUp: healthy[s.UUID] && !isBusy && !down}
	}
	if hasHead {
		_, isBusy := busy[head.UUID]
		obs.HeadnodeServicesUp = healthy[head.UUID] && !isBusy
	}
	obs.Conditions = f.conditions(ctx, p)
	return obs, nil
}

func (f *Fleet) headnode() (Server, bool) {
	for _, s := range f.inv.Servers {
		if s.Headnode {
			return s, true
		}
	}
	return Server{}, false
}

// healthOf returns the servers' last health results, starting a check in
// the background for each result older than HealthTTL (at most 32 at
// once). It never waits (tests' manual fleets check at once).
func (f *Fleet) healthOf(ctx context.Context, servers []Server) map[string]bool {
	out := make(map[string]bool, len(servers))
	now := f.now()
	for _, s := range servers {
		if f.opts.manual {
			out[s.UUID] = f.check(ctx, s) == nil
			continue
		}
		f.mu.Lock()
		r, ok := f.health[s.UUID]
		fresh := ok && now.Sub(r.at) < f.opts.HealthTTL && now.Sub(r.at) >= 0
		start := !fresh && !f.probing[s.UUID]
		if start {
			f.probing[s.UUID] = true
		}
		f.mu.Unlock()
		out[s.UUID] = ok && r.ok
		if start {
			f.wg.Add(1)
			go func(s Server) {
				defer f.wg.Done()
				select {
				case f.probeSem <- struct{}{}:
				case <-f.ctx.Done():
					return
				}
				ok := f.check(f.ctx, s) == nil
				<-f.probeSem
				f.mu.Lock()
				f.health[s.UUID] = healthResult{ok: ok, at: f.now()}
				delete(f.probing, s.UUID)
				f.mu.Unlock()
			}(s)
		}
	}
	return out
}

// kick makes sure a goroutine looks after the server (its live job and
// its power bookkeeping) until nothing is left to do.
func (f *Fleet) kick(server string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kickLocked(server)
}

func (f *Fleet) kickLocked(server string) {
	if f.opts.manual || f.ctx.Err() != nil {
		return
	}
	if f.workers[server] {
		f.pokes[server] = true
		return
	}
	f.workers[server] = true
	f.wg.Add(1)
	go f.worker(server)
}

func (f *Fleet) worker(server string) {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		f.pokes[server] = false
		f.mu.Unlock()
		more := f.stepServer(f.ctx, server)
		f.mu.Lock()
		if !more && !f.pokes[server] || f.ctx.Err() != nil {
			delete(f.workers, server)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		t := time.NewTimer(f.opts.Poll)
		select {
		case <-f.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// stepServer looks after one server once: its power bookkeeping (one
// reconcile while a power cycle of the fleet has not settled), then its
// live job (as many steps as it can take at once). It reports whether
// anything is left to do. One goroutine at a time per server.
func (f *Fleet) stepServer(ctx context.Context, server string) bool {
	if f.isDead() {
		return false
	}
	keeping := f.keep(ctx, server)
	f.mu.Lock()
	id, live := f.liveJob[server]
	f.mu.Unlock()
	if live {
		live = f.stepJob(ctx, id)
	}
	if f.isDead() {
		return false
	}
	if !live && !keeping {
		h, err := f.hosts.load(server)
		return err != nil || h.needsKeeping()
	}
	return true
}

func (f *Fleet) isDead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

// crashAt is a test's kill point: true means the fleet died there.
func (f *Fleet) crashAt(point string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dead && f.opts.crash != nil && f.opts.crash(point) {
		f.dead = true
	}
	return f.dead
}

// keep reconciles the server's power once if the fleet's power cycle of
// it has not settled: until it reads on (not an echo of a state before the
// fleet's last command) with no request left and no reboot pending,
// whatever happened to the job or the plan. It reports whether it must
// look again.
func (f *Fleet) keep(ctx context.Context, server string) bool {
	h, err := f.hosts.load(server)
	if err != nil || !h.needsKeeping() {
		return err != nil
	}
	res, rerr := f.rec.Reconcile(ctx, server)
	if f.isDead() {
		return false
	}
	if rerr != nil && !errors.Is(rerr, reboot.ErrConflict) {
		f.debugf("reconcile", "server", server, "error", rerr.Error())
	}
	f.mu.Lock()
	rd, read := f.reads[server]
	last := max(f.lastCmd[server], f.start)
	f.mu.Unlock()
	stale := f.opts.Reboot.StaleReads
	if stale <= 0 {
		stale = reboot.DefaultConfig().StaleReads
	}
	h, err = f.hosts.load(server)
	if err != nil {
		return true
	}
	phase := phaseText(res.Decision, rd.state)
	settled := rerr == nil && read && rd.state == power.StateOn && rd.at-stale >= last && !h.hasRequest() && !h.Status.Pending()
	if settled {
		phase = "on"
	}
	if phase != h.Phase || settled && (h.Watch || !h.Settled) {
		now := f.now()
		h, err = f.hosts.modify(server, func(r *hostRecord) error {
			if r.Version != h.Version {
				return errSkip // changed meanwhile: look again next time
			}
			if r.Phase != phase {
				r.Phase, r.PhaseSince = phase, now
			}
			if settled {
				r.Settled, r.Watch = true, false
			}
			return nil
		})
		if err != nil {
			return true
		}
	}
	return h.needsKeeping()
}

// stepJob runs job id's decisions and acts until it has to wait. It
// reports whether the job is still live.
func (f *Fleet) stepJob(ctx context.Context, id string) bool {
	for range 8 {
		j, ok, err := f.job(id)
		if err != nil {
			return true
		}
		if !ok || j.Over() {
			f.mu.Lock()
			if f.liveJob[j.Server] == id {
				delete(f.liveJob, j.Server)
			}
			f.mu.Unlock()
			return false
		}
		s, _ := f.inv.Server(j.Server)
		h, err := f.hosts.load(j.Server)
		if err != nil {
			return true
		}
		in := jobInput{Job: j, Host: h, JobTimeout: f.opts.JobTimeout, ServicesTimeout: f.opts.ServicesTimeout}
		if s.UUID != "" && s.UUID == f.opts.Self {
			in.Self, in.HasReboot = true, len(s.Reboot) > 0
			if id, err := f.opts.BootID(); err == nil {
				in.BootID = id
			}
		}
		if j.State == JobRebooting && j.RequestValue != "" {
			t := reboot.Ticket{Host: j.Server, Annotation: reboot.AnnotationPrefix + j.key(), Value: j.RequestValue, At: j.RequestAt}
			in.Fenced = h.Annotations[t.Annotation] == t.Value && reboot.FencedFor(h.Status, t, f.now())
		}
		if j.State == JobBooted && !j.Cancel {
			in.Healthy = f.check(ctx, s) == nil
		}
		st := decideJob(in, f.now())
		if st.Changed {
			if j, err = f.persist(j, st.Job); err != nil {
				f.infof("job state not saved", "job", id, "error", err.Error())
				return true
			}
			f.logStep(j)
		}
		if f.crashAt("job " + st.Job.State + " " + st.Act.String()) {
			return false
		}
		if st.Act == actNone {
			if !st.Changed {
				return true // wait
			}
			continue
		}
		aerr := f.act(ctx, s, j, st.Act)
		if f.isDead() || ctx.Err() != nil {
			return false
		}
		switch {
		case aerr != nil && st.FailOnErr != "":
			now := f.now()
			failed := j
			failed.State, failed.StateAt, failed.Ended, failed.Error = JobFailed, now, &now, st.FailOnErr+aerr.Error()
			if j, err = f.persist(j, failed); err == nil {
				f.logStep(j)
			}
			return true
		case aerr != nil:
			f.infof("job step failed; retrying", "job", id, "server", s.Hostname, "step", st.Act.String(), "error", aerr.Error())
			return true
		case st.AfterOK != nil:
			if f.crashAt("after " + st.Act.String()) {
				return false
			}
			after := *st.AfterOK
			if after.Drained != nil && j.Drained == nil {
				ended := f.now()
				after.Drained = &ended // when the drain ended, not when it was decided
			}
			if j, err = f.persist(j, after); err != nil {
				return true
			}
			f.logStep(j)
		}
	}
	return true
}

// persist writes next over the job read as prev (compare-and-swap on its
// state), keeping a cancel written meanwhile.
func (f *Fleet) persist(prev, next JobRecord) (JobRecord, error) {
	out, err := f.update(prev.UUID, func(cur *JobRecord) error {
		if cur.State != prev.State {
			return fmt.Errorf("inventory: job %s moved to %s meanwhile", prev.UUID, cur.State)
		}
		cancel, reason := cur.Cancel, cur.CancelReason
		*cur = next
		if cancel && !next.Cancel {
			cur.Cancel, cur.CancelReason = true, reason
		}
		return nil
	})
	if err == nil && out.Over() {
		f.mu.Lock()
		if f.liveJob[out.Server] == out.UUID {
			delete(f.liveJob, out.Server)
		}
		f.mu.Unlock()
	}
	return out, err
}

func (f *Fleet) logStep(j JobRecord) {
	s, _ := f.inv.Server(j.Server)
	args := []any{"job", j.UUID, "server", s.Hostname, "state", j.State}
	if j.Error != "" {
		args = append(args, "error", j.Error)
	}
	switch j.State {
	case JobFailed:
		f.warnf("reboot job failed", args...)
	case JobCancelled:
		f.warnf("reboot job cancelled", args...)
	default:
		f.infof("job "+j.State, args...)
	}
}

// act does one job act.
func (f *Fleet) act(ctx context.Context, s Server, j JobRecord, a jobAct) error {
	ann := reboot.AnnotationPrefix + j.key()
	switch a {
	case actDrain:
		if len(s.Drain) > 0 {
			return f.command(ctx, s.Drain)
		}
	case actUndrain:
		if len(s.Undrain) > 0 {
			return f.command(ctx, s.Undrain)
		}
	case actSelfReboot:
		return f.command(ctx, s.Reboot)
	case actRequest:
		_, err := f.hosts.modify(s.UUID, func(h *hostRecord) error {
			if h.Annotations[ann] == j.RequestValue {
				return errSkip // written before a crash: the same request
			}
			for k := range h.Annotations {
				if reboot.IsRebootAnnotation(k) && k != ann {
					return fmt.Errorf("inventory: %s has another reboot request (%s); job %s waits", s.Hostname, k, j.UUID)
				}
			}
			if h.Annotations == nil {
				h.Annotations = map[string]string{}
			}
			h.Annotations[ann] = j.RequestValue
			h.Watch, h.Settled, h.OffMaybe, h.Job = true, false, false, j.UUID
			return nil
		})
		return err
	case actRelease:
		_, err := f.hosts.modify(s.UUID, func(h *hostRecord) error {
			if h.Annotations[ann] != j.RequestValue {
				return errSkip
			}
			delete(h.Annotations, ann)
			return nil
		})
		return err
	case actWithdraw:
		_, err := f.hosts.modify(s.UUID, func(h *hostRecord) error {
			_, had := h.Annotations[ann]
			abort := !h.OffMaybe && h.Status.Pending() && h.Job == j.UUID
			if !had && !abort {
				return errSkip
			}
			if had {
				h.Annotations = copyMap(h.Annotations)
				delete(h.Annotations, ann)
			}
			if abort {
				// No power-off of this reboot can have been accepted:
				// drop it, so that nothing powers the server off.
				h.Status.PendingRebootSince, h.Status.Seen, h.Status.LastRequestSeen = time.Time{}, nil, time.Time{}
				h.Status.Mode = power.ModeSoft
			}
			h.Watch, h.Settled = true, false
			return nil
		})
		return err
	}
	return nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// power is the Reconciler's power controller for a server: its BMC's,
// behind the fleet's gate.
func (f *Fleet) power(server string) (power.Controller, error) {
	c, err := f.controller(server)
	if err != nil {
		return nil, err
	}
	return &gated{f: f, server: server, inner: c}, nil
}

// gated is a server's power controller as the fleet lets the reboot
// package use it: every call bounded by CallTimeout and its errors
// recorded; a power-off sent only while the server's live job may power
// it off (not cancelled, its plan still runs it), with OffMaybe recorded
// before it is sent.
type gated struct {
	f      *Fleet
	server string
	inner  power.Controller
}

func (g *gated) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.f.opts.CallTimeout)
}

func (g *gated) State(ctx context.Context) (power.State, error) {
	if g.f.isDead() {
		return power.StateUnknown, errKilled
	}
	ctx, cancel := g.bounded(ctx)
	defer cancel()
	at := g.f.mono()
	st, err := g.inner.State(ctx)
	if err != nil {
		st = power.StateUnknown
	}
	g.f.mu.Lock()
	g.f.reads[g.server] = reading{state: st, at: at}
	g.f.mu.Unlock()
	g.f.noteCall(g.server, "state", err)
	return st, err
}

func (g *gated) On(ctx context.Context) error {
	if g.f.crashAt("power on " + g.server) {
		return errKilled
	}
	ctx, cancel := g.bounded(ctx)
	defer cancel()
	g.f.noteCommand(g.server)
	err := g.inner.On(ctx)
	if g.f.crashAt("powered on " + g.server) {
		return errKilled
	}
	g.f.noteCall(g.server, "on", err)
	return err
}

// TogglesOff passes on the inner controller's reboot.Toggler (false if
// it has none), so that the reboot controller's press rule applies.
func (g *gated) TogglesOff(m power.Mode) bool {
	t, ok := g.inner.(reboot.Toggler)
	return ok && t.TogglesOff(m)
}

func (g *gated) Off(ctx context.Context, m power.Mode) error {
	if g.f.isDead() {
		return errKilled
	}
	h, err := g.f.hosts.load(g.server)
	if err != nil {
		return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "fleet state unreadable: " + err.Error()}
	}
	was := h.OffMaybe
	if !was {
		if why := g.f.mayPowerOff(ctx, g.server, h); why != "" {
			return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "held: " + why}
		}
		if _, err := g.f.hosts.modify(g.server, func(r *hostRecord) error {
			if r.Version != h.Version {
				return fmt.Errorf("inventory: host %s changed meanwhile", g.server)
			}
			r.OffMaybe = true
			return nil
		}); err != nil {
			return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: err.Error()}
		}
		if g.f.crashAt("power off intent " + g.server) {
			return errKilled
		}
	}
	ctx, cancel := g.bounded(ctx)
	defer cancel()
	g.f.noteCommand(g.server)
	if g.f.crashAt("power off " + g.server) {
		return errKilled
	}
	err = g.inner.Off(ctx, m)
	if g.f.crashAt("powered off " + g.server) {
		return errKilled // the answer is lost: the power-off may have been accepted
	}
	if err != nil && !was && notApplied(err) {
		_, _ = g.f.hosts.modify(g.server, func(r *hostRecord) error {
			r.OffMaybe = false // refused: nothing was powered off
			return nil
		})
	}
	g.f.noteCall(g.server, power.OpName(m), err)
	return err
}

// mayPowerOff says why the server must not be powered off now ("" if it
// may): only its live job, not cancelled, in its reboot step, whose plan
// still runs it, and never the executor's own server.
func (f *Fleet) mayPowerOff(ctx context.Context, server string, h hostRecord) string {
	if server == f.opts.Self {
		return "this executor runs on this server"
	}
	f.mu.Lock()
	id, live := f.liveJob[server]
	f.mu.Unlock()
	if !live || id != h.Job {
		return "no live job of this fleet asked for it"
	}
	j, ok, err := f.job(id)
	switch {
	case err != nil || !ok:
		return "its job cannot be read"
	case j.Cancel:
		return "its job was cancelled (" + j.CancelReason + ")"
	case j.State != JobRebooting:
		return "its job is " + j.State
	}
	if f.opts.PlanCheck != nil {
		ok, why, err := f.opts.PlanCheck(ctx, j.Plan, j.UUID)
		if err != nil {
			return "its plan cannot be read: " + err.Error()
		}
		if !ok {
			_ = f.cancelJob(j.UUID, why)
			return why
		}
	}
	return ""
}

func (f *Fleet) noteCommand(server string) {
	m := f.mono()
	f.mu.Lock()
	f.lastCmd[server] = m
	f.mu.Unlock()
}

// noteCall records a BMC call's outcome: an error as the server's last
// BMC error (written when it changes, or a minute after the last write),
// logged at Warn at most once a minute per server and class, and counted.
func (f *Fleet) noteCall(server, op string, err error) {
	if errors.Is(err, errKilled) {
		return
	}
	var pe *power.Error
	if errors.As(err, &pe) && strings.HasPrefix(pe.Message, "held: ") {
		return // the fleet's own gate, not the BMC
	}
	now, m := f.now(), f.mono()
	f.mu.Lock()
	prev, had := f.lastErr[server]
	f.mu.Unlock()
	if err == nil {
		if had && !prev.Cleared {
			prev.Cleared = true
			f.mu.Lock()
			f.lastErr[server] = prev
			f.mu.Unlock()
			_, _ = f.hosts.modify(server, func(h *hostRecord) error {
				if h.LastError.Cleared || h.LastError.Message == "" {
					return errSkip
				}
				h.LastError.Cleared = true
				return nil
			})
		}
		return
	}
	class := ClassifyBMC(err)
	if f.opts.OnBMCError != nil {
		f.opts.OnBMCError(class)
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	if !had || prev.Cleared || prev.Class != class || prev.Message != msg || now.Sub(prev.At) >= time.Minute || now.Before(prev.At) {
		h, herr := f.hosts.modify(server, func(h *hostRecord) error {
			h.LastError = BMCError{Class: class, Op: op, Message: msg, At: now, Job: h.Job}
			return nil
		})
		if herr == nil {
			f.mu.Lock()
			f.lastErr[server] = h.LastError
			f.mu.Unlock()
		}
	}
	key := server + "\x00" + class
	f.mu.Lock()
	at, logged := f.logged[key]
	due := !logged || m-at >= time.Minute
	if due {
		f.logged[key] = m
	}
	f.mu.Unlock()
	if due {
		s, _ := f.inv.Server(server)
		f.warnf("BMC error", "server", s.Hostname, "class", class, "op", op, "problem", ClassText(class), "error", msg)
	}
}

// controller returns server uuid's power controller from the fleet's
// power.Pool (one cached connection per server, closed when idle, every
// call bounded, back-off per BMC after failures: hardest after a refused
// password).
func (f *Fleet) controller(uuid string) (power.Controller, error) {
	s, ok := f.inv.Server(uuid)
	if !ok {
		return nil, fmt.Errorf("inventory: no server %s", uuid)
	}
	b := f.inv.BMCOf(s)
	addr := b.Redfish
	if b.IPMI != "" {
		addr = "ipmi://" + b.IPMI
	}
	// No secret in the config: the password's source, not the password.
	cfg := fmt.Sprintf("%s user=%s env=%s file=%s ca=%s insecure=%v basic=%v cipher=%d",
		addr, b.Username, b.PasswordEnv, b.PasswordFile, b.CAFile, b.Insecure, b.BasicAuth, b.CipherSuite)
	return f.pool.Controller(uuid, power.Target{BMC: addr, Config: cfg, Connect: func(ctx context.Context) (power.Controller, error) {
		var c power.Controller
		var err error
		if f.opts.Controller != nil {
			c, err = f.opts.Controller(ctx, s)
		} else {
			c, err = connectBounded(ctx, b, f.opts.Reboot.SoftTimeout, f.opts.Reboot.StaleReads)
		}
		if err != nil {
			return nil, fmt.Errorf("server %s: connect: %w", s.Hostname, err)
		}
		return c, nil
	}}), nil
}

// ServerStatus is where one server stands, for watch and show.
type ServerStatus struct {
	UUID     string `json:"uuid"`
	Hostname string `json:"hostname"`
	// Job and JobState: its live job, or the last one.
	Job      string `json:"job,omitempty"`
	JobState string `json:"job_state,omitempty"`
	// Phase is where its power cycle stands (soft power-off, hard
	// power-off, held off, powering on, on), since PhaseSince.
	Phase      string    `json:"phase,omitempty"`
	PhaseSince time.Time `json:"phase_since,omitzero"`
	// LastError is its last BMC error, if no call succeeded since.
	LastError *BMCError `json:"last_error,omitempty"`
}

// Status lists the servers with a live job, a power cycle that has not
// settled, or a BMC error no call has cleared.
func (f *Fleet) Status() ([]ServerStatus, error) {
	var out []ServerStatus
	jobs := map[string]JobRecord{}
	err := f.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error {
			var j JobRecord
			if err := json.Unmarshal(v, &j); err != nil {
				return err
			}
			if prev, ok := jobs[j.Server]; !ok || !j.Over() || prev.Over() && j.Created.After(prev.Created) {
				if !ok || prev.Over() {
					jobs[j.Server] = j
				}
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			var h hostRecord
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
			j := jobs[string(k)]
			errShown := h.LastError.Message != "" && !h.LastError.Cleared
			if j.UUID == "" || j.Over() && !h.needsKeeping() && !errShown {
				return nil
			}
			s, _ := f.inv.Server(string(k))
			st := ServerStatus{UUID: string(k), Hostname: s.Hostname, Job: j.UUID, JobState: j.State, Phase: h.Phase, PhaseSince: h.PhaseSince}
			if errShown {
				e := h.LastError
				st.LastError = &e
			}
			out = append(out, st)
			return nil
		})
	})
	return out, err
}

func (f *Fleet) infof(msg string, args ...any) {
	if f.opts.Logger != nil {
		f.opts.Logger.Info(msg, args...)
	}
}

func (f *Fleet) debugf(msg string, args ...any) {
	if f.opts.Logger != nil {
		f.opts.Logger.Debug(msg, args...)
	}
}

func (f *Fleet) warnf(msg string, args ...any) {
	if f.opts.Logger != nil {
		f.opts.Logger.Warn(msg, args...)
	}
}

// poweredOn is when job j's server was powered on again: the power-on the
// reboot controller decided after the job's request (the host's
// LastPoweredOn, kept to the second: never before the job saw the server
// off), else the end of the power cycle (Finished).
func poweredOn(j JobRecord, h hostRecord) *time.Time {
	on := h.Status.LastPoweredOn
	if j.RequestAt.IsZero() || !on.After(j.RequestAt) {
		return j.Finished
	}
	if j.PoweredOff != nil && on.Before(*j.PoweredOff) {
		on = *j.PoweredOff
	}
	if j.Finished != nil && on.After(*j.Finished) {
		return j.Finished
	}
	return &on
}

// check runs server s's health check once.
func (f *Fleet) check(ctx context.Context, s Server) error {
	if f.opts.Health != nil {
		return f.opts.Health(ctx, s)
	}
	return f.inv.CheckHealth(ctx, s)
}

// Connect opens the power controller of a BMC (Redfish or IPMI).
func Connect(ctx context.Context, b BMC) (power.Controller, error) {
	return connectBounded(ctx, b, 0, 0)
}

// connectBounded is Connect giving the Redfish adapter the reboot
// controller's SoftTimeout and StaleReads (zero: the adapter's defaults),
// so that its own press rule uses the operator's bounds.
func connectBounded(ctx context.Context, b BMC, softTimeout, staleReads time.Duration) (power.Controller, error) {
	pass, err := b.Password()
	if err != nil {
		return nil, err
	}
	if b.IPMI != "" {
		host, port, err := splitHostPort(b.IPMI, 623)
		if err != nil {
			return nil, err
		}
		return ipmi.Connect(ctx, ipmi.Config{Host: host, Port: port, Username: b.Username, Password: pass, CipherSuite: b.CipherSuite,
			Privilege: b.Privilege})
	}
	cfg := redfish.Config{Endpoint: b.Redfish, Username: b.Username, Password: pass, BasicAuth: b.BasicAuth, InsecureSkipVerify: b.Insecure,
		SystemID: b.System, SoftTimeout: softTimeout, StaleReads: staleReads}
	if b.CAFile != "" {
		pem, err := os.ReadFile(b.CAFile)
		if err != nil {
			return nil, fmt.Errorf("inventory: ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("inventory: ca_file %s holds no certificate", b.CAFile)
		}
		cfg.RootCAs = pool
	}
	c, err := redfish.Connect(ctx, cfg)
	if errors.Is(err, redfish.ErrNoSessionService) {
		return nil, &hintError{msg: "the BMC at " + b.Redfish + " has no Redfish session service (sushy-tools has none): set basic_auth: true in its bmc section of the inventory", err: err}
	}
	return c, err
}

// command runs argv with the command timeout.
func (f *Fleet) command(ctx context.Context, argv []string) error {
	if f.opts.command != nil {
		return f.opts.command(ctx, argv)
	}
	ctx, cancel := context.WithTimeout(ctx, f.inv.Defaults.commandTimeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = f.inv.CommandEnv(nil) // explicit: never the executor's whole environment (BMC passwords)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := string(out)
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		return fmt.Errorf("%s: %w: %s", argv[0], err, msg)
	}
	return nil
}
