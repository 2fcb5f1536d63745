package inventory

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/rebootkit/rebootkit/internal/ownfile"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrLocked: the fleet state file is open in another process.
var ErrLocked = errors.New("inventory: the fleet state file is open in another process")

// ErrNotStateFile: the fleet state file's path names something else than
// a regular file of its own (a symbolic link, a directory, a device, or a
// file with another name too). It is opened as what its path names,
// never through a link (ownfile.Opener, as the plan store): an executor
// running as root must never write a bbolt database into the file a
// link's owner chose.
var ErrNotStateFile = errors.New("inventory: the fleet state file's path is not a regular file with one link")

// openStateFile is bbolt's OpenFile for OpenFleet.
var openStateFile = ownfile.Opener(ErrNotStateFile, "the fleet state file")

// ErrServerBusy: CreateJob was asked for a server that has a live reboot
// job already (one live job per server).
var ErrServerBusy = errors.New("inventory: the server has a live reboot job")

// ErrMissingServer: OpenFleet found a server with a live job or a power
// cycle that has not settled, and the inventory no longer has it: the
// fleet could neither finish the job nor power the server on.
var ErrMissingServer = errors.New("inventory: a server the fleet is busy with is missing from the inventory")

// ErrUnknownServer: the inventory has no such server (Fleet.Abandon of a
// server taken out of the inventory since it was abandoned).
var ErrUnknownServer = errors.New("inventory: no such server in the inventory")

