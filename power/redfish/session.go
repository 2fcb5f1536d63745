package redfish

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

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

	mu     sync.Mutex
	client *gofish.APIClient // nil once logged out
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
	return client, nil
}

// relogin replaces the expired client stale with a new login, once for
// all the controllers sharing the session: a caller that finds it already
// replaced uses the new one. The old session is logged out in the
// background, never holding up the caller.
func (s *session) relogin(ctx context.Context, c *Controller, stale *gofish.APIClient) (*gofish.APIClient, error) {
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, &power.Error{Op: "connect", Class: power.ClassBusy, Message: "waiting for another login on this session", Err: ctx.Err()}
	}
	defer func() { <-s.busy }()
	cur := s.current()
	if cur == nil {
		return nil, &power.Error{Op: "request", Class: power.ClassFailed, Message: "controller closed"}
	}
	if cur != stale {
		return cur, nil
	}
	fresh, err := s.login(ctx, c, true)
	if err != nil {
		return nil, err
	}
	s.set(fresh)
	go logout(ctx, stale)
	return fresh, nil
}

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
	c := &Controller{cfg: cfg, sess: sh.sess, sem: make(chan struct{}, 1)}
	if err := c.discover(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// sameLogin reports whether a and b log in to the same endpoint with the
// same credentials and the same transport settings.
func (a Config) sameLogin(b Config) bool {
	pools := a.RootCAs == b.RootCAs || a.RootCAs != nil && b.RootCAs != nil && a.RootCAs.Equal(b.RootCAs)
	proxies := a.Proxy == b.Proxy || a.Proxy != nil && b.Proxy != nil && a.Proxy.String() == b.Proxy.String()
	return strings.TrimSuffix(a.Endpoint, "/") == strings.TrimSuffix(b.Endpoint, "/") &&
		a.Username == b.Username && a.Password == b.Password && a.BasicAuth == b.BasicAuth &&
		a.InsecureSkipVerify == b.InsecureSkipVerify && pools && proxies && a.HTTPClient == b.HTTPClient
}
