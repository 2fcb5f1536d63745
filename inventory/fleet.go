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
	"strconv"
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

// Job states, in order.
const (
	JobCreated    = "created"    // recorded, nothing done yet
	JobDraining   = "draining"   // the drain command runs
	JobDrained    = "drained"    // drained; the reboot is about to be asked
	JobRequesting = "requesting" // the reboot request is being written
	JobRebooting  = "rebooting"  // asked (the reboot command is sent): off, then on
	JobBooted     = "booted"     // powered on again; waiting for the health check
	JobDone       = "done"       // healthy and undrained
	JobFailed     = "failed"
	JobCancelled  = "cancelled"
)

// JobRecord is a reboot job as the fleet state file keeps it. Each change
// of state is written before the step it starts, so an executor restarted
// at any point resumes the job where it was, without a second reboot.
type JobRecord struct {
	UUID   string `json:"uuid"`
	Server string `json:"server"`
	Plan   string `json:"plan"`
	State  string `json:"state"`
	// Cancel: CancelJob was asked (honoured until the reboot is asked).
	Cancel bool `json:"cancel,omitempty"`
	// RequestValue and RequestAt are the reboot annotation value and its
	// time, chosen before it is written (JobRequesting), so that writing
	// it again after a crash is the same request.
	RequestValue string     `json:"request_value,omitempty"`
	RequestAt    time.Time  `json:"request_at,omitzero"`
	Created      time.Time  `json:"created"`
	Started      *time.Time `json:"started,omitempty"`
	Drained      *time.Time `json:"drained,omitempty"`
	Finished     *time.Time `json:"finished,omitempty"` // the reboot was asked
	Ended        *time.Time `json:"ended,omitempty"`
	Error        string     `json:"error,omitempty"`
	// PoweredOff, PoweredOn and Healthy are when the job saw its server
	// fenced off, powered on again, and passing its health check: the
	// phases a plan records for its report (plan.Phases).
	PoweredOff *time.Time `json:"powered_off,omitempty"`
	PoweredOn  *time.Time `json:"powered_on,omitempty"`
	Healthy    *time.Time `json:"healthy,omitempty"`
}

func (j JobRecord) ended() bool {
	return j.State == JobDone || j.State == JobFailed || j.State == JobCancelled
}

// Options tune a Fleet.
type Options struct {
	// Reboot configures the power decisions (soft timeout, stale reads).
	Reboot reboot.Config
	// JobTimeout: a job that has not powered its server back on and seen
	// it healthy this long after it asked for the reboot fails (its
	// request withdrawn). Default 1h.
	JobTimeout time.Duration
	// HealthTTL: how long a health result is reused. Default 2s.
	HealthTTL time.Duration
	// Poll: how often a job reconciles and checks. Default 1s.
	Poll time.Duration
	// Logger gets a line per job step.
	Logger *slog.Logger
	// Controller, if set, replaces the BMC adapters (tests).
	Controller func(ctx context.Context, s Server) (power.Controller, error)
}

// Fleet is a plan.Fleet over an inventory: reboot jobs are drain, a power
// cycle through the reboot package's decisions (soft, falling back to hard
// after Reboot.SoftTimeout, fenced on evidence before the power-on), then
// undrain once the health check passes. Jobs are idempotent by job UUID
// and kept in a bbolt state file, so a restarted executor resumes them.
//
// A server counts as down when its health check fails or a job of the
// fleet is rebooting it; its services count as up when the check passes
// and no job of the fleet is busy with it.
type Fleet struct {
	inv  Inventory
	opts Options
	db   *bolt.DB
	now  func() time.Time

	hosts *boltHosts
	rec   *reboot.Reconciler
	cli   *reboot.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[string]bool             // job UUIDs with a goroutine
	ctrl    map[string]power.Controller // by server UUID
	health  map[string]healthResult
}

type healthResult struct {
	ok bool
	at time.Time
}

var (
	bucketJobs  = []byte("jobs")
	bucketHosts = []byte("hosts")
)

// OpenFleet opens (or creates) the fleet state file at path and resumes
// every job that had not ended.
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
	if opts.HealthTTL <= 0 {
		opts.HealthTTL = 2 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	f := &Fleet{inv: inv, opts: opts, db: db, now: time.Now, running: map[string]bool{},
		ctrl: map[string]power.Controller{}, health: map[string]healthResult{}}
	f.hosts = &boltHosts{db: db}
	f.rec = &reboot.Reconciler{Hosts: f.hosts, Power: f.controller, Now: f.now, Config: opts.Reboot, Logger: withHostnames(opts.Logger, inv)}
	f.cli = &reboot.Client{Hosts: f.hosts, Key: "rebootctl", Now: f.now, Poll: opts.Poll}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	jobs, err := f.Jobs()
	if err != nil {
		db.Close()
		return nil, err
	}
	for _, j := range jobs {
		if !j.ended() {
			f.start(j.UUID)
		}
	}
	return f, nil
}

