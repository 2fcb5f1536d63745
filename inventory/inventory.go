package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/redfish"
)

// ErrInvalid is wrapped by every error about the inventory's content.
var ErrInvalid = errors.New("inventory: invalid")

// MaxBytes bounds an inventory file.
const MaxBytes = 64 << 20

// Inventory is the servers a rebootctl plan may reboot, and how to reach
// and check each.
type Inventory struct {
	// Defaults apply to every server that does not say otherwise (BMC
	// credentials and options, timeouts).
	Defaults Defaults `yaml:"defaults"`
	// Servers in any order; plans put the headnode first, then the other
	// core servers, then the rest.
	Servers []Server `yaml:"servers"`
	// Plan is what new plans get unless rebootctl's flags say otherwise:
	// maintenance windows, canary ramp, failure-domain limits, blocking
	// conditions.
	Plan PlanPolicy `yaml:"plan"`

	// byKey maps UUIDs and hostnames to positions in Servers (built by
	// Parse; Server scans when it is nil).
	byKey map[string]int
}

// Defaults are inherited by every server.
type Defaults struct {
	BMC BMC `yaml:"bmc"`
	// HealthTimeout bounds one health check (default 5s).
	HealthTimeout Duration `yaml:"health_timeout"`
	// CommandTimeout bounds a drain or undrain command (default 15m).
	CommandTimeout Duration `yaml:"command_timeout"`
	// CommandEnv names the environment variables, besides PATH, HOME and
	// SSH_AUTH_SOCK, that drain, undrain, reboot and health commands get
	// from the executor's environment. Nothing else is passed on; a BMC
	// password variable (password_env) is refused here and never passed.
	CommandEnv []string `yaml:"command_env"`
}

// Server is one server.
type Server struct {
	UUID     string `yaml:"uuid"`
	Hostname string `yaml:"hostname"`
	// Core servers reboot first, one at a time; the headnode (at most one,
	// core) first of all.
	Core     bool `yaml:"core"`
	Headnode bool `yaml:"headnode"`
	// Platform is what the server runs now (for the warnings and
	// --skip-current of plan create).
	Platform string `yaml:"platform"`
	BMC      BMC    `yaml:"bmc"`
	// Health stands for "the server's services are up".
	Health Health `yaml:"health"`
	// Drain and Undrain, optional, run before the power cycle and after
	// the health check passes (argv, no shell).
	Drain   []string `yaml:"drain"`
	Undrain []string `yaml:"undrain"`
	// Reboot, optional, reboots the server through its operating system
	// (argv, no shell, e.g. [systemctl, reboot]). Only the server the
	// executor runs on is rebooted this way (its BMC is never asked to
	// power it off: nothing would power it on again); a plan that includes
	// that server needs it.
	Reboot []string `yaml:"reboot"`
	// MachineID, optional, is the server's /etc/machine-id (32 hex
	// digits): the executor tells by it, decisively, whether it runs on
	// this server (equal) or not (different), whatever hostnames and
	// addresses say.
	MachineID string `yaml:"machine_id"`
	// Labels are the server's failure domains and other labels (rack:
	// r12, zone: z1), for the plan's domain limits (plan.domain_limits).
	Labels map[string]string `yaml:"labels"`
}

// BMC says how to reach a server's BMC. Exactly one of Redfish and IPMI.
// Credentials never appear in the inventory: PasswordEnv names an
// environment variable, PasswordFile a file (first line).
type BMC struct {
	// Redfish is the service root's base URL (https://host[:port]).
	Redfish string `yaml:"redfish"`
	// IPMI is host[:port] of an IPMI v2.0 (lanplus) BMC.
	IPMI string `yaml:"ipmi"`

	Username     string `yaml:"username"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`

	// CAFile is a PEM bundle to verify a Redfish BMC's certificate with
	// (in addition to the system roots). Insecure, when true, skips
	// verification (InsecureSkipVerify). Nil: not given (a server's
	// defaults apply); a server's false wins over a default true.
	CAFile   string `yaml:"ca_file"`
	Insecure *bool  `yaml:"insecure"`
	// BasicAuth, when true, uses HTTP basic authentication instead of a
	// Redfish session (for services without a SessionService;
	// UseBasicAuth). Nil: not given; a server's false wins over a default
	// true.
	BasicAuth *bool `yaml:"basic_auth"`
	// CipherSuite is the IPMI cipher suite: 3 (the default) or 17, the
	// suites the IPMI adapter speaks.
	CipherSuite int `yaml:"cipher_suite"`
	// Privilege is the IPMI session's privilege: operator (the default,
	// the least that controls power) or administrator. Ignored for Redfish
	// BMCs when it comes from the defaults.
	Privilege string `yaml:"privilege"`
	// System is the Id of the Redfish ComputerSystem to control, on a BMC
	// with several (blades, multi-node chassis); empty: the only one.
	// Ignored for IPMI BMCs when it comes from the defaults.
	System string `yaml:"system"`
}

