package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
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
			o := jobObs(j, hosts[j.Server])
			obs.Jobs[j.UUID] = o
			return nil
		})
	})
	if err != nil {
		return plan.Observations{}, err
	}
	for _, r := range p.Reboots {
		if _, ok := obs.Jobs[r.JobUUID]; !ok {
			if o, ok := abandonedJobObs(r, p.UUID, hosts[r.ServerUUID]); ok {
				obs.Jobs[r.JobUUID] = o
			}
		}
	}
	var servers []Server
	inPlan := make(map[string]bool, len(p.Reboots))
	for _, r := range p.Reboots {
		inPlan[r.ServerUUID] = true
		if s, ok := f.inv.Server(r.ServerUUID); ok {
			servers = append(servers, s)
		}
	}
	var extra []Server
	for s, h := range hosts {
		if h.SelfRebootBoot != "" && !inPlan[s] {
			if srv, ok := f.inv.Server(s); ok {
				extra = append(extra, srv)
			}
		}
	}
	servers = append(servers, extra...)
	head, hasHead := f.headnode()
	if hasHead {
		servers = append(servers, head)
	}
	healthy, since := f.healthSince(ctx, servers)
	for _, r := range p.Reboots {
		s, ok := f.inv.Server(r.ServerUUID)
		if !ok {
			continue // not in the inventory: unknown, counts as offline
		}
		j, isBusy := busy[s.UUID]
		h := hosts[s.UUID]
		// An abandoned server counts too (the executor will not touch
		// it again, but it may be off, and a power-off the fleet sent
		// before the abandon may still land: powerDown).
		down := f.serverDown(s.UUID, j, isBusy, h, healthy[s.UUID], since[s.UUID])
		obs.Servers[s.UUID] = plan.ServerObs{Down: down, ServicesUp: healthy[s.UUID] && !isBusy && !down}
		if err := f.settle(s.UUID, h, healthy[s.UUID], since[s.UUID]); err != nil {
			return plan.Observations{}, err
		}
	}
	// The executor's own server's reboot may still land though the
	// plan does not reboot it: its record settles all the same.
	for _, s := range extra {
		if err := f.settle(s.UUID, hosts[s.UUID], healthy[s.UUID], since[s.UUID]); err != nil {
			return plan.Observations{}, err
		}
	}
	if hasHead {
		j, isBusy := busy[head.UUID]
		obs.HeadnodeServicesUp = headServicesUp(f.serverDown(head.UUID, j, isBusy, hosts[head.UUID], healthy[head.UUID], since[head.UUID]), isBusy)
	}
	obs.Conditions = f.conditions(ctx, p)
	return obs, nil
}

// headnode is the inventory's headnode (found once: the inventory does
// not change while the fleet is open).
func (f *Fleet) headnode() (Server, bool) {
	f.headOnce.Do(func() {
		for i := range f.inv.Servers {
			if f.inv.Servers[i].Headnode {
				f.head, f.hasHead = f.inv.Servers[i], true
				return
			}
		}
	})
	return f.head, f.hasHead
}

// healthOf returns the servers' last health results, starting a check in
// the background for each result older than HealthTTL (at most 32 at
// once). A result older than HealthMaxAge counts as down. It never waits
// (tests' manual fleets check at once).
func (f *Fleet) healthOf(ctx context.Context, servers []Server) map[string]bool {
	up, _ := f.healthSince(ctx, servers)
	return up
}

