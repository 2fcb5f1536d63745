package redfish

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ErrRedirect is wrapped by the error of a request the BMC redirected off
// the endpoint (another scheme, host or port, or a path not under the
// endpoint's own, onEndpoint), or redirected at all when it
// carried a body (a login, a reset): the redirect is not followed, so that
// neither the credentials nor a login body go anywhere but the endpoint.
var ErrRedirect = errors.New("redfish: the BMC redirected the request; not followed")

// maxRedirects bounds the redirects on the endpoint followed for a read.
const maxRedirects = 3

// httpClient returns the Controller's HTTP client: Config.HTTPClient (its
// transport kept) or one of our own, that reaches the BMC directly unless
// Config.Proxy says otherwise (never through the environment's
// HTTP_PROXY/HTTPS_PROXY), never follows a redirect off the endpoint
// (onEndpoint) nor one of a request with a body, and bounds every response body.
func (c *Controller) httpClient(origin *url.URL) *http.Client {
	var hc http.Client
	if c.cfg.HTTPClient != nil {
		hc = *c.cfg.HTTPClient // its transport (nil: net/http's default) is the caller's
	} else {
		hc.Transport = c.transport()
	}
	theirs := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkRedirect(origin, req, via); err != nil {
			return err
		}
		if theirs != nil {
			return theirs(req, via)
		}
		return nil
	}
	hc.Transport = limitTransport{base: hc.Transport, origin: origin}
	return &hc
}

// ErrOffOrigin is wrapped by the error of a request the Controller
// refused to send because its URL is not on the endpoint (onEndpoint: its
// scheme, host and port, a plain path under the endpoint's own path) or
// carries user information: a URI the BMC gave (a
// session's Location, a Reset target, a link) that is not a path of the
// endpoint's. Neither the session token nor the password goes anywhere
// but the endpoint.
var ErrOffOrigin = errors.New("redfish: request to another origin than the endpoint's refused")

// bmcPath reports whether uri, given by the BMC, is a path of the
// endpoint's: it starts with one "/" (not "//", a network-path reference
// to another host), has no "\" or "@", and is a plain path (plainPath:
// no "." or ".." segment, no "//", no ';', no double encoding, no percent-encoded
// '.', '/' or '\'), so that,
// the endpoint prefixed, it stays under the endpoint's own path.
func bmcPath(uri string) bool {
	if !strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "//") || strings.ContainsAny(uri, "\\@") {
		return false
	}
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return plainPath(uri)
}

// plainPath reports whether p, an escaped URL path, names one resource
// whatever the server or a proxy in front of it makes of it: no "." or
// ".." segment (before or after percent-decoding), no empty segment
// ("//", which a proxy may merge into one '/' or not; a trailing '/'
// is no segment), no ';' (raw or
// encoded: path parameters, which servlet-style proxies strip from a
// segment before resolving dot segments, so that "..;" is ".."), no '%'
// left once decoded (a double encoding such as "%252e", which a server
// decoding twice reads as '.'), and no percent-encoded '.', '/' or '\'
// (nor a '\' decoded), which a server may decode and resolve into
// another path than the one checked. Such a path is refused outright
// rather than resolved.
func plainPath(p string) bool {
	if strings.Contains(p, "//") {
		return false
	}
	low := strings.ToLower(p)
	for _, bad := range []string{"%2e", "%2f", "%5c", ";", "%3b"} {
		if strings.Contains(low, bad) {
			return false
		}
	}
	dec, err := url.PathUnescape(p)
	if err != nil || strings.ContainsAny(dec, "\\;%") {
		return false
	}
	for _, q := range []string{p, dec} {
		for _, seg := range strings.Split(q, "/") {
			if seg == "." || seg == ".." {
				return false
			}
		}
	}
	return true
}