// Health is one check; exactly one of TCP, HTTP and Command.
type Health struct {
	// TCP: host:port accepts a connection.
	TCP string `yaml:"tcp"`
	// HTTP: a GET of the URL answers Status (default 200).
	HTTP   string `yaml:"http"`
	Status int    `yaml:"status"`
	// Command: the command (argv, no shell) exits 0.
	Command []string `yaml:"command"`
}

// Duration is a time.Duration written as "30s", "15m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// Load reads and checks an inventory file.
func Load(path string) (Inventory, error) {
	f, err := os.Open(path)
	if err != nil {
		return Inventory{}, fmt.Errorf("inventory: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return Inventory{}, fmt.Errorf("inventory: read %s: %w", path, err)
	}
	if len(data) > MaxBytes {
		return Inventory{}, fmt.Errorf("%w: %s is over %d bytes", ErrInvalid, path, MaxBytes)
	}
	inv, err := Parse(data)
	if err != nil {
		return Inventory{}, fmt.Errorf("%s: %w", path, err)
	}
	return inv, nil
}

// Parse decodes and checks an inventory document (YAML). Unknown fields
// are errors: a misspelt key must not silently drop a health check.
func Parse(data []byte) (Inventory, error) {
	if len(data) > MaxBytes {
		return Inventory{}, fmt.Errorf("%w: over %d bytes", ErrInvalid, MaxBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var inv Inventory
	if err := dec.Decode(&inv); err != nil {
		// The decoder quotes values; a credential typed into one must not
		// be echoed (decodeError scrubs what it quotes).
		return Inventory{}, decodeError(data, err)
	}
	if err := inv.check(); err != nil {
		return Inventory{}, err
	}
	return inv, nil
}

func (inv *Inventory) check() error {
	if len(inv.Servers) == 0 {
		return fmt.Errorf("%w: no servers", ErrInvalid)
	}
	if len(inv.Servers) > plan.MaxServers {
		return fmt.Errorf("%w: %d servers, limit %d", ErrInvalid, len(inv.Servers), plan.MaxServers)
	}
	seen := map[string]string{}
	passwordVars := map[string]bool{}
	inv.byKey = make(map[string]int, 2*len(inv.Servers))
	heads := 0
	for i := range inv.Servers {
		s := &inv.Servers[i]
		bad := func(format string, a ...any) error {
			name := s.Hostname // operators know servers by hostname
			if name == "" {
				name = s.UUID
			}
			return fmt.Errorf("%w: server %d (%s): %s", ErrInvalid, i+1, name, fmt.Sprintf(format, a...))
		}
		if err := plan.ValidUUID(s.UUID); err != nil {
			return bad("uuid: %v", err)
		}
		if s.Hostname == "" {
			s.Hostname = s.UUID
		}
		for _, k := range []string{s.UUID, s.Hostname} {
			if other, ok := seen[k]; ok && other != s.UUID {
				return bad("%q is also server %s", k, other)
			} else if ok && k == s.UUID {
				return bad("listed twice")
			}
		}
		seen[s.UUID], seen[s.Hostname] = s.UUID, s.UUID
		// A hostname names a machine, case aside (DNS; the executor
		// finds its own server case aside): two that differ only in
		// case are one machine to an operator.
		if other, ok := seen["host:"+strings.ToLower(s.Hostname)]; ok {
			return bad("hostname %q differs only in case from server %s's: give each server its own hostname", s.Hostname, other)
		}
		seen["host:"+strings.ToLower(s.Hostname)] = s.Hostname
		if s.MachineID != "" {
			id := normMachineID(s.MachineID)
			if !machineIDRe.MatchString(id) {
				return bad("machine_id: want the 32 hex digits of the server's /etc/machine-id")
			}
			if other, ok := seen["machine-id:"+id]; ok {
				return bad("machine_id is also server %s's", other)
			}
			seen["machine-id:"+id] = s.Hostname
		}
		inv.byKey[s.UUID], inv.byKey[s.Hostname] = i, i
		if s.Headnode {
			heads++
			s.Core = true
		}
		b := s.merged(inv.Defaults)
		switch {
		case (b.Redfish == "") == (b.IPMI == ""):
			return bad("bmc: give exactly one of redfish and ipmi")
		case b.Username == "":
			return bad("bmc: no username")
		case (b.PasswordEnv == "") == (b.PasswordFile == ""):
			return bad("bmc: give exactly one of password_env and password_file (never a password)")
		case b.PasswordEnv != "" && !envName.MatchString(b.PasswordEnv):
			// Never echoed: it may be a password typed in by mistake.
			return bad("bmc.password_env must name an environment variable (letters, digits and _, not starting with a digit), never hold the password; its value is not shown")
		}
		if b.Redfish != "" {
			u, err := url.Parse(b.Redfish)
			switch {
			case hasUserinfo(b.Redfish) || err == nil && u.User != nil:
				return bad("bmc.redfish %q: no credentials in the URL (give username, and password_env or password_file)", Scrub(b.Redfish))
			case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
				return bad("bmc.redfish %q: want https://host[:port]", Scrub(b.Redfish))
			}
			if _, err := redfish.Origin(b.Redfish); err != nil {
				return bad("bmc.redfish %q: %v", Scrub(b.Redfish), err)
			}
		}
		if b.IPMI != "" {
			if strings.Contains(b.IPMI, "@") {
				return bad("bmc.ipmi %q: no credentials in the address (give username, and password_env or password_file)", Scrub(b.IPMI))
			}
			if h, _, err := splitHostPort(b.IPMI, 623); err != nil || strings.TrimSuffix(strings.Trim(h, "[]"), ".") == "" {
				// Not echoed: "admin:pw" is as likely as "host:port".
				return bad("bmc.ipmi: want host[:port] (a host name or address, a port from 1 to 65535)")
			}
			if len(b.Username) > 16 {
				return bad("bmc.username: IPMI allows at most 16 bytes, this one has %d", len(b.Username))
			}
			switch strings.ToLower(b.Privilege) {
			case "", "operator", "administrator":
			default:
				return bad("bmc.privilege %q: want operator (the default) or administrator", b.Privilege)
			}
			if s.BMC.System != "" {
				return bad("bmc.system is for Redfish BMCs; an IPMI BMC controls one system")
			}
			if b.CipherSuite != 0 && b.CipherSuite != 3 && b.CipherSuite != 17 {
				return bad("bmc.cipher_suite %d: want 3 (the default) or 17, the cipher suites the IPMI adapter speaks", b.CipherSuite)
			}
		}
		if id := bmcIdentity(b); id != "" {
			if other, ok := seen["bmc:"+id]; ok {
				return bad("its BMC (%s) is also server %s's: each server needs its own BMC, or its own bmc.system of a Redfish service with several", Scrub(bmcShown(b)), other)
			}
			seen["bmc:"+id] = s.Hostname
			if b.Redfish != "" && b.System != "" {
				// A server with no system names the service's only one,
				// which may be this one.
				if other, ok := seen["bmc:"+bmcIdentity(BMC{Redfish: b.Redfish})]; ok {
					return bad("its BMC (%s) is also server %s's, which names no bmc.system: give every server of that BMC its system", Scrub(bmcShown(b)), other)
				}
				seen["bmc-sys:"+bmcIdentity(BMC{Redfish: b.Redfish})] = s.Hostname
			} else if b.Redfish != "" {
				if other, ok := seen["bmc-sys:"+id]; ok {
					return bad("its BMC (%s) is also server %s's: give every server of that BMC its bmc.system", Scrub(bmcShown(b)), other)
				}
			}
		}
		if b.Redfish != "" && s.BMC.Privilege != "" {
			return bad("bmc.privilege is for IPMI BMCs; Redfish uses the account's role")
		}
		h := s.Health
		n := 0
		for _, set := range []bool{h.TCP != "", h.HTTP != "", len(h.Command) > 0} {
			if set {
				n++
			}
		}
		if n != 1 {
			return bad("health: give exactly one of tcp, http and command")
		}
		if h.TCP != "" {
			if _, _, err := net.SplitHostPort(h.TCP); err != nil || strings.Contains(h.TCP, "@") {
				return bad("health.tcp %q: want host:port", Scrub(h.TCP))
			}
		}
		if h.HTTP != "" {
			if u, err := url.Parse(h.HTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				return bad("health.http %q: want an http(s) URL", Scrub(h.HTTP))
			}
		}
		if b.PasswordEnv != "" {
			passwordVars[b.PasswordEnv] = true
		}
	}
	if heads > 1 {
		return fmt.Errorf("%w: %d headnodes, at most one", ErrInvalid, heads)
	}
	if err := inv.checkLabels(); err != nil {
		return err
	}
	if err := inv.Plan.check(); err != nil {
		return err
	}
	for _, name := range inv.Defaults.CommandEnv {
		switch {
		case !validEnvName(name):
			return fmt.Errorf("%w: defaults.command_env: %q is not an environment variable name", ErrInvalid, Scrub(name))
		case passwordVars[name]:
			return fmt.Errorf("%w: defaults.command_env: %s holds a BMC password (password_env); commands never get it", ErrInvalid, name)
		}
	}
	return nil
}

// bmcIdentity is what names one BMC-controlled system, whatever the
// spelling: a Redfish service by redfish.Origin (the one spelling the
// adapter, the Pool and the window registry name it by) and its system,
// or an IPMI host and port (ipmiAddress). "" if b names none.
func bmcIdentity(b BMC) string {
	if b.IPMI != "" {
		id, err := ipmiAddress(b.IPMI)
		if err != nil {
			return ""
		}
		return "ipmi://" + id
	}
	o, err := redfish.Origin(b.Redfish)
	if err != nil {
		return ""
	}
	return o + "#" + b.System
}

// bmcShown is a BMC as an operator wrote it.
func bmcShown(b BMC) string {
	if b.IPMI != "" {
		return "ipmi " + b.IPMI
	}
	if b.System != "" {
		return b.Redfish + " system " + b.System
	}
	return b.Redfish
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// baseCommandEnv are the variables every command gets (when set).
var baseCommandEnv = []string{"PATH", "HOME", "SSH_AUTH_SOCK"}

// CommandEnv returns the environment drain, undrain, reboot and health
// commands run with: PATH, HOME and SSH_AUTH_SOCK, and the variables
// Defaults.CommandEnv names, from lookup (os.LookupEnv when nil). A
// variable any server reads its BMC password from is never included.
func (inv Inventory) CommandEnv(lookup func(string) (string, bool)) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	secret := map[string]bool{}
	for _, s := range inv.Servers {
		if b := inv.BMCOf(s); b.PasswordEnv != "" {
			secret[b.PasswordEnv] = true
		}
	}
	var env []string
	seen := map[string]bool{}
	for _, name := range append(append([]string{}, baseCommandEnv...), inv.Defaults.CommandEnv...) {
		if seen[name] || secret[name] {
			continue
		}
		seen[name] = true
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// hasUserinfo reports whether s looks like it carries credentials before
// its host ("scheme://user:pw@host", "user:pw@host").
func hasUserinfo(s string) bool {
	rest := s
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}

// Scrub replaces whatever stands before an '@' in the authority of every
// address in msg ("htps://admin:pw@host" becomes "htps://***@host",
// "admin:pw@host" becomes "***@host"), so that an error about an address
// never echoes a credential typed into it.
func Scrub(msg string) string {
	return userinfo.ReplaceAllString(msg, "${1}***@")
}

// userinfo matches an optional scheme and the userinfo of an address: the
// characters up to the last '@' before the host, stopping at spaces,
// quotes and backquotes (greedy: through the last '@' of a token).
var userinfo = regexp.MustCompile("([A-Za-z][A-Za-z0-9+.-]*:/+)?[^\\s\"'`]*@")

// merged returns the server's BMC with the defaults filled in.
func (s Server) merged(d Defaults) BMC {
	b := s.BMC
	def := d.BMC
	if b.Redfish == "" && b.IPMI == "" {
		b.Redfish, b.IPMI = def.Redfish, def.IPMI
	}
	if b.Username == "" {
		b.Username = def.Username
	}
	if b.PasswordEnv == "" && b.PasswordFile == "" {
		b.PasswordEnv, b.PasswordFile = def.PasswordEnv, def.PasswordFile
	}
	if b.CAFile == "" {
		b.CAFile = def.CAFile
	}
	if b.Insecure == nil {
		b.Insecure = def.Insecure
	}
	if b.BasicAuth == nil {
		b.BasicAuth = def.BasicAuth
	}
	if b.CipherSuite == 0 {
		b.CipherSuite = def.CipherSuite
	}
	if b.Privilege == "" {
		b.Privilege = def.Privilege
	}
	if b.System == "" {
		b.System = def.System
	}
	return b
}

// InsecureSkipVerify reports whether the BMC's certificate goes unchecked
// (insecure: true).
func (b BMC) InsecureSkipVerify() bool { return b.Insecure != nil && *b.Insecure }

// UseBasicAuth reports whether credentials go with every Redfish request
// instead of a session (basic_auth: true).
func (b BMC) UseBasicAuth() bool { return b.BasicAuth != nil && *b.BasicAuth }

// BMCOf returns server s's BMC settings, defaults applied.
func (inv Inventory) BMCOf(s Server) BMC { return s.merged(inv.Defaults) }

// Password reads the BMC password from the environment or the file.
func (b BMC) Password() (string, error) {
	if b.PasswordEnv != "" {
		if !envName.MatchString(b.PasswordEnv) {
			return "", fmt.Errorf("%w: password_env does not name an environment variable (its value is not shown: it may be a password)", ErrNoPassword)
		}
		v, ok := os.LookupEnv(b.PasswordEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("%w: environment variable %s is not set", ErrNoPassword, envShown(b.PasswordEnv))
		}
		return v, nil
	}
	raw, err := os.ReadFile(b.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("%w: password file: %w", ErrNoPassword, err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%w: password file %s is empty", ErrNoPassword, b.PasswordFile)
	}
	return line, nil
}

// Server returns the server with that UUID or hostname.
func (inv Inventory) Server(key string) (Server, bool) {
	if i, ok := inv.byKey[key]; ok && i < len(inv.Servers) && (inv.Servers[i].UUID == key || inv.Servers[i].Hostname == key) {
		return inv.Servers[i], true
	}
	for _, s := range inv.Servers { // not indexed (built by hand, or changed since Parse)
		if s.UUID == key || s.Hostname == key {
			return s, true
		}
	}
	return Server{}, false
}

// PlanServers returns the servers as plan.Create wants them.
func (inv Inventory) PlanServers() []plan.Server {
	out := make([]plan.Server, len(inv.Servers))
	for i, s := range inv.Servers {
		out[i] = plan.Server{UUID: s.UUID, Hostname: s.Hostname, Platform: s.Platform, Core: s.Core || s.Headnode, Headnode: s.Headnode, Labels: s.Labels}
	}
	return out
}

func (d Defaults) healthTimeout() time.Duration {
	if d.HealthTimeout > 0 {
		return time.Duration(d.HealthTimeout)
	}
	return 5 * time.Second
}

func (d Defaults) commandTimeout() time.Duration {
	if d.CommandTimeout > 0 {
		return time.Duration(d.CommandTimeout)
	}
	return 15 * time.Minute
}

// ipmiAddress is an IPMI BMC's address in one spelling: host and port
// (623 if none), an IP literal in its canonical form (an IPv4-mapped IPv6
// address as IPv4, IPv6 compressed and lower-case), a host name
// lower-cased without a trailing dot; so that two spellings of one BMC
// are one BMC to the inventory's checks and one name to the Pool.
func ipmiAddress(s string) (string, error) {
	host, port, err := splitHostPort(s, 623)
	if err != nil {
		return "", err
	}
	return ipmi.BMCName(host, port), nil
}

func splitHostPort(s string, def int) (string, int, error) {
	if ip := net.ParseIP(s); ip != nil {
		return s, def, nil // an address without a port (an IPv6 literal too)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return s, def, nil
		}
		return "", 0, err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("port %q", port)
	}
	return host, n, nil
}

// envName is what password_env must be: an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// machineIDRe is a machine ID as normMachineID leaves it.
var machineIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// conventionalEnv: a variable's name as people write them.
var conventionalEnv = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// envShown is how a password_env name appears in messages: as is when it
// reads like a variable's name (upper case, digits, _), else masked, so
// that a password typed into password_env never reaches a log, show, the
// store or a report.
func envShown(name string) string {
	if conventionalEnv.MatchString(name) {
		return name
	}
	return fmt.Sprintf("named in password_env (%d characters, not shown: it does not read like a variable's name and may be a password)", len(name))
}
