package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish"
)

// session is one login to a BMC: the HTTP client and the gofish client
// holding the session token. The controllers of several systems of one
// service may share it; a session that expires is re-established once for
// all of them.
type session struct {
	hc   *http.Client
	gate power.LoginGate // the Pool's, or nil
	busy chan struct{}   // held while logging in again
	// places are the places of the reads in flight that are no power
	// command's (Config.MaxInFlight of them, the probe, the suspect
	// systems'): reqPath.do, readplace.go.
	places *readPlaces
	stats  readStats // the reads' answer times (readplace.go)
	// loginTook: how long the BMC took to answer the last login
	// (nanoseconds; with BasicAuth the service root's read): the time a
	// read beside a system's read is given at least (readSystem).
	loginTook atomic.Int64

	mu     sync.Mutex
	client *gofish.APIClient // nil once logged out

	// checks bounds the credentials' checks run alone (checkAlone): the
	// owning Controller's Close ends it, so nothing of a check is sent
	// once Close returned. Nil: never ended (tests' bare sessions).
	checks    context.Context
	endChecks context.CancelFunc
}

// newSession returns a session on hc (the owning Controller's).
func newSession(hc *http.Client, gate power.LoginGate, places *readPlaces) *session {
	checks, end := context.WithCancel(context.Background())
	return &session{hc: hc, gate: gate, busy: make(chan struct{}, 1), places: places, checks: checks, endChecks: end}
}

// checksContext returns the context the checks run alone derive from.
func (s *session) checksContext() context.Context {
	if s.checks == nil {
		return context.Background()
	}
	return s.checks
}

// stopChecks ends the checks run alone on s, at once (before it returns).
func (s *session) stopChecks() {
	if s.endChecks != nil {
		s.endChecks()
	}
}

func (s *session) current() *gofish.APIClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

func (s *session) set(cl *gofish.APIClient) {
	s.mu.Lock()
	s.client = cl
	s.mu.Unlock()
}

// replace makes fresh the client if old still is, atomically (a Close may
// have taken the session meanwhile: then fresh is not installed).
func (s *session) replace(old, fresh *gofish.APIClient) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != old {
		return false
	}
	s.client = fresh
	return true
}

// take removes the client, atomically, and returns it (nil if none).
func (s *session) take() *gofish.APIClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.client
	s.client = nil
	return cl
}

// login makes a new login for c's configuration. A later login (gated)
// goes through the gate: one login at a time per BMC and the back-off of
// the credentials, when a Pool gave one (the Pool holds them already for
// the first, inside Connect).
func (s *session) login(ctx context.Context, c *Controller, gated bool) (_ *gofish.APIClient, err error) {
	if gated && s.gate != nil {
		done, gerr := s.gate(ctx)
		if gerr != nil {
			return nil, c.classify("connect", gerr)
		}
		defer func() { done(err) }()
	}
	start := time.Now()
	client, cerr := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint: strings.TrimSuffix(c.cfg.Endpoint, "/"), Username: c.cfg.Username, Password: c.cfg.Password,
		BasicAuth: c.cfg.BasicAuth, HTTPClient: s.hc, ReuseConnections: true, NoModifyTransport: true,
	})
	if cerr != nil {
		if !c.cfg.BasicAuth && strings.Contains(cerr.Error(), "no target provided") {
			return nil, &power.Error{Op: "connect", Class: power.ClassUnsupported,
				Message: "the service root links no SessionService (sushy-tools has none): set BasicAuth", Err: ErrNoSessionService}
		}
		return nil, c.classify("connect", cerr)
	}
	s.loginTook.Store(int64(time.Since(start)))
	return client, nil
}

