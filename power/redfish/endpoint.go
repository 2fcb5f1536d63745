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
// such as a Config.Endpoint: its scheme and host name lower-cased (a
// trailing dot dropped), an IP address in its canonical form (IPv6 as
// RFC 5952 writes it, an IPv4-mapped IPv6 address as IPv4), the scheme's
// default port (443 for https, 80 for http) dropped and any other port
// written without leading zeros, trailing slashes, a query and a
// fragment dropped; a path of its own (a BMC behind a proxy) is kept. Two
// spellings of one BMC ("https://BMC:443/" and "https://bmc") give one
// origin, so that one BMC is one endpoint to the window registry and to
// session sharing, and one power.Target.BMC to a caller that names it by
// Origin. It fails (ErrConfig) for anything but an http(s) URL with a
// host and without credentials.
func Origin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
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
		host = strings.TrimSuffix(strings.ToLower(host), ".")
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
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// originOf is Origin of endpoint, or endpoint itself if it is no http(s)
// URL (Connect refuses those: this only keeps a key for them).
func originOf(endpoint string) string {
	if o, err := Origin(endpoint); err == nil {
		return o
	}
	return endpoint
}
