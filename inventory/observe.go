package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rebootkit/rebootkit/plan"
)

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
		down := !healthy[s.UUID] || isBusy && powerBusy(j.State) || h.Abandoned == "" && (h.Watch && !h.Settled || h.Status.Pending())
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
// once). A result older than HealthMaxAge counts as down. It never waits
// (tests' manual fleets check at once).
func (f *Fleet) healthOf(ctx context.Context, servers []Server) map[string]bool {
	out := make(map[string]bool, len(servers))
	now := f.mono()
	for _, s := range servers {
		if f.opts.manual {
			out[s.UUID] = f.check(ctx, s) == nil
			continue
		}
		f.mu.Lock()
		r, ok := f.health[s.UUID]
		age := now - r.at
		fresh := ok && age < f.opts.HealthTTL && age >= 0
		start := !fresh && !f.probing[s.UUID]
		if start {
			f.probing[s.UUID] = true
		}
		f.mu.Unlock()
		// Only a result young enough counts as up (its age bounded
		// from the start of its check).
		out[s.UUID] = ok && r.ok && age >= 0 && age <= f.opts.HealthMaxAge
		if start {
			f.wg.Add(1)
			go func(s Server) {
				defer f.wg.Done()
				select {
				case f.probeSem <- struct{}{}:
				case <-f.ctx.Done():
					return
				}
				at := f.mono()
				ok := f.check(f.ctx, s) == nil
				<-f.probeSem
				f.mu.Lock()
				f.health[s.UUID] = healthResult{ok: ok, at: at}
				delete(f.probing, s.UUID)
				f.mu.Unlock()
			}(s)
		}
	}
	return out
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
