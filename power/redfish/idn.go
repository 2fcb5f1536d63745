package redfish

// This file: a BMC host name that is not ASCII, written in its ASCII
// (punycode) form for Origin, without an IDNA library: only the Latin
// letters whose form the IDNA mapping (UTS 46) leaves as they are, once
// lower-cased; any other host name is refused.

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hostASCII returns host, a host name (no IP address), lower-cased and in
// its ASCII form: each label that is not ASCII as "xn--" and its punycode
// (RFC 3492), as net/http dials it. It fails (ErrConfig) for a label with
// a character that is neither ASCII nor a Latin letter idnLetter accepts:
// the operator writes such a host in its punycode form.
func hostASCII(host string) (string, error) {
	if isASCII(host) {
		return strings.ToLower(host), nil
	}
	labels := strings.Split(host, ".")
	for i, l := range labels {
		if isASCII(l) {
			labels[i] = strings.ToLower(l)
			continue
		}
		rs := []rune(l)
		for j, r := range rs {
			lr, ok := idnLetter(r)
			if !ok || strings.HasPrefix(strings.ToLower(l), "xn--") || len(rs) > 63 {
				return "", fmt.Errorf("%w: endpoint host %q is not ASCII: write it in its ASCII (punycode, xn--) form", ErrConfig, safeText(host))
			}
			rs[j] = lr
		}
		labels[i] = "xn--" + punycode(rs)
	}
	return strings.Join(labels, "."), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// idnLetter returns r lower-cased and whether it is a character of a host
// name hostASCII writes in punycode: an ASCII one, or a letter of Latin-1
// or Latin Extended-A (U+00C0 to U+017F) that UTS 46 maps only by
// lower-casing it as unicode.ToLower does, and keeps as valid. Left out:
// U+00DF (sharp s, a deviation between IDNA 2003 and 2008), U+0130
// (dotted capital I, mapped to "i" and a combining dot), U+0132 and
// U+0133 (the ligature ij, mapped to "ij"), U+013F and
// U+0140 (middle-dot l, mapped to "l·"), U+0149 (mapped to "ʼn"), U+017F
// (long s, mapped to "s"). TestHostASCIIAsNetHTTPDials checks the set
// against what net/http dials.
func idnLetter(r rune) (rune, bool) {
	if r < utf8.RuneSelf {
		return unicode.ToLower(r), true
	}
	if r < 0xC0 || r > 0x17F || !unicode.IsLetter(r) {
		return r, false
	}
	switch r {
	case 0xDF, 0x130, 0x132, 0x133, 0x13F, 0x140, 0x149, 0x17F:
		return r, false
	}
	lr := unicode.ToLower(r)
	return lr, lr >= 0xC0 && unicode.IsLower(lr)
}

// punycode is the Bootstring encoding of label for IDNA (RFC 3492 6.3),
// without the "xn--" prefix. The label is short (at most 63 runes, code
// points below U+0180): no overflow.
func punycode(label []rune) string {
	const (
		base, tmin, tmax, skew, damp = 36, 1, 26, 38, 700
	)
	adapt := func(delta, points int, first bool) int {
		if first {
			delta /= damp
		} else {
			delta /= 2
		}
		delta += delta / points
		k := 0
		for delta > (base-tmin)*tmax/2 {
			delta /= base - tmin
			k += base
		}
		return k + (base-tmin+1)*delta/(delta+skew)
	}
	digit := func(d int) byte {
		if d < 26 {
			return byte('a' + d)
		}
		return byte('0' + d - 26)
	}
	var out []byte
	for _, r := range label {
		if r < utf8.RuneSelf {
			out = append(out, byte(r))
		}
	}
	b := len(out)
	h := b
	if b > 0 {
		out = append(out, '-')
	}
	n, delta, bias := 128, 0, 72
	for h < len(label) {
		m := int(unicode.MaxRune) + 1
		for _, r := range label {
			if int(r) >= n && int(r) < m {
				m = int(r)
			}
		}
		delta += (m - n) * (h + 1)
		n = m
		for _, r := range label {
			if int(r) < n {
				delta++
			}
			if int(r) != n {
				continue
			}
			q := delta
			for k := base; ; k += base {
				t := min(max(k-bias, tmin), tmax)
				if q < t {
					break
				}
				out = append(out, digit(t+(q-t)%(base-t)))
				q = (q - t) / (base - t)
			}
			out = append(out, digit(q))
			bias = adapt(delta, h+1, h == b)
			delta = 0
			h++
		}
		delta++
		n++
	}
	return string(out)
}