// Close stops the job goroutines (the jobs stay recorded and resume at the
// next OpenFleet) and closes the state file and the BMC sessions.
func (f *Fleet) Close() error {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	for _, c := range f.ctrl {
		if cl, ok := c.(interface{ Close() error }); ok {
			_ = cl.Close()
		}
	}
	f.mu.Unlock()
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
// starts it.
func (f *Fleet) CreateJob(_ context.Context, a plan.Action) error {
	if _, ok := f.inv.Server(a.Server); !ok {
		return fmt.Errorf("inventory: no server %s", a.Server)
	}
	created := false
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b.Get([]byte(a.JobUUID)) != nil {
			return nil // idempotent
		}
		raw, err := json.Marshal(JobRecord{UUID: a.JobUUID, Server: a.Server, Plan: a.PlanUUID, State: JobCreated, Created: f.now()})
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
		f.logf("job created", "job", a.JobUUID, "server", f.hostname(a.Server))
	}
	f.start(a.JobUUID)
	return nil
}

// CancelJob implements plan.Fleet: honoured until the reboot is asked.
func (f *Fleet) CancelJob(_ context.Context, a plan.Action) error {
	_, err := f.update(a.JobUUID, func(j *JobRecord) error {
		j.Cancel = true
		return nil
	})
	return err
}

// FreezeShard and UnfreezeShard: an inventory fleet has no shard.
func (f *Fleet) FreezeShard(context.Context) error { return nil }

// UnfreezeShard: see FreezeShard.
func (f *Fleet) UnfreezeShard(context.Context) error { return nil }

// Observe implements plan.Fleet: health of the plan's servers (checked
// concurrently, reused for HealthTTL), and the jobs.
func (f *Fleet) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	jobs, err := f.Jobs()
	if err != nil {
		return plan.Observations{}, err
	}
	busy := map[string]JobRecord{}
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}, HeadnodeServicesUp: true, ShardHealthy: true}
	for _, j := range jobs {
		if !j.ended() {
			busy[j.Server] = j
		}
		o := plan.JobObs{Exists: true, Started: j.Started != nil, Drained: j.Drained != nil, Finished: j.Finished != nil && j.State != JobFailed,
			Failed: j.State == JobFailed, Cancelled: j.State == JobCancelled, Error: j.Error}
		if j.Started != nil {
			o.StartedAt = *j.Started
		}
		if j.Finished != nil {
			o.FinishedAt = *j.Finished
		}
		o.Phases = plan.Phases{Drained: j.Drained, Off: j.PoweredOff, On: j.PoweredOn, Healthy: j.Healthy}
		obs.Jobs[j.UUID] = o
	}
	var servers []Server
	for _, r := range p.Reboots {
		if s, ok := f.inv.Server(r.ServerUUID); ok {
			servers = append(servers, s)
		}
	}
	if h, ok := f.headnode(); ok {
		servers = append(servers, h)
	}
	healthy := f.checkAll(ctx, servers)
	for _, r := range p.Reboots {
		s, ok := f.inv.Server(r.ServerUUID)
		if !ok {
			continue // not in the inventory: unknown, counts as offline
		}
		j, isBusy := busy[s.UUID]
		rebooting := isBusy && (j.State == JobRequesting || j.State == JobRebooting)
		obs.Servers[s.UUID] = plan.ServerObs{Down: !healthy[s.UUID] || rebooting, ServicesUp: healthy[s.UUID] && !isBusy}
	}
	if h, ok := f.headnode(); ok {
		_, isBusy := busy[h.UUID]
		obs.HeadnodeServicesUp = healthy[h.UUID] && !isBusy
	}
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

