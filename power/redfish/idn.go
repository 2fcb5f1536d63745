package redfish

// This file: a BMC host name that is not ASCII, written in its ASCII
// (punycode, "xn--") form for Origin by golang.org/x/net/idna's Lookup
// profile, the conversion net/http applies to the host it dials.

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// hostASCII returns host, a host name (no IP address), lower-cased and in
// its ASCII form: each label that is not ASCII mapped and written as
// "xn--" and its punycode by idna.Lookup, as net/http dials it. It fails
// (ErrConfig) for a name the IDNA rules refuse: the operator writes such a
// host in its punycode form.
func hostASCII(host string) (string, error) {
	if isASCII(host) {
		return strings.ToLower(host), nil
	}
	a, err := idna.Lookup.ToASCII(host)
	if err != nil || !isASCII(a) {
		return "", fmt.Errorf("%w: endpoint host %q is not a valid international host name: write it in its ASCII (punycode, xn--) form", ErrConfig, safeText(host))
	}
	return strings.ToLower(a), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
