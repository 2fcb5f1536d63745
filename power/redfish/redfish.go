// Package redfish implements power.Controller over Redfish, with
// github.com/stmcginnis/gofish.
//
// Connect finds the ComputerSystem once (by ID, or the only one) and keeps
// the client, the session and the system's URI, its Reset target and its
// allowable reset types, so that in steady state reading the power state
// costs one request and a power change two (read, reset).
//
// What real BMCs do, and what this adapter does about it:
//   - Reset types are chosen from the system's allowable values (inline,
//     or from @Redfish.ActionInfo): soft off = GracefulShutdown, hard off =
//     ForceOff, on = On or ForceOn, PushPowerButton as the last resort
//     (HPE iLO 5 has no Graceful* types). None fits: power.ErrUnsupported.
//   - Allowable values are matched case-insensitively and a malformed
//     concatenation such as "GracefulShutdownGracefulRestart" (a
//     Supermicro firmware) counts for its parts. The reset is posted
//     directly, because gofish's own allowable-value check refuses
//     GracefulShutdown in that case.
//   - A system already in the wanted state gets no reset.
//   - HTTP 400, 405 and 501 on a reset are power.ErrUnsupported; 409 and
//     503 are power.ErrBusy (Dell iDRAC answers 409 to power-on for up to a
//     minute after a power-off: the caller retries); other failures are
//     power.ErrFailed. A 400 or 409 whose re-read shows the target state
//     counts as success.
//   - PoweringOn and PoweringOff read as power.StateTransitioning.
//   - Every operation runs with the caller's context (gofish keeps the
//     context given at connect time; the adapter passes each operation's
//     own). An expired session is re-established once.
//   - TLS is verified unless InsecureSkipVerify; RootCAs adds a CA pool.
//     Errors carry the HTTP status and the Redfish message, never the
//     credentials.
package redfish

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

var _ power.Controller = (*Controller)(nil)

// ErrConfig is wrapped by Connect for invalid configurations.
var ErrConfig = errors.New("redfish: invalid configuration")

// Config says how to reach one BMC.
type Config struct {
	// Endpoint is the BMC's base URL, e.g. https://10.0.0.5. It must not
	// carry credentials.
	Endpoint string
	// Username and Password authenticate; with BasicAuth every request
	// carries them, otherwise a session is created and its token used.
	Username, Password string
	BasicAuth          bool
	// SystemID selects the ComputerSystem; empty means the only one.
	SystemID string
	// InsecureSkipVerify disables TLS verification. RootCAs, if set,
	// replaces the system's CA pool.
	InsecureSkipVerify bool
	RootCAs            *x509.CertPool
	// HTTPClient, if set, is used as is (TLS settings above are ignored).
	HTTPClient *http.Client
}

// Controller is a power.Controller for one Redfish ComputerSystem. It is
// safe for concurrent use.
type Controller struct {
	cfg Config

	mu          sync.Mutex
	client      *gofish.APIClient
	systemURI   string
	resetTarget string
	allowed     []string // as the BMC spells them
}

// Connect opens a session (or sets up basic auth), finds the system and
// reads its reset action.
func Connect(ctx context.Context, cfg Config) (*Controller, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%w: endpoint must be an http(s) URL", ErrConfig)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: endpoint must not carry credentials", ErrConfig)
	}
	c := &Controller{cfg: cfg}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) httpClient() *http.Client {
	if c.cfg.HTTPClient != nil {
		return c.cfg.HTTPClient
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.cfg.RootCAs,
		InsecureSkipVerify: c.cfg.InsecureSkipVerify} //nolint:gosec // the caller opted out
	return &http.Client{Transport: tr}
}

// connect (re)establishes the client and discovers the system (locked by
// the caller or before publication).
func (c *Controller) connect(ctx context.Context) error {
	client, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint: strings.TrimSuffix(c.cfg.Endpoint, "/"), Username: c.cfg.Username, Password: c.cfg.Password,
		BasicAuth: c.cfg.BasicAuth, HTTPClient: c.httpClient(), ReuseConnections: true,
	})
	if err != nil {
		return classify("connect", err)
	}
	old := c.client
	c.client = client
	if old != nil {
		old.Logout()
	}
	if c.systemURI != "" {
		return nil
	}
	systems, err := client.WithContext(ctx).GetService().Systems()
	if err != nil {
		return classify("list systems", err)
	}
	var sys *schemas.ComputerSystem
	for _, s := range systems {
		if c.cfg.SystemID == "" && len(systems) == 1 || s.ID == c.cfg.SystemID {
			sys = s
		}
	}
	if sys == nil {
		return &power.Error{Op: "connect", Class: power.ClassFailed,
			Message: fmt.Sprintf("system %q not found among %d system(s)", c.cfg.SystemID, len(systems))}
	}
	c.systemURI = sys.ODataID
	return c.readReset(ctx, sys.RawData)
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
	c.resetTarget, c.allowed = a.Target, a.Allowable
	if len(a.Allowable) == 0 && a.ActionInfo != "" {
		info, err := schemas.GetObject[schemas.ActionInfo](c.client.WithContext(ctx), a.ActionInfo)
		if err != nil {
			return classify("read ActionInfo", err)
		}
		for _, p := range info.Parameters {
			if p.Name == "ResetType" {
				c.allowed = p.AllowableValues
			}
		}
	}
	return nil
}

