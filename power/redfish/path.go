package redfish

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// reqPath is one Controller's own way of sending requests on its
// session (a schemas.Client): the session's HTTP client (the endpoint's
// origin only, every body bounded, no redirect off the origin nor of a
// request with a body: httpClient) and the session's token (or the basic
// auth credentials), but a request slot of the Controller's own. gofish
// sends one request at a time per client, and every copy of a client
// (WithContext) shares that one slot: the controllers of several systems
// sharing a session would queue behind each other, and one blade whose
// reads hang would hold a neighbour's fence
// (TestReview35_WedgedBladeStarvesSharedSession). Only the login and the
// logout go through the session's gofish client.
type reqPath struct {
	c   *Controller
	ctx context.Context
	cl  *gofish.APIClient // the session's client: its token and settings
	// slot, if not nil, is held by each request (one at a time per
	// Controller: a Systems listing reads its members one by one).
	slot chan struct{}
	// sent, if not nil, is called when a request is handed to the HTTP
	// client, holding the slot: from then on it may reach the BMC
	// (before, it certainly did not: a wait for the slot, a re-login,
	// an origin check).
	sent func()
	// beside: a read beside the system's own (readBeside): its answer is
	// no evidence about the system reads (readplace.go).
	beside bool
}

var _ schemas.Client = (*reqPath)(nil)

// on returns c's request path on session client cl, bound to ctx.
func (c *Controller) on(ctx context.Context, cl *gofish.APIClient) *reqPath {
	slot := c.reqs
	if isCommand(ctx) {
		slot = c.creqs // a command's requests wait for no read's
	}
	return &reqPath{c: c, ctx: ctx, cl: cl, slot: slot}
}

// service returns the service root of cl, its requests sent on p.
func (p *reqPath) service() *gofish.Service {
	svc := p.cl.WithContext(p.ctx).GetService() // a copy of its own
	svc.SetClient(p)
	return svc
}

// GetSettings returns the session client's settings.
func (p *reqPath) GetSettings() schemas.ClientSettings { return p.cl.GetSettings() }

// Get sends a GET.
func (p *reqPath) Get(uri string) (*http.Response, error) {
	return p.do(http.MethodGet, uri, nil, nil)
}

// GetWithHeaders sends a GET with headers.
func (p *reqPath) GetWithHeaders(uri string, h map[string]string) (*http.Response, error) {
	return p.do(http.MethodGet, uri, nil, h)
}

// Post sends a POST of payload as JSON.
func (p *reqPath) Post(uri string, payload any) (*http.Response, error) {
	return p.do(http.MethodPost, uri, payload, nil)
}

// PostWithHeaders sends a POST with headers.
func (p *reqPath) PostWithHeaders(uri string, payload any, h map[string]string) (*http.Response, error) {
	return p.do(http.MethodPost, uri, payload, h)
}

// PostMultipart is not used by the adapter: it fails.
func (p *reqPath) PostMultipart(string, map[string]io.Reader) (*http.Response, error) {
	return nil, errMultipart
}

// PostMultipartWithHeaders is not used by the adapter: it fails.
func (p *reqPath) PostMultipartWithHeaders(string, map[string]io.Reader, map[string]string) (*http.Response, error) {
	return nil, errMultipart
}

var errMultipart = errors.New("redfish: multipart requests are not sent by this adapter")

// Patch sends a PATCH.
func (p *reqPath) Patch(uri string, payload any) (*http.Response, error) {
	return p.do(http.MethodPatch, uri, payload, nil)
}

// PatchWithHeaders sends a PATCH with headers.
func (p *reqPath) PatchWithHeaders(uri string, payload any, h map[string]string) (*http.Response, error) {
	return p.do(http.MethodPatch, uri, payload, h)
}

// Put sends a PUT.
func (p *reqPath) Put(uri string, payload any) (*http.Response, error) {
	return p.do(http.MethodPut, uri, payload, nil)
}

// PutWithHeaders sends a PUT with headers.
func (p *reqPath) PutWithHeaders(uri string, payload any, h map[string]string) (*http.Response, error) {
	return p.do(http.MethodPut, uri, payload, h)
}

// Delete sends a DELETE.
func (p *reqPath) Delete(uri string) (*http.Response, error) {
	return p.do(http.MethodDelete, uri, nil, nil)
}

// DeleteWithHeaders sends a DELETE with headers.
func (p *reqPath) DeleteWithHeaders(uri string, h map[string]string) (*http.Response, error) {
	return p.do(http.MethodDelete, uri, nil, h)
}

