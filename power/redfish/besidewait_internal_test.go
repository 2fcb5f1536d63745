package redfish

import (
	"testing"
	"time"
)

// TestBesideWait: the read beside a system's read is sent after half the
// time left, or earlier so that it has twice the BMC's login answer time
// (TestReview35_SlowBMCDeadBladeRefusesHealthyFence: 1.9 s left, 1.3 s
// per request: sent at once), never after a negative wait.
func TestBesideWait(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ left, took, want time.Duration }{
		{1900 * ms, 1300 * ms, 0},
		{1900 * ms, 0, 950 * ms},
		{1000 * ms, 20 * ms, 500 * ms},
		{3000 * ms, 1000 * ms, 1000 * ms},
		{3000 * ms, 600 * ms, 1500 * ms},
		{0, 100 * ms, 0},
	} {
		if got := besideWait(c.left, c.took); got != c.want {
			t.Errorf("besideWait(%v, %v) = %v, want %v", c.left, c.took, got, c.want)
		}
	}
}
