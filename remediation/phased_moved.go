package remediation

// This file: a remediation's hosts other than the one its Machine maps
// to now: strays of its own requests found on its host after it ended,
// and the hosts it moved from (PrevHost, EarlierHosts), read until they
// are not off for a request of the Machine's.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// knownEarliest is the boundary a sighting falls back to when nothing
// earlier is known: any power-off read counts as after it (until the
// host is read on since).
var knownEarliest = time.Unix(1, 0).UTC()

// strayBound returns when a request of the Machine's found on its host
// by a pass at now (a remediation that is over, in state st) may have
// held it since: the T its value carries (t) if that is in the past;
// else (no T, or one ahead of this clock: a replica's clock running
// ahead says nothing of when it was written) the last known boundary,
// the last attempt's end (Finished), else its request (RequestedAt,
// Started), else knownEarliest; never now, which may be after the
// reboot controller powered the host off for it.
func strayBound(st State, t, now time.Time) time.Time {
	if !t.IsZero() && t.Before(now) {
		return t
	}
	b := cmp.Or(st.Finished, st.RequestedAt, st.Started, knownEarliest)
	if b.After(now) {
		return knownEarliest
	}
	return b
}

// ownStray keeps counting a remediation that is over while its own host
// (State.Host) may be off for a request of the Machine's found there
// since it ended (State.StraySeen): its admission is kept, or taken
// again if it was released (Decision.Admit: the host is off already, the
// storm guard can only count it), and the Machine looked at every
// PollInterval; the sighting is forgotten once the host is not off for
// it.
func (c Config) ownStray(o Observed, d *Decision) {
	st := &d.State
	if st.StraySeen.IsZero() {
		return
	}
	if InFlight(st.Phase) || !strayOff(*st, o.Host) {
		st.StraySeen = time.Time{}
		if strings.Contains(st.Message, strayWhy) {
			st.Message = "" // finish says the pass's reason
		}
		if o.Admitted && !o.State.StraySeen.IsZero() && !InFlight(st.Phase) && !keeps(*st, o.Host) {
			// The admission was kept, or taken, for the stray only: it is
			// released with it, never read as the Machine's own by a later
			// pass (a new attempt passes the storm guard first). An
			// attempt started by this pass (the storm guard admitted it)
			// keeps it.
			d.Release = true
		}
		return
	}
	d.Release = false
	d.Admit = !o.Admitted
	host := cmp.Or(st.Host, o.Host.Name) // no host recorded: the host read is HostOf's
	if !strings.Contains(d.Reason, strayWhy) {
		d.Reason = fmt.Sprintf("%s; host %s, %s: admission kept until it is on (if its BMC keeps refusing, power %s on by hand)", d.Reason, host, strayWhy, host)
	}
	if msg := fmt.Sprintf("host %s, %s: admission kept until it is on (if its BMC keeps refusing, power %s on by hand)", host, strayWhy, host); !strings.Contains(st.Message, strayWhy) {
		if st.Message != "" && st.Message != o.State.Message {
			msg = st.Message + "; " + msg // this pass's own word first (the storm guard's)
		}
		st.Message = msg
	}
	if d.RequeueAfter <= 0 || d.RequeueAfter > c.PollInterval {
		d.RequeueAfter = c.PollInterval
	}
}

// strayWhy says why a remediation that is over counts its own host
// (State.StraySeen).
const strayWhy = "its own host, may be off for a request of the machine's found there after the remediation ended"

// strayOff reports whether s's own host, read as h for its last request,
// may still be off for a request of the Machine's found there after the
// remediation ended (State.StraySeen set).
func strayOff(s State, h Host) bool {
	return !s.StraySeen.IsZero() && (h.RebootAnnotation || offFor(h))
}

// prevHost keeps the hosts the Machine moved from (State.PrevHost,
// State.EarlierHosts), and removes a request of this Machine's found on
// one (recording when it was found: MovedFrom.Seen, saved before the
// removal), until a pass of a remediation that is over finds none there
// and the host not off for one found there (Observed.PrevHostOff,
// PrevReading.Off): only then is it forgotten (a paused writer's request
// may land there at any time during the attempt, and power the host
// off). While a host may be off for such a request the admission is kept
// (the storm guard counts it). A pass in flight that finds a host not off
// for the request found there forgets that sighting (Seen): a later
// power-off of that host is another's, unless a request of the
// Machine's is found there again. While one is kept, the Machine is
// looked at again every PollInterval.
func (c Config) prevHost(o Observed, now time.Time, d *Decision) {
	st := &d.State
	l := movedFrom(*st)
	if len(l) == 0 {
		return
	}
	read := o.readings()
	var keep []MovedFrom
	for _, e := range l {
		r, observed := read[e.Host]
		switch {
		case e.Host == st.Host:
			// Moved back: the request's own removal covers this host.
			continue
		case !observed:
			// Set by this decision: read on the next pass.
		case r.Request:
			if e.Host == o.State.PrevHost {
				d.RemovePrevRequest = true
			} else {
				d.RemoveEarlierRequests = append(d.RemoveEarlierRequests, e.Host)
			}
			if e.Seen.IsZero() {
				e.Seen = now // saved before the request is removed
			}
			d.Release = false
		case r.Off:
			d.Release = false
			if !InFlight(st.Phase) && !strings.Contains(d.Reason, prevOffWhy) {
				d.Reason = fmt.Sprintf("%s; host %s, %s: admission kept until it is on", d.Reason, e.Host, prevOffWhy)
			}
		case !InFlight(st.Phase):
			continue // forgotten
		default:
			// Not off for the request found there (served): a power-off
			// from now on is not its.
			e.Seen = time.Time{}
		}
		keep = append(keep, e)
	}
	setMovedFrom(st, keep)
	if len(keep) > 0 && (d.RequeueAfter <= 0 || d.RequeueAfter > c.PollInterval) {
		d.RequeueAfter = c.PollInterval
	}
}