// do sends one request as gofish would (the same headers, the same
// errors: a *schemas.Error for an answer other than 2xx, and
// schemas.ErrNotModified with the response for a 304), on the session's
// HTTP client, holding p's slot and, unless it is a power command's, one
// of the session's read places until it returns and its answer's body
// is read (readplace.go); a read cut (a probe, a doubtful or suspect
// system's, or one the evidence shows to hang) is sent again, as long as
// its context allows.
func (p *reqPath) do(method, uri string, payload any, headers map[string]string) (*http.Response, error) {
	if uri == "" {
		return nil, schemas.ConstructError(0, []byte("unable to execute request, no target provided"))
	}
	var body []byte
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, err
		}
		body = b
	}
	if _, err := p.request(p.ctx, method, uri, body, headers); err != nil {
		return nil, err
	}
	if p.slot != nil {
		select {
		case p.slot <- struct{}{}:
		case <-p.ctx.Done():
			return nil, p.ctx.Err()
		}
		defer func() { <-p.slot }()
	}
	place := &readPlace{c: p.c, ctx: p.ctx, get: method == http.MethodGet, proof: !p.beside}
	var resp *http.Response
	for {
		ctx, err := place.wait()
		if err != nil {
			return nil, err
		}
		req, err := p.request(ctx, method, uri, body, headers)
		if err != nil {
			place.done(false)
			place.release(nil)
			return nil, err
		}
		// A request whose context is done (its caller's deadline passed
		// while it waited for the slot, which a select may take all the
		// same, or for its place) is not handed to the HTTP client: it
		// cannot reach the BMC, and a reset must say it was not sent
		// (TestReview35ab_ResetOnExpiredContextNotNotSent).
		if err = ctx.Err(); err == nil {
			if p.sent != nil {
				p.sent()
			}
			resp, err = p.c.sess.hc.Do(req)
		}
		if err == nil && ctx.Err() != nil {
			// An answer that raced the request's end (its caller's
			// deadline, a cut): not taken, nor timed (a server may
			// answer a request because its connection closed).
			resp.Body.Close()
			resp, err = nil, ctx.Err()
		}
		// Only an answer of the service's own counts for the read place
		// (its answer time, the system's suspicion, evidence for overdue
		// reads): a 5xx is a failure it reports, often a chassis
		// manager's gateway timeout on a dead blade's controller, late
		// (TestReview35_DeadBladesAnsweringGatewayTimeoutHoldHealthyPlaces).
		if place.done(err == nil && resp.StatusCode < http.StatusInternalServerError) {
			continue // cut: sent again (readplace.go)
		}
		if err != nil {
			place.release(nil)
			if cerr := p.ctx.Err(); cerr != nil && place.cut {
				return nil, cerr // the caller's end, not the cut's
			}
			return nil, err
		}
		place.release(resp)
		break
	}
	switch {
	case resp.StatusCode == http.StatusNotModified:
		return resp, schemas.ErrNotModified
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted &&
		resp.StatusCode != http.StatusNoContent:
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body) // bounded (MaxBody)
		if err != nil {
			return nil, schemas.ConstructError(0, []byte(err.Error()))
		}
		return nil, schemas.ConstructError(resp.StatusCode, b)
	}
	return resp, nil
}

// request makes the request do sends, bound to ctx.
func (p *reqPath) request(ctx context.Context, method, uri string, body []byte, headers map[string]string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(p.c.cfg.Endpoint, "/")+uri, rd)
	if err != nil {
		return nil, err
	}
	// gofish's order: its common headers, the custom ones (never
	// Content-Length: the length is the body's), then the content type,
	// the credentials, and "Connection: keep-alive" (the session client
	// is made with ReuseConnections).
	req.Header.Set("User-Agent", "gofish/1.0")
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		if k != "" && !strings.EqualFold(k, "Content-Length") {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	if s, err := p.cl.GetSession(); err == nil && s.Token != "" {
		req.Header.Set("X-Auth-Token", s.Token)
	} else if p.c.cfg.BasicAuth && p.c.cfg.Username != "" && p.c.cfg.Password != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.c.cfg.Username+":"+p.c.cfg.Password)))
	}
	req.Close = false
	req.Header.Add("Connection", "keep-alive")
	return req, nil
}

// commandKey marks the context of a power command's requests.
type commandKey struct{}

// asCommand marks ctx as a power command's (On, Off, Reset): its requests
// are not held by Config.MaxInFlight.
func asCommand(ctx context.Context) context.Context {
	return context.WithValue(ctx, commandKey{}, true)
}

// isCommand reports whether ctx is a power command's.
func isCommand(ctx context.Context) bool {
	b, _ := ctx.Value(commandKey{}).(bool)
	return b
}
