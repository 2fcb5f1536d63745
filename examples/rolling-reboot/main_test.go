package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRun runs the example's three scenarios side by side (each a
// simulation of its own, its store in its own directory: they spend most
// of their time waiting for the disk).
func TestRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  options
		wants []string
	}{
		{"failures", options{servers: 30, core: 3, failures: 2, concurrency: "20%", budget: 3, seed: 7, quiet: true},
			[]string{"result: failed (as expected: reboots were made to fail) in", "1 executor restart(s)", "0 server(s) with more than one job", "makespan: sliding window"}},
		{"no failures", options{servers: 20, core: 2, failures: 0, concurrency: "4", budget: 0, seed: 3, quiet: true},
			[]string{"result: complete in"}},
		{"policies", options{servers: 24, core: 1, concurrency: "4", seed: 5, quiet: true, racks: 4, rackLimit: 1,
			ramp: "1,2", window: "daily 00:30-01:30", zone: "Europe/Berlin"},
			[]string{"result: complete in", "at most 1 server(s) of one rack offline", "canary ramp [1 2] then 4: 1 1 1 2", // the headnode, then the canary (the ramp counts servers that are not core)
				`maintenance window "daily 00:30-01:30" (Europe/Berlin): first job at t=`, "0 job(s) started outside"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := run(&out, c.opts); err != nil {
				t.Fatal(err)
			}
			for _, want := range c.wants {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestRunSaysWhatItDoes (issue 27): the example ended "result: failed"
// without saying first that it injects failures, and printed the
// placeholder "<dir>/plans.db" for its store.
func TestRunSaysWhatItDoes(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, options{servers: 10, core: 2, failures: 1, concurrency: "2", budget: 3, seed: 1, quiet: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "makes 1 reboot(s) fail on purpose") {
		t.Errorf("the first line should say failures are injected:\n%s", out.String())
	}
	m := regexp.MustCompile(`plan store (\S+) \(temporary`).FindStringSubmatch(out.String())
	if m == nil || !filepath.IsAbs(m[1]) || strings.Contains(m[1], "<dir>") {
		t.Errorf("the store's real path, and that it is temporary:\n%s", out.String())
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the temporary store %s should be gone after the run (err %v)", m[1], err)
	}
}

// TestOptionsValidated (issue 27): -core 0 still made a headnode, and
// -concurrency 150% was accepted (rebootctl refuses over 100%).
func TestOptionsValidated(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, options{servers: 6, core: 0, failures: 0, concurrency: "2", seed: 1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "headnode") || strings.Contains(out.String(), " head ") {
		t.Errorf("-core 0: no headnode:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "result: complete") {
		t.Errorf("-core 0 -failures 0 completes:\n%s", out.String())
	}
	for _, o := range []options{
		{servers: 6, concurrency: "150%"},
		{servers: 6, concurrency: "0"},
		{servers: 6, concurrency: "0%"},
		{servers: 6, core: -1, concurrency: "2"},
		{servers: 2, failures: 3, concurrency: "2"},
	} {
		if err := run(io.Discard, o); err == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
}
