package kube

import (
	"context"
	"errors"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// resetRecord is the persisted state of the reboot by reset of a host with
// spec.disablePowerOff (the ResetAnnotation of its RebootRecord). Its
// times are the controller's wall clock.
type resetRecord struct {
	// Since is when the controller first saw the pending request.
	Since time.Time `json:"since"`
	// Request identifies that request (resetRequest.answers).
	Request *resetRequest `json:"request,omitempty"`
	// Sending is when the last command (a reset, or a power-on of a host
	// that read off) was about to be sent: written before it is sent.
	Sending time.Time `json:"sending,omitzero"`
	// Accepted is when the BMC accepted that command (its answer came).
	Accepted time.Time `json:"accepted,omitzero"`
	// Op is the command: "reset" or "on".
	Op string `json:"op,omitempty"`
	// Resets is how many resets were about to be sent for the request,
	// less those the BMC refused (at most maxResets): the resets that were
	// or may have been carried out.
	Resets int `json:"resets,omitempty"`
	// Refused is when the BMC refused the last reset: it answered that it
	// did not carry it out (see resetRefused).
	Refused time.Time `json:"refused,omitzero"`
	// GaveUp is when the controller stopped resetting: maxResets resets
	// were sent and the outcome of the last one is not known.
	GaveUp time.Time `json:"gaveUp,omitzero"`
	// Done is when the request was found done (written before the
	// request is removed: a pass that still sees the request removes it),
	// LeftOff whether the host was left off.
	Done    time.Time `json:"done,omitzero"`
	LeftOff bool      `json:"leftOff,omitempty"`
}

// maxResets bounds the resets sent for one request: a reset whose answer
// is lost (on NC-SI hardware the reset takes the BMC's port down with the
// host's NIC, so the answer is what gets lost) is sent once more, and then
// no more (ResetOutcomeUnknown).
const maxResets = 2

func (r resetRecord) pending() bool { return !r.Since.IsZero() }

// accepted reports whether the latest command sent was accepted.
func (r resetRecord) accepted() bool {
	return !r.Accepted.IsZero() && !r.Accepted.Before(r.Sending)
}

// refused reports whether the latest command sent was a reset the BMC
// refused.
func (r resetRecord) refused() bool {
	return !r.Refused.IsZero() && !r.Refused.Before(r.Sending)
}

// resetRefused reports whether err, the error of a reset, says that the
// reset was not carried out: a call never sent (power.ErrNotSent, a
// refused login, a Pool's back-off, a refusal for leadership), or the
// BMC's own answer refusing it (a *power.Error of class busy or failed
// with the protocol's status: Redfish 409 or 503 while it is busy, 500;
// an IPMI completion code). A timeout, an error with no answer, and the
// answers that do not say the BMC did nothing (a gateway's HTTP 502 or
// 504, whose BMC may have got the request; IPMI completion codes 0xC3,
// a timeout while processing, and 0xCE, no response could be provided:
// power.Error.Answered) are an unknown outcome: the reset may have been
// carried out.
func resetRefused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, power.ErrNotSent) || errors.Is(err, power.ErrAuth) || errors.Is(err, power.ErrBackoff) ||
		errors.Is(err, reboot.ErrNotLeader) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *power.Error
	if !errors.As(err, &pe) || pe.Status == 0 || pe.Class != power.ClassBusy && pe.Class != power.ClassFailed {
		return false
	}
	// The answers that do not say the BMC did nothing are
	// power.Error.Answered's list, shared with the reboot package.
	return pe.Answered()
}

// resetOutcome is the in-memory outcome of a command of the reset path:
// when its answer came, and the error (nil: accepted).
type resetOutcome struct {
	at  time.Time
	err error
}

