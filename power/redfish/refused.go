package redfish

// This file: with BasicAuth, telling a refusal of the host's own system
// from a refusal of the credentials, by asking the BMC.

import (
	"context"
	"errors"
	"net/http"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// credsCheckPath is the resource read, with BasicAuth, after a request
// for the host's system was refused 401: it needs the credentials (the
// emulator and real BMCs protect it) and asks no blade (a chassis may
// hang its Systems collection while one blade is dead).
const credsCheckPath = "/redfish/v1/SessionService"

// systemRefused is err, a 401 to a request for the host's own system,
// once the BMC answered the same credentials on credsCheckPath: classify
// makes it an error matching power.ErrSystemRefused, not power.ErrAuth.
// It unwraps to err (its status stays readable).
type systemRefused struct{ err error }

func (e systemRefused) Error() string { return e.err.Error() }

func (e systemRefused) Unwrap() error { return e.err }

// refusedHere returns err, the outcome of a request for the host's own
// system sent on client, as it is, unless c sends the credentials with
// every request (BasicAuth), err is a 401 and ctx is not done: then it
// reads credsCheckPath once, beside (no request slot; bounded by ctx):
// answered 2xx, the credentials work and the refusal is this system's
// (systemRefused); refused, failed or unanswered, err as it is (a
// refusal of the credentials, power.ErrAuth). Each refused read counts
// towards the account's lock-out, so it is one read per refused request
// at most, and only if ctx's power.CallInfo asks for it (CheckRefusal:
// a Pool whose other hosts use the credentials; not on the login retried
// after their refusal, which sends the refused password once).
func (c *Controller) refusedHere(ctx context.Context, client *gofish.APIClient, err error) error {
	var re *schemas.Error
	if !c.cfg.BasicAuth || client == nil || ctx.Err() != nil || !power.CallInfoFrom(ctx).CheckRefusal ||
		!errors.As(err, &re) || re.HTTPReturnedStatusCode != http.StatusUnauthorized {
		return err
	}
	if cerr := c.readBeside(ctx, client, credsCheckPath); cerr != nil {
		if f := power.CallInfoFrom(ctx).CheckRefused; f != nil && c.classify("check credentials", cerr).Status == http.StatusUnauthorized {
			f() // one more refused request with the credentials
		}
		return err
	}
	return systemRefused{err}
}

// classifyRefused is classify for a systemRefused err (ok false for any
// other error): the refusal's status and message, marked
// power.ErrSystemRefused instead of power.ErrAuth.
func (c *Controller) classifyRefused(op string, err error) (_ *power.Error, ok bool) {
	var sr systemRefused
	if !errors.As(err, &sr) {
		return nil, false
	}
	e := c.classify(op, sr.err)
	cp := *e
	cp.Err = power.ErrSystemRefused
	cp.Message = "the BMC answers these credentials but refuses requests for this system (check the account's rights on it): " + e.Message
	return &cp, true
}
