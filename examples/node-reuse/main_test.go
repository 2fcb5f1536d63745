package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		var out bytes.Buffer
		if err := run(&out, 3, 4, seed); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if !strings.Contains(s, "md-storage: 3 of 3 machines kept their host") {
			t.Fatalf("seed %d: reuse pool did not keep its hosts:\n%s", seed, s)
		}
		if !strings.Contains(s, "storage-v2-0     round 1: requeue") {
			t.Fatalf("seed %d: the new machine fell back instead of waiting for its host:\n%s", seed, s)
		}
	}
}
