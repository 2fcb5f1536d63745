package inventory

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const good = `
defaults:
  bmc:
    username: admin
    password_env: BMC_PASSWORD
servers:
  - uuid: hn0
    headnode: true
    platform: "20261001"
    bmc: {redfish: "https://10.0.0.10"}
    health: {tcp: "10.0.1.10:22"}
  - uuid: cn1
    hostname: compute-1
    bmc: {ipmi: "10.0.0.11", password_file: /etc/rebootkit/cn1}
    health: {http: "http://10.0.1.11:8080/healthz", status: 204}
    drain: [ssh, compute-1, drain]
    undrain: [ssh, compute-1, undrain]
`

func TestParse(t *testing.T) {
	inv, err := Parse([]byte(good))
	require.NoError(t, err)
	require.Len(t, inv.Servers, 2)
	hn, ok := inv.Server("hn0")
	require.True(t, ok)
	assert.True(t, hn.Core, "the headnode is core")
	assert.Equal(t, "hn0", hn.Hostname, "hostname defaults to the uuid")
	cn, ok := inv.Server("compute-1")
	require.True(t, ok)
	b := inv.BMCOf(cn)
	assert.Equal(t, "10.0.0.11", b.IPMI)
	assert.Equal(t, "admin", b.Username)
	assert.Equal(t, "/etc/rebootkit/cn1", b.PasswordFile)
	assert.Empty(t, b.PasswordEnv, "the server's own password source wins")
	ps := inv.PlanServers()
	assert.True(t, ps[0].Headnode && ps[0].Core)
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown key":          strings.Replace(good, "health: {tcp:", "heath: {tcp:", 1),
		"password in clear":    strings.Replace(good, "password_env: BMC_PASSWORD", "password: hunter2", 1),
		"two password sources": strings.Replace(good, "password_file: /etc/rebootkit/cn1", "password_file: /x, password_env: Y", 1),
		"no health check":      strings.Replace(good, `health: {tcp: "10.0.1.10:22"}`, "", 1),
		"two health checks":    strings.Replace(good, `{tcp: "10.0.1.10:22"}`, `{tcp: "10.0.1.10:22", command: [true]}`, 1),
		"two bmcs":             strings.Replace(good, `{redfish: "https://10.0.0.10"}`, `{redfish: "https://10.0.0.10", ipmi: "10.0.0.10"}`, 1),
		"credentials in url":   strings.Replace(good, "https://10.0.0.10", "https://root:pw@10.0.0.10", 1),
		"bad uuid":             strings.Replace(good, "uuid: hn0", "uuid: ../hn0", 1),
		"duplicate":            strings.Replace(good, "uuid: cn1", "uuid: hn0", 1),
		"hostname clash":       strings.Replace(good, "hostname: compute-1", "hostname: hn0", 1),
		"two headnodes":        strings.Replace(good, "hostname: compute-1", "hostname: compute-1\n    headnode: true", 1),
		"empty":                "servers: []\n",
		"not yaml":             "{{{",
	} {
		_, err := Parse([]byte(doc))
		assert.ErrorIs(t, err, ErrInvalid, name)
		if err != nil {
			assert.NotContains(t, err.Error(), "hunter2", name)
		}
	}
}

func TestPassword(t *testing.T) {
	t.Setenv("RK_TEST_PW", "from-env")
	p, err := BMC{PasswordEnv: "RK_TEST_PW"}.Password()
	require.NoError(t, err)
	assert.Equal(t, "from-env", p)
	f := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(f, []byte("from-file\nignored\n"), 0o600))
	p, err = BMC{PasswordFile: f}.Password()
	require.NoError(t, err)
	assert.Equal(t, "from-file", p)
	_, err = BMC{PasswordEnv: "RK_TEST_UNSET_PW"}.Password()
	assert.Error(t, err)
}

func TestLoadTooLarge(t *testing.T) {
	f := filepath.Join(t.TempDir(), "inv.yaml")
	require.NoError(t, os.WriteFile(f, make([]byte, MaxBytes+1), 0o600))
	_, err := Load(f)
	assert.ErrorIs(t, err, ErrInvalid)
}

// FuzzParse: any input either parses into an inventory that passes its
// own checks again, or is refused with ErrInvalid; never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("servers: [{uuid: a, bmc: {ipmi: x}, health: {tcp: 'a:1'}}]"))
	f.Add([]byte("defaults: {health_timeout: 1s}\nservers: []"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := Parse(data)
		if err != nil {
			if !strings.Contains(err.Error(), "inventory") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		if err := inv.check(); err != nil {
			t.Fatalf("a parsed inventory fails its own check: %v", err)
		}
	})
}