// Options tune a Fleet.
type Options struct {
	// CheckFile, when set, judges the fleet state file opened (its
	// descriptor, so that a name swapped after a check of the path is
	// judged too: its owner, say) before a byte of it is read; its error
	// is OpenFleet's.
	CheckFile func(*os.File) error
	// Reboot configures the power decisions (soft timeout, stale reads).
	Reboot reboot.Config
	// JobTimeout: a job whose server's power-off has not been accepted
	// this long after the job was created is cancelled (it never powers
	// the server off afterwards). Give the plan's job timeout. Default 1h.
	JobTimeout time.Duration
	// ServicesTimeout: a job whose server's health check does not pass
	// this long after its power cycle fails (it is undrained all the same).
	// Give the plan's services timeout. Default 1h.
	ServicesTimeout time.Duration
	// ShutdownMax bounds how long after it was sent a power-off the BMC
	// accepted (or may have: it timed out, or the executor died before the
	// answer) can still take effect: the longest an OS takes to shut down
	// after a soft power-off, plus the power's own delay. A soft shutdown
	// that takes longer must never end (an OS that ignores the request).
	// Once a job has ended, nothing powers its server off again; its server
	// counts as offline, and its power cycle is kept, until a health check
	// or a power reading taken ShutdownMax after the last power-off shows
	// it on. Default twice Reboot.SoftTimeout (the reboot package assumes
	// a soft shutdown ends within SoftTimeout or never, its A2).
	ShutdownMax time.Duration
	// HealthTTL: how long a health result is reused. Default 2s.
	HealthTTL time.Duration
	// HealthMaxAge bounds the age of a health result a start may rely
	// on, measured from the start of the check that produced it (on the
	// monotonic clock): an older "up" counts as down, so that a server
	// that crashed while the checks of dead servers queued is never
	// counted up. Default 15s.
	HealthMaxAge time.Duration
	// JobRetention: how long an ended job stays in the fleet state file
	// at least (Prune; Status shows a server's last job meanwhile).
	// Default 1h.
	JobRetention time.Duration
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
	// MaybeSelf lists the servers that may be the machine this executor
	// runs on when it cannot tell (Inventory.Identify): they are never
	// powered off through their BMC, and CreateJob refuses their jobs
	// (ErrMaybeSelf) until the operator says (--self).
	MaybeSelf []string
	// BootID returns this machine's boot ID (default: the Linux kernel's,
	// /proc/sys/kernel/random/boot_id).
	BootID func() (string, error)
	// PlanCheck, if set, is asked right before the first power-off of a
	// reboot is sent (for the executor's own server: before its reboot
	// command is recorded sent and run): does plan planUUID still run job
	// jobUUID (the plan has not ended and the job's reboot is still in its
	// job step)? No answer, or no, and nothing is powered off (no reboot
	// command run); "no" cancels the job (why says why).
	PlanCheck func(ctx context.Context, planUUID, jobUUID string) (live bool, why string, err error)
	// Claim, if set, is called once the fleet state file is open (and
	// locked: no other OpenFleet has it) with the file's identity (its ID
	// and generations: Fleet.Identity), before any job resumes; its error
	// is OpenFleet's, and nothing resumes. The executor records the
	// identity in its lease there, and refuses a copy of the file taken
	// before the last executor's last pass.
	Claim func(id FleetIdentity) error
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
	// slowProbes, with manual: healthOf starts no check; it reads the
	// results the test delivers (probeResult), slow as it likes, with
	// their age bounded as the background checks' are (tests).
	slowProbes bool
	// crash, if set, is asked at each step boundary; true kills the fleet
	// there (tests).
	crash func(point string) bool
	// command, if set, replaces running drain, undrain and reboot
	// commands (tests).
	command func(ctx context.Context, argv []string) error
	// lockTimeout: how long OpenFleet waits for the state file's lock
	// (default 1s; tests).
	lockTimeout time.Duration
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
	// ident: the state file's identity (Identity; under mu).
	ident FleetIdentity
	now   func() time.Time
	mono  func() time.Duration

	hosts *boltHosts
	rec   *reboot.Reconciler
	start time.Duration // monotonic time at open

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]bool   // servers with a goroutine
	pokes   map[string]bool   // servers kicked while their goroutine ran
	liveJob map[string]string // server UUID -> its live job
	keeping map[string]bool   // servers whose power bookkeeping has not settled
	// jobPlan caches the plan of each job Owed named (a job's plan never
	// changes): a claim of an unchanged file decodes no job record again.
	jobPlan map[string]string
	// abandoned: the servers the operator abandoned (watched by
	// ObserveView: one may be off, or its power-off may still land).
	abandoned map[string]bool
	// selfReboots: the servers whose reboot command (the executor's own
	// server's) may still land (hostRecord.SelfRebootBoot).
	selfReboots map[string]bool
	// openJobs: the jobs of the state file not known to have ended (job
	// UUID -> server); endedJobs: those that ended and are not pruned
	// yet; lastJob: each server's last job; shown: the servers whose
	// host record Status shows (interesting). Kept in memory so that no
	// pass reads every record of the state file.
	openJobs  map[string]string
	endedJobs endedHeap
	lastJob   map[string]string
	shown     map[string]bool
	// draining: job UUID -> interrupts its running drain command (a
	// cancel or an abandon does not wait out the drain's timeout).
	draining map[string]context.CancelFunc
	// missing: the servers of the plan whose Members map is missingKey
	// (of length missingLen) that the inventory lacks (ObserveView).
	missingKey uintptr
	missingLen int
	missingIDs []string
	headOnce   sync.Once
	head       Server
	hasHead    bool
	pool       *power.Pool
	printKey   []byte // random, this process's: keys secretPrint
	health     map[string]healthResult
	probing    map[string]bool
	reads      map[string]reading       // last power reading per server
	lastCmd    map[string]time.Duration // monotonic time of the last power command sent
	lastOff    map[string]time.Duration // monotonic time of the last power-off sent
	// selfCmds: the servers whose reboot command (the executor's own
	// server's) runs now: its cut-off is not known until it returns.
	selfCmds map[string]bool
	lastErr  map[string]BMCError      // last error recorded per server
	logged   map[string]time.Duration // server+class -> last Warn (monotonic)
	dead     bool                     // killed by a test's crash point
	probeSem chan struct{}
}

