package power

import "context"

// CallInfo is what a Pool tells a controller's call, or a Connect, about
// it through its context (WithCallInfo, CallInfoFrom).
type CallInfo struct {
	// CheckRefusal: a refusal (HTTP 401) of a request for the host's own
	// system may be checked once against the credentials, with one more
	// request on a resource of no system's, by an adapter that can (power/redfish
	// with BasicAuth): answered, the refusal is the host's own
	// (ErrSystemRefused: the Pool backs that host alone off); refused
	// too, the credentials' (ErrAuth). A Pool sets it when other hosts
	// use the same BMC and credentials (a refusal of one system taken for
	// the credentials' would back them off too), and not for the login
	// retried after the credentials were refused (each refused request
	// counts towards the account's lock-out: the retry sends the refused
	// password once). The zero value (no Pool): no check, a 401 is
	// ErrAuth.
	CheckRefusal bool
	// CheckRefused, if not nil, is called by an adapter whose check
	// (CheckRefusal) was refused too: the BMC saw one more refused request
	// with the credentials, which a Pool counts towards their back-off
	// (AuthBackoff doubles once more), so that a BMC with a wrong password
	// still sees at most two refused requests a minute.
	CheckRefused func()
}

// callInfoLocked returns the CallInfo of a call or Connect with cr's
// credentials (p.mu held): check, whether a refusal is to be checked.
func (p *Pool) callInfoLocked(cr *creds, check bool) CallInfo {
	return CallInfo{CheckRefusal: check, CheckRefused: func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		cr.checksRefused++ // counted by the back-off that the refusal starts
	}}
}

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
