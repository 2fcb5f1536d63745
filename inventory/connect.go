package inventory

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/reboot"
)

// controller returns server uuid's power controller from the fleet's
// power.Pool (one cached connection per server, closed when idle, every
// call bounded, back-off per BMC after failures: hardest after a refused
// password).
func (f *Fleet) controller(uuid string) (power.Controller, error) {
	s, ok := f.inv.Server(uuid)
	if !ok {
		return nil, fmt.Errorf("inventory: no server %s", uuid)
	}
	b := f.inv.BMCOf(s)
	// One BMC is one name (Target.BMC) and one endpoint, however the
	// inventory spells it (redfish.Origin).
	addr := b.Redfish
	if o, err := redfish.Origin(b.Redfish); err == nil {
		addr = o
	}
	if b.IPMI != "" {
		addr = "ipmi://" + b.IPMI
		if a, err := ipmiAddress(b.IPMI); err == nil {
			addr = "ipmi://" + a
		}
	}
	// No secret in the config: the password's source and a keyed
	// fingerprint of its content, so that a changed password (a corrected
	// password_file) is a new login, tried at once, not one backing off
	// after the old password's refusals.
	cfg := fmt.Sprintf("%s system=%s user=%s env=%s file=%s secret=%s ca=%s insecure=%v basic=%v cipher=%d priv=%s",
		addr, b.System, b.Username, b.PasswordEnv, b.PasswordFile, f.secretPrint(b), b.CAFile, b.InsecureSkipVerify(), b.UseBasicAuth(), b.CipherSuite, b.Privilege)
	// The login's identity is what the login sends, not where the
	// password came from: servers behind one BMC whose password files or
	// variables hold the same credentials share one login, its back-off
	// and (Redfish) one session (review 35, round 2).
	login := ""
	if pass, err := b.Password(); err == nil {
		login = power.CredentialsKey(addr, b.Username, pass, b.CAFile, strconv.FormatBool(b.InsecureSkipVerify()),
			strconv.FormatBool(b.UseBasicAuth()), b.Privilege, strconv.Itoa(b.CipherSuite))
	}
	return f.pool.Controller(uuid, power.Target{BMC: addr, Config: cfg, Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
		var c power.Controller
		var err error
		if f.opts.Controller != nil {
			c, err = f.opts.Controller(ctx, s)
		} else {
			c, err = connectBounded(ctx, b, f.opts.Reboot)
		}
		if err != nil {
			return nil, fmt.Errorf("server %s: connect: %w", s.Hostname, err)
		}
		return c, nil
	}}), nil
}

// secretPrint is a fingerprint of b's password as it reads now: an
// HMAC-SHA-256 under this fleet's random key (never the secret, nor a hash
// one could test guesses against elsewhere), "none" if it does not read.
func (f *Fleet) secretPrint(b BMC) string {
	pass, err := b.Password()
	if err != nil {
		return "none"
	}
	m := hmac.New(sha256.New, f.printKey)
	m.Write([]byte(pass))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// Connect opens the power controller of a BMC (Redfish or IPMI).
func Connect(ctx context.Context, b BMC) (power.Controller, error) {
	return connectBounded(ctx, b, reboot.Config{})
}

// connectBounded is Connect giving the Redfish adapter the bounds of r,
// the reboot.Config the fleet decides with (redfishConfig).
func connectBounded(ctx context.Context, b BMC, r reboot.Config) (power.Controller, error) {
	pass, err := b.Password()
	if err != nil {
		return nil, err
	}
	if b.IPMI != "" {
		host, port, err := splitHostPort(b.IPMI, 623)
		if err != nil {
			return nil, err
		}
		return ipmi.Connect(ctx, ipmi.Config{Host: host, Port: port, Username: b.Username, Password: pass, CipherSuite: b.CipherSuite,
			Privilege: b.Privilege})
	}
	cfg := redfishConfig(b, pass, r)
	if b.CAFile != "" {
		pem, err := os.ReadFile(b.CAFile)
		if err != nil {
			return nil, fmt.Errorf("inventory: ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("inventory: ca_file %s holds no certificate", b.CAFile)
		}
		cfg.RootCAs = pool
	}
	c, err := redfish.Connect(ctx, cfg)
	if errors.Is(err, redfish.ErrNoSessionService) {
		return nil, &hintError{msg: "the BMC at " + b.Redfish + " has no Redfish session service (sushy-tools has none): set basic_auth: true in its bmc section of the inventory", err: err}
	}
	return c, err
}

// redfishConfig is the Redfish adapter's Config for b (password pass),
// with the bounds of r, the reboot.Config the fleet decides with: its
// SoftTimeout, StaleReads, OffSettle and LostLanding (reboot.LostLandingOf:
// the adapter's doc asks for it equal to the reboot package's), so that
// the adapter's own press rule uses the operator's bounds. r's zero
// SoftTimeout and StaleReads leave the adapter's defaults.
func redfishConfig(b BMC, pass string, r reboot.Config) redfish.Config {
	endpoint := b.Redfish
	if o, err := redfish.Origin(b.Redfish); err == nil {
		endpoint = o
	}
	return redfish.Config{Endpoint: endpoint, Username: b.Username, Password: pass, BasicAuth: b.UseBasicAuth(), InsecureSkipVerify: b.InsecureSkipVerify(),
		SystemID: b.System, SoftTimeout: r.SoftTimeout, StaleReads: r.StaleReads, OffSettle: r.OffSettle, LostLanding: reboot.LostLandingOf(r)}
}

// operatorText is a BMC error as an operator reads it: the Redfish
// adapter's advice to a library user when a login finds no
// SessionService ("set BasicAuth", a Go field) becomes the inventory key
// to set, on every path (a first connect is reworded by Connect; a
// re-login of an expired session is not).
func operatorText(err error, hostname string) string {
	var h *hintError
	if errors.Is(err, redfish.ErrNoSessionService) && !errors.As(err, &h) {
		return "the BMC of " + hostname + " has no Redfish session service (sushy-tools has none): set basic_auth: true in its bmc section of the inventory"
	}
	return err.Error()
}

// serverName is server's hostname (its UUID if the inventory lacks it).
func (f *Fleet) serverName(server string) string {
	if s, ok := f.inv.Server(server); ok {
		return s.Hostname
	}
	return server
}
