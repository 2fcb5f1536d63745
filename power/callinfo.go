package power

import (
	"context"
	"errors"
)

// Verdict is the outcome of a check of the credentials after a refusal
// (HTTP 401) of a request for a host's own system (CallInfo.Check).
type Verdict int

const (
	// VerdictUnknown: the check proved nothing (it was not answered in
	// time, answered something that is not an authenticated answer, or
	// was cut): the refusal is neither the credentials' nor surely the
	// system's. A Pool backs that host alone off and leaves the
	// credentials, their back-off and the shared session as they are.
	VerdictUnknown Verdict = iota
	// CredentialsWork: the BMC answered the credentials on resources that
	// need them: the refusal is the host's system's (ErrSystemRefused).
	CredentialsWork
	// CredentialsRefused: the BMC refused the credentials on the check
	// too: the refusal is theirs (ErrAuth), and the check was one more
	// refused request with them.
	CredentialsRefused
)

// String names v.
func (v Verdict) String() string {
	switch v {
	case CredentialsWork:
		return "credentials work"
	case CredentialsRefused:
		return "credentials refused"
	default:
		return "unknown"
	}
}

// CallInfo is what a Pool tells a controller's call, or a Connect, about
// it through its context (WithCallInfo, CallInfoFrom).
type CallInfo struct {
	// CheckRefusal: a refusal (HTTP 401) of a request for the host's own
	// system may be checked against the credentials, with requests on
	// resources of no system's, by an adapter that can (power/redfish
	// with BasicAuth): CredentialsWork, the refusal is the host's own
	// (ErrSystemRefused: the Pool backs that host alone off);
	// CredentialsRefused, the credentials' (ErrAuth); VerdictUnknown,
	// neither (a Pool backs that host alone off, as in the first case,
	// but does not take the credentials for proven). A Pool sets it when
	// other hosts use the same BMC and credentials (a refusal of one
	// system taken for the credentials' would back them off too), unless
	// the credentials back off after a confirmed refusal (a refused
	// check), until that back-off ends. The zero value (no Pool): no
	// check, a 401 is ErrAuth.
	CheckRefusal bool
	// Check, if not nil, runs the check: the adapter passes read (its
	// requests, bounded by the context read is given, which is not the
	// caller's: one caller's cancellation does not end a check others
	// wait for) and takes the Verdict Check returns. A Pool runs at most
	// one check per credentials at a time: a call refused while one runs
	// waits for its verdict (bounded by its own context: VerdictUnknown
	// for it if that ends first, or at once, with no request, if it has
	// ended already), a verdict obtained since the call began is taken
	// without a new request (CredentialsWork only from a check started
	// after the call's refusal arrived), and a CredentialsRefused verdict
	// counts towards the credentials' back-off. Close ends the running
	// checks and waits for them. Nil with CheckRefusal:
	// the adapter runs read itself, once, detached from the caller's
	// cancellation and bounded by its own request timeout.
	Check func(ctx context.Context, read func(context.Context) Verdict) Verdict
}

// checkNote is what the check of one call or Connect found (guarded by
// Pool.mu): asked, whether the adapter asked for one; v, its verdict.
type checkNote struct {
	asked bool
	v     Verdict
}

// unknownLocked reports whether the call's refusal was checked without
// a verdict (p.mu held): the Pool takes it for the host's own, and
// counts nothing against the credentials.
func (n *checkNote) unknownLocked() bool { return n != nil && n.asked && n.v == VerdictUnknown }

// countedLocked reports whether the call's refusal was checked and the
// check refused the credentials (p.mu held): Pool.check counted it.
func (n *checkNote) countedLocked() bool { return n != nil && n.asked && n.v == CredentialsRefused }

// checkRun is one check of a creds' (Pool.check): its verdict once done
// is closed; seq, its order among the creds' checks done; start, among
// those started.
type checkRun struct {
	seq, start uint64
	v          Verdict
	done       chan struct{}
}

// callInfoLocked returns the CallInfo of a call or Connect with cr's
// credentials (p.mu held): a check is asked for when other hosts use
// them and they do not back off after a confirmed refusal (a check that
// refused them, until their back-off ends: then the next refusal is
// checked again); note records its verdict.
func (p *Pool) callInfoLocked(cr *creds, note *checkNote) CallInfo {
	if !p.checkAskedLocked(cr) {
		return CallInfo{}
	}
	began := cr.checksDone
	return CallInfo{CheckRefusal: true, Check: func(ctx context.Context, read func(context.Context) Verdict) Verdict {
		return p.noteCheck(ctx, cr, began, note, read)
	}}
}