// checkAll runs the health checks that are not fresh, at most 32 at once.
func (f *Fleet) checkAll(ctx context.Context, servers []Server) map[string]bool {
	out := make(map[string]bool, len(servers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	now := f.now()
	for _, s := range servers {
		f.mu.Lock()
		r, ok := f.health[s.UUID]
		f.mu.Unlock()
		if ok && now.Sub(r.at) < f.opts.HealthTTL && now.Sub(r.at) >= 0 {
			out[s.UUID] = r.ok
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(s Server) {
			defer wg.Done()
			defer func() { <-sem }()
			ok := f.check(ctx, s) == nil
			mu.Lock()
			out[s.UUID] = ok
			mu.Unlock()
			f.mu.Lock()
			f.health[s.UUID] = healthResult{ok: ok, at: f.now()}
			f.mu.Unlock()
		}(s)
	}
	wg.Wait()
	return out
}

// check runs server s's health check once.
func (f *Fleet) check(ctx context.Context, s Server) error { return f.inv.CheckHealth(ctx, s) }

// controller returns server uuid's power controller, connecting once.
func (f *Fleet) controller(uuid string) (power.Controller, error) {
	f.mu.Lock()
	c, ok := f.ctrl[uuid]
	f.mu.Unlock()
	if ok {
		return c, nil
	}
	s, ok := f.inv.Server(uuid)
	if !ok {
		return nil, fmt.Errorf("inventory: no server %s", uuid)
	}
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	if f.opts.Controller != nil {
		c, err := f.opts.Controller(ctx, s)
		if err == nil {
			f.mu.Lock()
			f.ctrl[uuid] = c
			f.mu.Unlock()
		}
		return c, err
	}
	c, err := Connect(ctx, f.inv.BMCOf(s))
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Hostname, err)
	}
	f.mu.Lock()
	f.ctrl[uuid] = c
	f.mu.Unlock()
	return c, nil
}

// Connect opens the power controller of a BMC (Redfish or IPMI).
func Connect(ctx context.Context, b BMC) (power.Controller, error) {
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
			Privilege: strings.ToUpper(b.Privilege)})
	}
	cfg := redfish.Config{Endpoint: b.Redfish, Username: b.Username, Password: pass, BasicAuth: b.BasicAuth, InsecureSkipVerify: b.Insecure,
		SystemID: b.System}
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

// start runs job id in a goroutine, unless one runs already.
func (f *Fleet) start(id string) {
	f.mu.Lock()
	if f.running[id] {
		f.mu.Unlock()
		return
	}
	f.running[id] = true
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() {
			f.mu.Lock()
			delete(f.running, id)
			f.mu.Unlock()
		}()
		f.run(id)
	}()
}

// hostname is how operators know a server (its UUID if the inventory
// does not have it).
func (f *Fleet) hostname(uuid string) string {
	if s, ok := f.inv.Server(uuid); ok {
		return s.Hostname
	}
	return uuid
}

func (f *Fleet) logf(msg string, args ...any) {
	if f.opts.Logger != nil {
		f.opts.Logger.Info(msg, args...)
	}
}

