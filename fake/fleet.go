package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// Compile-time checks.
var (
	_ plan.ViewFleet = (*Fleet)(nil)
)

// ErrUnavailable is returned by a Fleet while its headnode is down: the
// executor that runs there is not running either.
var ErrUnavailable = errors.New("fake: headnode down, executor unavailable")

// ErrStaleFence is returned for an action whose fencing token
// (plan.Action.Fence) is lower than one the Fleet has seen: it comes from
// a deposed executor.
var ErrStaleFence = errors.New("fake: stale fencing token")

// FleetServer is one simulated server and how its reboot goes. Times are
// measured from the moment its reboot job is created.
type FleetServer struct {
	UUID, Hostname string
	Platform       string
	Core, Headnode bool
	// Queue: until the job starts. Drain: until the agent is drained.
	// Shutdown: until the reboot command is sent (the job finishes).
	// Boot: the server is down. Services: until its services are up.
	Queue, Drain, Shutdown, Boot, Services time.Duration
	// FailJob makes the job fail once drained; NeverUp keeps the services
	// down after the reboot; DownNow marks it down for other reasons.
	FailJob, NeverUp, DownNow bool
	// Labels are its labels (rack, zone), given to plans (Servers).
	Labels map[string]string
}

// fleetServer is a server of the fleet: its copy of the FleetServer and
// its jobs, oldest first.
type fleetServer struct {
	FleetServer
	jobs []*fleetJob
}

type fleetJob struct {
	server   string
	srv      *fleetServer // the server's record (server is its UUID)
	created  time.Time
	cancel   time.Time // when CancelJob was asked (zero: never)
	gone     bool      // garbage-collected
	endedAt  time.Time
	rebooted bool // the reboot command was sent (it reboots whatever happens next)
}

// Start is one job creation as the fleet saw it: the ground truth the
// concurrency invariant is checked against.
type Start struct {
	Server string
	At     time.Time
	// Offline are the other servers of the fleet that were offline at that
	// instant: down, or with a job that had not ended.
	Offline []string
	// SelfOffline: the server itself was offline already.
	SelfOffline bool
}

// Fleet is a simulated datacenter for plans: reboot jobs unfold on the
// clock, servers go down and come back, the database shard can be frozen.
//
// Jobs behave like real ones: once created, a job runs to its end whatever
// the plan decides (a plan that gives up on it does not stop it); only
// CancelJob stops it, and only before it sent the reboot command. Finished
// jobs can be garbage-collected (CollectJobs, or Retain). CreateJob is
// idempotent by job UUID; the Fleet counts jobs per server and records
// every job start with the servers offline at that instant, so that tests
// check invariants against what really happened. Observe costs
// O(servers + jobs). Not for production.
type Fleet struct {
	mu      sync.Mutex
	now     func() time.Time
	servers map[string]*fleetServer
	order   []string
	jobs    map[string]*fleetJob
	created map[string]int
	starts  []Start
	// Retain, if set, garbage-collects jobs this long after they ended.
	retain       time.Duration
	shardPrimary string
	frozen       bool
	freezes      int
	hide         map[string]bool // servers Observe leaves out
	head         string          // the headnode's UUID ("" if none)
	downNow      map[string]bool // servers with DownNow set
	// live are the servers a job may still take offline; a server leaves
	// once all its jobs ended and it booted (see offlineSet).
	live    map[string]bool
	latest  time.Time           // the latest time the fleet saw
	unknown map[string][]string // per plan: its servers the fleet does not have
	// truthAt and truth: the servers offline (ground truth) at truthAt,
	// appended to as jobs that have not ended are created at that instant
	// and dropped (nil) by anything else that changes the truth at it;
	// Start.Offline lists share it (its elements are never changed).
	// TestFleetTruthCacheExact checks it against a recount.
	truthAt time.Time
	truth   []string
	inTruth map[string]bool
	// fence is the highest fencing token seen; stale are the actions
	// refused for a lower one.
	fence int64
	stale int
	// fenceCheck, if set, also asks the authority whether a token is the
	// current one (SetFenceCheck).
	fenceCheck func(token int64) error
	// executorElsewhere: the fleet stays available while the headnode is
	// down (SetExecutorElsewhere).
	executorElsewhere bool
	// conditions are the blocking conditions' states (SetCondition).
	conditions map[string]condition
	// headnodeZero: without a headnode, HeadnodeServicesUp is reported
	// false (SetHeadnodeZero).
	headnodeZero bool
	// frozenAt is when the shard was last frozen; jobSinceFreeze whether
	// a job on its primary was created since; idleMax the longest time
	// it stayed frozen before such a job (FrozenWithoutJob).
	frozenAt       time.Time
	jobSinceFreeze bool
	idleMax        time.Duration
}

