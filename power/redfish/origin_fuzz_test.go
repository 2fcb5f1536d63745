package redfish

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzCheckRedirect: whatever Location a BMC sends, a redirect is
// followed only for a read, to the endpoint's own scheme, host and port.
func FuzzCheckRedirect(f *testing.F) {
	for _, s := range []string{"https://10.0.0.5/redfish/v1/Systems/1", "http://10.0.0.5/x", "https://10.0.0.5:443/x",
		"https://10.0.0.5:8443/x", "https://evil.example/x", "//10.0.0.5/x", "https://10.0.0.5.evil/x", "https://[::1]/x",
		"HTTPS://10.0.0.5/x", "https://user:pw@10.0.0.5/x"} {
		f.Add(s, "GET")
		f.Add(s, "POST")
	}
	origin, _ := url.Parse("https://10.0.0.5")
	f.Fuzz(func(t *testing.T, location, method string) {
		u, err := url.Parse(location)
		if err != nil || u.Host == "" {
			return
		}
		first, err := http.NewRequest(method, "https://10.0.0.5/redfish/v1/Systems/1", nil)
		if err != nil {
			return
		}
		next := &http.Request{Method: http.MethodGet, URL: u}
		if checkRedirect(origin, next, []*http.Request{first}) != nil {
			return
		}
		if method != http.MethodGet && method != http.MethodHead {
			t.Fatalf("a %s was redirected", method)
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		if !strings.EqualFold(u.Scheme, "https") || !strings.EqualFold(u.Hostname(), "10.0.0.5") || port != "443" {
			t.Fatalf("a redirect to %q (another origin) was allowed", location)
		}
	})
}
