package redfish

// This file: the power commands (On, Off, Reset): the reset type
// chosen, the safety windows of a power-button press, and a command
// posted again after a re-login.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish/schemas"
)

// On powers the system on.
func (c *Controller) On(ctx context.Context) error {
	return c.change(ctx, "on", power.StateOn, onPrefs, nil)
}

// OnChecked powers the system on as On does, calling check after the
// state read and just before the reset is posted, and again after the
// re-login and just before the POST is retried when its session was
// refused (power.CheckedOner): if it refuses, nothing more is posted.
func (c *Controller) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return c.change(ctx, "on", power.StateOn, onPrefs, check)
}

// Off powers the system off.
func (c *Controller) Off(ctx context.Context, m power.Mode) error {
	return c.change(ctx, power.OpName(m), power.StateOff, offPrefs(m), nil)
}

// change moves the system to want with the first of prefs it allows;
// check, if set, is called after every read, just before the reset is
// posted (again before a POST retried after a re-login: postReset), and
// refusing it posts nothing more (power.CheckedOner).
func (c *Controller) change(ctx context.Context, op string, want power.State, prefs []string, check func(context.Context) error) error {
	if err := c.lock(ctx, op); err != nil {
		return err
	}
	defer c.unlock()
	ctx = asCommand(ctx)
	if !bmcPath(c.resetTarget) {
		return &power.Error{Op: op, Class: power.ClassFailed,
			Message: "the system's Reset target is not a path of the endpoint's: not sent", Err: ErrOffOrigin}
	}
	rt := c.choose(prefs)
	toggle := strings.EqualFold(rt, "PushPowerButton")
	// A power-off that does not toggle (ForceOff, GracefulShutdown) can
	// power nothing on, so it is sent without a read: a read of Off may be
	// an echo of the past (a stale BMC, a host powered on out of band a
	// moment ago), and skipping the command on it would leave a host
	// running that the caller is fencing; nor does it wait for a read
	// that hangs (a blade controller that answers no GET while the BMC
	// still takes its resets) until the caller's deadline, which would
	// leave nothing of it for the reset
	// (TestReview35ab_BlindForceOffNeverSentWhileSystemReadHangs).
	// Anything else needs a read.
	blindOff := want == power.StateOff && rt != "" && !toggle
	// The windows below are checked against when the read began: a read
	// begun inside one may echo the state before it, however late its
	// answer arrives.
	readAt := c.now()
	cur := power.StateUnknown
	if !blindOff {
		var err error
		if cur, err = c.readState(ctx); err != nil {
			return notSent(op, err)
		}
		if cur == want {
			return nil
		}
	}
	if rt == "" {
		return &power.Error{Op: op, Class: power.ClassUnsupported,
			Message: c.redact(fmt.Sprintf("none of %v among the allowable reset types %v", prefs, c.allowed))}
	}
	if toggle {
		if err := c.pressSafe(op, want, cur, readAt); err != nil {
			return err
		}
	}
	if check != nil {
		if err := check(ctx); err != nil {
			return power.CheckRefused(op, err)
		}
	}
	began := c.now()
	var again func(context.Context) error
	if toggle || check != nil {
		again = func(ctx context.Context) error {
			if toggle {
				// The read the press was decided on is older than the
				// re-login: read again, and check the windows again
				// (TestReview39_PressResentAfterReloginOnStaleRead).
				readAt := c.now()
				cur, err := c.readState(ctx)
				if err != nil {
					return notSent(op, err)
				}
				if cur == want {
					return errReached
				}
				if err := c.pressSafe(op, want, cur, readAt); err != nil {
					return err
				}
			}
			if check != nil {
				if err := check(ctx); err != nil {
					return power.CheckRefused(op, err)
				}
			}
			return nil
		}
	}
	sent, acc, refusal, err := c.postReset(ctx, rt, again)
	if refusal != nil {
		// The POST was refused for its session (nothing applied), and
		// what was checked again after the re-login refused the retry
		// (or found the system already in want).
		if errors.Is(refusal, errReached) {
			return nil
		}
		return refusal
	}
	var pe *power.Error
	if err != nil {
		pe = c.classify(op+" ("+rt+")", err)
		if !sent {
			// Never handed to the HTTP client (a wait for the request
			// slot or a re-login ran out of time): nothing reached the
			// BMC, no window opens, nothing was pressed
			// (TestReview35_UnsentPressBlocksPressesForMinutes).
			return unsentReset(pe)
		}
	}
	// A press refused for its credentials (the session expired and the
	// login was refused) was not carried out and shuts nothing down; any
	// other outcome, a timeout included, may have pressed.
	c.resetReturned(began, pe, acc, toggle && want == power.StateOff && (pe == nil || !errors.Is(pe, power.ErrAuth)))
	if err == nil {
		return nil
	}
	if pe.Status == http.StatusBadRequest || pe.Status == http.StatusConflict {
		// Some BMCs refuse a reset into the state the system just reached.
		if s, rerr := c.readState(ctx); rerr == nil && s == want {
			return nil
		}
	}
	return pe
}

