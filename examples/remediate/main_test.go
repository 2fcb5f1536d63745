package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 2*time.Minute, time.Minute, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"worker-1: 1 power cycle(s), node ready=true, phase=done, labels storage=ceph-new,topology.kubernetes.io/zone=zone-1",
		"worker-0: 0 power cycle(s)",
		"worker-2: 0 power cycle(s)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "SAFETY VIOLATION") {
		t.Fatalf("unsafe:\n%s", s)
	}

	out.Reset()
	if err := run(&out, 2*time.Minute, time.Minute, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "worker-1: 1 power cycle(s)") || strings.Contains(out.String(), "worker-1: 0 power cycle(s)") {
		t.Fatalf("the table mode was expected to loop:\n%s", out.String())
	}
	// TestRun's table mode (issue 27): the run stopped at its step limit
	// without a word on why.
	if !strings.Contains(out.String(), "stopped after 240 steps (20m0s simulated): the seed's stateless table") {
		t.Errorf("the table mode's closing line is missing:\n%s", out.String())
	}
	if strings.Contains(out.String(), "annoation") {
		t.Errorf("our own text spells annotation right:\n%s", out.String())
	}
}
