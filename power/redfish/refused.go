package redfish

// This file: with BasicAuth, telling a refusal of the host's own system
// from a refusal of the credentials, by asking the BMC.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// The resources read, with BasicAuth, after a request for the host's
// system was refused 401 (checkCreds): they need the credentials (the
// Redfish specification requires it; the emulator protects them) and
// ask no blade.
const (
	credsCheckPath   = "/redfish/v1/SessionService"
	systemsCheckPath = "/redfish/v1/Systems"
)

// checkTimeout bounds a check run without a Pool (CallInfo.Check nil):
// it is detached from the caller's cancellation.
const checkTimeout = 10 * time.Second

// maxCheckBody bounds the body of a check's answer read.
const maxCheckBody = 1 << 20

// systemRefused is err, a 401 to a request for the host's own system,
// once the BMC answered the same credentials (checkCreds): classify
// makes it an error matching power.ErrSystemRefused, not power.ErrAuth.
// It unwraps to err (its status stays readable).
type systemRefused struct{ err error }

func (e systemRefused) Error() string { return e.err.Error() }

func (e systemRefused) Unwrap() error { return e.err }

// checkCut is err, a 401 to a request for the host's own system, whose
// check ended with the caller's context (cause) without a verdict:
// classify makes it an error matching power.ErrCheckCut and cause, not
// power.ErrAuth (nothing refused the credentials as far as is known).
type checkCut struct{ err, cause error }

func (e checkCut) Error() string { return e.err.Error() }

func (e checkCut) Unwrap() error { return e.err }

// refusedHere returns err, the outcome of a request for the host's own
// system sent on client, as it is, unless c sends the credentials with
// every request (BasicAuth), err is a 401 and ctx's power.CallInfo asks
// for a check (CheckRefusal: a Pool whose other hosts use the
// credentials, unless they back off after a confirmed refusal): then the
// credentials are checked (checkCreds), through CallInfo.Check if set (a
// Pool: one check per credentials at a time, power.VerdictUnknown at
// once if ctx is done already), else once here, detached from ctx's
// cancellation and bounded by checkTimeout, ctx bounding the wait only
// (nothing sent if ctx is done already). power.CredentialsWork: the
// refusal is this system's (systemRefused); no verdict because ctx
// ended: checkCut (a 401 of a call whose caller left is not counted
// against the credentials); else (refused, or no verdict) err as it is
// (power.ErrAuth: a Pool acts on the verdict it recorded).
func (c *Controller) refusedHere(ctx context.Context, client *gofish.APIClient, err error) error {
	var re *schemas.Error
	ci := power.CallInfoFrom(ctx)
	if !c.cfg.BasicAuth || client == nil || !ci.CheckRefusal ||
		!errors.As(err, &re) || re.HTTPReturnedStatusCode != http.StatusUnauthorized {
		return err
	}
	read := func(ctx context.Context) power.Verdict { return c.checkCreds(ctx, client) }
	v := power.VerdictUnknown
	switch {
	case ci.Check != nil:
		v = ci.Check(ctx, read) // VerdictUnknown at once if ctx is done
	case ctx.Err() == nil:
		v = checkAlone(ctx, c.sess.checksContext(), read)
	}
	switch {
	case v == power.CredentialsWork:
		return systemRefused{err}
	case v == power.VerdictUnknown && ctx.Err() != nil:
		return checkCut{err: err, cause: ctx.Err()}
	}
	return err
}

// checkAlone runs read detached from ctx's cancellation, bounded by
// checkTimeout and ended by closing (the Controller's Close: nothing of
// it is sent once Close returned), and returns its verdict, or
// power.VerdictUnknown once ctx ends (read goes on to its end).
func checkAlone(ctx, closing context.Context, read func(context.Context) power.Verdict) power.Verdict {
	res := make(chan power.Verdict, 1)
	go func() {
		cctx, cancel := context.WithTimeout(valuesOf{Context: closing, vals: ctx}, checkTimeout)
		defer cancel()
		res <- read(cctx)
	}()
	select {
	case v := <-res:
		return v
	case <-ctx.Done():
		return power.VerdictUnknown
	}
}

