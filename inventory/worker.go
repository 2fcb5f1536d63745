package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/internal/termsafe"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	bolt "go.etcd.io/bbolt"
)

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
	h, err := f.hosts.load(server)
	if err == nil {
		f.mu.Lock()
		if h.needsKeeping() {
			f.keeping[server] = true
		} else {
			delete(f.keeping, server)
		}
		f.mu.Unlock()
	}
	if !live && !keeping {
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
	if server == f.opts.Self && f.opts.Self != "" {
		f.mu.Lock()
		_, live := f.liveJob[server]
		f.mu.Unlock()
		if !live {
			return f.dropCycle(server, false, "power cycle of the executor's own server dropped: it runs there, so it is on")
		}
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
	if res.Decision.Phase == reboot.PhasePoweringOff && rd.state != power.StateUnknown && !f.cycleJobPowers(server, h.Job) {
		// gated.Off holds every power-off once the job ended: say what
		// the fleet really does.
		phase = "its job ended: watched until no earlier power-off can land (powered on if it reads off, never off)"
	}
	settled := rerr == nil && read && rd.state == power.StateOn && rd.at-stale >= last && !h.hasRequest() && !h.Status.Pending()
	if !settled && h.Status.Pending() && !h.hasRequest() && !f.cycleJobPowers(server, h.Job) &&
		read && rd.state == power.StateOn && rd.at-stale >= max(last, f.offHorizon(server)) {
		// Its job ended and nothing powers the server off any more
		// (gated.Off): it read on at an instant after any power-off sent
		// before could take effect, so what is left of the power cycle
		// can never complete; dropped, the server is settled.
		return f.dropCycle(server, true, "power cycle dropped after its job ended: the server reads on, and no power-off sent before can still take effect")
	}
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
				// The reboot is over: nothing of it may be off any more.
				r.Settled, r.Watch, r.OffMaybe = true, false, false
			}
			return nil
		})
		if err != nil {
			return true
		}
	}
	return h.needsKeeping()
}