type healthResult struct {
	ok bool
	at time.Duration // monotonic: when the check that produced it started
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
	lock := opts.lockTimeout
	if lock <= 0 {
		lock = time.Second
	}
	open := openStateFile
	if opts.CheckFile != nil {
		open = ownfile.CheckedOpener(ErrNotStateFile, "the fleet state file", opts.CheckFile)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lock, OpenFile: open})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("inventory: open %s: %w", path, err)
	}
	var id FleetIdentity
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketHosts} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		var err error
		id, err = ensureFleetID(tx)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	if opts.Claim != nil {
		if err := opts.Claim(id); err != nil {
			db.Close()
			return nil, err
		}
	}
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = time.Hour
	}
	if opts.ServicesTimeout <= 0 {
		opts.ServicesTimeout = time.Hour
	}
	if opts.ShutdownMax <= 0 {
		opts.ShutdownMax = 2 * opts.Reboot.SoftTimeout
		if opts.Reboot.SoftTimeout <= 0 {
			opts.ShutdownMax = 2 * reboot.DefaultConfig().SoftTimeout
		}
	}
	if opts.HealthTTL <= 0 {
		opts.HealthTTL = 2 * time.Second
	}
	if opts.HealthMaxAge <= 0 {
		opts.HealthMaxAge = 15 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.JobRetention <= 0 {
		opts.JobRetention = time.Hour
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
	f := &Fleet{inv: inv, opts: opts, db: db, ident: id, now: opts.Now, mono: opts.Monotonic,
		workers: map[string]bool{}, pokes: map[string]bool{}, liveJob: map[string]string{}, keeping: map[string]bool{},
		abandoned: map[string]bool{}, selfReboots: map[string]bool{},
		health:  map[string]healthResult{},
		probing: map[string]bool{}, reads: map[string]reading{}, lastCmd: map[string]time.Duration{},
		lastOff: map[string]time.Duration{}, selfCmds: map[string]bool{},
		lastErr: map[string]BMCError{}, logged: map[string]time.Duration{}, probeSem: make(chan struct{}, 32),
		openJobs: map[string]string{}, lastJob: map[string]string{}, shown: map[string]bool{},
		draining: map[string]context.CancelFunc{}}
	f.start = f.mono()
	f.printKey = make([]byte, 32)
	if _, err := rand.Read(f.printKey); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("inventory: random key: %w", err)
	}
	// The Pool measures back-off and idleness only: give it the monotonic
	// clock, so that a wall clock stepped back (NTP) never leaves a BMC
	// backing off for as long as the step.
	monoEpoch := time.Unix(0, 0)
	f.pool = power.NewPool(power.PoolConfig{CallTimeout: opts.CallTimeout, ConnectTimeout: opts.CallTimeout, Logger: opts.Logger,
		Now: func() time.Time { return monoEpoch.Add(f.mono()) }})
	f.hosts = &boltHosts{db: db, written: f.noteHost}
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
	f.trackJobs(jobs)
	var keep, rebooting []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			var h hostRecord
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("inventory: host %s: %w", k, err)
			}
			if h.needsKeeping() {
				keep = append(keep, string(k))
			}
			if h.SelfRebootBoot != "" && h.Abandoned == "" {
				// An abandoned one may leave the inventory, as an
				// abandoned power cycle may: the operator took
				// responsibility for the server.
				rebooting = append(rebooting, string(k))
			}
			if h.interesting() {
				f.shown[string(k)] = true
			}
			if h.Abandoned != "" {
				f.abandoned[string(k)] = true
			}
			if h.SelfRebootBoot != "" {
				f.selfReboots[string(k)] = true
			}
			return nil
		})
	}); err != nil {
		f.pool.Close()
		db.Close()
		return nil, err
	}
	if err := f.missing(jobs, keep, rebooting); err != nil {
		f.pool.Close()
		db.Close()
		return nil, err
	}
	for s := range f.liveJob {
		f.kick(s)
	}
	for _, s := range keep {
		f.keeping[s] = true
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
// another live job. A job for a server the operator abandoned in the same
// plan is recorded failed at once (it never runs), so that the plan moves
// on.
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
		if f.selfWhy(s.UUID) != "" && s.UUID != f.opts.Self {
			return fmt.Errorf("%w: %s (it could not be told apart from this machine by hostname or address); job %s of plan %s waits: "+
				"restart the executor with --self %s if it runs there, or --self none or --self SERVER if it does not", ErrMaybeSelf, s.Hostname, a.JobUUID, a.PlanUUID, s.Hostname)
		}
		if other, busy := f.liveJob[s.UUID]; busy && other != a.JobUUID {
			return fmt.Errorf("%w: %s has job %s; job %s of plan %s waits for it to end", ErrServerBusy, s.Hostname, other, a.JobUUID, a.PlanUUID)
		}
		if h, err := hostIn(tx, s.UUID); err != nil {
			return err
		} else if h.Abandoned != "" && h.AbandonedPlan != a.PlanUUID && h.AbandonedCycle {
			// Abandoned mid power cycle: a power-off the fleet sent
			// before may still land until its cut-off, and the server
			// counts as down until a health check begun after then
			// passes (offLanded). Another plan's reboot would take the
			// server (and drop AbandonedCycle) while it may be off: it
			// waits for the cut-off, and then while the last check
			// that passed began before it (that stale result would
			// count the server up once AbandonedCycle is dropped). A
			// failing or missing result counts it down until a check
			// begun later passes.
			at := f.offHorizonLocked(s.UUID)
			if r, ok := f.health[s.UUID]; f.mono() < at || ok && r.ok && r.at < at {
				wait := "until a health check of it begun after the cut-off passes"
				if left := at - f.mono(); left > 0 {
					wait = fmt.Sprintf("for %s, then %s", left.Round(time.Second), wait)
				}
				return fmt.Errorf("%w: %s was abandoned by the operator mid power cycle, and a power-off sent before may still take effect; job %s of plan %s waits %s",
					ErrServerBusy, s.Hostname, a.JobUUID, a.PlanUUID, wait)
			}
		}
		abandoned, err := takeBack(tx, s.UUID, a.PlanUUID)
		if err != nil {
			return err
		}
		if abandoned != "" {
			// Abandoned in this very plan (its job may have been refused
			// until then): recorded ended, so that the plan sees its
			// reboot fail now and moves on; nothing of it ever runs.
			now := f.now()
			raw, err := json.Marshal(JobRecord{UUID: a.JobUUID, Server: s.UUID, Hostname: s.Hostname, Plan: a.PlanUUID, State: JobFailed,
				Created: now, StateAt: now, Ended: &now, Error: "abandoned by the operator (" + abandoned + ") before its job started"})
			if err != nil {
				return err
			}
			return b.Put([]byte(a.JobUUID), raw)
		}
		if raw := tx.Bucket(bucketHosts).Get([]byte(s.UUID)); raw != nil {
			var h hostRecord
			if err := json.Unmarshal(raw, &h); err != nil {
				return err
			}
			if h.SelfRebootBoot != "" {
				// A second reboot command would push back (or fail) the
				// one that may still land.
				return fmt.Errorf("%w: %s: the reboot command of this executor's own server, sent at %s, may still land; job %s of plan %s waits until its new boot is seen, or --shutdown-max after the command",
					ErrServerBusy, s.Hostname, h.SelfRebootAt.UTC().Format(time.RFC3339), a.JobUUID, a.PlanUUID)
			}
			if h.needsKeeping() && h.Job != "" {
				// A job that gave up on a BMC mid-cycle left its power
				// cycle to the fleet: no new reboot joins it.
				return fmt.Errorf("%w: %s: the power cycle of job %s has not settled (%s); job %s of plan %s waits for it",
					ErrServerBusy, s.Hostname, h.Job, orUnknown(h.Phase), a.JobUUID, a.PlanUUID)
			}
		}
		now := f.now()
		raw, err := json.Marshal(JobRecord{UUID: a.JobUUID, Server: s.UUID, Hostname: s.Hostname, Plan: a.PlanUUID, State: JobCreated, Created: now, StateAt: now})
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
		delete(f.abandoned, s.UUID) // taken back (takeBack)
		f.liveJob[s.UUID] = a.JobUUID
		f.openJobs[a.JobUUID] = s.UUID
		f.lastJob[s.UUID] = a.JobUUID
		f.infof("job created", "job", a.JobUUID, "server", s.Hostname, "plan", a.PlanUUID)
	}
	f.kickLocked(s.UUID)
	return nil
}

