package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rebootkit/rebootkit/plan"
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
	// (in addition to the system roots). Insecure skips verification.
	CAFile   string `yaml:"ca_file"`
	Insecure bool   `yaml:"insecure"`
	// BasicAuth uses HTTP basic authentication instead of a Redfish
	// session (for services without a SessionService).
	BasicAuth bool `yaml:"basic_auth"`
	// CipherSuite is the IPMI cipher suite (default 3).
	CipherSuite int `yaml:"cipher_suite"`
	// System is the Redfish ComputerSystem's ID, for a BMC with more than
	// one system (default: the only one).
	System string `yaml:"system"`
	// Privilege is the IPMI session's privilege: operator (enough for
	// power control) or administrator (the default).
	Privilege string `yaml:"privilege"`
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
		}
		if b.Redfish != "" {
			u, err := url.Parse(b.Redfish)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return bad("bmc.redfish %q: want https://host[:port]", b.Redfish)
			}
			if u.User != nil {
				return bad("bmc.redfish: no credentials in the URL")
			}
		}
		if b.IPMI != "" {
			if _, _, err := splitHostPort(b.IPMI, 623); err != nil {
				return bad("bmc.ipmi: %v", err)
			}
		}
		switch strings.ToLower(b.Privilege) {
		case "", "operator", "administrator":
		default:
			return bad("bmc.privilege %q: want operator or administrator", b.Privilege)
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
			if _, _, err := net.SplitHostPort(h.TCP); err != nil {
				return bad("health.tcp: %v", err)
			}
		}
		if h.HTTP != "" {
			if u, err := url.Parse(h.HTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				return bad("health.http %q: want an http(s) URL", h.HTTP)
			}
		}
	}
	if heads > 1 {
		return fmt.Errorf("%w: %d headnodes, at most one", ErrInvalid, heads)
	}
	return nil
}

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
	b.Insecure = b.Insecure || def.Insecure
	b.BasicAuth = b.BasicAuth || def.BasicAuth
	if b.CipherSuite == 0 {
		b.CipherSuite = def.CipherSuite
	}
	if b.System == "" {
		b.System = def.System
	}
	if b.Privilege == "" {
		b.Privilege = def.Privilege
	}
	return b
}

// BMCOf returns server s's BMC settings, defaults applied.
func (inv Inventory) BMCOf(s Server) BMC { return s.merged(inv.Defaults) }

// Password reads the BMC password from the environment or the file.
func (b BMC) Password() (string, error) {
	if b.PasswordEnv != "" {
		v, ok := os.LookupEnv(b.PasswordEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("inventory: environment variable %s is not set", b.PasswordEnv)
		}
		return v, nil
	}
	raw, err := os.ReadFile(b.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("inventory: password file: %w", err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return "", fmt.Errorf("inventory: password file %s is empty", b.PasswordFile)
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
		out[i] = plan.Server{UUID: s.UUID, Hostname: s.Hostname, Platform: s.Platform, Core: s.Core || s.Headnode, Headnode: s.Headnode}
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

func splitHostPort(s string, def int) (string, int, error) {
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