// prevOffWhy says why a host the Machine moved from is waited for
// (Observed.PrevHostOff).
const prevOffWhy = "which the machine moved from, may still be off for a request of the machine's found there"

// movedFrom returns the hosts s's Machine moved from: State.PrevHost
// (with PrevHostSince and PrevHostSeen) first, then State.EarlierHosts.
// A PrevHost without PrevHostSince (a state persisted before it existed,
// or rewritten by a controller of that version) does not say whether a
// request of the Machine's was found there: it is taken as found at the
// last request's time (Seen = Since), erring towards counting the host
// while it may be off for one.
func movedFrom(s State) []MovedFrom {
	var out []MovedFrom
	if s.PrevHost != "" {
		seen := s.PrevHostSeen
		if s.PrevHostSince.IsZero() {
			seen = cmp.Or(seen, prevSince(s))
		}
		out = append(out, MovedFrom{Host: s.PrevHost, Since: prevSince(s), Seen: seen})
	}
	return append(out, s.EarlierHosts...)
}

// prevSince is State.PrevHostSince or, in a state persisted before it
// existed, the last request's time.
func prevSince(s State) time.Time {
	return cmp.Or(s.PrevHostSince, s.RequestedAt, s.Started)
}

// setMovedFrom writes l into s: its first entry as State.PrevHost, the
// others as State.EarlierHosts.
func setMovedFrom(s *State, l []MovedFrom) {
	s.PrevHost, s.PrevHostSince, s.PrevHostSeen, s.EarlierHosts = "", time.Time{}, time.Time{}, nil
	if len(l) == 0 {
		return
	}
	s.PrevHost, s.PrevHostSince, s.PrevHostSeen = l[0].Host, l[0].Since, l[0].Seen
	if len(l) > 1 {
		s.EarlierHosts = slices.Clone(l[1:])
	}
}

// readings returns what the pass read of each host the observed state's
// Machine moved from, by host.
func (o Observed) readings() map[string]PrevReading {
	r := map[string]PrevReading{}
	if o.State.PrevHost != "" {
		r[o.State.PrevHost] = PrevReading{Request: o.PrevHostRequest, Off: o.PrevHostOff}
	}
	for i, e := range o.State.EarlierHosts {
		if _, ok := r[e.Host]; !ok && i < len(o.EarlierHosts) {
			r[e.Host] = o.EarlierHosts[i]
		} else if !ok {
			r[e.Host] = PrevReading{}
		}
	}
	return r
}

// prevOffHost returns the first host the observed Machine moved from that
// may still be off for a request of its found there ("" if none).
func (o Observed) prevOffHost() string {
	if o.PrevHostOff && o.State.PrevHost != "" && o.State.PrevHost != o.State.Host {
		return o.State.PrevHost
	}
	for i, e := range o.State.EarlierHosts {
		if i < len(o.EarlierHosts) && o.EarlierHosts[i].Off && e.Host != o.State.Host {
			return e.Host
		}
	}
	return ""
}

// movePrev records from, the host the Machine moves away from now, as
// State.PrevHost (read from now on: PrevHostSince now). The host it
// replaces (a second move) is kept in State.EarlierHosts (prevHost
// forgets it once it is not off for a request of the Machine's found
// there): no host is left off for such a request with no pass reading it.
func movePrev(d *Decision, from string, now time.Time) {
	l := movedFrom(d.State)
	l = slices.DeleteFunc(l, func(e MovedFrom) bool { return e.Host == from })
	setMovedFrom(&d.State, append([]MovedFrom{{Host: from, Since: now}}, l...))
}

// moved reports whether the Machine maps now to another host than the one
// its request was written to (State.Host).
func moved(o Observed) bool {
	return o.State.Host != "" && !o.Host.Missing && o.Host.Name != "" && o.Host.Name != o.State.Host
}

// releaseMoved removes the request from the host the Machine no longer
// maps to; the next pass asks its new host.
func (c Config) releaseMoved(o Observed, d *Decision) {
	d.RemoveRebootAnnotation = true
	d.Reason = fmt.Sprintf("the machine moved from host %s to %s: release %s first", o.State.Host, o.Host.Name, o.State.Host)
	d.RequeueAfter = c.PollInterval
}

