package kube

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/redfish"
)

// ErrBMCAddress: a BareMetalHost's spec.bmc.address this package cannot
// use.
var ErrBMCAddress = errors.New("kube: unsupported BMC address")

// BMCTarget is a parsed spec.bmc.address.
type BMCTarget struct {
	// Protocol is "redfish" or "ipmi".
	Protocol string
	// Endpoint is the Redfish base URL (scheme, host, port, and the
	// path before /redfish/v1 of a BMC behind a path proxy) in its one
	// canonical spelling (redfish.Origin): one BMC, one Endpoint.
	Endpoint string
	// SystemID is the Redfish system's ID from the address's path, if any.
	SystemID string
	// Host and Port of an IPMI BMC (port 623 by default), the host in one
	// spelling (ipmi.CanonicalHost); the Pool names the BMC by
	// ipmi.BMCName, so that two spellings of one BMC are one Pool BMC.
	Host string
	Port int
	// Privilege of the IPMI session, from the address's privilegelevel
	// query parameter as the baremetal-operator reads it (OPERATOR or
	// ADMINISTRATOR; "" is the adapter's default, OPERATOR).
	Privilege string
}

// ParseBMCAddress parses a BareMetalHost's BMC address, as the
// baremetal-operator writes them: ipmi://host[:port][?privilegelevel=P],
// and the Redfish
// family (redfish://, redfish+http://, redfish+https://, the
// virtual-media and UEFI-HTTP variants such as redfish-virtualmedia:// and
// idrac-virtualmedia://, and vendor variants such as idrac-redfish:// or
// ilo5-redfish://), each also without the "//" after the scheme
// (redfish:host, ipmi:host:port, read as the operator reads them), with
// no path or the system's path
// ([prefix]/redfish/v1/Systems/ID): a prefix (a BMC behind a path proxy,
// https://proxy/bmc1) is kept in the Endpoint, so /bmc1 and /bmc2 are
// two BMCs. Anything else (another path: no system is guessed) wraps
// ErrBMCAddress.
func ParseBMCAddress(addr string) (BMCTarget, error) {
	u, err := url.Parse(addr)
	if err == nil && u.Scheme != "" && u.Opaque != "" {
		// "redfish:host/…", "ipmi:host:port": read with "//" after the
		// scheme, as the baremetal-operator does.
		u, err = url.Parse(u.Scheme + "://" + strings.TrimPrefix(addr[len(u.Scheme)+1:], "//"))
	}
	if err != nil || u.Host == "" {
		return BMCTarget{}, fmt.Errorf("%w: %q", ErrBMCAddress, addr)
	}
	if u.User != nil {
		return BMCTarget{}, fmt.Errorf("%w: credentials belong in the secret, not the address", ErrBMCAddress)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "ipmi":
		host, port := ipmi.CanonicalHost(u.Hostname()), 623
		if strings.TrimSuffix(host, ".") == "" {
			return BMCTarget{}, fmt.Errorf("%w: %q names no host (ipmi://host[:port])", ErrBMCAddress, addr)
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return BMCTarget{}, fmt.Errorf("%w: port %q", ErrBMCAddress, p)
			}
			port = n
		}
		priv := strings.ToUpper(u.Query().Get("privilegelevel"))
		switch priv {
		case "", ipmi.PrivilegeOperator, ipmi.PrivilegeAdministrator:
		default:
			return BMCTarget{}, fmt.Errorf("%w: privilegelevel %q (OPERATOR or ADMINISTRATOR)", ErrBMCAddress, priv)
		}
		return BMCTarget{Protocol: "ipmi", Host: host, Port: port, Privilege: priv}, nil
	case strings.Contains(scheme, "redfish") || strings.Contains(scheme, "virtualmedia") || strings.Contains(scheme, "uefihttp"):
		// The baremetal-operator's Redfish drivers: redfish, its
		// virtual-media and UEFI-HTTP boot variants, and the vendors'
		// (idrac-redfish, idrac-virtualmedia, ilo5-redfish, ...).
		web := "https"
		if strings.HasSuffix(scheme, "+http") {
			web = "http"
		}
		// The path is empty or "<prefix>/redfish/v1/Systems/<id>": the
		// prefix (a BMC behind a path proxy, /bmc1 and /bmc2) stays in
		// the Endpoint, as the baremetal-operator hands ironic the
		// whole path (TestReview35ah_PathPrefixedBMCsCollapseToOneEndpoint),
		// and as an inventory's Redfish base URL keeps it.
		path := strings.TrimSuffix(u.EscapedPath(), "/")
		prefix, id := "", ""
		if path != "" {
			i := strings.LastIndex(path, systemsPath)
			if i < 0 {
				return BMCTarget{}, fmt.Errorf("%w: path %q: write the system's path, [prefix]%s<id>, or none", ErrBMCAddress, u.Path, systemsPath)
			}
			prefix, id = path[:i], path[i+len(systemsPath):]
			dec, err := url.PathUnescape(id)
			if err != nil || dec == "" || strings.Contains(dec, "/") {
				return BMCTarget{}, fmt.Errorf("%w: system path %q: write it as [prefix]%s<id>", ErrBMCAddress, u.Path, systemsPath)
			}
			id = dec
		}
		// One BMC is one Endpoint (and Target.BMC) however its address
		// spells it: redfish:// and redfish-virtualmedia:// of one host,
		// the default port, a host name's case, an IPv6 address's form
		// (TestReview35ae_OneChassisTwoBMCNames).
		origin, err := redfish.Origin(web + "://" + u.Host + prefix)
		if err != nil {
			return BMCTarget{}, fmt.Errorf("%w: %q: %w", ErrBMCAddress, u.Host+prefix, err)
		}
		return BMCTarget{Protocol: "redfish", Endpoint: origin, SystemID: id}, nil
	}
	return BMCTarget{}, fmt.Errorf("%w: scheme %q (redfish family or ipmi)", ErrBMCAddress, u.Scheme)
}