// Close logs the session out.
func (c *Controller) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		c.client.Logout()
		c.client = nil
	}
	return nil
}

// State reads the system's PowerState (one request).
func (c *Controller) State(ctx context.Context) (power.State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.readState(ctx)
	if err != nil {
		return power.StateUnknown, err
	}
	return s, nil
}

func (c *Controller) readState(ctx context.Context) (power.State, error) {
	var sys *schemas.ComputerSystem
	err := c.withSession(ctx, func(cl *gofish.APIClient) error {
		var err error
		sys, err = schemas.GetComputerSystem(cl, c.systemURI)
		return err
	})
	if err != nil {
		return power.StateUnknown, classify("state", err)
	}
	switch strings.ToLower(string(sys.PowerState)) {
	case "on":
		return power.StateOn, nil
	case "off":
		return power.StateOff, nil
	case "poweringon", "poweringoff":
		return power.StateTransitioning, nil
	}
	return power.StateUnknown, nil
}

// withSession runs f with a client bound to ctx, and once more after
// re-establishing the session if the BMC answered 401.
func (c *Controller) withSession(ctx context.Context, f func(*gofish.APIClient) error) error {
	if c.client == nil {
		return &power.Error{Op: "request", Class: power.ClassFailed, Message: "controller closed"}
	}
	err := f(c.client.WithContext(ctx))
	var re *schemas.Error
	if errors.As(err, &re) && re.HTTPReturnedStatusCode == http.StatusUnauthorized && !c.cfg.BasicAuth {
		if cerr := c.connect(ctx); cerr != nil {
			return cerr
		}
		err = f(c.client.WithContext(ctx))
	}
	return err
}

// On powers the system on.
func (c *Controller) On(ctx context.Context) error {
	return c.change(ctx, "on", power.StateOn, []string{"On", "ForceOn", "PushPowerButton"})
}

// Off powers the system off.
func (c *Controller) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		return c.change(ctx, power.OpName(m), power.StateOff, []string{"ForceOff", "PushPowerButton"})
	}
	return c.change(ctx, power.OpName(m), power.StateOff, []string{"GracefulShutdown", "PushPowerButton"})
}

func (c *Controller) change(ctx context.Context, op string, want power.State, prefs []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.readState(ctx)
	if err != nil {
		return err
	}
	if cur == want {
		return nil
	}
	rt := c.choose(prefs)
	if rt == "" {
		return &power.Error{Op: op, Class: power.ClassUnsupported,
			Message: fmt.Sprintf("none of %v among the allowable reset types %v", prefs, c.allowed)}
	}
	if strings.EqualFold(rt, "PushPowerButton") && cur == power.StateTransitioning {
		return &power.Error{Op: op, Class: power.ClassBusy, Message: "power is changing; PushPowerButton would toggle it"}
	}
	err = c.withSession(ctx, func(cl *gofish.APIClient) error {
		resp, err := cl.Post(c.resetTarget, map[string]string{"ResetType": rt})
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	})
	if err == nil {
		return nil
	}
	pe := classify(op+" ("+rt+")", err)
	if pe.Status == http.StatusBadRequest || pe.Status == http.StatusConflict {
		// Some BMCs refuse a reset into the state the system just reached.
		if s, rerr := c.readState(ctx); rerr == nil && s == want {
			return nil
		}
	}
	return pe
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

// classify turns a gofish or transport error into a *power.Error.
func classify(op string, err error) *power.Error {
	var pe *power.Error
	if errors.As(err, &pe) {
		return pe
	}
	var re *schemas.Error
	if errors.As(err, &re) {
		msg := re.Message
		if len(re.ExtendedInfos) > 0 && re.ExtendedInfos[0].Message != "" {
			msg = re.ExtendedInfos[0].Message
		}
		class := power.ClassFailed
		switch re.HTTPReturnedStatusCode {
		case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusNotImplemented:
			class = power.ClassUnsupported
		case http.StatusConflict, http.StatusServiceUnavailable:
			class = power.ClassBusy
		}
		return &power.Error{Op: op, Class: class, Status: re.HTTPReturnedStatusCode, Message: msg}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &power.Error{Op: op, Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	}
	// Transport errors name the URL but never carry the credentials
	// (Connect refuses endpoints with userinfo).
	return &power.Error{Op: op, Class: power.ClassFailed, Err: err}
}
