package inventory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/internal/termsafe"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

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
	at, wall := g.f.mono(), g.f.now()
	st, err := g.inner.State(ctx)
	if err != nil {
		st = power.StateUnknown
	}
	g.f.mu.Lock()
	g.f.reads[g.server] = reading{state: st, at: at}
	g.f.mu.Unlock()
	g.f.noteCall(g.server, "state", err)
	if st == power.StateOff {
		g.f.noteOffRead(g.server, wall)
	}
	return st, err
}

// noteOffRead records, for the report, the first Off reading (begun at
// wall) after a power-off of the server's current reboot was sent.
func (f *Fleet) noteOffRead(server string, wall time.Time) {
	h, err := f.hosts.load(server)
	if err != nil || !h.OffMaybe || !h.FirstOffRead.IsZero() {
		return
	}
	_, _ = f.hosts.modify(server, func(r *hostRecord) error {
		if !r.OffMaybe || !r.FirstOffRead.IsZero() {
			return errSkip
		}
		r.FirstOffRead = wall
		return nil
	})
}

func (g *gated) On(ctx context.Context) error {
	if g.f.crashAt("power on " + g.server) {
		return errKilled
	}
	if h, err := g.f.hosts.load(g.server); err != nil || h.Abandoned != "" {
		return &power.Error{Op: "on", Class: power.ClassBusy, Message: "held: abandoned by the operator, or the fleet state is unreadable"}
	}
	ctx, cancel := g.bounded(ctx)
	defer cancel()
	g.f.noteCommand(g.server)
	err := g.inner.On(ctx)
	if g.f.crashAt("powered on " + g.server) {
		return errKilled
	}
	g.f.noteCall(g.server, "on", err)
	g.f.logPower(g.server, "on", err)
	return err
}

// logPower logs a power command sent to a server's BMC and its answer
// (Info: rebootctl executor -v).
func (f *Fleet) logPower(server, op string, err error) {
	if err != nil {
		f.infof("power command failed", "server", f.serverName(server), "op", op, "error", termsafe.Clean(operatorText(err, f.serverName(server))))
		return
	}
	f.infof("power command accepted", "server", f.serverName(server), "op", op)
}

// TogglesOff passes on the inner controller's reboot.Toggler (false if
// it has none), so that the reboot controller's press rule applies.
func (g *gated) TogglesOff(m power.Mode) bool {
	t, ok := g.inner.(reboot.Toggler)
	return ok && t.TogglesOff(m)
}

// TogglesOn passes on the inner controller's reboot.OnToggler (false if
// it has none).
func (g *gated) TogglesOn() bool {
	t, ok := g.inner.(reboot.OnToggler)
	return ok && t.TogglesOn()
}

func (g *gated) Off(ctx context.Context, m power.Mode) error {
	if g.f.isDead() {
		return errKilled
	}
	h, err := g.f.hosts.load(g.server)
	if err != nil {
		return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "fleet state unreadable: " + err.Error()}
	}
	if h.Abandoned != "" {
		return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "held: abandoned by the operator (" + h.Abandoned + ")"}
	}
	// Before anything else, whatever was recorded: the executor's own
	// server (or one that may be it) is never powered off through its
	// BMC, not even to complete a power cycle that began before the
	// executor knew it ran there.
	if why := g.f.selfWhy(g.server); why != "" {
		return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "held: " + why}
	}
	if !g.f.cycleJobPowers(g.server, h.Job) {
		// Its job ended or gave up on its power cycle (at the latest
		// JobTimeout after its request, saying the server may be off:
		// it then only undrains), or there is none: the plan may
		// have started another reboot in its slot, so nothing powers it
		// off any more, not even to complete a power cycle whose
		// power-off may have been accepted. The fleet only powers it on
		// (if it reads off), and counts it offline until a power-off
		// sent before can no longer take effect (offLanded).
		return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Message: "held: its job ended or gave up on its power cycle; the fleet only powers it on"}
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
			r.OffMaybe, r.FirstOffRead = true, time.Time{}
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
	g.f.noteOff(g.server)
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
	g.f.logPower(g.server, power.OpName(m), err)
	return err
}