type condition struct {
	ok     bool
	output string
}

// SetFenceCheck makes the fleet ask check, atomically with every fenced
// action (plan.Action.Fence != 0), whether the token is the current
// leadership's; an error refuses the action. It emulates a fleet whose job
// records live in the leader election's store and are written with a
// transaction that compares the leader's key: a deposed executor's late
// actions are refused even before a new leader acted.
func (f *Fleet) SetFenceCheck(check func(token int64) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fenceCheck = check
}

// fenced checks a's fencing token (locked): 0 passes; a lower one than
// the highest seen is refused.
func (f *Fleet) fenced(a plan.Action) error {
	if a.Fence == 0 {
		return nil
	}
	if a.Fence < f.fence {
		f.stale++
		return fmt.Errorf("%w: %d < %d (%s for %s)", ErrStaleFence, a.Fence, f.fence, a.Kind, a.Server)
	}
	if f.fenceCheck != nil {
		if err := f.fenceCheck(a.Fence); err != nil {
			f.stale++
			return fmt.Errorf("%w: %d: %v (%s for %s)", ErrStaleFence, a.Fence, err, a.Kind, a.Server)
		}
	}
	f.fence = a.Fence
	return nil
}

// StaleActions returns how many actions were refused for a stale fencing
// token.
func (f *Fleet) StaleActions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stale
}

// NewFleet returns a fleet of copies of servers on the clock now.
func NewFleet(now func() time.Time, shardPrimary string, servers ...FleetServer) *Fleet {
	f := &Fleet{now: now, servers: map[string]*fleetServer{}, jobs: map[string]*fleetJob{},
		created: map[string]int{}, shardPrimary: shardPrimary, hide: map[string]bool{},
		downNow: map[string]bool{}, live: map[string]bool{}, unknown: map[string][]string{}}
	for _, s := range servers {
		f.servers[s.UUID] = &fleetServer{FleetServer: s}
		f.order = append(f.order, s.UUID)
		if s.Headnode && f.head == "" {
			f.head = s.UUID
		}
		if s.DownNow {
			f.downNow[s.UUID] = true
		}
	}
	return f
}

// Servers returns the fleet as plan.Create wants it.
func (f *Fleet) Servers() []plan.Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]plan.Server, 0, len(f.order))
	for _, id := range f.order {
		s := f.servers[id]
		out = append(out, plan.Server{UUID: s.UUID, Hostname: s.Hostname, Platform: s.Platform, Core: s.Core, Headnode: s.Headnode, Labels: s.Labels})
	}
	return out
}

// SetDown marks a server down (or up again) for reasons of its own, at
// once. Safe while in use.
func (f *Fleet) SetDown(server string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.truth = nil // the ground truth changed at this instant
	if s, ok := f.servers[server]; ok {
		s.DownNow = down
		if down {
			f.downNow[server] = true
		} else {
			delete(f.downNow, server)
		}
	}
}

// Hide makes Observe leave a server out (a monitoring gap), or not.
func (f *Fleet) Hide(server string, hidden bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hide[server] = hidden
}

// SetRetain garbage-collects jobs d after they ended (0: never).
func (f *Fleet) SetRetain(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retain = d
}

// CollectJobs garbage-collects every job that ended at least d ago.
func (f *Fleet) CollectJobs(d time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.collect(f.now(), d)
}

func (f *Fleet) collect(now time.Time, d time.Duration) int {
	n := 0
	for _, j := range f.jobs {
		f.settle(j, now)
		if !j.gone && !j.endedAt.IsZero() && !now.Before(j.endedAt.Add(d)) {
			j.gone = true
			n++
		}
	}
	return n
}

// times returns the job's milestones for server s.
func (s *FleetServer) times(created time.Time) (started, drained, finished, up time.Time) {
	started = created.Add(s.Queue)
	drained = started.Add(s.Drain)
	finished = drained.Add(s.Shutdown)
	up = finished.Add(s.Boot + s.Services)
	return
}

