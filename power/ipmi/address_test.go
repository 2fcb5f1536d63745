package ipmi

import "testing"

func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"BMC.Example.":              "bmc.example.",
		"bmc.example":               "bmc.example",
		"\u212Abmc.example":         "\u212Abmc.example", // KELVIN SIGN: not folded to 'k'
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

func TestBMCName(t *testing.T) {
	for _, c := range []struct {
		host string
		port int
		want string
	}{
		{"BMC.Example.", 623, "bmc.example:623"},
		{"bmc.example", 623, "bmc.example:623"},
		{"[::ffff:10.0.0.5]", 623, "10.0.0.5:623"},
		{"2001:DB8::1", 6230, "[2001:db8::1]:6230"},
	} {
		if got := BMCName(c.host, c.port); got != c.want {
			t.Errorf("BMCName(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}
