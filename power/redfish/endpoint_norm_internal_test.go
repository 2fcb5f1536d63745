package redfish

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// dialedHost is the host name net/http dials for http://host/ (its own
// IDNA conversion, the stdlib's), caught before any connection.
func dialedHost(t *testing.T, host string) string {
	t.Helper()
	var addr string
	stop := errors.New("stop")
	tr := &http.Transport{Proxy: nil, DialContext: func(_ context.Context, _, a string) (net.Conn, error) {
		addr = a
		return nil, stop
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RoundTrip(req); !errors.Is(err, stop) {
		t.Fatalf("%s: no dial: %v", host, err)
	}
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHostASCIIAsNetHTTPDials: every non-ASCII host name hostASCII
// accepts (letters of Latin-1, Latin Extended-A, Greek and Cyrillic,
// upper-case or lower-case, at the start, inside and at the end of a
// label; full-width letters; a combining accent; sharp s) is written as
// net/http dials it, so an IDN host and its punycode spelling are one
// Origin and name the host net/http reaches; a name hostASCII refuses is
// one net/http cannot dial either.
func TestHostASCIIAsNetHTTPDials(t *testing.T) {
	var hosts []string
	for _, span := range [][2]rune{{0xC0, 0x17F}, {0x391, 0x3C9}, {0x410, 0x44F}} {
		for r := span[0]; r <= span[1]; r++ {
			hosts = append(hosts, string(r)+"bmc.example", "bmc"+string(r)+"x"+string(r)+"-1.example", "Rack-"+string(r))
		}
	}
	hosts = append(hosts, "ｂｍｃ.example", "a\u0301.example", "straße.example", "бмц.example")
	n := 0
	for _, h := range hosts {
		got, err := hostASCII(h)
		if err != nil {
			if !errors.Is(err, ErrConfig) || !containsFold(err.Error(), "punycode") {
				t.Errorf("%q: refused with %v; want ErrConfig saying to write punycode", h, err)
			}
			continue
		}
		n++
		if want := dialedHost(t, h); got != want {
			t.Errorf("%q: hostASCII %q, net/http dials %q", h, got, want)
		}
	}
	if n < len(hosts)*9/10 {
		t.Fatalf("only %d of %d host names accepted", n, len(hosts))
	}
}

// TestOriginRefusesInvalidNonASCIIHosts: a host name the IDNA rules
// refuse is refused, with ErrConfig and a message that says what to write.
func TestOriginRefusesInvalidNonASCIIHosts(t *testing.T) {
	for _, h := range []string{"https://xn--bü.example", "https://-bü.example"} {
		o, err := Origin(h)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Origin %q, %v; want ErrConfig", h, o, err)
			continue
		}
		if want := "punycode"; !containsFold(err.Error(), want) {
			t.Errorf("%s: %v does not say %q", h, err, want)
		}
	}
}

// TestOriginRefusesDotSegmentPaths (review 35ag, Low): an endpoint whose
// path has a dot segment, raw or encoded, is refused rather
// than kept as ".../bmc1/.".
func TestOriginRefusesDotSegmentPaths(t *testing.T) {
	for _, e := range []string{"https://proxy/bmc1/./", "https://proxy/bmc1/.", "https://proxy/x/../bmc1", "https://proxy/%2e%2E/bmc1"} {
		if o, err := Origin(e); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Origin %q, %v; want ErrConfig", e, o, err)
		}
	}
}

// TestOnEndpointComparesNormalisedPaths (review 35ag, Low): an endpoint
// spelled /%7Ebmc1 takes a redirect to /~bmc1/... (one path, RFC 3986
// 6.2.2.2), and the other way round, but not one to /%7Ebmc2.
func TestOnEndpointComparesNormalisedPaths(t *testing.T) {
	for _, c := range []struct {
		e, u string
		ok   bool
	}{
		{"https://proxy/%7Ebmc1", "https://proxy/~bmc1/redfish/v1/Systems/1", true},
		{"https://proxy/~bmc1", "https://proxy/%7ebmc1/redfish/v1", true},
		{"https://proxy/bmc%2a", "https://proxy/bmc%2A/redfish/v1", true},
		{"https://proxy/%7Ebmc1", "https://proxy/~bmc2/redfish/v1", false},
		{"https://proxy/%7Ebmc1", "https://proxy/~bmc1x/redfish/v1", false},
	} {
		e, _ := url.Parse(c.e)
		u, _ := url.Parse(c.u)
		if got := onEndpoint(e, u); got != c.ok {
			t.Errorf("onEndpoint(%s, %s) = %v, want %v", c.e, c.u, got, c.ok)
		}
	}
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if equalFoldASCII(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// TestPlainPathRefusesParametersAndDoubleEncoding (review 35ag, High):
// a ';' (path parameters, raw or encoded: "..;" is ".." to a
// servlet-style proxy) and a '%' left after one decode (a double
// encoding, "%252e" is '.' to a server decoding twice) make no plain
// path, nor an endpoint Origin takes, nor a URL on the endpoint.
func TestPlainPathRefusesParametersAndDoubleEncoding(t *testing.T) {
	for _, p := range []string{"/..;/bmc2/redfish/v1", "/bmc1/..;x/bmc2", "/redfish/v1;jsessionid=1", "/redfish%3Bv1", "/%252e%252e/bmc2", "/bmc%2525"} {
		if plainPath(p) {
			t.Errorf("plainPath(%q) = true", p)
		}
	}
	for _, p := range []string{"/redfish/v1/Systems/1", "/~bmc1/redfish/v1", "/r%C3%BCck"} {
		if !plainPath(p) {
			t.Errorf("plainPath(%q) = false", p)
		}
	}
	for _, e := range []string{"https://proxy/bmc1;x", "https://proxy/bmc%252e", "https://proxy/bmc1%3b"} {
		if o, err := Origin(e); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Origin %q, %v; want ErrConfig", e, o, err)
		}
	}
	e, _ := url.Parse("https://proxy/bmc1")
	u, _ := url.Parse("https://proxy/bmc1/..;/bmc2/redfish/v1")
	if onEndpoint(e, u) {
		t.Errorf("onEndpoint(%s, %s) = true", e, u)
	}
}