// pressSafe returns nil if a PushPowerButton for want may be sent on cur,
// read beginning at readAt, and else a busy error matching
// power.ErrNotSent that says why.
func (c *Controller) pressSafe(op string, want, cur power.State, readAt time.Time) error {
	// A toggle is only safe when a fresh read says the host is in the
	// opposite state; anything else may power on a host that is off.
	if !opposite(cur, want) {
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: fmt.Sprintf("PushPowerButton toggles the power and the state reads %s, not %s: not sent", cur, oppositeOf(want)), Err: power.ErrNotSent}
	}
	// Right after a reset of ours, the read may echo the state from
	// before it; after one whose POST got no answer, the BMC may still
	// apply it (LostLanding late), and the shutdown it starts then may
	// take SoftTimeout more.
	if since, ok := c.resetQuiet(readAt); !ok {
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: fmt.Sprintf("PushPowerButton toggles the power, and %s after the last reset the state read may be stale: not sent", since.Round(time.Millisecond)), Err: power.ErrNotSent}
	}
	// After a press for a power-off, the OS may shut down until
	// SoftTimeout, and a read shows a state up to StaleReads old: until
	// both have passed, an On read may echo the state before that
	// shutdown, and a press would power on a host that is off. The press
	// may be any Controller's for the same system (windows.go).
	w := windows.get(c.windowKey())
	lastOffPush, pushOverAt := w.press.at, w.pushOverAt
	// The run that ended the window counts only if it was over when the
	// read began: a read begun before (an answer held back while another
	// caller's read completed the run) may show the state from before the
	// shutdown (TestReview35ac_ConcurrentStateReadOpensPressWindowPoweringFencedHostOn),
	// and so may a read begun before the press itself (a clock stepped back).
	runOver := !pushOverAt.IsZero() && !pushOverAt.After(readAt)
	if since, over := readAt.Sub(lastOffPush), readAt.Sub(pushOverAt); want == power.StateOff && !lastOffPush.IsZero() &&
		(since < 0 || !runOver && (since < c.softTimeout()+c.staleReads() || readAt.Before(w.press.until)) ||
			runOver && (over < c.staleReads() || readAt.Before(w.pushOverUntil))) {
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: fmt.Sprintf("PushPowerButton toggles the power, and %s after the last press the OS may still be shutting down: not sent", since.Round(time.Millisecond)), Err: power.ErrNotSent}
	}
	return nil
}

// errReached is what a check before a retried reset returns when a
// fresh read shows the system already in the state the reset was for:
// nothing more is posted, and the call succeeds.
var errReached = errors.New("redfish: the system already reads the wanted state")