// settle records how job j stands at now: whether the reboot command was
// sent, and when the job ended (a cancel before the reboot command ends
// it; a failing job ends once drained).
func (f *Fleet) settle(j *fleetJob, now time.Time) {
	if !j.endedAt.IsZero() {
		return
	}
	s := j.srv
	_, drained, finished, _ := s.times(j.created)
	switch {
	case !j.cancel.IsZero() && j.cancel.Before(finished) && (s.FailJob && j.cancel.Before(drained) || !s.FailJob):
		if !now.Before(j.cancel) {
			j.endedAt = j.cancel
		}
	case s.FailJob:
		if !now.Before(drained) {
			j.endedAt = drained
		}
	case !now.Before(finished):
		j.endedAt, j.rebooted = finished, true
	}
}

// down reports whether server s is down at now (locked): for its own
// reasons, or rebooting after a job sent the reboot command.
func (f *Fleet) down(s *fleetServer, now time.Time) bool {
	if s.DownNow {
		return true
	}
	for _, j := range s.jobs {
		f.settle(j, now)
		if j.rebooted {
			if !now.Before(j.endedAt) && now.Before(j.endedAt.Add(s.Boot)) {
				return true
			}
		}
	}
	return false
}

func (f *Fleet) servicesUp(s *fleetServer, now time.Time) bool {
	return f.servicesUpDown(s, now, f.down(s, now))
}

// servicesUpDown is servicesUp of a server whose down is known.
func (f *Fleet) servicesUpDown(s *fleetServer, now time.Time, down bool) bool {
	if down {
		return false
	}
	for _, j := range s.jobs {
		if j.rebooted {
			_, _, finished, up := s.times(j.created)
			if !now.Before(finished) && (s.NeverUp || now.Before(up)) {
				return false
			}
		}
	}
	return true
}

// offline reports whether s is offline at now by the plan's definition,
// from ground truth: down, or a job on it that has not ended.
func (f *Fleet) offline(s *fleetServer, now time.Time) bool {
	if f.down(s, now) {
		return true
	}
	for _, j := range s.jobs {
		f.settle(j, now)
		if j.endedAt.IsZero() {
			return true
		}
	}
	return false
}

// executorDown: the executor runs on the headnode, which is down.
func (f *Fleet) executorDown(now time.Time) bool {
	return !f.executorElsewhere && f.headnodeDown(now)
}

// SetExecutorElsewhere says the executors do not run on the headnode
// (several executors on other machines, e.g. on etcd): the fleet stays
// available while the headnode reboots.
func (f *Fleet) SetExecutorElsewhere(elsewhere bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.executorElsewhere = elsewhere
}

// HeadnodeDown reports whether the headnode is down now (ground truth).
func (f *Fleet) HeadnodeDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headnodeDown(f.now())
}

func (f *Fleet) headnodeDown(now time.Time) bool {
	return f.head != "" && f.down(f.servers[f.head], now)
}