// mayPowerOff says why the server must not be powered off now ("" if it
// may): only its live job, not cancelled, in its reboot step, whose plan
// still runs it, and never the executor's own server.
func (f *Fleet) mayPowerOff(ctx context.Context, server string, h hostRecord) string {
	f.mu.Lock()
	id, live := f.liveJob[server]
	selfJob := f.liveJob[f.opts.Self]
	var pending []string
	for s := range f.selfReboots {
		if s != server {
			pending = append(pending, s)
		}
	}
	f.mu.Unlock()
	for _, s := range pending {
		// Self last, alone, also once its job ended (failed, abandoned):
		// a reboot command sent may still land (hostRecord.SelfRebootBoot)
		// until its cut-off (then the server only counts as down until a
		// health check passes: settleSelfReboot).
		if sh, err := f.hosts.load(s); err != nil || sh.SelfRebootBoot != "" && f.mono() < f.offHorizon(s) {
			return "the reboot command of this executor's own server (" + f.serverName(s) + ") may still take it down: " +
				"nothing else is powered off until its new boot is seen, or --shutdown-max after the command"
		}
	}
	if f.opts.Self != "" && selfJob != "" {
		// Self last, alone: while this executor's server reboots
		// through its OS, nothing else is powered off.
		// Once its command was sent and its cut-off passed, the record
		// above says all (the job ends at its next step).
		if sj, ok, err := f.job(selfJob); err != nil || ok && sj.State == JobSelfReboot &&
			(sj.RebootSentBoot != sj.BootID || f.mono() < f.offHorizon(f.opts.Self)) {
			return "this executor's own server is rebooting"
		}
	}
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

// cycleJobPowers reports whether job (the one whose power cycle the host
// record holds) is the server's live job and still owns its power cycle:
// in a power step (requesting, rebooting, withdrawing) and not giving it
// up. A job that gave up on its power cycle (JobTimeout after its request:
// the request released, the job undraining with EndAs set) no longer owns
// it, though it stays live until its undrain ends: from then on the fleet
// only powers the server on (issue 38, review round 2).
func (f *Fleet) cycleJobPowers(server, job string) bool {
	f.mu.Lock()
	live := job != "" && f.liveJob[server] == job
	f.mu.Unlock()
	if !live {
		return false
	}
	j, ok, err := f.job(job)
	return err == nil && ok && !j.Over() && j.EndAs == "" && powerBusy(j.State)
}

// noteOff records when a power-off was last sent to server (monotonic).
func (f *Fleet) noteOff(server string) {
	m := f.mono()
	f.mu.Lock()
	f.lastOff[server] = m
	f.mu.Unlock()
}

// offHorizon is the monotonic instant after which no power-off this
// process or an earlier one sent to server can take effect any more: its
// last power-off (or this process's start, for one an earlier process
// sent) plus Options.ShutdownMax; never while a reboot command of the
// server runs (its cut-off counts from when it returns or is killed).
func (f *Fleet) offHorizon(server string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offHorizonLocked(server)
}

// offHorizonLocked is offHorizon with f.mu held.
func (f *Fleet) offHorizonLocked(server string) time.Duration {
	if f.selfCmds[server] {
		return math.MaxInt64
	}
	return max(f.lastOff[server], f.start) + f.opts.ShutdownMax
}

func (f *Fleet) noteCommand(server string) {
	m := f.mono()
	f.mu.Lock()
	f.lastCmd[server] = m
	f.mu.Unlock()
}

// noteCall records a BMC call's outcome: an error as the server's last
// BMC error (written when it changes, or a minute after the last write),
// logged at Warn at most once a minute per server and class, and counted;
// a success clears the recorded error, one of a previous run included. A
// call the Pool refused during a login back-off reached no BMC: neither
// recorded nor counted.
func (f *Fleet) noteCall(server, op string, err error) {
	if errors.Is(err, errKilled) {
		return
	}
	var pe *power.Error
	if errors.As(err, &pe) && strings.HasPrefix(pe.Message, "held: ") {
		return // the fleet's own gate, not the BMC
	}
	if errors.Is(err, power.ErrBackoff) {
		// The Pool refused the call during a login back-off: nothing
		// reached the BMC. The error that started the back-off stands;
		// not counted, not recorded again (its countdown changes every
		// second).
		return
	}
	now, m := f.now(), f.mono()
	f.mu.Lock()
	prev, had := f.lastErr[server]
	f.mu.Unlock()
	if err == nil {
		// The first success since this process started (the record may
		// hold an error of a previous run) or since an error. A state
		// read that works does not clear a refused power command: that
		// error still says why the server's power cycle does not move
		// (only a power command that works, or an error of a read,
		// is cleared by it).
		if had && !prev.Cleared && op == "state" && prev.Op != "state" {
			return
		}
		if !had || !prev.Cleared {
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
	msg := termsafe.Clean(operatorText(err, f.serverName(server))) // the BMC's words: never a control character
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

// selfWhy says why server must be treated as the executor's own ("" if
// not): it is Options.Self, or one of Options.MaybeSelf.
func (f *Fleet) selfWhy(server string) string {
	if server == f.opts.Self {
		return "this executor runs on this server"
	}
	for _, m := range f.opts.MaybeSelf {
		if m == server {
			return "this server may be the machine this executor runs on"
		}
	}
	return ""
}
