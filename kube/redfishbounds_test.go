package kube

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestPowersRedfishConfigCarriesRebootBounds (review 35ag, finding 3):
// the Redfish adapter Powers connects is given every bound of the
// Reconciler's reboot.Config that Powers holds, LostLanding (as the
// reboot package uses it) and OffSettle included, as the adapter's doc
// asks; it was given neither.
func TestPowersRedfishConfigCarriesRebootBounds(t *testing.T) {
	p := &Powers{SoftTimeout: 40 * time.Second, StaleReads: 7 * time.Second, OffSettle: 3 * time.Second, LostLanding: 90 * time.Second}
	cfg := p.redfishConfig(BMCTarget{Protocol: "redfish", Endpoint: "https://bmc1", SystemID: "1"}, "admin", "pw", false)
	if cfg.SoftTimeout != p.SoftTimeout || cfg.StaleReads != p.StaleReads || cfg.OffSettle != p.OffSettle || cfg.LostLanding != p.LostLanding {
		t.Errorf("adapter bounds soft %v stale %v settle %v lost %v; want Powers' %v %v %v %v",
			cfg.SoftTimeout, cfg.StaleReads, cfg.OffSettle, cfg.LostLanding, p.SoftTimeout, p.StaleReads, p.OffSettle, p.LostLanding)
	}
	if cfg.Endpoint != "https://bmc1" || cfg.SystemID != "1" || cfg.Username != "admin" {
		t.Errorf("endpoint %q system %q user %q", cfg.Endpoint, cfg.SystemID, cfg.Username)
	}
	p.LostLanding = 0
	if got, want := p.redfishConfig(BMCTarget{Endpoint: "https://bmc1"}, "a", "b", false).LostLanding,
		reboot.LostLandingOf(reboot.Config{SoftTimeout: p.SoftTimeout}); got != want {
		t.Errorf("LostLanding %v with Powers' left zero; want the reboot package's %v", got, want)
	}
}
