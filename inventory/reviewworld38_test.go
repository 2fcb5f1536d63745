package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// The review-38 worlds: newWorld's fleet with the first server's BMC
// accepting a power-off that takes effect late (or never), and the
// review-35 blades behind one Redfish service.

// softOffSent gives ids[0] the power pc (on the world's clock), opens the
// fleet (closed when the test ends), starts a plan and runs the world a
// second at a time, for two minutes at most, until ids[0]'s BMC saw a
// power-off; it returns that BMC. The caller checks what it saw.
func (w *world) softOffSent(t *testing.T, ids []string, pc fake.PowerConfig) *advBMC {
	t.Helper()
	b := w.bmcs[ids[0]]
	b.p = fake.NewPower(w.clk.Real, pc)
	w.open()
	t.Cleanup(func() { w.close() })
	w.newPlan()
	for i := 0; i < 120 && len(b.offs) == 0; i++ {
		w.run(ids, time.Second)
	}
	return b
}

// bladeFleet is four blades (blade-1 to blade-4) behind one chassis
// manager (one Redfish service over TLS whose password is bmcPassword),
// each with its own password_file holding filePassword, opened as a
// fleet; the service and the fleet are closed when the test ends.
func bladeFleet(t *testing.T, bmcPassword, filePassword string) (*Fleet, *redfishtest.BMC) {
	t.Helper()
	ca, err := redfishtest.NewCA()
	require.NoError(t, err)
	bmc := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	for i := 2; i <= 4; i++ {
		bmc.AddSystem(fmt.Sprint(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	srv := bmc.StartTLSWithCA(ca)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.PEM(), 0o600))
	doc := "servers:\n"
	for i := 1; i <= 4; i++ {
		pw := filepath.Join(dir, fmt.Sprintf("blade-%d.pw", i))
		require.NoError(t, os.WriteFile(pw, []byte(filePassword+"\n"), 0o600))
		doc += fmt.Sprintf("  - uuid: blade-%d\n    bmc: {redfish: %q, system: \"%d\", username: admin, password_file: %q, ca_file: %q}\n    health: {tcp: \"127.0.0.1:22\"}\n",
			i, srv.URL, i, pw, caFile)
	}
	inv, err := Parse([]byte(doc))
	require.NoError(t, err)
	f, err := OpenFleet(inv, filepath.Join(dir, "state.db"), Options{CallTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f, bmc
}