// dropCycle drops what is left of a power cycle of the fleet on server
// (why says why, in the log) once no job of it is live, so that the fleet
// no longer reconciles it: on the executor's own server (its job ended,
// saying it may be off, before the executor knew it ran there: the
// executor runs on it, so it is on, and the cycle could only be completed
// through its BMC, which never powers it off); on any server that reads
// on past Options.ShutdownMax after its last power-off (settled: nothing
// of the cycle can take effect any more). It reports whether it must
// look again.
func (f *Fleet) dropCycle(server string, settled bool, why string) bool {
	h, err := f.hosts.modify(server, func(h *hostRecord) error {
		for k := range h.Annotations {
			if reboot.IsRebootAnnotation(k) {
				h.Annotations = copyMap(h.Annotations)
				delete(h.Annotations, k)
			}
		}
		h.Status.PendingRebootSince, h.Status.Seen, h.Status.LastRequestSeen = time.Time{}, nil, time.Time{}
		h.Status.Mode = power.ModeSoft
		h.Watch, h.Settled, h.OffMaybe = false, settled, false
		h.Phase, h.PhaseSince = "", f.now()
		if settled {
			h.Phase = "on"
		}
		return nil
	})
	if err != nil {
		return true
	}
	f.infof(why, "server", f.serverName(server))
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
			in.SelfCutOff = f.mono() >= f.offHorizon(s.UUID)
			if j.State == JobDrained {
				in.OthersBusy = f.othersBusy(s.UUID)
			}
		} else if s.UUID != "" && f.selfWhy(s.UUID) != "" {
			in.MaybeSelf = true
		}
		if j.State == JobRebooting && j.RequestValue != "" {
			t := reboot.Ticket{Host: j.Server, Annotation: reboot.AnnotationPrefix + j.key(), Value: j.RequestValue, At: j.RequestAt}
			in.Fenced = h.Annotations[t.Annotation] == t.Value && fencedForRequest(h.Status, t, f.now())
		}
		if j.State == JobBooted && !j.Cancel {
			in.Healthy = f.check(ctx, s) == nil
		}
		st := decideJob(in, f.now())
		if st.Act == actSelfReboot {
			// The executor's own reboot command is this job's first
			// power-off: asked of the plan like a BMC one (mayPowerOff),
			// before "sent" is recorded, so a refusal records nothing.
			if why, retry := f.selfRebootAllowed(ctx, j); why != "" {
				if retry {
					f.infof("job step failed; retrying", "job", id, "server", s.Hostname, "step", st.Act.String(), "error", why)
					return true
				}
				continue // cancelled: decided again (never sent)
			}
			// Held from before "sent" is recorded: from then on no other
			// server is powered off (offHorizon) until its cut-off.
			f.mu.Lock()
			f.selfCmds[s.UUID] = true
			f.mu.Unlock()
		}
		if st.Changed {
			if j, err = f.persist(j, st.Job); err != nil {
				f.releaseSelfCmd(s.UUID, st.Act)
				f.infof("job state not saved", "job", id, "error", err.Error())
				return true
			}
			f.logStep(j)
		}
		if f.crashAt("job " + st.Job.State + " " + st.Act.String()) {
			f.releaseSelfCmd(s.UUID, st.Act)
			return false
		}
		if st.Act == actNone {
			if !st.Changed {
				return true // wait
			}
			continue
		}
		aerr := f.act(ctx, s, j, st.Act)
		f.releaseSelfCmd(s.UUID, st.Act)
		if f.isDead() || ctx.Err() != nil {
			return false
		}
		if st.Act == actSelfReboot {
			// The grace of a failed command counts from when it
			// returned or was killed, not from before it ran.
			ended := f.now()
			msg := ""
			if aerr != nil && st.RecordErr != "" {
				msg = st.RecordErr + aerr.Error()
			}
			if j, err = f.update(j.UUID, func(cur *JobRecord) error {
				cur.RebootSentAt, cur.RebootError = &ended, msg
				return nil
			}); err == nil && msg != "" {
				f.warnf("job step failed", "job", id, "server", s.Hostname, "step", st.Act.String(), "error", msg)
			}
			return true
		}
		switch {
		case errors.Is(aerr, errDrainInterrupted):
			// Cancelled or abandoned while draining: decided again from
			// the job as it is now (it undoes the drain and ends).
			continue
		case aerr != nil && st.FailOnErr != "":
			now := f.now()
			failed := j
			failed.State, failed.StateAt, failed.Ended, failed.Error = JobFailed, now, &now, st.FailOnErr+aerr.Error()
			if st.Act != actUndrain {
				// Every end undoes the drain (a failed or timed-out
				// drain may have cordoned the server already).
				failed.State, failed.EndAs, failed.Ended = JobUndraining, JobFailed, nil
			}
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

// selfRebootAllowed asks Options.PlanCheck whether job j may run the
// executor's own reboot command now: "" if so; else why not, and whether
// to retry (the plan cannot be read) or not (the plan no longer runs the
// job: it is cancelled).
func (f *Fleet) selfRebootAllowed(ctx context.Context, j JobRecord) (why string, retry bool) {
	if f.opts.PlanCheck == nil {
		return "", false
	}
	ok, why, err := f.opts.PlanCheck(ctx, j.Plan, j.UUID)
	if err != nil {
		return "reboot command not run: its plan cannot be read: " + err.Error(), true
	}
	if ok {
		return "", false
	}
	if why == "" {
		why = "its plan no longer runs it"
	}
	if err := f.cancelJob(j.UUID, why); err != nil {
		return "reboot command not run: " + why + " (cancel not saved: " + err.Error() + ")", true
	}
	return why, false
}

// releaseSelfCmd ends the hold stepJob put on the other servers'
// power-offs for a self reboot act (a no-op for any other act).
func (f *Fleet) releaseSelfCmd(server string, a jobAct) {
	if a != actSelfReboot {
		return
	}
	f.mu.Lock()
	delete(f.selfCmds, server)
	f.mu.Unlock()
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
			return f.drain(ctx, s, j)
		}
	case actUndrain:
		if len(s.Undrain) > 0 {
			return f.command(ctx, s.Undrain)
		}
	case actSelfReboot:
		if len(s.Reboot) == 0 {
			return fmt.Errorf("inventory: %s has no reboot command", s.Hostname)
		}
		// Before it runs: from now on the reboot may land, whatever the
		// command answers or the job and the operator decide
		// (hostRecord.SelfRebootBoot). Its cut-off counts from now, and
		// again from when the command returned or was killed (it may
		// hang up to the command timeout, longer than ShutdownMax, and
		// have been accepted all the same).
		now := f.now()
		if _, err := f.hosts.modify(s.UUID, func(h *hostRecord) error {
			h.SelfRebootBoot, h.SelfRebootAt = j.BootID, now
			h.Phase, h.PhaseSince = phaseSelfReboot, now
			return nil
		}); err != nil {
			return fmt.Errorf("inventory: %s: reboot command not run: %w", s.Hostname, err)
		}
		f.noteOff(s.UUID)
		if f.crashAt("self reboot " + s.UUID) {
			return errKilled
		}
		f.mu.Lock()
		f.selfCmds[s.UUID] = true
		f.mu.Unlock()
		err := f.command(ctx, s.Reboot)
		f.noteOff(s.UUID)
		f.mu.Lock()
		delete(f.selfCmds, s.UUID)
		f.mu.Unlock()
		ended := f.now()
		_, _ = f.hosts.modify(s.UUID, func(h *hostRecord) error {
			if h.SelfRebootBoot != j.BootID {
				return errSkip // its new boot was seen meanwhile
			}
			h.SelfRebootAt = ended
			return nil
		})
		return err
	case actWithdrawSelf:
		_, err := f.hosts.modify(s.UUID, func(h *hostRecord) error {
			for k := range h.Annotations {
				if k == ann {
					h.Annotations = copyMap(h.Annotations)
					delete(h.Annotations, k)
				}
			}
			if h.Job == j.UUID {
				// The executor runs here, so the server is on: no
				// power cycle of it is pending, nothing to watch.
				h.Status.PendingRebootSince, h.Status.Seen, h.Status.LastRequestSeen = time.Time{}, nil, time.Time{}
				h.Status.Mode = power.ModeSoft
				h.Watch, h.Settled, h.OffMaybe = false, false, false
			}
			return nil
		})
		return err
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
		if err == nil {
			f.mu.Lock()
			f.keeping[s.UUID] = true
			f.mu.Unlock()
		}
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
			if h.OffMaybe {
				h.Watch, h.Settled = true, false
			} else {
				// No power-off of this reboot was sent (or every one
				// was refused): the server was never touched, so nothing
				// is left to confirm; no BMC reading is waited for.
				h.Watch = false
			}
			return nil
		})
		return err
	}
	return nil
}

