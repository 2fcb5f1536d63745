package redfish

// This file: the one canonical spelling of a BMC's endpoint, shared by
// the session sharing (Config.sameLogin), the window registry's keys
// (windows.go) and callers that name a BMC (power.Target.BMC).

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Origin returns the canonical spelling of endpoint, an http(s) base URL
// such as a Config.Endpoint: its scheme and host name lower-cased (one
// trailing dot dropped, after the IDNA mapping below, which makes a '.'
// of U+3002 or U+FF0E; a name that still ends in '.' or has an empty
// label is refused), an IP address in its canonical form (IPv6 as
// RFC 5952 writes it, an IPv4-mapped IPv6 address as IPv4), the scheme's
// default port (443 for https, 80 for http) dropped and any other port
// written without leading zeros, trailing slashes, a query and a
// fragment dropped; a path of its own (a BMC behind a proxy) is kept,
// normalised as RFC 3986 6.2.2 says (a percent-encoded unreserved
// character decoded, "%7E" as "~", the hex digits of every other
// percent-encoding upper-cased). Two spellings of one BMC
// ("https://BMC:443/" and "https://bmc", "https://proxy/%7ebmc1" and
// "https://proxy/~bmc1") give one origin, so that one BMC is one
// endpoint to the window registry and to session sharing, and one
// power.Target.BMC to a caller that names it by Origin. A host name that
// is not ASCII is written in its ASCII (punycode, "xn--") form by the
// IDNA conversion net/http applies when it dials (hostASCII, through
// golang.org/x/net/idna's Lookup profile); a name those rules refuse is
// refused: write it in its punycode form. It
// fails (ErrConfig) for anything but an http(s) URL with a host and
// without credentials, and for a path that is no plain path (plainPath:
// a "." or ".." segment, an empty segment ("//": write the path with
// single slashes), a ';', an encoded separator or dot).
func Origin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("%w: endpoint must be an http(s) URL", ErrConfig)
	}
	return canonical(u)
}

// canonical is Origin of u (its query and fragment ignored): the one
// normalisation of an endpoint or a request URL, by which the window
// registry (windowKey), session sharing (sameLogin), the origin check
// (sameOrigin) and the path check (onEndpoint) compare them.
func canonical(u *url.URL) (string, error) {
	if u.Host == "" {
		return "", fmt.Errorf("%w: endpoint must be an http(s) URL", ErrConfig)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", fmt.Errorf("%w: endpoint must be an http(s) URL", ErrConfig)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: endpoint must not carry credentials", ErrConfig)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	} else {
		// Mapped first, then one trailing dot dropped: the IDNA mapping
		// turns the other full stops (U+3002, U+FF0E, U+FF61) and a '.'
		// followed by an ignored character (U+00AD) into '.', which
		// net/http dials as the same name
		// (TestReview35ah_IdeographicFullStopSplitsPressWindow).
		h, err := hostASCII(host)
		if err != nil {
			return "", err
		}
		host = strings.TrimSuffix(h, ".")
		if host != "" && (strings.HasSuffix(host, ".") || strings.HasPrefix(host, ".") || strings.Contains(host, "..")) {
			return "", fmt.Errorf("%w: endpoint host %q has an empty label: write the host name without stray dots", ErrConfig, safeText(u.Hostname()))
		}
	}
	if host == "" {
		return "", fmt.Errorf("%w: endpoint must name a host", ErrConfig)
	}
	port := ""
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: endpoint port %q", ErrConfig, p)
		}
		if !(scheme == "https" && n == 443 || scheme == "http" && n == 80) {
			port = strconv.Itoa(n)
		}
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	host = strings.ReplaceAll(host, "%", "%25") // an IPv6 zone, escaped as in a URL
	p := u.EscapedPath()
	if strings.Contains(p, "//") {
		// An empty segment: a proxy that merges slashes reads "//bmc1"
		// as "/bmc1", one that does not as another path; either way
		// one spelling per BMC (TestReview35ah_DoubleSlashSpellingSplitsPressWindow).
		return "", fmt.Errorf("%w: endpoint path %q has an empty segment: write the path with single slashes", ErrConfig, safeText(p))
	}
	if !plainPath(p) || !plainPath(u.Path) {
		return "", fmt.Errorf("%w: endpoint path %q has a dot segment, a ';' or an encoded separator: write the BMC's plain path", ErrConfig, safeText(p))
	}
	return scheme + "://" + host + strings.TrimRight(normEscapes(p), "/"), nil
}

// normEscapes normalises the percent-encodings of p, an escaped URL path
// that plainPath accepted (every '%' starts a valid encoding), as RFC
// 3986 6.2.2.1 and 6.2.2.2 say: an encoded unreserved character (ALPHA,
// DIGIT, '-', '.', '_', '~') decoded, the hex digits of any other
// encoding upper-cased.
func normEscapes(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) {
			b.WriteByte(p[i])
			continue
		}
		v, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err != nil {
			b.WriteByte(p[i])
			continue
		}
		if c := byte(v); unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(p[i+1:i+3]))
		}
		i += 2
	}
	return b.String()
}

// unreserved reports whether c is an unreserved character of RFC 3986.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// safeText is s without control characters, for an error message.
func safeText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// originOf is Origin of endpoint, or endpoint itself if it is no http(s)
// URL (Connect refuses those: this only keeps a key for them).
func originOf(endpoint string) string {
	if o, err := Origin(endpoint); err == nil {
		return o
	}
	return endpoint
}