// TestParseNeverEchoesCredentials: a password typed into a BMC address is
// refused without being echoed, whether the scheme is mistyped
// (htps://admin:pw@host), the URL is otherwise valid, or an IPMI address is
// written admin:pw@host (issue 26, B9).
func TestParseNeverEchoesCredentials(t *testing.T) {
	const secret = "S3cr3tPw"
	for name, doc := range map[string]string{
		"mistyped scheme":     strings.Replace(good, "https://10.0.0.10", "htps://admin:"+secret+"@10.0.0.10", 1),
		"credentials in url":  strings.Replace(good, "https://10.0.0.10", "https://admin:"+secret+"@10.0.0.10", 1),
		"ipmi with user":      strings.Replace(good, `ipmi: "10.0.0.11"`, `ipmi: "admin:`+secret+`@10.0.0.11"`, 1),
		"ipmi user only":      strings.Replace(good, `ipmi: "10.0.0.11"`, `ipmi: "admin:`+secret+`"`, 1),
		"ipmi user and port":  strings.Replace(good, `ipmi: "10.0.0.11"`, `ipmi: "admin:`+secret+`@10.0.0.11:623"`, 1),
		"health url":          strings.Replace(good, "http://10.0.1.11:8080/healthz", "htp://u:"+secret+"@10.0.1.11/healthz", 1),
		"health tcp":          strings.Replace(good, `tcp: "10.0.1.10:22"`, `tcp: "u:`+secret+`@10.0.1.10"`, 1),
		"value of wrong type": strings.Replace(good, `cipher_suite`, `x`, 1) + "    bmc: https://admin:" + secret + "@h\n",
	} {
		_, err := Parse([]byte(doc))
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrInvalid, name)
		assert.NotContains(t, err.Error(), secret, name)
	}
	assert.Equal(t, "htps://***@10.0.0.10", Scrub("htps://admin:"+secret+"@10.0.0.10"))
	assert.Equal(t, "***@10.0.0.11", Scrub("admin:"+secret+"@10.0.0.11"))
}

// TestCommandsGetNoCredentials: drain, undrain and health commands run with
// an explicit environment — PATH, HOME, SSH_AUTH_SOCK and what the
// inventory names — never the BMC password variable the executor holds
// (issue 26, B9).
func TestCommandsGetNoCredentials(t *testing.T) {
	t.Setenv("BMC_PASSWORD", "hunter2-secret")
	t.Setenv("RK_SITE_VAR", "site")
	t.Setenv("RK_OTHER_VAR", "other")
	doc := strings.Replace(good, "defaults:\n", "defaults:\n  command_env: [RK_SITE_VAR]\n", 1)
	inv, err := Parse([]byte(doc))
	require.NoError(t, err)
	f, err := OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), Options{})
	require.NoError(t, err)
	defer f.Close()
	out := filepath.Join(t.TempDir(), "env")
	require.NoError(t, f.command(t.Context(), []string{"sh", "-c", "env > " + out}))
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	env := string(raw)
	assert.NotContains(t, env, "hunter2-secret")
	assert.Contains(t, env, "PATH=")
	assert.Contains(t, env, "RK_SITE_VAR=site")
	assert.NotContains(t, env, "RK_OTHER_VAR")

	_, err = Parse([]byte(strings.Replace(good, "defaults:\n", "defaults:\n  command_env: [BMC_PASSWORD]\n", 1)))
	assert.ErrorIs(t, err, ErrInvalid, "the password variable cannot be passed on")
}

