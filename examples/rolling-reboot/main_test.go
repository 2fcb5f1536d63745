package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, options{servers: 30, core: 3, failures: 2, concurrency: "20%", budget: 3, seed: 7, quiet: true}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"result: failed in", "1 executor restart(s)", "0 server(s) with more than one job", "makespan: sliding window"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	if err := run(&out, options{servers: 20, core: 2, failures: 0, concurrency: "4", budget: 0, seed: 3, quiet: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "result: complete in") {
		t.Errorf("a fleet without failures should complete:\n%s", out.String())
	}
	out.Reset()
	if err := run(&out, options{servers: 24, core: 1, concurrency: "4", seed: 5, quiet: true, racks: 4, rackLimit: 1,
		ramp: "1,2", window: "daily 00:30-01:30", zone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"result: complete in", "at most 1 server(s) of one rack offline", "canary ramp [1 2] then 4: 1 1 2",
		`maintenance window "daily 00:30-01:30" (Europe/Berlin): first job at t=0s`, "0 job(s) started outside"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