// healthSince is healthOf, with, for each server counted up, when the
// check that passed started (monotonic).
func (f *Fleet) healthSince(ctx context.Context, servers []Server) (map[string]bool, map[string]time.Duration) {
	out := make(map[string]bool, len(servers))
	since := make(map[string]time.Duration, len(servers))
	now := f.mono()
	for _, s := range servers {
		if f.opts.manual && !f.opts.slowProbes {
			out[s.UUID] = f.check(ctx, s) == nil
			since[s.UUID] = now
			continue
		}
		f.mu.Lock()
		r, ok := f.health[s.UUID]
		age := now - r.at
		since[s.UUID] = r.at
		if f.opts.manual {
			f.mu.Unlock()
			out[s.UUID] = f.countsUp(r, ok, age)
			continue
		}
		fresh := ok && age < f.opts.HealthTTL && age >= 0
		start := !fresh && !f.probing[s.UUID]
		if start {
			f.probing[s.UUID] = true
		}
		f.mu.Unlock()
		// Only a result young enough counts as up (its age bounded
		// from the start of its check).
		out[s.UUID] = f.countsUp(r, ok, age)
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
	return out, since
}

// countsUp: a health result (had: there is one) of this age counts as up,
// passed and no older than HealthMaxAge.
func (f *Fleet) countsUp(r healthResult, had bool, age time.Duration) bool {
	return had && r.ok && age >= 0 && age <= f.opts.HealthMaxAge
}

// probeResult records a health check of server that started at
// monotonic time at (tests' slow probes).
func (f *Fleet) probeResult(server string, ok bool, at time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, had := f.health[server]; !had || r.at <= at {
		f.health[server] = healthResult{ok: ok, at: at}
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

// jobObs is what the plan sees of job j (h: its server's record).
// abandonedJobObs is what Observe reports for the job of r, a reboot of
// plan planUUID in its job or cancel step, that this fleet state file
// does not have, when the operator abandoned its server in that plan (h:
// the server's record): failed, saying so. Its job was in another fleet
// state file, which the executor was let take the store over from
// because the abandon gave the server up (cmd/rebootctl): a reboot of
// it is never taken for one whose job the fleet collected after it ended
// ("seen once, gone now") and recorded done, though nothing may have
// rebooted the server.
func abandonedJobObs(r plan.Reboot, planUUID string, h hostRecord) (plan.JobObs, bool) {
	if r.JobUUID == "" || r.Step != plan.StepJob && r.Step != plan.StepCancelJob || h.Abandoned == "" || h.AbandonedPlan != planUUID {
		return plan.JobObs{}, false
	}
	return plan.JobObs{Exists: true, Failed: true,
		Error: "abandoned by the operator (" + h.Abandoned + ") in this plan: no job of it is in this executor's fleet state file"}, true
}

func jobObs(j JobRecord, h hostRecord) plan.JobObs {
	o := plan.JobObs{Exists: true, Started: j.Started != nil, Drained: j.Drained != nil,
		Finished: j.Finished != nil && j.State != JobFailed && j.State != JobCancelled,
		Failed:   j.State == JobFailed, Cancelled: j.State == JobCancelled, Error: j.Error}
	if !j.Over() && o.Error == "" && h.LastError.Job == j.UUID && !h.LastError.Cleared {
		o.Error = h.LastError.Text()
	}
	if j.Started != nil {
		o.StartedAt = *j.Started
	}
	if j.Finished != nil {
		o.FinishedAt = *j.Finished
	}
	// For the plan's report: drained, fenced off, read on again after the
	// power cycle, health check passing.
	o.Phases = plan.Phases{Drained: j.Drained, Off: poweredOff(j, h), On: poweredOn(j, h), Healthy: j.Healthy}
	return o
}

// poweredOff is when job j's server went off, as near the hardware as
// the fleet knows it: the first Off reading after the job's power-off was
// sent (the host's FirstOffRead, for this job's request), not later than
// the job saw the server fenced (PoweredOff, which waits StaleReads more
// for fencing evidence); PoweredOff when there is no such reading.
func poweredOff(j JobRecord, h hostRecord) *time.Time {
	if j.PoweredOff == nil || h.Job != j.UUID || h.FirstOffRead.IsZero() ||
		h.FirstOffRead.Before(j.RequestAt) || h.FirstOffRead.After(*j.PoweredOff) {
		return j.PoweredOff
	}
	at := h.FirstOffRead
	return &at
}

// powerDown: the server may be off because of this fleet: its live job
// (j, if busy) is in a power step, or a power cycle of the fleet has not
// settled, also when the operator abandoned it mid-way (AbandonedCycle:
// an abandon stops the fleet's follow-up, not a power-off already sent).
// While a job of the server
// is live this counts whatever its health check says; once none is (its
// job ended, at the latest JobTimeout after its request, saying the
// server may be off), an unsettled power cycle counts until a health check
// begun after every power-off sent to the server can have taken effect
// passes (offLanded): a BMC that never answers would otherwise hold a
// concurrency slot for good (issue 38, A.1), and a soft power-off the BMC
// accepted but the OS has not carried out yet may still land while the
// plan reboots another server in that slot. The fleet goes on reconciling
// it (only ever powering it on), and show and watch list it with its BMC
// error.
//
// The executor's own server's reboot command counts as such a power-off
// (SelfRebootBoot) until its new boot is seen or its cut-off passed.
func powerDown(j JobRecord, busy bool, h hostRecord) bool {
	return busy && powerBusy(j.State) || h.AbandonedCycle || h.SelfRebootBoot != "" ||
		h.Abandoned == "" && (h.Watch && !h.Settled || h.Status.Pending())
}

// settleAbandoned clears the AbandonedCycle of server's record h once a
// health check begun after its cut-off passed (offLanded): no power-off
// of ours can land on it any more, so the abandoned power cycle is
// settled for good, as keep settles an ended job's cycle, and a restart
// of the executor (whose offHorizon falls back to its start) does not
// count the server down, or refuse a job of another plan, again.
func (f *Fleet) settleAbandoned(server string, h hostRecord, healthy bool, since time.Duration) error {
	if !h.AbandonedCycle || !healthy || !f.offLanded(server, since) {
		return nil
	}
	if _, err := f.hosts.modify(server, func(h *hostRecord) error {
		if !h.AbandonedCycle {
			return errSkip
		}
		h.AbandonedCycle = false
		return nil
	}); err != nil {
		return err
	}
	f.debugf("abandoned power cycle settled: a health check begun after its cut-off passed", "server", server)
	return nil
}

// settle settles what may still land on server (settleAbandoned,
// settleSelfReboot).
func (f *Fleet) settle(server string, h hostRecord, healthy bool, since time.Duration) error {
	if err := f.settleAbandoned(server, h, healthy, since); err != nil {
		return err
	}
	return f.settleSelfReboot(server, h, healthy, since)
}

// settleSelfReboot clears the SelfRebootBoot of server's record h once
// its reboot can no longer land: a boot ID other than the one the command
// ran on is read on it (it runs this executor: the reboot happened), or a
// health check begun after its cut-off passed (offLanded: the command
// plus ShutdownMax, or this process's start plus ShutdownMax after a
// restart).
func (f *Fleet) settleSelfReboot(server string, h hostRecord, healthy bool, since time.Duration) error {
	if h.SelfRebootBoot == "" {
		return nil
	}
	rebooted := false
	if server == f.opts.Self {
		if id, err := f.opts.BootID(); err == nil && id != "" && id != h.SelfRebootBoot {
			rebooted = true
		}
	}
	if !rebooted && (!healthy || !f.offLanded(server, since)) {
		return nil
	}
	if _, err := f.hosts.modify(server, func(r *hostRecord) error {
		if r.SelfRebootBoot != h.SelfRebootBoot {
			return errSkip
		}
		r.SelfRebootBoot, r.SelfRebootAt = "", time.Time{}
		if r.Phase == phaseSelfReboot {
			r.Phase, r.PhaseSince = "on", f.now()
		}
		return nil
	}); err != nil {
		return err
	}
	if rebooted {
		f.infof("the executor's own server rebooted: a new boot ID is read", "server", f.serverName(server))
	} else {
		f.infof("the executor's own server did not reboot within --shutdown-max of its reboot command: it counts as up again", "server", f.serverName(server))
	}
	return nil
}

// phaseSelfReboot is the phase shown while the executor's own server's
// reboot command may still land.
const phaseSelfReboot = "rebooting through its OS: reboot command sent, counted offline until its new boot is seen or --shutdown-max after the command"

// offLanded reports whether a health check of server that started at
// checkAt (monotonic) began after every power-off the fleet sent it can
// have taken effect (offHorizon: its last power-off, or this process's
// start, plus ShutdownMax): once such a check passes, the server is on and
// nothing of ours can power it off any more (no power-off is sent once its
// job ended, gated.Off).
func (f *Fleet) offLanded(server string, checkAt time.Duration) bool {
	return checkAt >= f.offHorizon(server)
}

var _ plan.ViewFleet = (*Fleet)(nil)

// ObserveView implements plan.ViewFleet: Observe for the view's reboots
// only (their servers' health checks and jobs), with Offline listing every
// server the fleet may have powered off (a live job in a power step, a
// power cycle not settled, one abandoned mid-way until its cut-off:
// tracked in memory, so that a pass never reads every record of the state
// file), every server the operator abandoned whose check fails, every
// server of the view whose check fails, and every server of the plan the
// inventory lacks. A pass costs
// O(reboots in flight) whatever the plan's size, and health checks run
// for the view's servers only: a server of the plan outside the view
// counts as up unless the fleet is busy with it.
func (f *Fleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	if v.Full() {
		return f.Observe(ctx, v.Plan)
	}
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}, HeadnodeServicesUp: true, ShardHealthy: true, Partial: true}
	f.mu.Lock()
	watch := make(map[string]string, len(f.liveJob)+len(f.keeping))
	for s, id := range f.liveJob {
		watch[s] = id
	}
	for s := range f.keeping {
		if _, ok := watch[s]; !ok {
			watch[s] = ""
		}
	}
	for s := range f.abandoned {
		if _, ok := watch[s]; !ok {
			watch[s] = ""
		}
	}
	for s := range f.selfReboots {
		if _, ok := watch[s]; !ok {
			watch[s] = f.liveJob[s]
		}
	}
	head, hasHead := f.headnode()
	if hasHead {
		// Its record too: whether a power-off of ours may still land on
		// it says whether its services are up.
		if _, ok := watch[head.UUID]; !ok {
			watch[head.UUID] = f.liveJob[head.UUID]
		}
	}
	f.mu.Unlock()
	var servers []Server
	inView := make(map[string]bool, len(v.Reboots))
	for _, r := range v.Reboots {
		inView[r.ServerUUID] = true
		if s, ok := f.inv.Server(r.ServerUUID); ok {
			servers = append(servers, s)
			if _, ok := watch[s.UUID]; !ok {
				f.mu.Lock()
				watch[s.UUID] = f.liveJob[s.UUID]
				f.mu.Unlock()
			}
		}
	}
	// Servers kept reconciled outside the view (a power cycle that has not
	// settled) are health-checked too: once their job ended, their health
	// check says whether they count as offline (offLanded).
	for s, id := range watch {
		if !inView[s] && id == "" && (!hasHead || s != head.UUID) {
			if srv, ok := f.inv.Server(s); ok {
				servers = append(servers, srv)
			}
		}
	}
	if hasHead {
		servers = append(servers, head)
	}
	hosts := make(map[string]hostRecord, len(watch))
	live := make(map[string]JobRecord, len(watch))
	err := f.db.View(func(tx *bolt.Tx) error {
		hb, jb := tx.Bucket(bucketHosts), tx.Bucket(bucketJobs)
		for s, id := range watch {
			if raw := hb.Get([]byte(s)); raw != nil {
				var h hostRecord
				if err := json.Unmarshal(raw, &h); err != nil {
					return fmt.Errorf("inventory: host %s: %w", s, err)
				}
				hosts[s] = h
			}
			if id == "" {
				continue
			}
			if raw := jb.Get([]byte(id)); raw != nil {
				var j JobRecord
				if err := json.Unmarshal(raw, &j); err != nil {
					return fmt.Errorf("inventory: job %s: %w", id, err)
				}
				if !j.Over() {
					live[s] = j
				}
			}
		}
		for _, r := range v.Reboots {
			if r.JobUUID == "" {
				continue
			}
			raw := jb.Get([]byte(r.JobUUID))
			if raw == nil {
				var h hostRecord
				if hr := hb.Get([]byte(r.ServerUUID)); hr != nil && json.Unmarshal(hr, &h) == nil {
					if o, ok := abandonedJobObs(r, v.UUID, h); ok {
						obs.Jobs[r.JobUUID] = o
					}
				}
				continue
			}
			var j JobRecord
			if err := json.Unmarshal(raw, &j); err != nil {
				return fmt.Errorf("inventory: job %s: %w", r.JobUUID, err)
			}
			obs.Jobs[j.UUID] = jobObs(j, hosts[j.Server])
		}
		return nil
	})
	if err != nil {
		return plan.Observations{}, err
	}
	healthy, since := f.healthSince(ctx, servers)
	offline := map[string]bool{}
	for _, r := range v.Reboots {
		s, ok := f.inv.Server(r.ServerUUID)
		if !ok {
			offline[r.ServerUUID] = true // not in the inventory: cannot observe it
			continue
		}
		j, isBusy := live[s.UUID]
		down := f.serverDown(s.UUID, j, isBusy, hosts[s.UUID], healthy[s.UUID], since[s.UUID])
		obs.Servers[s.UUID] = plan.ServerObs{Down: down, ServicesUp: healthy[s.UUID] && !isBusy && !down}
		if down {
			offline[s.UUID] = true
		}
	}
	for s, h := range hosts {
		j, isBusy := live[s]
		if inView[s] {
			continue
		}
		if powerDown(j, isBusy, h) && (isBusy || !healthy[s] || !f.offLanded(s, since[s])) || h.Abandoned != "" && !healthy[s] {
			offline[s] = true
		}
	}
	for s, h := range hosts {
		if err := f.settle(s, h, healthy[s], since[s]); err != nil {
			return plan.Observations{}, err
		}
	}
	for _, s := range f.missingOf(v.Members) {
		offline[s] = true
	}
	for s := range offline {
		obs.Offline = append(obs.Offline, s)
	}
	sort.Strings(obs.Offline)
	if hasHead {
		j, isBusy := live[head.UUID]
		obs.HeadnodeServicesUp = headServicesUp(f.serverDown(head.UUID, j, isBusy, hosts[head.UUID], healthy[head.UUID], since[head.UUID]), isBusy)
	}
	obs.Conditions = f.conditions(ctx, v.Plan)
	return obs, nil
}

// serverDown is the fleet's down accounting of server (its live job j if
// busy, its host record h, whether its health check counts up and when
// that check began): down while the check fails, or while the fleet may
// have powered it off (powerDown) and, once no job is live on it, until a
// check begun after every power-off sent to it can have taken effect
// passes (offLanded).
func (f *Fleet) serverDown(server string, j JobRecord, busy bool, h hostRecord, healthy bool, since time.Duration) bool {
	return !healthy || powerDown(j, busy, h) && (busy || !f.offLanded(server, since))
}

// headServicesUp: the headnode's services count as up only when it does
// not count as down by the fleet's own accounting (its check passes and
// no power-off of ours may still land: serverDown) and no job is busy
// with it.
func headServicesUp(down, busy bool) bool {
	return !down && !busy
}

// missingOf returns the servers of a plan (its view's Members) that the
// inventory lacks. A plan's Members map is shared between its views and
// never modified, and the inventory does not change while the fleet is
// open: the answer is kept for the last map asked about, so a pass does
// not look up every server of the plan.
func (f *Fleet) missingOf(members map[string]int) []string {
	if members == nil {
		return nil
	}
	key := reflect.ValueOf(members).Pointer()
	f.mu.Lock()
	if f.missingKey == key && f.missingLen == len(members) {
		out := f.missingIDs
		f.mu.Unlock()
		return out
	}
	f.mu.Unlock()
	var out []string
	for s := range members {
		if _, ok := f.inv.Server(s); !ok {
			out = append(out, s)
		}
	}
	f.mu.Lock()
	f.missingKey, f.missingLen, f.missingIDs = key, len(members), out
	f.mu.Unlock()
	return out
}
