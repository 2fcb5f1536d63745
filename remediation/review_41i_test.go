package remediation

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReview41i_OthersControlPlaneBusy: another controller's admission
// (Admissions.Others) of a control-plane machine keeps a control-plane
// candidate waiting, as one of this store's would (one control-plane
// machine at a time across both controllers); a worker's does not; one
// whose role the record does not say (an earlier version's record)
// counts as control plane. Before OthersControlPlane, an Other was never
// a control-plane remediation in flight, and the candidate started.
func TestReview41i_OthersControlPlaneBusy(t *testing.T) {
	fleet := []FleetMachine{
		{Name: "n0", Node: "n0", ControlPlane: true, Unhealthy: true},
		{Name: "node/n1", Node: "n1", ControlPlane: true},
		{Name: "node/n2", Node: "n2", ControlPlane: true},
	}
	cand := Machine{Name: "n0", NodeName: "n0", ControlPlane: true, NeedsRemediation: true}
	for _, tc := range []struct {
		name  string
		roles map[string]bool
		may   bool
	}{
		{"control plane", map[string]bool{"machine-h1": true}, false},
		{"worker", map[string]bool{"machine-h1": false}, true},
		{"unknown", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adm := Admissions{Others: map[string]string{"machine-h1": "h1"}, OthersControlPlane: tc.roles}
			may, why := MayStart(withGone(fleet, adm, cand), "n0", MaxCount(2))
			assert.Equal(t, tc.may, may, why)
		})
	}
	// Added as a member of its own (no healthy member left to stand for).
	adm := Admissions{Others: map[string]string{"a": "h1", "b": "h2", "c": "h3"}, OthersControlPlane: map[string]bool{"a": false, "b": false, "c": true}}
	may, why := MayStart(withGone(fleet, adm, cand), "n0", MaxCount(10))
	assert.False(t, may, why)
}