// offlineSet returns the servers offline at now, sorted: with truth, by
// the plan's definition from ground truth (down, or a job on it that has
// not ended); without, what a partial observation lists (down, or hidden
// from the observations). It costs O(servers down + servers with recent
// jobs): servers whose jobs all ended and that booted since leave the live
// set for good, unless the clock goes back, when it scans every server.
func (f *Fleet) offlineSet(now time.Time, truth bool) []string {
	var out []string
	back := now.Before(f.latest)
	f.latest = maxTime(f.latest, now)
	candidates := f.live
	if back {
		candidates = make(map[string]bool, len(f.order))
		for _, id := range f.order {
			candidates[id] = true
		}
	}
	for id := range candidates {
		s := f.servers[id]
		if truth && f.offline(s, now) || !truth && f.down(s, now) {
			out = append(out, id)
		}
		if !back && f.quiet(s, now) {
			delete(f.live, id)
		}
	}
	for id := range f.downNow {
		out = append(out, id)
	}
	if !truth {
		for id, h := range f.hide {
			if h {
				out = append(out, id)
			}
		}
	}
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// quiet reports whether no job of s can take it offline at now or later:
// every job ended, and the server booted after each reboot it caused.
func (f *Fleet) quiet(s *fleetServer, now time.Time) bool {
	for _, j := range s.jobs {
		f.settle(j, now)
		if j.endedAt.IsZero() || j.rebooted && now.Before(j.endedAt.Add(s.Boot)) {
			return false
		}
	}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Observe implements plan.Fleet, in O(servers + jobs).
func (f *Fleet) Observe(_ context.Context, p plan.Plan) (plan.Observations, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.executorDown(now) {
		return plan.Observations{}, ErrUnavailable
	}
	if f.retain > 0 {
		f.collect(now, f.retain)
	}
	obs := plan.Observations{Servers: make(map[string]plan.ServerObs, len(f.servers)), Jobs: make(map[string]plan.JobObs, len(f.jobs)),
		HeadnodeServicesUp: f.head != "" || !f.headnodeZero, ShardPrimary: f.shardPrimary, ShardFrozen: f.frozen, ShardHealthy: true}
	for _, s := range f.servers {
		up := f.servicesUp(s, now)
		if s.Headnode && !up {
			obs.HeadnodeServicesUp = false
		}
		if f.hide[s.UUID] {
			continue
		}
		obs.Servers[s.UUID] = plan.ServerObs{Down: f.down(s, now), ServicesUp: up}
	}
	var times timeBuf
	for id, j := range f.jobs {
		if !j.gone {
			obs.Jobs[id] = f.jobObs(j, now, &times)
		}
	}
	obs.Conditions = f.conditionResults(now)
	return obs, nil
}

// timeBuf hands out pointers to times taken from a few large
// allocations instead of one each (an observation of thousands of jobs
// points to thousands of phase times). A chunk never grows: the pointers
// stay valid.
type timeBuf []time.Time

func (b *timeBuf) ptr(t time.Time) *time.Time {
	if len(*b) == cap(*b) {
		*b = make([]time.Time, 0, max(64, 2*cap(*b)))
	}
	*b = append(*b, t)
	return &(*b)[len(*b)-1]
}

// jobObs is what is observed of job j at now (locked); its phase times
// come from times.
func (f *Fleet) jobObs(j *fleetJob, now time.Time, times *timeBuf) plan.JobObs {
	s := j.srv
	f.settle(j, now)
	started, drained, finished, up := s.times(j.created)
	o := plan.JobObs{Exists: true, Started: !now.Before(started), Drained: !now.Before(drained)}
	if o.Started {
		o.StartedAt = started
	}
	// The phases as they happen, for reports: drained; off at the end of
	// the shutdown and on again at once (nothing holds a server off
	// here); healthy when its services are up.
	seen := func(t time.Time) *time.Time {
		if now.Before(t) {
			return nil
		}
		return times.ptr(t)
	}
	if o.Drained {
		o.Phases.Drained = seen(drained)
	}
	if j.rebooted {
		o.Phases.Off, o.Phases.On = seen(finished), seen(finished)
		if !s.NeverUp {
			o.Phases.Healthy = seen(up)
		}
	}
	switch {
	case !j.endedAt.IsZero() && !j.rebooted && !j.cancel.IsZero() && !j.endedAt.After(now) && j.endedAt.Equal(j.cancel):
		o.Cancelled, o.Error = true, "cancelled"
	case s.FailJob && o.Drained:
		o.Failed, o.Error = true, "simulated job failure on "+s.Hostname
	case !now.Before(finished):
		o.Finished, o.FinishedAt = true, finished
	}
	return o
}

// ObserveView implements plan.ViewFleet: the view's servers and their
// jobs, the headnode and the shard, and the servers down or hidden (plus
// the plan's servers the fleet does not have). It costs O(view + servers
// down + servers with recent jobs), not O(servers).
func (f *Fleet) ObserveView(_ context.Context, v plan.View) (plan.Observations, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.executorDown(now) {
		return plan.Observations{}, ErrUnavailable
	}
	var times timeBuf
	obs := plan.Observations{Partial: true, Servers: make(map[string]plan.ServerObs, len(v.Reboots)), Jobs: make(map[string]plan.JobObs, len(v.Reboots)),
		HeadnodeServicesUp: f.head == "" && !f.headnodeZero || f.head != "" && f.servicesUp(f.servers[f.head], now), ShardPrimary: f.shardPrimary, ShardFrozen: f.frozen, ShardHealthy: true}
	for _, r := range v.Reboots {
		s, ok := f.servers[r.ServerUUID]
		if ok && !f.hide[s.UUID] {
			down := f.down(s, now)
			obs.Servers[s.UUID] = plan.ServerObs{Down: down, ServicesUp: f.servicesUpDown(s, now, down)}
		}
		if j, ok := f.jobs[r.JobUUID]; ok && r.JobUUID != "" {
			f.settle(j, now)
			if f.retain > 0 && !j.gone && !j.endedAt.IsZero() && !now.Before(j.endedAt.Add(f.retain)) {
				j.gone = true
			}
			if !j.gone {
				obs.Jobs[r.JobUUID] = f.jobObs(j, now, &times)
			}
		}
	}
	obs.Offline = f.offlineSet(now, false)
	key := v.UUID
	if v.CreatedAt != nil {
		key += "@" + v.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	unknown, ok := f.unknown[key]
	if !ok {
		for id := range v.Members {
			if _, have := f.servers[id]; !have {
				unknown = append(unknown, id)
			}
		}
		f.unknown[key] = unknown
	}
	obs.Offline = append(obs.Offline, unknown...)
	obs.Conditions = f.conditionResults(now)
	return obs, nil
}

// CreateJob implements plan.Fleet.
func (f *Fleet) CreateJob(_ context.Context, a plan.Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.executorDown(now) {
		return ErrUnavailable
	}
	if err := f.fenced(a); err != nil {
		return err
	}
	s, ok := f.servers[a.Server]
	if !ok {
		return fmt.Errorf("fake: no server %s", a.Server)
	}
	if _, ok := f.jobs[a.JobUUID]; ok {
		return nil
	}
	if f.truth == nil || !now.Equal(f.truthAt) {
		f.truthAt, f.truth, f.inTruth = now, f.offlineSet(now, true), map[string]bool{}
		for _, id := range f.truth {
			f.inTruth[id] = true
		}
	}
	st := Start{Server: a.Server, At: now, SelfOffline: f.offline(s, now)}
	if f.inTruth[a.Server] {
		for _, id := range f.truth {
			if id != a.Server {
				st.Offline = append(st.Offline, id)
			}
		}
	} else {
		st.Offline = f.truth[:len(f.truth):len(f.truth)] // shared, never changed
	}
	f.starts = append(f.starts, st)
	if f.frozen && a.Server == f.shardPrimary && !f.jobSinceFreeze {
		f.endIdle(now)
	}
	j := &fleetJob{server: a.Server, srv: s, created: now}
	f.jobs[a.JobUUID] = j
	s.jobs = append(s.jobs, j)
	f.live[a.Server] = true
	f.created[a.Server]++
	// The cache stays exact: the new job takes its server offline at this
	// instant only if it has not ended at it (a job with no queue and no
	// drain that fails ends at the instant it was created).
	if !f.inTruth[a.Server] && f.offline(s, now) {
		f.truth = append(f.truth, a.Server)
		f.inTruth[a.Server] = true
	}
	return nil
}

// CancelJob implements plan.Fleet: a job that has not sent its reboot
// command stops; one that has reboots the server all the same.
func (f *Fleet) CancelJob(_ context.Context, a plan.Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.executorDown(now) {
		return ErrUnavailable
	}
	if err := f.fenced(a); err != nil {
		return err
	}
	f.truth = nil // a cancel may end the job at this instant
	j, ok := f.jobs[a.JobUUID]
	if !ok {
		return nil
	}
	if j.cancel.IsZero() {
		f.settle(j, now)
		if j.endedAt.IsZero() {
			j.cancel = now
		}
	}
	return nil
}

// Starts returns every job creation with the servers offline at that
// instant (ground truth).
func (f *Fleet) Starts() []Start {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Start(nil), f.starts...)
}

// FreezeShard implements plan.Fleet.
func (f *Fleet) FreezeShard(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.freezes++
		f.frozenAt, f.jobSinceFreeze = f.now(), false
	}
	f.frozen = true
	return nil
}

// UnfreezeShard implements plan.Fleet.
func (f *Fleet) UnfreezeShard(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen && !f.jobSinceFreeze {
		f.endIdle(f.now())
	}
	f.frozen = false
	return nil
}

// FreezeShardFenced is FreezeShard for an executor with fencing token
// token, checked as a job's (ErrStaleFence when stale), atomically with the
// freeze.
func (f *Fleet) FreezeShardFenced(_ context.Context, token int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fenced(plan.Action{Kind: plan.ActionFreeze, Fence: token}); err != nil {
		return err
	}
	if !f.frozen {
		f.freezes++
		f.frozenAt, f.jobSinceFreeze = f.now(), false
	}
	f.frozen = true
	return nil
}

// UnfreezeShardFenced is UnfreezeShard for an executor with fencing token
// token, checked as a job's (ErrStaleFence when stale), atomically with the
// unfreeze.
func (f *Fleet) UnfreezeShardFenced(_ context.Context, token int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fenced(plan.Action{Kind: plan.ActionUnfreeze, Fence: token}); err != nil {
		return err
	}
	if f.frozen && !f.jobSinceFreeze {
		f.endIdle(f.now())
	}
	f.frozen = false
	return nil
}

// JobsCreated returns how many jobs were created for each server.
func (f *Fleet) JobsCreated() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.created))
	for k, v := range f.created {
		out[k] = v
	}
	return out
}

