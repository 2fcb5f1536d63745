package redfish

// This file: what Connect reads once logged in (the service root, the
// system, its reset types), and the reads beside a system read that
// tell a slow BMC from a dead system.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// discover finds the system: the one named by Config.SystemID (fetched
// directly at its conventional URI, listed only if that fails), or the
// only one.
func (c *Controller) discover(ctx context.Context) error {
	client := c.sess.current()
	if client == nil {
		return &power.Error{Op: "connect", Class: power.ClassFailed, Message: "the shared session is closed"}
	}
	if id := c.cfg.SystemID; id != "" {
		// The direct read has the whole time: a slow BMC may take most of
		// it. If it has not answered by half the time left (earlier on a
		// BMC slow to answer: besideWait), the Systems
		// collection alone (its members' reads would hang on this system
		// again) is read beside it: if the direct read then runs out of
		// time while the collection answered, the service works and the
		// failure is the system's (a hanging blade), not the login's.
		// With BasicAuth the SessionService is read instead (it needs
		// the credentials and no blade).
		r := c.readSystem(ctx, client, "/redfish/v1/Systems/"+url.PathEscape(id))
		sys, err := r.sys, r.err
		if err != nil && r.listed && r.listErr != nil {
			e := c.classify("list systems", r.listErr)
			if c.cfg.BasicAuth && !errors.Is(e, power.ErrAuth) {
				e = c.classify("read session service", r.listErr)
				switch {
				case e.Status != 0:
					// The SessionService answered these credentials (a
					// status other than a refusal: 404 on a BMC without
					// one) while the system's read ran out of time: the
					// host's own failure (a dead blade), not the
					// credentials'.
					return power.AfterLogin(e)
				case errors.Is(err, context.DeadlineExceeded) && r.listHad >= c.sess.answerTime():
					// Neither read was answered, the SessionService's
					// having had at least as long as the BMC took to
					// answer the login: a refusal of the credentials
					// that the BMC holds back (a failed-login delay, IP
					// blocking), or a BMC that hangs as a whole.
					// power.Unanswered: a Pool counts it against the
					// login, unless a request with these credentials was
					// answered lately (another host's): then this host
					// backs off alone. A read that had less time than
					// that proves nothing of the credentials (a slow BMC
					// beside a dead blade): the error is returned as it
					// is, a timeout
					// (TestReview35_SlowBMCDeadBladeRefusesHealthyFence).
					return power.Unanswered(e)
				}
			}
			return c.serviceAfterLogin(e)
		}
		if err != nil && r.listed {
			e := c.classify("read system", err)
			if c.cfg.BasicAuth && !errors.Is(e, power.ErrAuth) {
				// The SessionService answered these credentials while
				// the system's own read ran out of time (a dead blade): the
				// system's failure, not the credentials' (a refused
				// password is answered 401, it does not hang), so the
				// Pool backs this host alone off, never the shared
				// login (TestReview35_BasicAuthDeadBladeBacksOffNeighbours).
				return power.AfterLogin(e)
			}
			return c.systemsOwn(e)
		}
		if err != nil && c.cfg.BasicAuth {
			// With basic auth nothing proved the credentials yet: a
			// refusal here is checked on a resource of no system's
			// (refusedHere): refused there too, it is
			// theirs, whatever the listing says (with a session the
			// login proved them; the listing decides), and the system
			// is not read again (each read with a refused password
			// counts towards the account's lockout): the Pool backs the
			// login off. Answered there, it is this system's refusal
			// (power.ErrSystemRefused, power.AfterLogin): the Pool backs
			// this host alone off.
			e := c.classify("read system", c.refusedHere(ctx, client, err))
			if errors.Is(e, power.ErrSystemRefused) {
				return power.AfterLogin(e)
			}
			if errors.Is(e, power.ErrAuth) || errors.Is(e, power.ErrCheckCut) {
				return e
			}
		}
		if err == nil && sys.ID == id {
			c.systemURI = sys.ODataID
			return c.readReset(ctx, sys.RawData)
		}
	}
	systems, err := c.on(ctx, client).service().Systems()
	if err != nil {
		if membersFailed(err) {
			// The collection answered; a member's read failed (this
			// host's system, as its direct read did): the system's.
			return c.systemsOwn(c.classify("list systems", err))
		}
		// The service root or the Systems collection failed (a busy
		// or updating service, a timeout).
		e := c.classify("list systems", err)
		if !c.cfg.BasicAuth {
			return c.serviceAfterLogin(e)
		}
		if c.cfg.BasicAuth && e.Status == http.StatusForbidden && e.Err == nil {
			// With basic auth this read is the login: a 403 refuses the
			// account, as a 403 to a session's login does.
			cp := *e
			cp.Err = power.ErrAuth
			e = &cp
		}
		return e
	}
	var sys *schemas.ComputerSystem
	for _, s := range systems {
		if c.cfg.SystemID == "" && len(systems) == 1 || s.ID == c.cfg.SystemID {
			sys = s
		}
	}
	if sys == nil {
		ids := make([]string, len(systems))
		for i, s := range systems {
			ids[i] = s.ID
		}
		msg := fmt.Sprintf("system %q not found among the BMC's %d system(s) (%s)", c.cfg.SystemID, len(systems), strings.Join(ids, ", "))
		if c.cfg.SystemID == "" {
			msg = fmt.Sprintf("the BMC has %d systems (%s): name the one to control", len(systems), strings.Join(ids, ", "))
		}
		// The listing answered with these credentials: with a session
		// (its login proved them) or, with basic auth, a listing whose
		// members were read (an empty collection may be served to
		// anyone), the login is good and the system is this host's own
		// problem.
		var cause error
		if !c.cfg.BasicAuth || len(systems) > 0 {
			cause = power.ErrNoSystem
		}
		return c.systemsOwn(&power.Error{Op: "connect", Class: power.ClassFailed, Message: c.redact(msg), Err: cause})
	}
	c.systemURI = sys.ODataID
	return c.systemsOwn(c.readReset(ctx, sys.RawData))
}

