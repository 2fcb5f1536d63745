package fake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// Compile-time checks.
var (
	_ plan.Fleet = (*Fleet)(nil)
	_ plan.Store = (*PlanStore)(nil)
)

// ErrUnavailable is returned by a Fleet while its headnode is down: the
// executor that runs there is not running either.
var ErrUnavailable = errors.New("fake: headnode down, executor unavailable")

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
}

type fleetJob struct {
	server  string
	created time.Time
}

// Fleet is a simulated datacenter for plans: reboot jobs unfold on the
// clock, servers go down and come back, the database shard can be frozen.
// CreateJob is idempotent by job UUID, and the Fleet counts jobs and
// reboots per server, so tests can check that nothing happens twice. Not
// for production.
type Fleet struct {
	mu      sync.Mutex
	now     func() time.Time
	servers map[string]*FleetServer
	order   []string
	jobs    map[string]fleetJob
	created map[string]int
	// ShardPrimary is the server hosting the shard's primary.
	shardPrimary string
	frozen       bool
	freezes      int
}

// NewFleet returns a fleet of copies of servers on the clock now.
func NewFleet(now func() time.Time, shardPrimary string, servers ...FleetServer) *Fleet {
	f := &Fleet{now: now, servers: map[string]*FleetServer{}, jobs: map[string]fleetJob{},
		created: map[string]int{}, shardPrimary: shardPrimary}
	for _, s := range servers {
		s := s
		f.servers[s.UUID] = &s
		f.order = append(f.order, s.UUID)
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
		out = append(out, plan.Server{UUID: s.UUID, Hostname: s.Hostname, Platform: s.Platform, Core: s.Core, Headnode: s.Headnode})
	}
	return out
}

// times returns the job's milestones for server s.
func (s *FleetServer) times(created time.Time) (started, drained, finished, up time.Time) {
	started = created.Add(s.Queue)
	drained = started.Add(s.Drain)
	finished = drained.Add(s.Shutdown)
	up = finished.Add(s.Boot + s.Services)
	return
}

// down reports whether server s is down at now (locked).
func (f *Fleet) down(s *FleetServer, now time.Time) bool {
	if s.DownNow {
		return true
	}
	for _, j := range f.jobs {
		if j.server != s.UUID || s.FailJob {
			continue
		}
		_, _, finished, _ := s.times(j.created)
		if !now.Before(finished) && now.Before(finished.Add(s.Boot)) {
			return true
		}
	}
	return false
}

func (f *Fleet) servicesUp(s *FleetServer, now time.Time) bool {
	if f.down(s, now) {
		return false
	}
	for _, j := range f.jobs {
		if j.server != s.UUID || s.FailJob {
			continue
		}
		_, _, finished, up := s.times(j.created)
		if !now.Before(finished) && (s.NeverUp || now.Before(up)) {
			return false
		}
	}
	return true
}

func (f *Fleet) headnodeDown(now time.Time) bool {
	for _, s := range f.servers {
		if s.Headnode && f.down(s, now) {
			return true
		}
	}
	return false
}

// Observe implements plan.Fleet.
func (f *Fleet) Observe(_ context.Context, p plan.Plan) (plan.Observations, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.headnodeDown(now) {
		return plan.Observations{}, ErrUnavailable
	}
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{},
		HeadnodeServicesUp: true, ShardPrimary: f.shardPrimary, ShardFrozen: f.frozen, ShardHealthy: true}
	for _, s := range f.servers {
		up := f.servicesUp(s, now)
		obs.Servers[s.UUID] = plan.ServerObs{Down: f.down(s, now), ServicesUp: up}
		if s.Headnode && !up {
			obs.HeadnodeServicesUp = false
		}
	}
	for id, j := range f.jobs {
		s := f.servers[j.server]
		started, drained, finished, _ := s.times(j.created)
		o := plan.JobObs{Exists: true, Started: !now.Before(started), Drained: !now.Before(drained)}
		if o.Started {
			o.StartedAt = started
		}
		switch {
		case s.FailJob && o.Drained:
			o.Failed, o.Error = true, "simulated job failure on "+s.Hostname
		case !now.Before(finished):
			o.Finished, o.FinishedAt = true, finished
		}
		obs.Jobs[id] = o
	}
	return obs, nil
}

// CreateJob implements plan.Fleet.
func (f *Fleet) CreateJob(_ context.Context, a plan.Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.headnodeDown(now) {
		return ErrUnavailable
	}
	if _, ok := f.servers[a.Server]; !ok {
		return fmt.Errorf("fake: no server %s", a.Server)
	}
	if _, ok := f.jobs[a.JobUUID]; ok {
		return nil
	}
	f.jobs[a.JobUUID] = fleetJob{server: a.Server, created: now}
	f.created[a.Server]++
	return nil
}

// FreezeShard implements plan.Fleet.
func (f *Fleet) FreezeShard(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.freezes++
	}
	f.frozen = true
	return nil
}

// UnfreezeShard implements plan.Fleet.
func (f *Fleet) UnfreezeShard(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
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

// PlanStore is an in-memory plan.Store that keeps encoded documents, so
// that every Get decodes what Put encoded. Not for production.
type PlanStore struct {
	mu       sync.Mutex
	docs     map[string][]byte
	failPuts int
	puts     int
	between  interloper
}

// FailPuts makes the next n Puts fail (a crash before the write). Safe
// while in use.
func (s *PlanStore) FailPuts(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPuts += n
}

// SetInterloper installs a second writer, called with the plan's UUID
// without the store's lock just before every Put is applied (an operator's
// run, stop or cancel between the executor's read and write). nil removes
// it. Safe while in use.
func (s *PlanStore) SetInterloper(f func(uuid string)) { s.between.set(f) }

// NewPlanStore returns an empty store.
func NewPlanStore() *PlanStore { return &PlanStore{docs: map[string][]byte{}} }

// Get implements plan.Store.
func (s *PlanStore) Get(_ context.Context, uuid string) (plan.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[uuid]
	if !ok {
		return plan.Plan{}, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	p, err := plan.Decode(d)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("%w: %v", plan.ErrCorrupt, err)
	}
	return p, nil
}

// Put implements plan.Store.
func (s *PlanStore) Put(_ context.Context, p plan.Plan) error {
	s.between.run(p.UUID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPuts > 0 {
		s.failPuts--
		return errors.New("fake: injected store failure")
	}
	d, err := plan.Encode(p)
	if err != nil {
		return err
	}
	s.docs[p.UUID] = d
	s.puts++
	return nil
}

// List implements plan.Store.
func (s *PlanStore) List(ctx context.Context) ([]plan.Plan, error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.docs))
	for id := range s.docs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var out []plan.Plan
	for _, id := range ids {
		p, err := s.Get(ctx, id)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// RebootTime is how long the server's reboot takes from job creation to
// its services being up (if all goes well).
func (s FleetServer) RebootTime() time.Duration {
	return s.Queue + s.Drain + s.Shutdown + s.Boot + s.Services
}
