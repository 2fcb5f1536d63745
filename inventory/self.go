package inventory

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strings"
)

// ErrMaybeSelf: CreateJob was asked for a server that may be the machine
// the executor runs on, and the executor cannot tell (Options.MaybeSelf).
var ErrMaybeSelf = errors.New("inventory: the server may be the machine this executor runs on")

// Machine is what the executor knows of the machine it runs on, for
// Identify: its hostname, its addresses (loopback left out), and the
// addresses each of the inventory's names resolved to (a name missing
// from Resolved did not resolve: the executor cannot tell where it
// points).
type Machine struct {
	Hostname string
	// MachineID is this machine's /etc/machine-id ("" if unknown):
	// compared with each server's machine_id before anything else.
	MachineID string
	Addrs     []netip.Addr
	Resolved  map[string][]netip.Addr
}

// Names returns the names Identify looks up for server s: its hostname
// and the hosts of its health checks (literal addresses left out).
func (s Server) Names() []string {
	var out []string
	add := func(h string) {
		h = strings.Trim(h, "[]")
		if h == "" {
			return
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return
		}
		out = append(out, h)
	}
	add(s.Hostname)
	if h, _, err := net.SplitHostPort(s.Health.TCP); err == nil {
		add(h)
	}
	if u, err := url.Parse(s.Health.HTTP); err == nil && s.Health.HTTP != "" {
		add(u.Hostname())
	}
	return out
}

// addrs returns the literal addresses of server s's health checks.
func (s Server) addrs() []netip.Addr {
	var out []netip.Addr
	add := func(h string) {
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
			out = append(out, a.Unmap())
		}
	}
	if h, _, err := net.SplitHostPort(s.Health.TCP); err == nil {
		add(h)
	}
	if u, err := url.Parse(s.Health.HTTP); err == nil && s.Health.HTTP != "" {
		add(u.Hostname())
	}
	return out
}

// Identify says which server of the inventory this machine is (self, ""
// if none): first by machine ID (a server whose machine_id equals this
// machine's is it, one whose machine_id differs is not, whatever else
// matches), then by its hostname (case and domain aside) and by its addresses
// (a server whose hostname or health check host resolves to one of this
// machine's addresses, or names one literally). maybe lists the servers
// it cannot tell about: several match, or a server's names did not
// resolve (and its health check names no literal address) while nothing
// matched. A pure function: the caller resolves.
func (inv Inventory) Identify(m Machine) (self string, maybe []string) {
	short := func(h string) string {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		s, _, _ := strings.Cut(h, ".")
		return s
	}
	mine := map[netip.Addr]bool{}
	for _, a := range m.Addrs {
		if !a.IsLoopback() {
			mine[a.Unmap()] = true
		}
	}
	var byName, byAddr, unknown []string
	mid := normMachineID(m.MachineID)
	if mid != "" {
		for _, s := range inv.Servers {
			if normMachineID(s.MachineID) == mid {
				return s.UUID, nil // decisive (Validate refuses duplicates)
			}
		}
	}
	for _, s := range inv.Servers {
		if mid != "" && normMachineID(s.MachineID) != "" {
			continue // another machine, told by its machine ID
		}
		if m.Hostname != "" && (strings.EqualFold(s.Hostname, m.Hostname) || short(s.Hostname) == short(m.Hostname) && short(m.Hostname) != "") {
			byName = append(byName, s.UUID)
			continue
		}
		literal := s.addrs()
		hit, unresolved := false, false
		for _, a := range literal {
			hit = hit || mine[a]
		}
		for _, n := range s.Names() {
			as, ok := m.Resolved[n]
			if !ok && len(literal) == 0 {
				unresolved = true // no address known for it at all
			}
			for _, a := range as {
				hit = hit || !a.IsLoopback() && mine[a.Unmap()]
			}
		}
		switch {
		case hit:
			byAddr = append(byAddr, s.UUID)
		case unresolved:
			unknown = append(unknown, s.UUID)
		}
	}
	all := append(append([]string(nil), byName...), byAddr...)
	sort.Strings(all)
	all = compactStrings(all)
	switch {
	case len(all) == 1:
		return all[0], nil
	case len(all) > 1:
		return "", all
	}
	sort.Strings(unknown)
	return "", unknown
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// normMachineID is a machine ID as compared: lower case, spaces and
// dashes left out.
func normMachineID(id string) string {
	return strings.ToLower(strings.NewReplacer("-", "", " ", "", "\n", "").Replace(id))
}
