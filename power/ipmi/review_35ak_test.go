package ipmi

import (
	"net"
	"testing"
)

// TestReview35ak_CanonicalHostDialsAnotherName (review 35ak, Low).
// CanonicalHost's doc promises "It dials the same BMC as the host as
// written", and kube's ParseBMCAddress now dials the canonical host
// (Powers.controllerOf: ipmi.Config{Host: t.Host}). Two of its rewrites
// change the name that is resolved:
//   - strings.ToLower folds non-ASCII letters, and U+212A KELVIN SIGN
//     lower-cases to ASCII 'k': "\u212Abmc.example" becomes the different
//     host "kbmc.example" (DNS folds ASCII case only, RFC 4343; Go's
//     resolver refuses the written name outright). A typo'd address now
//     reaches another server's BMC with this host's credentials.
//   - the trailing dot is dropped: a rooted name ("bmc1.mgmt.example.",
//     what an operator writes in a pod to keep the search list out,
//     ndots:5) is dialled as a relative name, looked up in the search
//     domains first. Ground truth here: Go's own resolver answers
//     "localhost" and "localhost." differently.
func TestReview35ak_CanonicalHostDialsAnotherName(t *testing.T) {
	t.Run("kelvin", func(t *testing.T) {
		in := "\u212Abmc.example"
		if got := CanonicalHost(in); got == "kbmc.example" {
			t.Errorf("CanonicalHost(%q) = %q: a non-ASCII letter folded into another ASCII host name, which dials another BMC", in, got)
		}
	})
	t.Run("rooted", func(t *testing.T) {
		in := "localhost."
		got := CanonicalHost(in)
		a, errA := net.ResolveUDPAddr("udp", net.JoinHostPort(in, "623"))
		b, errB := net.ResolveUDPAddr("udp", net.JoinHostPort(got, "623"))
		if (errA == nil) != (errB == nil) || errA == nil && !a.IP.Equal(b.IP) {
			t.Errorf("CanonicalHost(%q) = %q resolves otherwise than the host as written: %v (%v) vs %v (%v)", in, got, a, errA, b, errB)
		}
	})
}
