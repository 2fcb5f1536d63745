package inventory

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestRedfishConfigCarriesRebootBounds (review 35ag, finding 3): the
// Redfish adapter a Fleet connects is given every bound of the
// reboot.Config the fleet decides with, LostLanding (as the reboot
// package uses it, its default SoftTimeout) and OffSettle included, as
// the adapter's doc asks; it was given no LostLanding.
func TestRedfishConfigCarriesRebootBounds(t *testing.T) {
	b := BMC{Redfish: "https://BMC1:443/", Username: "admin", System: "1"}
	r := reboot.Config{SoftTimeout: 40 * time.Second, StaleReads: 7 * time.Second, OffSettle: 3 * time.Second, LostLanding: 90 * time.Second}
	cfg := redfishConfig(b, "pw", r)
	if cfg.SoftTimeout != r.SoftTimeout || cfg.StaleReads != r.StaleReads || cfg.OffSettle != r.OffSettle || cfg.LostLanding != r.LostLanding {
		t.Errorf("adapter bounds soft %v stale %v settle %v lost %v; want the reboot.Config's %+v", cfg.SoftTimeout, cfg.StaleReads, cfg.OffSettle, cfg.LostLanding, r)
	}
	if cfg.Endpoint != "https://bmc1" || cfg.Password != "pw" || cfg.SystemID != "1" {
		t.Errorf("endpoint %q system %q", cfg.Endpoint, cfg.SystemID)
	}
	r.LostLanding = 0
	if got := redfishConfig(b, "pw", r).LostLanding; got != reboot.LostLandingOf(r) || got != 40*time.Second {
		t.Errorf("LostLanding %v with the reboot.Config's left zero; want %v (its SoftTimeout)", got, reboot.LostLandingOf(r))
	}
}