// postReset posts the Reset action rt on c's session. sent: the last POST
// was handed to the HTTP client and not refused with a 401 (it may have
// reached the BMC and been applied); if not, nothing was applied. acc:
// whether the last POST was answered 202 Accepted, and its task. A POST
// refused with a 401 is posted again after a re-login, whose answer may
// come late, so that what the first POST was decided on may be stale:
// again, if set, is called just before that POST (a fresh read for a
// press or a restart, the caller's check), and if it fails (refusal),
// nothing more is posted
// (TestReview39n_OnlineFalseDuringReloginAfterCheckIgnored,
// TestReview39_PressResentAfterReloginOnStaleRead).
func (c *Controller) postReset(ctx context.Context, rt string, again func(context.Context) error) (sent bool, acc accepted, refusal, err error) {
	first := true
	err = c.withSession(ctx, func(cl *reqPath) error {
		if !first && again != nil {
			if refusal = again(ctx); refusal != nil {
				return refusal
			}
		}
		first = false
		acc = accepted{}
		cl.sent = func() { sent = true }
		resp, err := cl.Post(c.resetTarget, map[string]string{"ResetType": rt})
		if err == nil && resp != nil && resp.StatusCode == http.StatusAccepted {
			// A task: the reset may take effect later, until the task
			// ended (power.Queued; its monitor, if named: task.go).
			acc = accepted{queued: true, monitor: c.noteAccepted(ctx, resp)}
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		var re *schemas.Error
		if errors.As(err, &re) && re.HTTPReturnedStatusCode == http.StatusUnauthorized {
			// Answered with a refusal (the session expired): the BMC
			// applied nothing. Unless the retry after the re-login is
			// handed to the client, nothing was sent: a re-login that
			// outlives the caller opens no lost window and records no
			// press (TestReview35_RefusedPressWithSlowReloginBlocksPresses).
			sent = false
		}
		return err
	})
	return sent, acc, refusal, err
}

// accepted says whether a reset POST was answered 202 Accepted (queued:
// the BMC may run it later, until its task ended), and the task monitor
// it named (empty: none valid).
type accepted struct {
	queued  bool
	monitor string
}

// unsentReset is the error pe of a reset POST never handed to the HTTP
// client: of its class, matching power.ErrNotSent too.
func unsentReset(pe *power.Error) error {
	cp := *pe
	cp.Message = "not sent: " + pe.Message
	cp.Err = power.ErrNotSent
	if pe.Err != nil {
		cp.Err = fmt.Errorf("%w: %w", power.ErrNotSent, pe.Err)
	}
	return &cp
}

// opposite reports whether cur is the other stable state than want.
func opposite(cur, want power.State) bool {
	return cur == power.StateOn && want == power.StateOff || cur == power.StateOff && want == power.StateOn
}

func oppositeOf(want power.State) power.State {
	if want == power.StateOn {
		return power.StateOff
	}
	return power.StateOn
}

// choose returns the first preferred reset type the system allows, spelled
// as the BMC spells it. No allowable values means the standard ones.
func (c *Controller) choose(prefs []string) string {
	if len(c.allowed) == 0 {
		return prefs[0]
	}
	for _, p := range prefs {
		for _, a := range c.allowed {
			if strings.EqualFold(a, p) {
				return a
			}
		}
		for _, a := range c.allowed {
			if concatenationOf(a, p) {
				return p
			}
		}
	}
	return ""
}

// concatenationOf reports whether a is several known reset types run
// together, one of them p (a firmware bug seen in the wild).
func concatenationOf(a, p string) bool {
	known := []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn", "PushPowerButton", "PowerCycle"}
	rest, found, parts := strings.ToLower(a), false, 0
	for rest != "" {
		matched := false
		for _, k := range known {
			if strings.HasPrefix(rest, strings.ToLower(k)) {
				found = found || strings.EqualFold(k, p)
				rest, matched = rest[len(k):], true
				parts++
				break
			}
		}
		if !matched {
			return false
		}
	}
	return found && parts > 1
}

// Reset restarts the system without a power-off (power.Resetter): the
// Reset action with ForceRestart, sent only when a fresh read shows the
// system On (a restart of a system that is off powers it on on some BMCs).
// A system whose allowable reset types lack ForceRestart cannot be reset
// (power.ErrUnsupported): PowerCycle and GracefulRestart are not taken
// instead (the first powers off, the second may be ignored by the OS).
func (c *Controller) Reset(ctx context.Context) error {
	const op = "reset"
	if err := c.lock(ctx, op); err != nil {
		return err
	}
	defer c.unlock()
	ctx = asCommand(ctx)
	if !bmcPath(c.resetTarget) {
		return &power.Error{Op: op, Class: power.ClassFailed,
			Message: "the system's Reset target is not a path of the endpoint's: not sent", Err: ErrOffOrigin}
	}
	rt := c.choose([]string{"ForceRestart"})
	if rt == "" {
		return &power.Error{Op: op, Class: power.ClassUnsupported,
			Message: c.redact(fmt.Sprintf("ForceRestart is not among the allowable reset types %v", c.allowed))}
	}
	cur, err := c.readState(ctx)
	if err != nil {
		return notSent(op, err)
	}
	if cur != power.StateOn {
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: fmt.Sprintf("the state reads %s, not On: not sent", cur)}
	}
	began := c.now()
	sent, acc, refusal, err := c.postReset(ctx, rt, func(ctx context.Context) error {
		// A retry after a re-login: the read of On may be stale (a
		// restart of a system that went off may power it on).
		cur, err := c.readState(ctx)
		if err != nil {
			return notSent(op, err)
		}
		if cur != power.StateOn {
			return &power.Error{Op: op, Class: power.ClassBusy,
				Message: fmt.Sprintf("the state reads %s after a re-login, not On: not sent", cur), Err: power.ErrNotSent}
		}
		return nil
	})
	if refusal != nil {
		return refusal
	}
	var pe *power.Error
	if err != nil {
		pe = c.classify(op+" ("+rt+")", err)
		if !sent {
			// Never handed to the HTTP client (a wait for the request
			// slot or a re-login ran out of time): nothing reached the
			// BMC, no window opens, nothing was pressed
			// (TestReview35_UnsentPressBlocksPressesForMinutes).
			return unsentReset(pe)
		}
	}
	c.resetReturned(began, pe, acc, false)
	if pe != nil {
		return pe
	}
	return nil
}