// checkAskedLocked reports whether a call or Connect with cr's
// credentials asks for a check of a refusal (p.mu held): when other
// hosts use them and they do not back off after a confirmed refusal
// (callInfoLocked).
func (p *Pool) checkAskedLocked(cr *creds) bool {
	return cr.refs > 1 && !(cr.auth && cr.confirmed && p.cfg.Now().Before(cr.until))
}

// noteCheck runs CallInfo.Check for a call or Connect with cr's
// credentials that began when cr.checksDone was began (Pool.check), and
// records its verdict in note.
func (p *Pool) noteCheck(ctx context.Context, cr *creds, began uint64, note *checkNote, read func(context.Context) Verdict) Verdict {
	v := VerdictUnknown
	if ctx.Err() == nil { // a caller gone already waits for nothing
		v = p.check(ctx, cr, began, read)
	}
	p.mu.Lock()
	note.asked, note.v = true, v
	p.mu.Unlock()
	return v
}

// check returns the verdict of a check of cr's credentials for a call
// that began when cr.checksDone was began and whose refusal arrived now:
// that of a check done since the call began, or of the one running,
// without a new request, if it refused the credentials or proved
// nothing; CredentialsWork only from a check that started after the
// refusal arrived (one from before may predate a password change that
// the refusal is); else that of a new check. So one check runs per
// credentials at a time. A check runs detached from ctx (a caller's
// cancellation does not end it for the others), bounded by CallTimeout
// and by the Pool's Close (which waits for it); ctx bounds the wait only
// (VerdictUnknown if it ends). A CredentialsRefused verdict is counted
// here: the refusal it confirms backs the credentials off (the check's
// refused request and the call's; the calls refused meanwhile count
// nothing more: release, refusedInCallLocked, which retires their
// session).
func (p *Pool) check(ctx context.Context, cr *creds, began uint64, read func(context.Context) Verdict) Verdict {
	p.mu.Lock()
	arrived := cr.checksStarted
	fresh := func(r *checkRun) bool { return r.v != CredentialsWork || r.start > arrived }
	for {
		if r := cr.checkLast; r != nil && r.seq > began && fresh(r) {
			p.mu.Unlock()
			return r.v
		}
		if r := cr.checking; r != nil {
			p.mu.Unlock()
			v := waitCheck(ctx, r)
			if ctx.Err() != nil || fresh(r) {
				return v
			}
			p.mu.Lock() // it proved the credentials before this refusal: check anew
			continue
		}
		if p.closed {
			p.mu.Unlock()
			return VerdictUnknown
		}
		break
	}
	cr.checksStarted++
	r := &checkRun{start: cr.checksStarted, done: make(chan struct{})}
	cr.checking = r
	p.checks.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.checks.Done()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CallTimeout)
		go func() { // the Pool's Close ends it
			select {
			case <-p.stop:
				cancel()
			case <-cctx.Done():
			}
		}()
		v := read(cctx)
		cancel()
		p.mu.Lock()
		cr.checksDone++
		r.v, r.seq = v, cr.checksDone
		cr.checking, cr.checkLast = nil, r
		if v == CredentialsRefused {
			cr.confirmed = true
			cr.checksRefused++ // the check's own refused request
			p.failedLocked(cr, errCheckRefused)
		}
		p.gcLocked(cr) // kept while the check ran (a Forget of every host)
		p.mu.Unlock()
		close(r.done)
	}()
	return waitCheck(ctx, r)
}

// errCheckRefused is the last failure of credentials a check refused
// (Pool.check).
var errCheckRefused = &Error{Op: "check", Class: ClassFailed,
	Message: "the BMC refused these credentials on a resource that needs them, after refusing a host's request: check the password (was it changed?)",
	Err:     ErrAuth}

// waitCheck waits for check r, bounded by ctx: its verdict, or
// VerdictUnknown if ctx ended first.
func waitCheck(ctx context.Context, r *checkRun) Verdict {
	select {
	case <-r.done:
		return r.v
	case <-ctx.Done():
		return VerdictUnknown
	}
}

// ErrCheckCut is wrapped by the error of a call refused (HTTP 401) whose
// check of the credentials (CallInfo) ended with the caller's context,
// unanswered: it says nothing of the credentials, and matches the
// context's error, not ErrAuth.
var ErrCheckCut = errors.New("power: the BMC refused a request for this system, and the check of the credentials was not answered before the call ended")

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo ctx carries (the zero value if none).
func CallInfoFrom(ctx context.Context) CallInfo {
	ci, _ := ctx.Value(callInfoKey{}).(CallInfo)
	return ci
}