// relogin replaces the expired client stale with a new login, once for
// all the controllers sharing the session: a caller that finds it already
// replaced uses the new one. The login is not the caller's to cancel: a
// caller that gives up waiting leaves it running (bounded by
// reloginTimeout), and its session serves the next call; a BMC that was
// still answering an abandoned login would otherwise get the next one at
// the same time, and keep a session nobody can log out. The old session is
// logged out in the background, never holding up the caller.
func (s *session) relogin(ctx context.Context, c *Controller, stale *gofish.APIClient) (*gofish.APIClient, error) {
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, &power.Error{Op: "connect", Class: power.ClassBusy, Message: "waiting for another login on this session", Err: ctx.Err()}
	}
	cur := s.current()
	if cur == nil || cur != stale {
		<-s.busy
		if cur == nil {
			return nil, &power.Error{Op: "request", Class: power.ClassFailed, Message: "controller closed"}
		}
		return cur, nil
	}
	type result struct {
		cl  *gofish.APIClient
		err error
	}
	res := make(chan result, 1)
	go func() {
		defer func() { <-s.busy }()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reloginTimeout)
		defer cancel()
		fresh, err := s.login(lctx, c, true)
		if err == nil {
			if s.replace(stale, fresh) {
				go logout(lctx, stale)
			} else {
				logout(lctx, fresh) // closed meanwhile
				fresh, err = nil, &power.Error{Op: "request", Class: power.ClassFailed, Message: "controller closed"}
			}
		}
		res <- result{fresh, err}
	}()
	select {
	case r := <-res:
		return r.cl, r.err
	case <-ctx.Done():
		return nil, &power.Error{Op: "connect", Class: power.ClassBusy,
			Message: "gave up waiting for the new login to the BMC; it goes on, and the next call uses it", Err: ctx.Err()}
	}
}

// reloginTimeout bounds a login made inside a call.
const reloginTimeout = 30 * time.Second

// share makes the controller of cfg's system on the session of shared,
// without a login, if shared is a Controller of this package with the same
// endpoint, credentials and transport settings; otherwise it fails with
// power.ErrNotShared (credentials are never crossed).
func share(ctx context.Context, cfg Config, shared power.Controller) (*Controller, error) {
	sh, ok := shared.(*Controller)
	if !ok || !sh.cfg.sameLogin(cfg) {
		return nil, &power.Error{Op: "connect", Class: power.ClassFailed,
			Message: fmt.Sprintf("the offered session is not this login's (%T)", shared), Err: power.ErrNotShared}
	}
	c := newController(cfg, sh.sess, false)
	stale := c.sess.current()
	err := c.discover(ctx)
	var pe *power.Error
	if errors.As(err, &pe) && pe.Status == http.StatusUnauthorized && !cfg.BasicAuth && stale != nil && ctx.Err() == nil &&
		(!errors.Is(err, power.ErrAfterLogin) || c.expired(ctx, stale)) {
		// The shared session expired: re-established once, for all. (A
		// 401 for this system's own member of a Systems collection is no
		// expiry, the system's own, no login, if the BMC still takes the
		// session: a BMC may serve the collection to anyone.)
		if _, err := c.sess.relogin(ctx, c, stale); err != nil {
			return nil, err
		}
		err = c.discover(ctx)
	}
	if errors.Is(err, ErrOffOrigin) {
		// The session refuses this endpoint's requests: never a refusal
		// of this host for as long as that session lives, but a login of
		// its own.
		return nil, &power.Error{Op: "connect", Class: power.ClassFailed,
			Message: "the offered session cannot reach this endpoint", Err: fmt.Errorf("%w: %w", power.ErrNotShared, err)}
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// sameLogin reports whether a and b log in to the same endpoint with the
// same credentials and the same transport settings.
func (a Config) sameLogin(b Config) bool {
	pools := a.RootCAs == b.RootCAs || a.RootCAs != nil && b.RootCAs != nil && a.RootCAs.Equal(b.RootCAs)
	proxies := a.Proxy == b.Proxy || a.Proxy != nil && b.Proxy != nil && a.Proxy.String() == b.Proxy.String()
	return originOf(a.Endpoint) == originOf(b.Endpoint) &&
		a.Username == b.Username && a.Password == b.Password && a.BasicAuth == b.BasicAuth &&
		a.InsecureSkipVerify == b.InsecureSkipVerify && pools && proxies && a.HTTPClient == b.HTTPClient
}

// expired reports whether the BMC refuses session cl: a 401 to a read of
// the session's own resource (or, if its login named none on this
// endpoint, of the Sessions collection), which only an authenticated
// client may read (DSP0266). Any other outcome (an answer, a failure that
// is no refusal) is not taken for an expiry.
func (c *Controller) expired(ctx context.Context, cl *gofish.APIClient) bool {
	path := "/redfish/v1/SessionService/Sessions"
	if sess, err := cl.GetSession(); err == nil && bmcPath(sess.ID) {
		path = sess.ID
	}
	resp, err := c.on(ctx, cl).Get(path)
	if err == nil {
		resp.Body.Close()
		return false
	}
	return c.classify("check session", err).Status == http.StatusUnauthorized
}
