package reboot_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestDefaultConfigLostLandingFollowsSoftTimeout (review 36 round 13, a
// low): a copy of DefaultConfig whose SoftTimeout is changed gets that
// SoftTimeout as its LostLanding default (as the Redfish adapter's
// Config.LostLanding does), not the 180 s of the default SoftTimeout; a
// LostLanding set stays.
func TestDefaultConfigLostLandingFollowsSoftTimeout(t *testing.T) {
	cfg := reboot.DefaultConfig()
	if got := reboot.LostLandingOf(cfg); got != cfg.SoftTimeout {
		t.Fatalf("default LostLanding %v, want SoftTimeout %v", got, cfg.SoftTimeout)
	}
	cfg.SoftTimeout = 10 * time.Minute
	if got := reboot.LostLandingOf(cfg); got != 10*time.Minute {
		t.Fatalf("a DefaultConfig copy with SoftTimeout 10m has LostLanding %v, want 10m", got)
	}
	cfg.LostLanding = time.Minute
	if got := reboot.LostLandingOf(cfg); got != time.Minute {
		t.Fatalf("LostLanding set to 1m reads %v", got)
	}
}