// Abandon gives up on server (a UUID or a hostname) for plan planUUID,
// as the operator asked (why says who and when): the fleet never powers
// it on or off again and stops reconciling it; its live job undoes its
// drain and ends failed, naming the server's last known power phase. It
// counts as down while its health check fails and, if its power cycle
// had not settled, until a health check begun after the last power-off
// sent to it can have taken effect (offHorizon) passes: an abandon stops
// the fleet's follow-up, not a power-off already sent. A job of another
// plan takes the server back once that cut-off passed and its last passing
// health check (if that is its last result) began after it: until then
// CreateJob refuses it (ErrServerBusy); taking back a server abandoned
// mid power cycle takes back that cycle too (powered on if it reads off,
// never off, whatever becomes of the new job). Abandoning
// again is a no-op, and so is the same abandon (same plan, same why) once
// a job of another plan took the server back.
// A server the inventory does not list is ErrUnknownServer.
func (f *Fleet) Abandon(server, planUUID, why string) error {
	s, ok := f.inv.Server(server)
	if !ok {
		return fmt.Errorf("%w: abandon %s", ErrUnknownServer, server)
	}
	now := f.now()
	changed := false
	if _, err := f.hosts.modify(s.UUID, func(h *hostRecord) error {
		if h.Abandoned != "" && h.AbandonedPlan == planUUID {
			return errSkip
		}
		if h.Abandoned == "" && h.TakenBackPlan == planUUID && h.TakenBackWhy == why {
			return errSkip // a job of another plan took it back since
		}
		h.Abandoned, h.AbandonedPlan, h.AbandonedAt = why, planUUID, now
		// A power-off sent before may still land: the cut-off is kept
		// (AbandonedCycle), whatever is dropped below.
		h.AbandonedCycle = h.AbandonedCycle || h.OffMaybe || h.Watch && !h.Settled || h.Status.Pending() || h.hasRequest()
		// Nothing of this fleet's reboots is left on it: no request to
		// hold it off, no reboot pending (a job that takes it back
		// starts a new one), nothing to watch.
		for k := range h.Annotations {
			if reboot.IsRebootAnnotation(k) {
				h.Annotations = copyMap(h.Annotations)
				delete(h.Annotations, k)
			}
		}
		h.Status.PendingRebootSince, h.Status.Seen, h.Status.LastRequestSeen = time.Time{}, nil, time.Time{}
		h.Watch, h.Settled, h.OffMaybe = false, false, false
		changed = true
		return nil
	}); err != nil {
		return err
	}
	if changed {
		f.warnf("server abandoned by the operator: never powered by this executor again", "server", s.Hostname, "plan", planUUID, "why", why)
	}
	f.mu.Lock()
	live := f.liveJob[s.UUID]
	f.mu.Unlock()
	if live != "" {
		f.interruptDrain(live)
	}
	f.kick(s.UUID)
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
	f.interruptDrain(id)
	f.kick(j.Server)
	return nil
}

