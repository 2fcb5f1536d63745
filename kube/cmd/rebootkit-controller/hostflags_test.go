package main

import "testing"

// TestParseHosts: --hosts is node=host pairs; a malformed item or a node
// listed twice is refused rather than half-read.
func TestParseHosts(t *testing.T) {
	m, err := parseHosts(" n0=h0, n1 = h1 ,")
	if err != nil || len(m) != 2 || m["n0"] != "h0" || m["n1"] != "h1" {
		t.Fatalf("parseHosts = %v, %v", m, err)
	}
	if m, err := parseHosts(""); err != nil || m != nil {
		t.Fatalf("empty: %v, %v", m, err)
	}
	for _, bad := range []string{"n0", "n0=", "=h0", "n0=h0,n0=h1"} {
		if _, err := parseHosts(bad); err == nil {
			t.Errorf("parseHosts(%q): no error", bad)
		}
	}
}