// resetObserved is what a pass of the reset path decides on: the host's
// bare request, its persisted record, the power read after both, and the
// outcome of the last command this process sent (nil: none known, such as
// after a restart). Online is the host's spec.online; Held reports a keyed
// reboot request (a hold off, refused on this path): the reset path never
// powers the host on unless Online and not Held.
type resetObserved struct {
	Requested bool
	Request   *resetRequest
	Online    bool
	Held      bool
	Rec       resetRecord
	Power     power.State
	Outcome   *resetOutcome
	InFlight  bool
}

// resetDecision: persist Rec first when Write, then send Call ("reset",
// "on" or none); Done removes the bare request and clears the record
// (LeftOff: the host read off after the request and is left off, as
// spec.online false or a hold wants); Clear only clears it. GaveUp
// reports that the record's GaveUp was just set (ResetOutcomeUnknown).
// After is the next pass (0: at once).
type resetDecision struct {
	Write       bool
	Rec         resetRecord
	Call        string
	Done        bool
	LeftOff     bool
	Clear       bool
	Unsupported bool
	GaveUp      bool
	After       time.Duration
}

// resetConfig is the part of reboot.Config the reset path uses, with the
// reboot package's defaults.
type resetConfig struct {
	StaleReads, PollInterval, QuickPoll, RetryDelay time.Duration
}

func resetConfigOf(c reboot.Config) resetConfig {
	d := reboot.DefaultConfig()
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	return resetConfig{StaleReads: pick(c.StaleReads, d.StaleReads), PollInterval: pick(c.PollInterval, d.PollInterval),
		QuickPoll: pick(c.QuickPoll, d.QuickPoll), RetryDelay: pick(c.RetryDelay, d.RetryDelay)}
}