// moveBlocked reports, for a Machine that moved (moved) and whose
// request is gone from the host it moved from (State.Host, whose
// evidence o.Host carries), whether that host may still be off for the
// request: held, or powered off after the request with no power reading
// of On (Host.Power) nor the reboot controller's confirmation
// (Host.ConfirmedOn) to confirm the power-on: the controller's record of
// a power-on alone, written before a power-on its BMC may refuse, never
// unblocks a move. The new host is requested only once the move is not blocked:
// never two hosts held at once.
func moveBlocked(o Observed) bool { return offFor(o.Host) }

// offFor reports whether h, read for a request of the Machine's, may
// still be off for it (moveBlocked's rule).
func offFor(h Host) bool {
	return held(h) || h.OffAfterRequest && !h.Offline && h.Power != power.StateOn && !h.ConfirmedOn
}

// waitMoved waits, its request removed from the host the Machine no
// longer maps to, for that host to be released (moveBlocked false: the
// reboot controller powered it on since the request, read on State.Host)
// before the new host is requested, until the attempt's timeout, when the
// remediation fails instead of retrying (retryOrEscalate).
func (c Config) waitMoved(o Observed, now time.Time, timedOut bool, d *Decision, why string) {
	if timedOut {
		c.retryOrEscalate(o, now, d, why)
		return
	}
	d.Reason = fmt.Sprintf("the machine moved from host %s to %s: waiting for %s, off for its request, to be powered on before requesting %s%s (if its BMC keeps refusing, power %s on by hand)",
		o.State.Host, o.Host.Name, o.State.Host, o.Host.Name, unread(o.Host), o.State.Host)
	d.RequeueAfter = c.PollInterval
}

// waitPrevOff waits, instead of writing a reboot request (why says
// which), while host, a host the Machine moved from, may still be off
// for a request of its found there (Observed.prevOffHost): until the
// attempt's timeout, when the remediation fails naming host (no retry:
// retryOrEscalate waits for the same host).
func (c Config) waitPrevOff(o Observed, now time.Time, timedOut bool, d *Decision, host, why string) {
	if timedOut {
		c.retryOrEscalate(o, now, d, "host "+host+" not on in time")
		return
	}
	d.Reason = fmt.Sprintf("%s: waiting for host %s, %s, to be powered on before requesting %s (if its BMC keeps refusing, power %s on by hand)",
		why, host, prevOffWhy, cmp.Or(o.Host.Name, o.State.Host), host)
	d.RequeueAfter = c.PollInterval
}

// waitOverMoved decides for a remediation that is over, whose Machine is
// unhealthy again and maps to another host than its last request's,
// which may still be off for it (moveBlocked): it waits for that host,
// with a current message, until Timeout after the Machine was first
// seen unhealthy again (State.UnhealthyAgain), then escalates with the
// reason; its admission is kept while the host is held.
//
// host is the host waited for (State.Host; State.PrevHost when a request
// of the Machine's landed there: prevHost), why says why.
func (c Config) waitOverMoved(o Observed, now time.Time, d *Decision, host, why string) {
	st := &d.State
	if st.UnhealthyAgain.IsZero() {
		st.UnhealthyAgain = now
	}
	if now.Sub(st.UnhealthyAgain) >= c.Timeout {
		// No power cycle is made while it waits: the cause is the wait,
		// not retries run out.
		c.giveUp(o, now, d, fmt.Sprintf("%s, for %s: %s was not asked (power %s on, by hand if its BMC keeps refusing)",
			why, c.Timeout, cmp.Or(o.Host.Name, "no host"), host))
		return
	}
	st.Message = fmt.Sprintf("%s: waiting for it to be powered on before starting again, until %s (if its BMC keeps refusing, power %s on by hand)",
		why, st.UnhealthyAgain.Add(c.Timeout).UTC().Format(time.RFC3339), host)
	d.Reason = st.Message
	d.RequeueAfter = min(c.PollInterval, st.UnhealthyAgain.Add(c.Timeout).Sub(now))
}

// unread says, for a move blocked while no reading confirms the old
// host's power-on (h.Power unknown, h.ConfirmedOn false), why: a move
// needs an On reading, the store's own (RebootAPIHosts.Power; the kube
// module's SetRemediationPower) or the reboot controller's
// (reboot.Status.OnConfirmed). "" otherwise.
func unread(h Host) string {
	if h.Power != power.StateUnknown || h.ConfirmedOn || !h.OffAfterRequest {
		return ""
	}
	return "; no On reading confirms its power-on: its power was not read (RebootAPIHosts.Power unset, in the kube module kube.SetRemediationPower not called, or its BMC did not answer) and the reboot controller has not confirmed it (reboot.Status.OnConfirmed: its BMC refusing the power-on, or a controller of an earlier version)"
}
