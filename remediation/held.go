package remediation

import (
	"cmp"
	"time"
)

// held reports whether the host h may still be held by the remediation's
// last reboot request (h read for that request: RequestFor while an
// attempt is in flight, LastRequest after it): the request is still on
// it, or the reboot controller has a reboot pending on it, or powered it
// off after the request and it is not known on since (Host.PoweredOn,
// which waits out a reading that may echo the state from before the
// power-on, reboot.UpReadFrom). A remediation that is over (done after a
// cancellation, given up, failed) keeps its admission while its host is
// held: the admission is the storm guard's count of the hosts taken off
// and, in the kube module, the lock that keeps a next remediation of the
// same host from acting on it.
//
// A host its owner keeps off with no request of the Machine's on it
// (Host.Offline) and no reboot pending on it (Host.RebootPending) is not
// held: it stays off by its owner's will, and no power-on for the request
// will ever come. One reading of Offline does not release a host the
// reboot controller still has a reboot pending on: the controller keeps
// that reboot pending while Online is false ("held while Online is
// false") and powers the host on for it as soon as Online is true again,
// so an owner's Online false-and-back blip leaves the host off for the
// request, and it stays held.
//
// Host.Missing does not enter: it says the Machine maps to no host now,
// not that the request's host is on. The request's host is judged on its
// own evidence, read through the request (Request.Host) whatever the
// Machine maps to; a host that is gone, or that was never read, carries
// none and is not held.
func held(h Host) bool {
	return h.Requested || h.RebootPending && !h.PoweredOn || h.OffAfterRequest && !h.PoweredOn && !h.Offline
}

// Held reports whether a remediation in state s still holds its host,
// read as h (HostStore.Get with LastRequest(m, s)): the Decision keeps its
// admission (Decision.Release false) while it does, whatever its phase,
// and an in-flight attempt always holds it. A health checker's next
// remediator must not act on the host before Held is false.
func Held(s State, h Host) bool {
	return InFlight(s.Phase) || keeps(s, h)
}

// LastRequest returns the reboot request of the last attempt of s for a
// Machine, in flight or over (RequestFor answers only in flight), on
// State.Host: read the host for it to learn whether a remediation that
// is over still holds its host (Held). Done and failed with no attempt
// made return the zero Request. None (never remediated, or a failed
// remediation cleared) returns a request naming the Machine's UID, as
// RequestFor does, never the zero Request: only a request of this
// Machine's is found there as its own (a host re-used from another
// Machine is not its), on State.Host, the host its last request was
// written to, whatever HostOf answers now (the host HostOf names when
// State.Host is empty: never remediated). It has no T (so no reboot
// pending on the host, and no power-off of it, whoever asked, is read
// against the Machine: its last attempt let go of the host before it
// was cleared) until a request of the Machine's is found there
// (State.StraySeen); then its T is the last request's (else when the
// remediation finished, else State.StraySeen), or State.StraySeen if
// earlier: no later than the T the found request carries. A Machine
// without a UID reads any request as its own.
func LastRequest(m Machine, s State) Request {
	at := s.RequestedAt
	if at.IsZero() {
		at = s.Started
	}
	if s.Phase == PhaseNone {
		if s.StraySeen.IsZero() {
			// No request of the Machine's found there since its last
			// attempt, which let go of the host (a failed remediation is
			// cleared only once its host is not held): no T, so no
			// reboot pending on the host and no power-off of it, by
			// whoever asked, is read against the Machine.
			at = time.Time{}
		} else {
			// A request of the Machine's found on its host since the
			// last attempt (State.StraySeen, no later than the T its
			// value carries): the host may be off for it.
			at = cmp.Or(at, s.Finished, s.StraySeen)
			if s.StraySeen.Before(at) {
				at = s.StraySeen
			}
		}
		switch {
		case m.UID == "":
			return Request{Host: s.Host}
		case at.IsZero():
			return Request{Value: RebootValue(m.UID, time.Time{}), Host: s.Host}
		}
	} else if at.IsZero() {
		return Request{}
	}
	return Request{Value: RebootValue(m.UID, at), At: at, Host: s.Host}
}

// keeps reports whether a remediation that is over, in state s, keeps
// its admission because its host is held (held). A remediation that
// succeeded saw its Node back, its host on, and a failed one cleared
// (none) let go of its host once it was no longer held: a later reboot of
// the host by someone else is not its to count, but one for a request of
// its found there since (State.StraySeen) is, while the host may be off
// for it.
func keeps(s State, h Host) bool {
	return s.Phase != PhaseNone && (s.Phase != PhaseDone || s.Canceled) && held(h) || strayOff(s, h)
}