// systemsPath is what precedes a system's ID in a Redfish BMC address.
const systemsPath = "/redfish/v1/Systems/"

// BMCHostLabel on a BMC credentials Secret names the BareMetalHost it
// belongs to. Powers uses a Secret for a host only if it is bound to that
// host: this label names it, or the Secret has an owner reference to the
// host (the baremetal-operator adds one to the Secrets it manages). A
// client that may update BareMetalHosts (to ask for reboots) can point
// spec.bmc.credentialsName anywhere; it cannot bind a Secret, which needs
// update on Secrets.
const BMCHostLabel = "rebootkit.io/bmc-host"

// ErrSecretNotBound: the credentials Secret a host names is not bound to
// it (see BMCHostLabel); its credentials are not sent anywhere.
var ErrSecretNotBound = errors.New("kube: BMC credentials secret not bound to the host")

// boundTo reports whether secret is bound to the host (BMCHostLabel or an
// owner reference with the host's UID).
func boundTo(secret *corev1.Secret, bmh *metal3.BareMetalHost) bool {
	if v, ok := secret.Labels[BMCHostLabel]; ok && v == bmh.Name {
		return true
	}
	for _, o := range secret.OwnerReferences {
		if o.UID == bmh.UID && o.Kind == "BareMetalHost" {
			return true
		}
	}
	return false
}