// decideReset is the reboot by reset of a host whose power must never go
// off (spec.disablePowerOff), a pure function of what was observed and
// now. A reboot request is done when the BMC accepted a reset and the host
// then read On at least StaleReads after that acceptance (the reading
// cannot echo a state from before the reset: the host is up after it).
// A host that reads Off StaleReads after the request (or after the reset)
// was off after the request: it is powered on, and the request is done
// when it reads On StaleReads after that power-on. Nothing here is ever
// evidence of a power-off: the reset path writes no fencing evidence.
//
// The host is powered on only if spec.online is true and no keyed
// request holds it; otherwise an Off reading StaleReads after the request
// (or the reset) is done, the host left off.
//
// A reset is sent only on an On reading. A reset the BMC refused (it
// answered that it did not carry it out, resetRefused) is recorded
// (Refused), does not count, and is sent again RetryDelay after the
// refusal, on an On reading then, for as long as the BMC refuses. A
// command whose outcome is not known (a timeout, an answer lost, a
// restart between the write of Sending and the answer) is sent again
// only StaleReads (and RetryDelay) after it was about to be sent, on an
// On reading then, and a reset at most once: such a request may reset
// the host twice. After the second reset of unknown outcome the
// controller gives up (GaveUp) and waits for evidence (a late answer, an
// Off reading) or for a person to remove the request. A power-on of
// unknown outcome (or refused) followed by an On reading StaleReads
// later is done: the host came up after it was off.
//
// A request whose record says it is done (Done: the state was written,
// the request not yet removed) is done again, with nothing sent.
//
// With no request, power follows spec.online as on the normal path: a
// host that reads Off, with spec.online true and no hold, is powered on
// (not again before StaleReads after the last power-on was about to be
// sent, Rec.Sending of a record with no request).
func decideReset(o resetObserved, c resetConfig, now time.Time) resetDecision {
	rec := o.Rec
	if !o.Requested {
		if rec.pending() {
			return resetDecision{Clear: true}
		}
		if o.Power != power.StateOff || !o.Online || o.Held {
			return resetDecision{}
		}
		if wait := c.StaleReads - now.Sub(rec.Sending); wait > 0 {
			return resetDecision{After: wait}
		}
		return resetDecision{Write: true, Rec: resetRecord{Sending: now, Op: "on"}, Call: "on"}
	}
	if !rec.pending() {
		return resetDecision{Write: true, Rec: resetRecord{Since: now, Request: o.Request}}
	}
	if !rec.Done.IsZero() {
		// Found done; the removal of the request did not happen yet.
		return resetDecision{Done: true, LeftOff: rec.LeftOff}
	}
	if o.InFlight {
		return resetDecision{After: c.PollInterval}
	}
	sent := !rec.Sending.IsZero()
	if sent && rec.refused() {
		// Not carried out: again RetryDelay after the refusal.
		if wait := c.RetryDelay - now.Sub(rec.Refused); wait > 0 {
			return resetDecision{After: wait}
		}
		return resend(o, c, now, rec)
	}
	if sent && !rec.accepted() && o.Outcome != nil && !o.Outcome.at.Before(rec.Sending) {
		// The answer to the last command, not yet persisted.
		if o.Outcome.err == nil {
			rec.Accepted = o.Outcome.at
			return resetDecision{Write: true, Rec: rec}
		}
		if errors.Is(o.Outcome.err, power.ErrUnsupported) {
			return resetDecision{Unsupported: true, After: time.Minute}
		}
		if rec.Op == "reset" && resetRefused(o.Outcome.err) {
			// The BMC did not carry it out: it does not count.
			rec.Refused, rec.Resets = o.Outcome.at, max(rec.Resets-1, 0)
			return resetDecision{Write: true, Rec: rec}
		}
		// Timed out, or an error that does not say the BMC did nothing:
		// it may have been carried out all the same, so it is treated as
		// an unknown outcome (below).
	}
	if sent && rec.accepted() {
		since := now.Sub(rec.Accepted)
		switch o.Power {
		case power.StateOn:
			if since >= c.StaleReads {
				return resetDecision{Done: true}
			}
			return resetDecision{After: c.StaleReads - since}
		case power.StateOff:
			if since >= c.StaleReads {
				return powerOn(o, now, rec)
			}
			return resetDecision{After: c.StaleReads - since}
		}
		return resetDecision{After: c.QuickPoll}
	}
	if sent {
		// Sent, outcome unknown (failed, or lost in a restart): not again before
		// StaleReads and RetryDelay after it, so that the reading it is
		// sent on again cannot echo the state from before it.
		if wait := max(c.StaleReads, c.RetryDelay) - now.Sub(rec.Sending); wait > 0 {
			return resetDecision{After: wait}
		}
		if rec.Op == "on" && o.Power == power.StateOn {
			// "on" was sent only on an Off reading that proves a power-off
			// after the request; the host reads on StaleReads after it.
			return resetDecision{Done: true}
		}
	}
	return resend(o, c, now, rec)
}

// powerOn sends "on" to a host that reads off after the request, unless
// spec.online is false or a hold wants it off: then the request is done
// and the host left off.
func powerOn(o resetObserved, now time.Time, rec resetRecord) resetDecision {
	if !o.Online || o.Held {
		return resetDecision{Done: true, LeftOff: true}
	}
	rec.Sending, rec.Op = now, "on"
	return resetDecision{Write: true, Rec: rec, Call: "on"}
}

// resend decides the command to send on this pass's reading.
func resend(o resetObserved, c resetConfig, now time.Time, rec resetRecord) resetDecision {
	switch o.Power {
	case power.StateOn:
		if rec.Resets >= maxResets {
			if rec.GaveUp.IsZero() {
				rec.GaveUp = now
				return resetDecision{Write: true, Rec: rec, GaveUp: true}
			}
			return resetDecision{After: c.PollInterval}
		}
		rec.Sending, rec.Op, rec.Resets = now, "reset", rec.Resets+1
		return resetDecision{Write: true, Rec: rec, Call: "reset"}
	case power.StateOff:
		// Off is proof of a power-off after the request only StaleReads
		// after it; before, it may echo the past (and a power-on would
		// then answer a reboot that never happened).
		if wait := c.StaleReads - now.Sub(rec.Since); wait > 0 {
			return resetDecision{After: wait}
		}
		return powerOn(o, now, rec)
	}
	return resetDecision{After: c.QuickPoll}
}
