package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRun: the headnode's executor dies with the headnode, the other one
// takes over within about the lease TTL, and the plan completes with one
// job per server.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, options{servers: 6, concurrency: 2, ttl: 1, headBoot: 3 * time.Second}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"headnode leads", "headnode down: its executor died with it", "cn-other leads", "result: complete", "6/6 done"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	m := regexp.MustCompile(`gap without an executor: ([0-9.]+)(ms|s) `).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no gap reported:\n%s", s)
	}
	gap, _ := strconv.ParseFloat(m[1], 64)
	if m[2] == "ms" {
		gap /= 1000
	}
	if gap > 3 {
		t.Errorf("takeover took %.1fs with a 1 s lease:\n%s", gap, s)
	}
}
