package ipmi

import "testing"

func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"BMC.Example.":              "bmc.example",
		"bmc.example":               "bmc.example",
		"[::ffff:10.0.0.5]":         "10.0.0.5",
		"::ffff:10.0.0.5":           "10.0.0.5",
		"10.0.0.5":                  "10.0.0.5",
		"2001:DB8:0:0::1":           "2001:db8::1",
		"[2001:db8:0000:0:0:0:0:1]": "2001:db8::1",
	} {
		if got := CanonicalHost(in); got != want {
			t.Errorf("CanonicalHost(%q) = %q, want %q", in, got, want)
		}
	}
}