// Sync ends the jobs their plans no longer run: tracked is asked about
// every live job; known and not live cancels it (why says why). Call it
// after the passes with what the plans say, so that no job outlives its
// plan's view of it.
func (f *Fleet) Sync(_ context.Context, tracked func(j JobRecord) (known, live bool, why string)) error {
	// The live jobs only (kept in memory): a pass never reads every job
	// the state file ever recorded.
	f.mu.Lock()
	ids := make([]string, 0, len(f.liveJob))
	for _, id := range f.liveJob {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		j, ok, err := f.job(id)
		if err != nil {
			return err
		}
		if !ok || j.Over() || j.Cancel {
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

// HasHeadnode implements plan.HeadnodeFleet: the inventory lists a
// headnode. (An inventory fleet has no database shard: it is no
// plan.ShardFleet.)
func (f *Fleet) HasHeadnode() bool {
	_, ok := f.headnode()
	return ok
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

// hostIn reads server's host record in tx (zero if none).
func hostIn(tx *bolt.Tx, server string) (hostRecord, error) {
	var h hostRecord
	raw := tx.Bucket(bucketHosts).Get([]byte(server))
	if raw == nil {
		return h, nil
	}
	err := json.Unmarshal(raw, &h)
	return h, err
}

// takeBack clears an operator's abandon of server when a job of another
// plan starts on it, in the job's own transaction (CreateJob refuses one
// before the cut-off of a power cycle abandoned mid-way). For a job of the plan
// it was abandoned in it returns why it was abandoned (that job never
// runs).
func takeBack(tx *bolt.Tx, server, planUUID string) (string, error) {
	b := tx.Bucket(bucketHosts)
	raw := b.Get([]byte(server))
	if raw == nil {
		return "", nil
	}
	var h hostRecord
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", err
	}
	if h.Abandoned == "" {
		return "", nil
	}
	if h.AbandonedPlan == planUUID {
		return h.Abandoned, nil
	}
	h.TakenBackPlan, h.TakenBackWhy = h.AbandonedPlan, h.Abandoned
	if h.AbandonedCycle {
		// Abandoned mid power cycle of this fleet: a power-off sent
		// before may have left it off (CreateJob waited for the
		// cut-off, so none can land any more). Taking the server back
		// takes that cycle back too, whatever becomes of the new job:
		// the fleet powers it on if it reads off, never off (no job of
		// it powers: gated.Off), and drops the cycle once it reads on
		// (keep). Without this, a job cancelled or failed before its
		// own reboot left the server off with nobody's name on it.
		h.Status.PendingRebootSince = h.AbandonedAt
		h.Status.Seen, h.Status.LastRequestSeen = nil, time.Time{}
		// The cycle is no job's any more (the new job's own reboot
		// makes it its own when it asks): CreateJob does not wait for
		// it, and its power-offs stay held.
		h.Watch, h.Settled, h.OffMaybe, h.Job = true, false, false, ""
	}
	h.Abandoned, h.AbandonedPlan, h.AbandonedAt, h.AbandonedCycle = "", "", time.Time{}, false
	h.Version++
	out, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	return "", b.Put([]byte(server), out)
}

// missing refuses to resume while a server with a live job, an
// unsettled power cycle, or a reboot command that may still land
// (rebooting: hostRecord.SelfRebootBoot), none of them abandoned by the
// operator, is missing from the inventory (it
// may be off, and only its BMC can power it on; its reboot would not be
// counted), naming each.
func (f *Fleet) missing(jobs []JobRecord, keep, rebooting []string) error {
	names := map[string]string{}
	for _, j := range jobs {
		if j.Hostname != "" {
			names[j.Server] = j.Hostname
		}
	}
	var out []string
	seen := map[string]bool{}
	note := func(server, why string) {
		if _, ok := f.inv.Server(server); ok || seen[server] {
			return
		}
		seen[server] = true
		name := server
		if h := names[server]; h != "" {
			name = h + " (" + server + ")"
		}
		out = append(out, name+": "+why)
	}
	for _, j := range jobs {
		if !j.Over() {
			note(j.Server, "its reboot job "+j.UUID+" is "+j.State)
		}
	}
	for _, s := range keep {
		note(s, "its power cycle has not settled (it may be off)")
	}
	for _, s := range rebooting {
		note(s, "its reboot command (this executor's own server's) may still take it down")
	}
	if len(out) == 0 {
		return nil
	}
	sort.Strings(out)
	return fmt.Errorf("%w: %s. Put it back in the inventory (with its bmc section) and start the executor again, so that its power cycle completes; "+
		"remove it only once it is on and its job has ended", ErrMissingServer, strings.Join(out, "; "))
}