// onEndpoint reports whether u is on the endpoint (base URL e): no user
// information, a plain path (plainPath), and, both spelt as Origin
// spells them (canonical: "bmc." and "bmc", "[::ffff:10.0.0.1]" and
// "10.0.0.1" are one host, "%7Ebmc1" and "~bmc1" one path), the same
// origin and a path under e's own path (the path Origin keeps: a BMC
// behind a proxy, "https://proxy/bmc1", is not "https://proxy/bmc2"). It
// is the one rule for every request sent and every redirect followed,
// whatever URI the BMC gave.
func onEndpoint(e, u *url.URL) bool {
	if u.User != nil || !sameOrigin(e, u) {
		return false
	}
	ce, err := canonical(e)
	if err != nil {
		return false
	}
	cu, err := canonical(u) // refuses a path that is no plain path
	return err == nil && (cu == ce || strings.HasPrefix(cu, ce+"/"))
}

// transport is the Controller's own: verified TLS unless told not to, the
// proxy of Config.Proxy only, and twice Config.MaxInFlight idle
// connections kept.
func (c *Controller) transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if c.cfg.Proxy != nil {
		tr.Proxy = http.ProxyURL(c.cfg.Proxy)
	}
	// Twice as many idle connections as reads in flight: a read's place
	// is free once its answer arrived, while its connection goes back to
	// the idle ones only once its body is read, so the next read may dial
	// one more meanwhile; keeping those too, a round of reads of the
	// session's systems reuses them, no new TLS handshake each (under
	// -race, a limit of MaxInFlight closed the extra connection and the
	// next round dialled again: TestReview35_SharedSessionFansOutUnbounded).
	tr.MaxIdleConnsPerHost = 2 * c.cfg.maxInFlight()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.cfg.RootCAs,
		InsecureSkipVerify: c.cfg.InsecureSkipVerify} //nolint:gosec // the caller opted out
	return tr
}

// checkRedirect allows a redirect only of a read without a body, on the
// endpoint (onEndpoint: its origin and under its path), a few times.
func checkRedirect(origin *url.URL, req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case first.Method != http.MethodGet && first.Method != http.MethodHead:
		return fmt.Errorf("%w: a %s (which may carry credentials in its body) is never redirected", ErrRedirect, first.Method)
	case !onEndpoint(origin, req.URL):
		return fmt.Errorf("%w: off the endpoint (another origin, or a path not under the endpoint's)", ErrRedirect)
	case len(via) > maxRedirects:
		return fmt.Errorf("%w: more than %d redirects", ErrRedirect, maxRedirects)
	}
	return nil
}

// sameOrigin reports whether u has a's scheme, host and port, compared
// as Origin spells them (the default port of the scheme when none is
// given, one spelling of a host name or an IP address).
func sameOrigin(a, u *url.URL) bool {
	oa, ou := hostOrigin(a), hostOrigin(u)
	return oa != "" && oa == ou
}

// hostOrigin is Origin of u's scheme and host (no path), or "" if that is
// no http(s) origin.
func hostOrigin(u *url.URL) string {
	o, err := canonical(&url.URL{Scheme: u.Scheme, Host: u.Host})
	if err != nil {
		return ""
	}
	return o
}

// limitTransport sends only requests on the endpoint (onEndpoint: its
// origin, under its path; every
// request may carry the session token or the basic-auth password, and
// gofish prefixes the endpoint to whatever URI the BMC gave), and bounds
// every response body to MaxBody bytes.
type limitTransport struct {
	base   http.RoundTripper
	origin *url.URL
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.origin != nil && !onEndpoint(t.origin, r.URL) {
		if r.Body != nil {
			_ = r.Body.Close() // RoundTrip must close it, even on error
		}
		return nil, fmt.Errorf("%w: %s to %s", ErrOffOrigin, r.Method, safeHost(r.URL))
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = limitedBody{io.LimitReader(resp.Body, MaxBody), resp.Body}
	}
	return resp, err
}

type limitedBody struct {
	io.Reader
	c io.Closer
}

func (b limitedBody) Close() error { return b.c.Close() }

// safeHost is u's host for an error, without user information and
// without a peer's control characters.
func safeHost(u *url.URL) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, u.Scheme+"://"+u.Host)
}
