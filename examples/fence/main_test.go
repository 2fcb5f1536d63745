package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	for _, via := range []string{"", "redfish", "ipmi"} {
		t.Run("via="+via, func(t *testing.T) { testRun(t, via) })
	}
}

func testRun(t *testing.T, via string) {
	var out bytes.Buffer
	if err := run(&out, 30*time.Second, 180*time.Second, 4*time.Second, via); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"node-1: powering-off power-off (hard)",
		"client: node-1 is fenced",
		"node-2: powering-off power-off (hard)   soft power-off timed out",
		"all hosts on, no reboot pending",
		"node-0: 0 power cycle(s)",
		"node-1: 1 power cycle(s)",
		"node-2: 1 power cycle(s)",
		"fencing client: reboot done=true",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// The fencing client released node-1 only after it was fenced, and the
	// power-on came after the release.
	fenced := strings.Index(s, "client: node-1 is fenced")
	removed := strings.Index(s, "client: removed reboot.metal3.io/fencing")
	on := strings.Index(s, "node-1: powering-on")
	if !(fenced < removed && removed < on) {
		t.Errorf("wrong order: fenced@%d removed@%d on@%d", fenced, removed, on)
	}
}