// Reboots returns how many times each server was really rebooted (a job
// sent its reboot command), by now.
func (f *Fleet) Reboots() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	out := map[string]int{}
	for _, j := range f.jobs {
		f.settle(j, now)
		if j.rebooted {
			out[j.server]++
		}
	}
	return out
}

// Offline returns the servers down now.
func (f *Fleet) Offline() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, id := range f.order {
		if f.down(f.servers[id], f.now()) {
			out = append(out, id)
		}
	}
	return out
}

// Frozen reports whether the shard is frozen, and how often it was frozen.
func (f *Fleet) Frozen() (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen, f.freezes
}

// RebootTime is how long the server's reboot takes from job creation to
// its services being up (if all goes well).
func (s FleetServer) RebootTime() time.Duration {
	return s.Queue + s.Drain + s.Shutdown + s.Boot + s.Services
}

// SetCondition sets a blocking condition's state: Observe and ObserveView
// report it (plan.Observations.Conditions) as checked at that moment,
// succeeding if ok, with output. Safe while in use.
func (f *Fleet) SetCondition(name string, ok bool, output string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conditions == nil {
		f.conditions = map[string]condition{}
	}
	f.conditions[name] = condition{ok, output}
}

// ConditionHolds reports whether the blocking condition holds now (ground
// truth; a condition never set does not).
func (f *Fleet) ConditionHolds(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conditions[name].ok
}