// run drives job id from its recorded state to its end (or until Close).
func (f *Fleet) run(id string) {
	ctx := f.ctx
	tick := time.NewTicker(f.opts.Poll)
	defer tick.Stop()
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			return true
		}
	}
	set := func(state, errMsg string, change func(*JobRecord)) (JobRecord, error) {
		j, err := f.update(id, func(j *JobRecord) error {
			j.State, j.Error = state, errMsg
			now := f.now()
			if change != nil {
				change(j)
			}
			if j.ended() && j.Ended == nil {
				j.Ended = &now
			}
			return nil
		})
		if err == nil {
			f.logf("job "+state, "job", id, "server", f.hostname(j.Server), "error", errMsg)
		}
		return j, err
	}
	for ctx.Err() == nil {
		j, ok, err := f.job(id)
		if err != nil || !ok {
			if !wait() {
				return
			}
			continue
		}
		s, _ := f.inv.Server(j.Server)
		now := f.now()
		switch j.State {
		case JobCreated:
			if j.Cancel {
				_, err = set(JobCancelled, "cancelled before it started", nil)
				break
			}
			_, err = set(JobDraining, "", func(j *JobRecord) { j.Started = &now })
		case JobDraining:
			if len(s.Drain) > 0 {
				if cerr := f.command(ctx, s.Drain); cerr != nil {
					if ctx.Err() != nil {
						return // stopped: drain again at resume (drain is idempotent)
					}
					_, err = set(JobFailed, "drain: "+cerr.Error(), nil)
					break
				}
			}
			_, err = set(JobDrained, "", func(j *JobRecord) { j.Drained = &now })
		case JobDrained:
			if j.Cancel {
				_, err = set(JobCancelled, "cancelled after the drain, before the reboot", nil)
				break
			}
			// Choose the request before writing it: writing it again
			// after a crash is then the same request, not a second one.
			at := f.now()
			_, err = set(JobRequesting, "", func(j *JobRecord) {
				j.RequestAt, j.RequestValue = at, reboot.RequestValue(power.ModeSoft, at)
			})
		case JobRequesting:
			if _, rerr := f.cli.RequestWith(ctx, s.UUID, j.RequestValue, j.RequestAt); rerr != nil {
				f.logf("reboot request failed", "job", id, "error", rerr.Error())
				break
			}
			_, err = set(JobRebooting, "", func(j *JobRecord) { j.Finished = &now })
		case JobRebooting:
			t := reboot.Ticket{Host: s.UUID, Annotation: f.cli.Annotation(), Value: j.RequestValue, At: j.RequestAt}
			if _, rerr := f.rec.Reconcile(ctx, s.UUID); rerr != nil {
				f.logf("reconcile failed", "job", id, "error", rerr.Error())
			}
			if fenced, _ := f.cli.Fenced(ctx, t); fenced {
				if j.PoweredOff == nil {
					_, err = f.update(id, func(j *JobRecord) error { j.PoweredOff = &now; return nil })
				}
				_ = f.cli.Release(ctx, t) // off: power it on again
			}
			if done, _ := f.cli.Done(ctx, t); done {
				if _, rerr := f.rec.Reconcile(ctx, s.UUID); rerr == nil {
					_, err = set(JobBooted, "", func(j *JobRecord) {
						if j.PoweredOff == nil {
							j.PoweredOff = &now // fenced and released between two looks
						}
						j.PoweredOn = &now
					})
				}
				break
			}
			if j.Finished != nil && now.Sub(*j.Finished) > f.opts.JobTimeout {
				_ = f.cli.Release(ctx, t)
				_, err = set(JobFailed, "power cycle not done within "+f.opts.JobTimeout.String(), nil)
			}
		case JobBooted:
			if f.check(ctx, s) != nil {
				if j.Finished != nil && now.Sub(*j.Finished) > f.opts.JobTimeout {
					_, err = set(JobFailed, "health check not passing within "+f.opts.JobTimeout.String(), nil)
				}
				break
			}
			if j.Healthy == nil {
				_, _ = f.update(id, func(j *JobRecord) error { j.Healthy = &now; return nil })
			}
			if len(s.Undrain) > 0 {
				if cerr := f.command(ctx, s.Undrain); cerr != nil {
					if ctx.Err() != nil {
						return
					}
					f.logf("undrain failed; retrying", "job", id, "error", cerr.Error())
					break
				}
			}
			_, err = set(JobDone, "", nil)
		default:
			return // ended
		}
		if err != nil {
			f.logf("job state not saved", "job", id, "error", err.Error())
		}
		if j2, ok, _ := f.job(id); ok && j2.State != j.State {
			continue // moved on: next step at once
		}
		if !wait() {
			return
		}
	}
}

// command runs argv with the command timeout.
func (f *Fleet) command(ctx context.Context, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, f.inv.Defaults.commandTimeout())
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		msg := string(out)
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		return fmt.Errorf("%s: %w: %s", argv[0], err, msg)
	}
	return nil
}

// boltHosts is the reboot.HostStore of the fleet: one record per server
// in the state file, versioned for compare-and-swap.
type boltHosts struct{ db *bolt.DB }

type hostRecord struct {
	Version     uint64            `json:"version"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Status      reboot.Status     `json:"status"`
}

func (s *boltHosts) Get(_ context.Context, name string) (reboot.Host, error) {
	var rec hostRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketHosts).Get([]byte(name))
		if raw == nil {
			return nil
		}
		return json.Unmarshal(raw, &rec)
	})
	if err != nil {
		return reboot.Host{}, err
	}
	return reboot.Host{Name: name, Version: strconv.FormatUint(rec.Version, 10), Annotations: rec.Annotations, Online: true, Status: rec.Status}, nil
}

func (s *boltHosts) Update(_ context.Context, h reboot.Host) (reboot.Host, error) {
	var out reboot.Host
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHosts)
		var rec hostRecord
		if raw := b.Get([]byte(h.Name)); raw != nil {
			if err := json.Unmarshal(raw, &rec); err != nil {
				return err
			}
		}
		if strconv.FormatUint(rec.Version, 10) != h.Version {
			return fmt.Errorf("host %s: %w", h.Name, reboot.ErrConflict)
		}
		rec = hostRecord{Version: rec.Version + 1, Annotations: h.Annotations, Status: h.Status}
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		out = h
		out.Version = strconv.FormatUint(rec.Version, 10)
		return b.Put([]byte(h.Name), raw)
	})
	return out, err
}