// errDrainInterrupted: a job's drain command was stopped because the job
// was cancelled or its server abandoned meanwhile.
var errDrainInterrupted = errors.New("inventory: drain interrupted: the job was cancelled")

// drain runs server s's drain command for job j, interrupted as soon as
// the job is cancelled or the server abandoned (cancelJob, Abandon), not
// at the command's timeout (up to 15 minutes).
func (f *Fleet) drain(ctx context.Context, s Server, j JobRecord) error {
	dctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	f.mu.Lock()
	f.draining[j.UUID] = func() { stop(errDrainInterrupted) }
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.draining, j.UUID)
		f.mu.Unlock()
	}()
	// A cancel or an abandon recorded between the decision and the
	// registration above found nothing to interrupt: look once more.
	if cur, ok, err := f.job(j.UUID); err == nil && ok && cur.Cancel {
		return errDrainInterrupted
	}
	if h, err := f.hosts.load(s.UUID); err == nil && h.Abandoned != "" {
		return errDrainInterrupted
	}
	err := f.command(dctx, s.Drain)
	if err != nil && errors.Is(context.Cause(dctx), errDrainInterrupted) {
		return fmt.Errorf("%w: %w", errDrainInterrupted, err)
	}
	return err
}

// interruptDrain stops job id's running drain command, if any.
func (f *Fleet) interruptDrain(id string) {
	f.mu.Lock()
	stop := f.draining[id]
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// commandWaitDelay bounds how long a command that was killed (its timeout
// or an interrupt) may keep the fleet waiting for its output pipe.
const commandWaitDelay = 2 * time.Second

// command runs argv with the command timeout: it returns at most
// commandWaitDelay after the timeout or ctx's end, or after argv's own
// process exits, its process group killed either way.
func (f *Fleet) command(ctx context.Context, argv []string) error {
	if f.opts.command != nil {
		return f.opts.command(ctx, argv)
	}
	ctx, cancel := context.WithTimeout(ctx, f.inv.Defaults.commandTimeout())
	defer cancel()
	// Explicit environment: never the executor's whole environment (BMC
	// passwords). At the timeout or an interrupt the command's whole
	// process group is killed (a wrapper script's children too); when it
	// exits, what is left of its group is killed; the wait for its output
	// is bounded by commandWaitDelay.
	out, err := runGrouped(ctx, argv, f.inv.CommandEnv(nil))
	if err != nil {
		msg := termsafe.Clean(string(out))
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		return fmt.Errorf("%s: %w: %s", argv[0], err, msg)
	}
	return nil
}

// othersBusy reports whether a server other than self has a power cycle
// of this fleet that has not ended: a live job in a power step, or power
// bookkeeping not settled.
func (f *Fleet) othersBusy(self string) bool {
	f.mu.Lock()
	jobs := make(map[string]string, len(f.liveJob))
	for s, id := range f.liveJob {
		jobs[s] = id
	}
	f.mu.Unlock()
	for s, id := range jobs {
		if s == self {
			continue
		}
		if j, ok, err := f.job(id); err != nil || ok && powerBusy(j.State) {
			return true
		}
	}
	busy := false
	_ = f.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			if string(k) == self || busy {
				return nil
			}
			var h hostRecord
			if err := json.Unmarshal(v, &h); err != nil || h.needsKeeping() {
				busy = true
			}
			return nil
		})
	})
	return busy
}

// fencedForRequest: the reboot controller holds evidence that the server
// was off after it saw this very request (the request is in the pending
// reboot's Seen list and the evidence covers it: Status.Covers), not
// merely after the request's instant. A wall clock stepped back between
// two reboots, and a request chosen then but written after a crash, would
// otherwise be fenced by the previous reboot's power-off: "done" without
// a power cycle of this reboot. (reboot.FencedFor with a ticket instant
// no evidence can follow asks exactly the Covers question.)
func fencedForRequest(st reboot.Status, t reboot.Ticket, now time.Time) bool {
	if !st.Covers() {
		return false
	}
	t.At = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	return reboot.FencedFor(st, t, now)
}
