package inventory

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestIdentifySelf: the executor finds its own server by hostname (case
// and domain aside) or by address, and lists the servers it cannot tell
// apart from this machine (issue 38, A.2; old code: an exact hostname
// only, so "CN1.example.com" or an address match was never itself).
func TestIdentifySelf(t *testing.T) {
	inv := Inventory{Servers: []Server{
		{UUID: "u0", Hostname: "cn0", Health: Health{TCP: "10.0.0.10:22"}},
		{UUID: "u1", Hostname: "cn1"},
		{UUID: "u2", Hostname: "cn2", Health: Health{HTTP: "http://cn2-mgmt:8080/health"}},
	}}
	a := netip.MustParseAddr
	all := map[string][]netip.Addr{"cn1": {a("10.0.0.11")}, "cn2": {a("10.0.0.12")}, "cn2-mgmt": {a("10.0.1.12")}}
	for _, c := range []struct {
		name  string
		m     Machine
		self  string
		maybe []string
	}{
		{"hostname, other case and a domain", Machine{Hostname: "CN1.example.com", Resolved: all}, "u1", nil},
		{"literal health address", Machine{Hostname: "x", Addrs: []netip.Addr{a("127.0.0.1"), a("10.0.0.10")}, Resolved: all}, "u0", nil},
		{"health host resolves to ours", Machine{Hostname: "x", Addrs: []netip.Addr{a("10.0.1.12")}, Resolved: all}, "u2", nil},
		{"none of them", Machine{Hostname: "x", Addrs: []netip.Addr{a("10.9.9.9")}, Resolved: all}, "", nil},
		{"cannot tell: names unresolved", Machine{Hostname: "x", Addrs: []netip.Addr{a("10.9.9.9")}, Resolved: map[string][]netip.Addr{}}, "", []string{"u1", "u2"}},
		{"two match", Machine{Hostname: "cn1", Addrs: []netip.Addr{a("10.0.0.10")}, Resolved: all}, "", []string{"u0", "u1"}},
		{"loopback never matches", Machine{Hostname: "x", Addrs: []netip.Addr{a("127.0.0.1")}, Resolved: map[string][]netip.Addr{"cn1": {a("127.0.0.1")}, "cn2": nil, "cn2-mgmt": nil}}, "", nil},
	} {
		self, maybe := inv.Identify(c.m)
		assert.Equal(t, c.self, self, c.name)
		assert.Equal(t, c.maybe, maybe, c.name)
	}
}

// TestIdentifySelfByMachineID: a server's machine_id decides, before
// hostnames and addresses: equal is this machine (even under another
// hostname), different is not (even with this machine's hostname or
// address), and a server told apart by it is never "cannot tell"; the
// inventory refuses a malformed or repeated machine_id (issue 38, A.2;
// old code: no machine ID, so a hostname mismatch made the executor's own
// server "none" and a renamed machine took another's reboot).
func TestIdentifySelfByMachineID(t *testing.T) {
	const mine, other = "3d1219c7c4c5404aaa1f6d2a48adfda4", "0123456789abcdef0123456789abcdef"
	inv := Inventory{Servers: []Server{
		{UUID: "u0", Hostname: "cn0", MachineID: other, Health: Health{TCP: "10.0.0.10:22"}},
		{UUID: "u1", Hostname: "cn1"},
		{UUID: "u2", Hostname: "cn2", MachineID: strings.ToUpper(mine) + "\n"},
	}}
	a := netip.MustParseAddr
	none := map[string][]netip.Addr{}
	for _, c := range []struct {
		name  string
		m     Machine
		self  string
		maybe []string
	}{
		{"equal machine ID under another hostname", Machine{Hostname: "renamed", MachineID: mine, Resolved: none}, "u2", nil},
		{"equal machine ID beats a hostname and an address", Machine{Hostname: "cn0", MachineID: mine, Addrs: []netip.Addr{a("10.0.0.10")}, Resolved: none}, "u2", nil},
		{"another machine ID beats the hostname", Machine{Hostname: "cn0", MachineID: "ffffffffffffffffffffffffffffffff", Resolved: map[string][]netip.Addr{"cn1": {a("10.0.0.11")}}}, "", nil},
		{"told apart by machine ID, the rest cannot tell", Machine{Hostname: "x", MachineID: "ffffffffffffffffffffffffffffffff", Resolved: none}, "", []string{"u1"}},
		{"no machine ID of ours: hostnames as before", Machine{Hostname: "cn2", Resolved: none}, "u2", nil},
	} {
		self, maybe := inv.Identify(c.m)
		assert.Equal(t, c.self, self, c.name)
		assert.Equal(t, c.maybe, maybe, c.name)
	}
	base := "defaults:\n  bmc: {username: a, password_env: P}\nservers:\n" +
		"  - {uuid: 00000000-0000-4000-8000-000000000001, hostname: a, bmc: {ipmi: 10.0.0.1}, health: {tcp: 10.0.0.1:22}, machine_id: %s}\n" +
		"  - {uuid: 00000000-0000-4000-8000-000000000002, hostname: b, bmc: {ipmi: 10.0.0.2}, health: {tcp: 10.0.0.2:22}, machine_id: %s}\n"
	_, err := Parse([]byte(fmt.Sprintf(base, mine, other)))
	require.NoError(t, err)
	_, err = Parse([]byte(fmt.Sprintf(base, mine, strings.ToUpper(mine))))
	assert.ErrorContains(t, err, "machine_id is also server a's")
	_, err = Parse([]byte(fmt.Sprintf(base, mine, "not-hex")))
	assert.ErrorContains(t, err, "machine_id: want the 32 hex digits")
}

// TestMaybeSelfRefused: a server the executor cannot tell apart from its
// own machine is never powered off and its job is refused, saying how to
// fix it (issue 38, A.2; old code: it was powered off like any other).
func TestMaybeSelfRefused(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer w.close()
	w.f.opts.MaybeSelf = []string{ids[0]}
	w.newPlan()
	w.run(ids, 2*time.Minute)
	assert.Empty(t, w.bmcs[ids[0]].offs)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	assert.Empty(t, jobs)
	err = w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "j", PlanUUID: "p"})
	assert.ErrorIs(t, err, ErrMaybeSelf)
	assert.Contains(t, err.Error(), "--self cn0")
}