// serviceAfterLogin marks e, a failure of the service root or the
// Systems collection after the BMC accepted the session's login, as the
// host's own (power.AfterLogin: the Pool backs this host alone off, and
// keeps the session for the other hosts of the login, whose own reads
// tell whether it works), unless it refuses the credentials (ErrAuth: the
// login's). A chassis that builds its collection by asking every blade
// hangs it while one blade is dead: that is no failure of the login, and
// must neither back off nor log out a login that the other blades' hosts
// use (TestReview35v_DeadBladeBacksOffNeighbourFenceMinutes,
// TestReview35v_EarlySharedLoginFailureRefusesOpenJoiner). With basic
// auth nothing proved the credentials: e is returned as it is.
func (c *Controller) serviceAfterLogin(e *power.Error) error {
	if c.cfg.BasicAuth || errors.Is(e, power.ErrAuth) {
		return e
	}
	return power.AfterLogin(e)
}

// systemsOwn marks err (nil if nil), a failure of this host's own system (its
// resource, its member of the Systems listing, its ActionInfo) after the
// BMC accepted the session's login, as the host's own (power.AfterLogin:
// a Pool backs this host alone off, not the login). A refusal (401) of
// such a request is no refusal of the credentials the BMC just accepted
// (an account without rights on this system, a blade's controller that
// rejects the token its chassis forwards): it no longer matches
// power.ErrAuth. With basic auth nothing proved the credentials (but an
// answered listing: ErrNoSystem): err is returned as it is.
func (c *Controller) systemsOwn(err error) error {
	if err == nil || c.cfg.BasicAuth {
		return err
	}
	if pe := (*power.Error)(nil); errors.As(err, &pe) && pe.Err == power.ErrAuth {
		cp := *pe
		cp.Err = nil
		cp.Message = "the BMC accepted the login but refuses requests for this system: " + pe.Message
		err = &cp
	}
	return power.AfterLogin(err)
}

// systemRead is the outcome of readSystem.
type systemRead struct {
	sys *schemas.ComputerSystem
	err error
	// listed: the direct read ran out of time after the Systems
	// collection was read beside it; listErr is that read's outcome.
	// With BasicAuth the SessionService is read instead (it needs the
	// credentials and no blade: a chassis may hang its collection while a
	// blade is dead), and only it: each request sends the password.
	listed  bool
	listErr error
	// listHad: the time to the deadline the read beside had when it was
	// sent.
	listHad time.Duration
}

// readSystem reads the system at uri on client, with the whole of ctx's
// time. If the read has not answered by half of ctx's time left (or
// earlier: besideWait), the Systems collection (no member; with
// BasicAuth the SessionService) is read beside it; its outcome is
// reported if the direct read then runs out of time (the listing, bounded
// by ctx as well, has ended too), and otherwise it is cancelled and not
// waited for.
func (c *Controller) readSystem(ctx context.Context, client *gofish.APIClient, uri string) systemRead {
	direct := make(chan systemRead, 1)
	go func() {
		sys, err := schemas.GetComputerSystem(c.on(ctx, client), uri)
		direct <- systemRead{sys: sys, err: err}
	}()
	dl, ok := ctx.Deadline()
	if !ok {
		return <-direct
	}
	t := time.NewTimer(besideWait(time.Until(dl), c.sess.answerTime()))
	defer t.Stop()
	select {
	case r := <-direct:
		return r
	case <-t.C:
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listed := make(chan error, 1)
	had := time.Until(dl)
	go func() { listed <- c.readSystems(lctx, client) }()
	r := <-direct
	if r.err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The read beside ends before this does: it uses the session's
		// client, which a Close may log out once this read returned.
		cancel()
		<-listed
		return r
	}
	r.listed, r.listErr, r.listHad = true, <-listed, had
	return r
}