// Powers gives the reboot Reconciler a power.Controller per BareMetalHost,
// from its spec.bmc (address, credentialsName: a Secret with "username"
// and "password", disableCertificateVerification), as the
// baremetal-operator reads them, through a power.Pool: every BMC call is
// bounded (PoolConfig.CallTimeout, ConnectTimeout), a BMC that fails is
// backed off (longer after a refused password), connections are cached per
// host while the address and the credentials stay the same (hosts with the
// same credentials share a login, whatever Secret holds them), and closed
// when idle or when the host is deleted (Forget). One hung or unreachable BMC thus costs its own
// host's passes only.
//
// Secrets are read with get, directly from the API server (Secrets), never
// through a cache: a cache would need list and watch on every Secret of
// the namespace and keep them all in memory.
type Powers struct {
	// Client reads BareMetalHosts (the manager's cached client is fine).
	// If it can also write (the manager's client can), it writes a
	// RebootRecord's BMCChanged mark (see checkPin); a Client that only
	// reads leaves the pin in place instead (the host's BMC stays refused
	// until spec.bmc is restored).
	Client client.Reader
	// Secrets reads with get, uncached, the credentials Secrets, the
	// host's RebootRecord (its BMC pin) and the reboot-client admission
	// policy: the manager's GetAPIReader(). Required.
	Secrets   client.Reader
	Namespace string
	// RootCAs verifies Redfish BMCs (nil: the system's pool).
	RootCAs *x509.CertPool
	// SoftTimeout, StaleReads, LostLanding and OffSettle are passed to
	// the Redfish adapter (redfish.Config, redfishConfig): set them to the
	// reboot.Config the Reconciler runs with, so that the adapter's own
	// press rule uses the same bounds. Zero: the reboot package's
	// defaults (LostLanding: reboot.LostLandingOf, SoftTimeout).
	SoftTimeout, StaleReads, LostLanding, OffSettle time.Duration
	// TaskLimit bounds how long a power-on through a pinned BMC that the
	// BMC accepted for later (a Redfish 202 and its task) is followed
	// (default DefaultTaskLimit): past it the host is left as it is
	// (ErrTaskOverdue) until its task monitor, read by any replica that
	// finds the record so (taskHold), says the task ended or is gone, or
	// an administrator removes the record's PowerOnSent.
	TaskLimit time.Duration
	// Timeout bounds reading the host and its Secret (default 30 s).
	Timeout time.Duration
	// Pool owns the BMC connections; nil: one with the default
	// power.PoolConfig, made on first use (Close closes it).
	Pool *power.Pool
	// PolicyName is the reboot-client admission policy and binding
	// (default AdmissionPolicyName), and PolicySettle how long before a
	// reboot became pending they must have existed (default
	// DefaultPolicySettle) for a BMC changed during that reboot to be
	// used: see ErrBMCChanged.
	PolicyName   string
	PolicySettle time.Duration
	// Done, if set, is called with a host's name when a background
	// reading of its pinned BMC (see checkPin) ends after its pass
	// stopped waiting, so that the host is requeued while the reading is
	// fresh (from the reading's goroutine; it must not block). The
	// RebootController's Async.Done does that.
	Done func(name string)
	// Guard, if set, wraps the power controller of the one power call
	// Powers makes itself (checkPin powering a host back on through its
	// pinned BMC): the LeaseGuard's Wrap, as for the Reconciler's calls.
	Guard func(power.Controller) power.Controller
	// Ownership, if set, is the RebootController's: a power-on Powers
	// sends itself (through a host's pinned BMC) is attempted only if the
	// host is rebootkit's (Ownership.Ours) when the attempt begins and
	// goes out only if it still is when read again, uncached, just before
	// it. Unset: a host the baremetal-operator shows its hand on (the
	// detached annotation, or a status.operationalStatus written) must be
	// detached (Detached).
	Ownership *Ownership
	// WithoutAdmissionPolicy runs without the reboot-client admission
	// policy of config/admission: without it (false, the default),
	// Controller refuses every host (ErrNoAdmissionPolicy: no credentials
	// sent, no power call) while the policy PolicyName and its denying
	// binding are not in force, as read at most PolicyRecheck ago. See
	// doc.go for what is weaker with it.
	WithoutAdmissionPolicy bool
	// PolicyRecheck is how long Controller keeps what it read of the
	// admission policy before reading it again (default 30 s).
	PolicyRecheck time.Duration

	once   sync.Once
	mu     sync.Mutex
	pinned map[string]*pinnedRead // background readings of pinned BMCs (pinnedReadsOff)
	seen   map[string]*pinnedSeen // when their requests were first found gone (pinnedNotBefore)
	pinOn  map[string]*pinnedOn   // power-on attempts through pinned BMCs (RebootRecord's PowerOnThrough)
	tasks  map[string]*taskRead   // readings of overdue bookings' task monitors (taskHold)
	// readCtx is the parent of the pinned readings, cancelled by Close.
	readCtx  context.Context
	readStop context.CancelFunc
	// policyErr is what the last check of the admission policy found
	// (nil: in force), policyAt when (zero: never checked).
	policyErr error
	policyAt  time.Time
}

func (p *Powers) pool() *power.Pool {
	p.once.Do(func() {
		if p.Pool == nil {
			p.Pool = power.NewPool(power.PoolConfig{})
		}
	})
	return p.Pool
}

// Close cancels the background readings of pinned BMCs and closes the
// pool's connections.
func (p *Powers) Close() error {
	p.mu.Lock()
	if p.readStop != nil {
		p.readStop()
	}
	p.pinned = nil
	for name := range p.seen {
		p.dropSeen(name)
	}
	p.mu.Unlock()
	return p.pool().Close()
}

// Forget drops what the pool keeps for host name (its session is logged
// out unless other hosts share it): call it when the host is deleted
// (RebootController does, on NotFound). A change of the host's BMC address
// or credentials needs no call: its next Controller has another
// Target.Config, and the pool drops the old one.
func (p *Powers) Forget(name string) {
	p.forgetPinned(name)
	p.pool().Forget(name)
}