// resetReturned notes, for every Controller of this system
// (windows.go), that a reset POST begun at began returned with pe (nil:
// success), acc saying whether it was answered 202 Accepted (a task) and
// offPress whether it was a press for a power-off that may have pressed.
// It may have reached the hardware at any time until now, so the window
// after it counts from now, if later than its start
// (TestReview36i_AdapterResetWindowCountsFromPostStart). A POST that got
// no HTTP answer (pe without a status: a timeout, a deadline, a broken
// connection), or whose status says a gateway in front of the BMC has no
// outcome for it (502, 504: power.Error.Answered,
// TestReview36o_GatewayTimeoutPressKeepsLostWindow), may still be
// applied after now, and so may one answered 202 Accepted (queued: the
// BMC runs it later, until its task ended,
// TestReview35ad_QueuedPressLandsLateSecondPressPowersFencedHostOn), so
// its window is as long as the latest it may land (Config.LostLanding)
// and then shut the host down in (SoftTimeout) and be read in
// (StaleReads) (resetQuiet;
// TestReview36j_AdapterResetWindowFromAbandonedPostReturn,
// TestReview36k_LostPressLandingLateThenSlowShutdown); a queued reset's
// task read ended counts as its landing instead (readTask).
func (c *Controller) resetReturned(began time.Time, pe *power.Error, acc accepted, offPress bool) {
	windows.noteReset(c.windowKey(), resetOutcome{
		began: began, returned: c.now(),
		stale: c.staleReads(), lostSpan: c.lostSpan(), pressSpan: c.softTimeout() + c.staleReads(),
		lost: pe != nil && !pe.Answered(), queued: pe == nil && acc.queued, monitor: acc.monitor,
		offPress: offPress,
	})
}

// lostSpan is how long no press goes out after a reset that may land
// late returned: LostLanding + SoftTimeout + StaleReads.
func (c *Controller) lostSpan() time.Duration {
	return c.lostLanding() + c.softTimeout() + c.staleReads()
}

// windowKey names this Controller's system in windows.
func (c *Controller) windowKey() string { return originKey(c.origin, c.systemURI) }

// resetQuiet reports whether a read begun at readAt is past the windows of
// this system's resets, by this Controller or any other for the same
// endpoint and system (windows.go): StaleReads after the last one
// returned, and LostLanding + SoftTimeout + StaleReads after the last one
// whose POST got no answer or was queued (202) and whose task was not
// read ended (the BMC may apply it LostLanding late, a press or a
// graceful shutdown it applies then may shut the OS down SoftTimeout
// later, and reads echo the state before for StaleReads more), each
// measured with this Controller's settings and with those of the
// Controller that noted it; a read begun before such a reset returned is
// inside its window. If not, since is the time from the reset whose
// window it is in.
func (c *Controller) resetQuiet(readAt time.Time) (since time.Duration, ok bool) {
	w := windows.get(c.windowKey())
	for _, s := range []struct {
		w window
		d time.Duration
	}{{w.reset, c.staleReads()}, {w.lost, c.lostSpan()}, {w.queued, c.lostSpan()}} {
		if !s.w.at.IsZero() && (readAt.Before(s.w.at.Add(s.d)) || readAt.Before(s.w.until)) {
			return readAt.Sub(s.w.at), false
		}
	}
	return 0, true
}