func (f *Fleet) conditionResults(now time.Time) map[string]plan.ConditionResult {
	if len(f.conditions) == 0 {
		return nil
	}
	out := make(map[string]plan.ConditionResult, len(f.conditions))
	for n, c := range f.conditions {
		out[n] = plan.ConditionResult{OK: c.ok, Output: c.output, At: now}
	}
	return out
}

// JobsEnded returns how many servers have a job that has ended by now or
// ended earlier (ground truth): at least as many reboots as any plan can
// have seen done, whatever the clock did since.
func (f *Fleet) JobsEnded() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	n := 0
	for _, id := range f.order {
		for _, j := range f.servers[id].jobs {
			f.settle(j, now)
			if !j.endedAt.IsZero() {
				n++
				break
			}
		}
	}
	return n
}

// HasHeadnode implements plan.HeadnodeFleet: the fleet has a headnode
// (a FleetServer with Headnode set).
func (f *Fleet) HasHeadnode() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head != ""
}

// SetHeadnodeZero makes a fleet without a headnode report
// Observations.HeadnodeServicesUp false, as a plan.Fleet of one's own that
// leaves the field at its zero value does (by default it reports true).
func (f *Fleet) SetHeadnodeZero(zero bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headnodeZero = zero
}

// endIdle ends a stretch of frozen time without a job on the primary at
// now (locked).
func (f *Fleet) endIdle(now time.Time) {
	f.jobSinceFreeze = true
	f.idleMax = max(f.idleMax, now.Sub(f.frozenAt))
}

// FrozenWithoutJob returns the longest time the database shard stayed
// frozen, up to now, before a job on its primary was created (or it was
// unfrozen): ground truth for "a hold never leaves the shard frozen".
func (f *Fleet) FrozenWithoutJob() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.idleMax
	if f.frozen && !f.jobSinceFreeze {
		d = max(d, f.now().Sub(f.frozenAt))
	}
	return d
}

// ShardIdle reports whether the database shard is frozen now and no job
// on its primary was created since it was frozen (ground truth).
func (f *Fleet) ShardIdle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen && !f.jobSinceFreeze
}