// Controller returns host name's power controller (the signature of
// reboot.Reconciler.Power). It reads the host and its Secret; the BMC is
// reached only by the controller's calls, through the pool.
func (p *Powers) Controller(name string) (power.Controller, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.readTimeout())
	defer cancel()
	var bmh metal3.BareMetalHost
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, &bmh); err != nil {
		if apierrors.IsNotFound(err) {
			p.Forget(name) // deleted: its session, what the pool kept for it and its pinned reading go (issue 35)
		}
		return nil, mapError("power of", p.Namespace, name, err)
	}
	if _, err := ParseBMCAddress(bmh.Spec.BMC.Address); err != nil {
		return nil, err
	}
	if p.Secrets == nil {
		return nil, errors.New("kube: Powers.Secrets is not set (use the manager's API reader)")
	}
	if err := p.policyGate(ctx, name); err != nil {
		return nil, err
	}
	if err := p.checkPin(ctx, &bmh); err != nil {
		return nil, err
	}
	pc, err := p.controllerOf(ctx, name, &bmh)
	if err != nil {
		return nil, err
	}
	// A command the BMC accepts for later is recorded (Async: bookTask),
	// so that every replica holds the host while it may land.
	return booked{Controller: pc, p: p, host: name, address: bmh.Spec.BMC.Address}, nil
}

// readTimeout is p.Timeout, or its default (30 s).
func (p *Powers) readTimeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return 30 * time.Second
}

// controllerOf is the pool's power controller, under the name key, of
// bmh's spec.bmc (checked against the pin by the caller).
func (p *Powers) controllerOf(ctx context.Context, key string, bmh *metal3.BareMetalHost) (power.Controller, error) {
	name := bmh.Name
	t, err := ParseBMCAddress(bmh.Spec.BMC.Address)
	if err != nil {
		return nil, err
	}
	var secret corev1.Secret
	if err := p.Secrets.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: bmh.Spec.BMC.CredentialsName}, &secret); err != nil {
		return nil, fmt.Errorf("kube: host %s: credentials secret %q: %w", name, bmh.Spec.BMC.CredentialsName, err)
	}
	if !boundTo(&secret, bmh) {
		return nil, fmt.Errorf("%w: host %s names secret %q, which has neither the label %s=%s nor an owner reference to the host; "+
			"label the secret if it is this host's", ErrSecretNotBound, name, secret.Name, BMCHostLabel, name)
	}
	user, pass := string(secret.Data["username"]), string(secret.Data["password"])
	if user == "" || pass == "" {
		return nil, fmt.Errorf("kube: host %s: secret %q lacks username or password", name, secret.Name)
	}
	insecure := bmh.Spec.BMC.DisableCertificateVerification
	var target power.Target
	switch t.Protocol {
	case "ipmi":
		target.BMC = ipmi.BMCName(t.Host, t.Port)
		cfg := ipmi.Config{Host: t.Host, Port: t.Port, Username: user, Password: pass, Privilege: t.Privilege}
		target.Connect = func(ctx context.Context) (power.Controller, error) { return ipmi.Connect(ctx, cfg) }
	default:
		target.BMC = t.Endpoint
		cfg := p.redfishConfig(t, user, pass, insecure)
		target.Connect = func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }
	}
	// The login's identity is a fingerprint of the credentials themselves
	// (never the password in clear), not of the Secret that holds them:
	// hosts with their own Secrets (the baremetal-operator's layout) and
	// the same credentials share a login, its back-off and, behind one
	// Redfish service, its session; a rewrite of a Secret that keeps its
	// credentials changes nothing, and a real change logs in anew (issue
	// 35).
	target.Login = power.CredentialsKey(t.Protocol, target.BMC, user, pass, strconv.FormatBool(insecure), t.Privilege)
	target.Config = string(bmh.UID) + "\x00" + bmh.Spec.BMC.Address + "\x00" + target.Login
	pc := p.pool().Controller(key, target)
	if bmh.Spec.DisablePowerOff {
		return noPowerOff{Controller: pc, host: name}, nil
	}
	return pc, nil
}

// redfishConfig is the Redfish adapter's Config for target t with the
// credentials user and pass: the bounds of the Reconciler's reboot.Config
// as Powers holds them (SoftTimeout, StaleReads, OffSettle, and
// LostLanding as the reboot package uses it, which the adapter's doc
// asks to keep equal).
func (p *Powers) redfishConfig(t BMCTarget, user, pass string, insecure bool) redfish.Config {
	return redfish.Config{Endpoint: t.Endpoint, SystemID: t.SystemID, Username: user, Password: pass,
		InsecureSkipVerify: insecure, RootCAs: p.RootCAs, SoftTimeout: p.SoftTimeout, StaleReads: p.StaleReads,
		OffSettle: p.OffSettle, LostLanding: p.lostLanding()}
}