// TestParsePrivilegeSystemIPv6 (issue 25): the IPMI privilege and the
// Redfish system are inventory keys, a bare or bracketed IPv6 literal is an
// IPMI address, and an IPMI user name over 16 bytes or an unknown privilege
// is refused at Parse.
func TestParsePrivilegeSystemIPv6(t *testing.T) {
	doc := strings.Replace(good, `{redfish: "https://10.0.0.10"}`, `{redfish: "https://10.0.0.10", system: "Blade-2"}`, 1)
	doc = strings.Replace(doc, `{ipmi: "10.0.0.11",`, `{ipmi: "fd00::5", privilege: administrator,`, 1)
	inv, err := Parse([]byte(doc))
	require.NoError(t, err)
	hn, _ := inv.Server("hn0")
	assert.Equal(t, "Blade-2", inv.BMCOf(hn).System)
	cn, _ := inv.Server("compute-1")
	assert.Equal(t, "administrator", inv.BMCOf(cn).Privilege)
	for _, addr := range []string{"fd00::5", "[fd00::5]:623", "[fd00::5]"} {
		_, err := Parse([]byte(strings.Replace(doc, `"fd00::5"`, `"`+addr+`"`, 1)))
		require.NoError(t, err, addr)
	}
	host, port, err := splitHostPort("fd00::5", 623)
	require.NoError(t, err)
	assert.Equal(t, "fd00::5", host)
	assert.Equal(t, 623, port)
	for name, bad := range map[string]string{
		"unknown privilege":          strings.Replace(doc, "privilege: administrator", "privilege: root", 1),
		"long IPMI user name":        strings.Replace(doc, "privilege: administrator", "username: a-seventeen-bytes", 1),
		"privilege on a Redfish BMC": strings.Replace(doc, `system: "Blade-2"`, "privilege: operator", 1),
		"system on an IPMI BMC":      strings.Replace(doc, "privilege: administrator", "system: x", 1),
	} {
		_, err := Parse([]byte(bad))
		assert.Error(t, err, name)
	}
}

// TestConnectRedfishSystemKey (issue 25): the inventory's system key picks
// one ComputerSystem of a BMC that has several; before it, such a server
// could not be controlled at all ("system \"\" not found among 2").
func TestConnectRedfishSystemKey(t *testing.T) {
	ca, err := redfishtest.NewCA()
	require.NoError(t, err)
	first := fake.NewPower(time.Now, fake.PowerConfig{})
	blade := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := redfishtest.NewBMC(time.Now, first, "admin", "inventory-Pw1")
	bmc.AddSystem("Blade-2", blade)
	srv := bmc.StartTLSWithCA(ca)
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.PEM(), 0o600))
	t.Setenv("REBOOTKIT_TEST_BMC_PASSWORD", "inventory-Pw1")

	doc := `
servers:
  - uuid: blade-2
    bmc: {redfish: "` + srv.URL + `", system: Blade-2, username: admin, password_env: REBOOTKIT_TEST_BMC_PASSWORD, ca_file: "` + caFile + `"}
    health: {tcp: "127.0.0.1:22"}
`
	inv, err := Parse([]byte(doc))
	require.NoError(t, err)
	s, _ := inv.Server("blade-2")
	c, err := Connect(context.Background(), inv.BMCOf(s))
	require.NoError(t, err)
	defer c.(interface{ Close() error }).Close()
	require.NoError(t, c.Off(context.Background(), power.ModeHard))
	assert.False(t, blade.HardwareOn(), "the named system is off")
	assert.True(t, first.HardwareOn(), "the other system is untouched")
}

// FuzzScrub: a password typed into an address (scheme://user:pw@host or
// user:pw@host, in a message) never survives Scrub.
func FuzzScrub(f *testing.F) {
	f.Add("htps", "admin", "S3cret", "10.0.0.1:443/redfish")
	f.Add("", "root", "p/a:ss", "bmc")
	f.Fuzz(func(t *testing.T, scheme, user, pw, host string) {
		bad := func(s string) bool { return strings.ContainsAny(s, " \t\n\r\v\f\"'`@\u0085\u00a0") }
		if len(pw) < 4 || bad(pw) || bad(user) || bad(host) || bad(scheme) || strings.Contains(host, pw) || strings.Contains(scheme, pw) {
			return
		}
		addr := user + ":" + pw + "@" + host
		if scheme != "" {
			addr = scheme + "://" + addr
		}
		msg := Scrub(`bmc.redfish "` + addr + `": want https://host[:port]`)
		if strings.Contains(msg, pw) {
			t.Fatalf("Scrub left the password in %q", msg)
		}
	})
}

// Review 36: the fleet's gated controller passes on reboot.Toggler.
func TestGatedForwardsTogglesOff(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	g := &gated{inner: fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft})}
	if !g.TogglesOff(power.ModeSoft) || g.TogglesOff(power.ModeHard) {
		t.Fatal("gated hides the inner controller's TogglesOff")
	}
	g = &gated{inner: fake.NewPower(clk.Real, fake.PowerConfig{})}
	if g.TogglesOff(power.ModeSoft) {
		t.Fatal("gated says a press for a controller that cannot toggle")
	}
}