// besideWait is how long the direct read of a system, with left to its
// deadline, runs alone before the read beside it is sent: half of left,
// but no later than twice the BMC's answer time (took: its login's)
// before the deadline, so that a BMC slower than a third of the
// deadline per request can still answer it (a read beside needs a
// connection of its own); at once if left is shorter than that.
func besideWait(left, took time.Duration) time.Duration {
	return max(0, min(left/2, left-2*took))
}

// answerTime is how long the BMC took to answer the session's last
// login (0: not known).
func (s *session) answerTime() time.Duration { return time.Duration(s.loginTook.Load()) }

// readSystems reads the Systems collection (no member) on client's
// session, beside the direct read of the system (which holds the
// Controller's request slot), through the session's own HTTP client (the
// endpoint's origin only): nil if the service answered.
func (c *Controller) readSystems(ctx context.Context, client *gofish.APIClient) error {
	if s, err := client.GetSession(); !c.cfg.BasicAuth && (err != nil || s.Token == "") {
		// Not sent without its token (a 401 would read as a refusal of
		// the credentials the login just proved): the service is not
		// known to answer.
		return errors.New("no session token to read the Systems collection with")
	}
	if c.cfg.BasicAuth {
		// The credentials' own resource (systemRead.listed).
		return c.readBeside(ctx, client, "/redfish/v1/SessionService")
	}
	return c.readBeside(ctx, client, "/redfish/v1/Systems")
}

// readBeside reads path on client's session, beside the direct read of
// the system (no request slot), through the session's own HTTP client:
// nil if the service answered 2xx.
func (c *Controller) readBeside(ctx context.Context, client *gofish.APIClient, path string) error {
	resp, err := (&reqPath{c: c, ctx: ctx, cl: client, beside: true}).Get(path) // no slot: beside the direct read
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body) // bounded (MaxBody)
	resp.Body.Close()
	return nil
}

// membersFailed reports whether err, of a listing of the Systems
// collection, is the failure of members only: the collection itself
// answered (every failed read is of a member, /redfish/v1/Systems/<id>).
func membersFailed(err error) bool {
	var ce *schemas.CollectionError
	if !errors.As(err, &ce) || ce == nil || len(ce.Failures) == 0 {
		return false
	}
	for k := range ce.Failures {
		u, perr := url.Parse(k)
		if perr != nil {
			return false
		}
		id, ok := strings.CutPrefix(strings.TrimSuffix(u.Path, "/"), "/redfish/v1/Systems/")
		if !ok || id == "" {
			return false
		}
	}
	return true
}

// readReset extracts the Reset target and allowable values (inline or via
// ActionInfo) from the system's JSON.
func (c *Controller) readReset(ctx context.Context, raw []byte) error {
	var s struct {
		Actions map[string]struct {
			Target     string   `json:"target"`
			Allowable  []string `json:"ResetType@Redfish.AllowableValues"`
			ActionInfo string   `json:"@Redfish.ActionInfo"`
		} `json:"Actions"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return &power.Error{Op: "connect", Class: power.ClassFailed, Message: "unreadable ComputerSystem", Err: err}
	}
	a, ok := s.Actions["#ComputerSystem.Reset"]
	if !ok || a.Target == "" {
		return &power.Error{Op: "connect", Class: power.ClassUnsupported, Message: "system has no Reset action"}
	}
	// A target that is not a path of the endpoint's is kept, and every
	// reset refused (change): reads still work, and the operator learns
	// why a power action fails.
	c.resetTarget, c.allowed = a.Target, a.Allowable
	if len(a.Allowable) == 0 && a.ActionInfo != "" && bmcPath(a.ActionInfo) {
		client := c.sess.current()
		info, err := schemas.GetObject[schemas.ActionInfo](c.on(ctx, client), a.ActionInfo)
		if err != nil {
			// With BasicAuth a 401 is checked against the
			// credentials (refusedHere): this system's, if they work.
			e := c.classify("read ActionInfo", c.refusedHere(ctx, client, err))
			if errors.Is(e, power.ErrSystemRefused) {
				return power.AfterLogin(e)
			}
			return e
		}
		for _, p := range info.Parameters {
			if p.Name == "ResetType" {
				c.allowed = p.AllowableValues
			}
		}
	}
	var bits uint32
	for i, m := range []power.Mode{power.ModeSoft, power.ModeHard} {
		if strings.EqualFold(c.choose(offPrefs(m)), "PushPowerButton") {
			bits |= 1 << i
		}
	}
	if strings.EqualFold(c.choose(onPrefs), "PushPowerButton") {
		bits |= 4
	}
	c.toggles.Store(bits)
	return nil
}
