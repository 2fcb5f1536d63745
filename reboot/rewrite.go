package reboot

import "time"

// How a re-added request is told from other writes (issue 36).
//
// A request is new when its annotation name and value are not among the
// requests seen in the last pass (Status.Seen, see Config.see): only then
// does LastRequestSeen move, and with it the StaleReads wait that every
// request of the pending reboot waits for (Covers). A write by someone
// else that leaves the set of requests and their values as they were
// (Observed.Changed) is not a new request: an inventory sync writing its
// own annotation every few seconds must not restart that wait, or a
// fence is never answered.
//
// Such a write may still hide a request removed and added again with the
// same value between two passes (a raw client of the seed writes the same
// value every time): its T is later than everything seen. It is answered
// apart, without delaying anyone else: Status.RewriteSeen is the earliest
// such write the evidence does not cover yet, LastRewriteSeen the latest
// one after it. The evidence moves forward once it can cover RewriteSeen
// (see Config.evidence), then RewriteSeen takes LastRewriteSeen's place.
// Like the requests, both are anchors on the monotonic clock
// (Observed.SinceRewrite, SinceLastRewrite), so that the evidence that
// covers them is dated right after the wall clock was corrected.
// A lone re-add is answered StaleReads after the pass that saw the write;
// one made while a writer never stops within two StaleReads. Each such
// write costs at most one status write.

// noteRewrite records a write by someone else that left the requests as
// they were (o.Changed with the same requests seen) at p, while keyed
// requests are present.
func (c Config) noteRewrite(p time.Time, st *Status) {
	at := maxTime(p, st.PendingRebootSince)
	if st.RewriteSeen.IsZero() || st.LastPoweredOff.After(st.RewriteSeen) {
		st.RewriteSeen, st.LastRewriteSeen = at, time.Time{}
		return
	}
	if at.After(st.RewriteSeen) {
		st.LastRewriteSeen = at
	}
}

// rewriteOpen reports whether a write that may have re-added a request is
// not covered by the evidence yet.
func (s Status) rewriteOpen() bool {
	return !s.RewriteSeen.IsZero() && !s.LastPoweredOff.After(s.RewriteSeen)
}

// coverRewrite moves the evidence to e if that newly covers the open
// rewrite, and opens the next one once the evidence covers the open one,
// however it came to (also by covering a new request).
func (s *Status) coverRewrite(e time.Time) {
	if s.rewriteOpen() && e.After(s.RewriteSeen) && e.After(s.LastPoweredOff) {
		s.LastPoweredOff = e
	}
	if !s.LastRewriteSeen.IsZero() && s.LastPoweredOff.After(s.RewriteSeen) {
		s.RewriteSeen, s.LastRewriteSeen = s.LastRewriteSeen, time.Time{}
	}
}

// untilRewrite is how long until an Off reading could cover the open
// rewrite (zero if none is open), on the wall clock: only a requeue hint.
func (c Config) untilRewrite(st *Status, now time.Time) time.Duration {
	if !st.rewriteOpen() {
		return 0
	}
	return max(st.RewriteSeen.Add(c.StaleReads+c.Precision).Sub(now), c.Precision/10)
}

// rewriteSince is how long the controller has known the value v of
// Status.RewriteSeen after this pass's changes: a value set in this pass
// is known from now, one promoted from LastRewriteSeen since it was.
func (o Observed) rewriteSince(v time.Time) time.Duration {
	switch {
	case v.IsZero():
		return 0
	case v.Equal(o.Status.RewriteSeen):
		return o.SinceRewrite
	case v.Equal(o.Status.LastRewriteSeen):
		return o.SinceLastRewrite
	}
	return 0
}