// checkAnswer is what one read of a check got.
type checkAnswer int

const (
	checkOther   checkAnswer = iota // no answer, or not an authenticated one
	checkOK                         // 200 with the resource's own JSON object
	checkRefused                    // 401: the credentials refused
	checkAbsent                     // 404: no such resource
)

// checkCreds tells whether the BMC answers the credentials, with
// requests that ask no system: it reads the SessionService, then (unless
// that was refused) the Systems collection (no member). A 401 to either
// is power.CredentialsRefused; both answered with their own resource
// (checkRead), or the SessionService absent (404: sushy-tools) and the
// Systems collection answered, power.CredentialsWork; anything else
// power.VerdictUnknown. So a BMC that protects either resource cannot
// answer a refused password with a proof; one that serves both to
// anyone would (the assumption the package doc states).
func (c *Controller) checkCreds(ctx context.Context, client *gofish.APIClient) power.Verdict {
	ss := c.checkRead(ctx, client, credsCheckPath)
	switch {
	case ss == checkRefused:
		return power.CredentialsRefused
	case ctx.Err() != nil: // cut (the Pool's Close): nothing more is sent
		return power.VerdictUnknown
	}
	sys := c.checkRead(ctx, client, systemsCheckPath)
	switch {
	case sys == checkRefused:
		return power.CredentialsRefused
	case sys == checkOK && (ss == checkOK || ss == checkAbsent):
		return power.CredentialsWork
	}
	return power.VerdictUnknown
}

// checkRead reads path once with client's credentials, on the session's
// HTTP client (the endpoint's origin only, bodies bounded) following no
// redirect (a 3xx is checkOther), beside the system's reads (no request
// slot, no read place), bounded by ctx. An answer is checkOK only if it
// is a 200 with a JSON object whose "@odata.id" is path (a trailing
// slash tolerated): a login page or a redirect is no proof.
func (c *Controller) checkRead(ctx context.Context, client *gofish.APIClient, path string) checkAnswer {
	req, err := (&reqPath{c: c, ctx: ctx, cl: client, beside: true}).request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return checkOther
	}
	hc := *c.sess.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return checkOther
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCheckBody))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return checkRefused
	case resp.StatusCode == http.StatusNotFound:
		return checkAbsent
	case resp.StatusCode != http.StatusOK || err != nil:
		return checkOther
	}
	var doc struct {
		ID string `json:"@odata.id"`
	}
	if json.Unmarshal(body, &doc) != nil || strings.TrimSuffix(doc.ID, "/") != path {
		return checkOther
	}
	return checkOK
}

// classifyRefused is classify for a systemRefused or checkCut err (ok
// false for any other error): the refusal's status and message, marked
// power.ErrSystemRefused (or power.ErrCheckCut and the context's error)
// instead of power.ErrAuth.
func (c *Controller) classifyRefused(op string, err error) (_ *power.Error, ok bool) {
	var sr systemRefused
	if errors.As(err, &sr) {
		e := c.classify(op, sr.err)
		cp := *e
		cp.Err = power.ErrSystemRefused
		cp.Message = "the BMC answers these credentials but refuses requests for this system (check the account's rights on it): " + e.Message
		return &cp, true
	}
	var cc checkCut
	if errors.As(err, &cc) {
		e := c.classify(op, cc.err)
		cp := *e
		cp.Class = power.ClassBusy
		cp.Err = errors.Join(power.ErrCheckCut, cc.cause)
		cp.Message = "the BMC refused a request for this system, and the call ended before the check of the credentials was answered (retry; if it persists, check the account's rights on this system and the password): " + e.Message
		return &cp, true
	}
	return nil, false
}

// valuesOf is a context ended by its Context (cancellation reaches its
// children at once: the Context's own values come first, so the context
// package sees its cancel) and carrying vals' values besides.
type valuesOf struct {
	context.Context
	vals context.Context
}

// Value returns the Context's value for key, else vals'.
func (v valuesOf) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.vals.Value(key)
}
