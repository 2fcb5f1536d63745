package inventory

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/reboot"
)

// hostRecord is one server's power bookkeeping in the fleet state file:
// the reboot package's record (annotations, status) and what the fleet
// adds to it. Versioned for compare-and-swap.
type hostRecord struct {
	Version     uint64            `json:"version"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Status      reboot.Status     `json:"status"`
	// Watch: this fleet asked for a power cycle of the server, so it keeps
	// reconciling it until Settled, whatever happens to the job or plan.
	Watch bool `json:"watch,omitempty"`
	// Settled: the server read on (a reading that cannot be the echo of
	// a state before the fleet's last power command), with no request
	// and no reboot pending. Cleared by every new request.
	Settled bool `json:"settled,omitempty"`
	// OffMaybe: a power-off of the current reboot may have been accepted
	// by the BMC (set before every power-off is sent, cleared only by an
	// answer that proves it was not). From then on the reboot completes:
	// the server is brought back on, whatever cancels it.
	OffMaybe bool `json:"off_maybe,omitempty"`
	// FirstOffRead is when the first Off reading began after a power-off
	// of the current reboot was sent (cleared when the next reboot's
	// first power-off is sent): the hardware went off between that
	// power-off and this reading. The plan's report draws the power-off
	// phase up to it (plan.Phases.Off), not up to the fencing evidence,
	// which waits StaleReads more.
	FirstOffRead time.Time `json:"first_off_read,omitzero"`
	// Job is the job that wrote the current request.
	Job string `json:"job,omitempty"`
	// Phase is where the power cycle stands, in an operator's words.
	Phase      string    `json:"phase,omitempty"`
	PhaseSince time.Time `json:"phase_since,omitzero"`
	// LastError is the last BMC error (and whether a call has succeeded
	// since).
	LastError BMCError `json:"last_error,omitzero"`
	// Abandoned: the operator gave up on the server (Fleet.Abandon): the
	// fleet never powers it on or off again, its live job ends, and it
	// counts as down while its health check fails or a power-off the
	// fleet sent before may still land (AbandonedCycle). AbandonedPlan is
	// the plan it was abandoned in: a job of another plan takes it back,
	// once no such power-off can land any more.
	Abandoned     string    `json:"abandoned,omitempty"`
	AbandonedPlan string    `json:"abandoned_plan,omitempty"`
	AbandonedAt   time.Time `json:"abandoned_at,omitzero"`
	// AbandonedCycle: a power cycle of the fleet had not settled when the
	// server was abandoned (a power-off may have been sent, a request or
	// a pending reboot was left): a power-off sent before may still land
	// until its cut-off (Fleet.offHorizon), so the server counts as down
	// until a health check begun after then passes (offLanded), and a job
	// of another plan waits for the cut-off before taking it back. It is
	// cleared (persisted) once a health check begun after the cut-off
	// passes (settleAbandoned), so that a restart does not bring it back.
	AbandonedCycle bool `json:"abandoned_cycle,omitempty"`
	// TakenBackPlan and TakenBackWhy name the last abandon a job of
	// another plan took back (takeBack): the executor applies the
	// operator's recorded abandons on every pass, and that one must not
	// abandon the server again (Fleet.Abandon skips it).
	TakenBackPlan string `json:"taken_back_plan,omitempty"`
	TakenBackWhy  string `json:"taken_back_why,omitempty"`
	// SelfRebootBoot: the reboot command of the executor's own server was
	// run (recorded before it runs) on this boot ID, at SelfRebootAt. It
	// may land late (shutdown -r +1), and one that failed or timed out
	// may have been accepted all the same, whatever its job or the
	// operator decided since (the job may have failed, the server been
	// abandoned): as for a BMC power-off that may still land, until a
	// boot ID other than this one is read on it, nothing else is powered
	// off (self last, alone) before its cut-off (Fleet.offHorizon: the
	// command plus Options.ShutdownMax), and the server counts as down
	// until a health check begun after the cut-off passes
	// (settleSelfReboot).
	SelfRebootBoot string    `json:"self_reboot_boot,omitempty"`
	SelfRebootAt   time.Time `json:"self_reboot_at,omitzero"`
}

// BMCError is a BMC failure as the fleet records and shows it.
type BMCError struct {
	// Class is one of the BMCClass constants.
	Class string `json:"class"`
	// Op is the operation: connect, state, on, off soft, off hard.
	Op string `json:"op,omitempty"`
	// Message is the error, free of credentials.
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	// Job is the job whose reboot the call served ("" if none).
	Job string `json:"job,omitempty"`
	// Cleared: a call succeeded since.
	Cleared bool `json:"cleared,omitempty"`
}

// BMC error classes, as shown to operators and counted in metrics.
const (
	BMCAuth        = "auth"        // the BMC refused the username or password
	BMCUnreachable = "unreachable" // no connection to the BMC
	BMCTLS         = "tls"         // the BMC's certificate is not trusted
	BMCTimeout     = "timeout"     // the BMC did not answer in time
	BMCBusy        = "busy"        // the BMC refused for now
	BMCUnsupported = "unsupported" // the BMC cannot do it
	BMCConfig      = "config"      // the inventory's BMC settings are incomplete (password unset, basic_auth)
	BMCFailed      = "failed"      // anything else
)

// BMCClasses lists the classes.
var BMCClasses = []string{BMCAuth, BMCUnreachable, BMCTLS, BMCTimeout, BMCBusy, BMCUnsupported, BMCConfig, BMCFailed}

// ErrNoPassword: a BMC's password variable or file is not available.
var ErrNoPassword = errors.New("inventory: BMC password not available")

// ClassText says what a class means, in an operator's words.
func ClassText(class string) string {
	switch class {
	case BMCAuth:
		return "authentication failed at the BMC (check the username and the password)"
	case BMCUnreachable:
		return "BMC unreachable"
	case BMCTLS:
		return "the BMC's certificate is not trusted (ca_file, insecure)"
	case BMCTimeout:
		return "the BMC did not answer in time"
	case BMCBusy:
		return "the BMC is busy"
	case BMCUnsupported:
		return "the BMC does not support the operation"
	case BMCConfig:
		return "BMC settings incomplete"
	}
	return "BMC error"
}

// Text is the error as an operator reads it: what it means, then what the
// BMC said.
func (e BMCError) Text() string {
	if e.Message == "" {
		return ""
	}
	return ClassText(e.Class) + ": " + e.Message
}

// ClassifyBMC returns the class of a BMC error.
func ClassifyBMC(err error) string {
	if err == nil {
		return ""
	}
	msg := strings.ToLower(err.Error())
	var pe *power.Error
	status := 0
	if errors.As(err, &pe) {
		status = pe.Status
	}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var oe *net.OpError
	switch {
	case errors.Is(err, ErrNoPassword), errors.Is(err, redfish.ErrNoSessionService), errors.Is(err, redfish.ErrConfig):
		return BMCConfig
	case errors.Is(err, power.ErrAuth), status == 401 || status == 403 || strings.Contains(msg, "authentication failed") || strings.Contains(msg, "unauthorized") ||
		strings.Contains(msg, "status 401") || strings.Contains(msg, "rakp"):
		return BMCAuth
	case errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci), strings.Contains(msg, "x509:"), strings.Contains(msg, "tls:"), strings.Contains(msg, "certificate"):
		return BMCTLS
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(msg, "timed out"), strings.Contains(msg, "timeout"):
		return BMCTimeout
	case errors.As(err, &oe), strings.Contains(msg, "connection refused"), strings.Contains(msg, "no route to host"),
		strings.Contains(msg, "no such host"), strings.Contains(msg, "network is unreachable"):
		return BMCUnreachable
	}
	switch power.Classify(err) {
	case power.ClassBusy:
		return BMCBusy
	case power.ClassUnsupported:
		return BMCUnsupported
	}
	return BMCFailed
}

// notApplied reports whether a failed power command certainly did nothing:
// the BMC refused it (credentials, busy, unsupported) or was never reached.
// A failure or a timeout may have been applied.
func notApplied(err error) bool {
	if errors.Is(err, power.ErrBackoff) || errors.Is(err, power.ErrNotSent) {
		return true // not tried, or never sent (no session)
	}
	switch ClassifyBMC(err) {
	case BMCAuth, BMCBusy, BMCUnsupported, BMCUnreachable, BMCTLS, BMCConfig:
		return true
	}
	return false
}

// hasRequest reports whether the record holds a reboot annotation.
func (h hostRecord) hasRequest() bool {
	for k := range h.Annotations {
		if reboot.IsRebootAnnotation(k) {
			return true
		}
	}
	return false
}

// needsKeeping reports whether the fleet must keep reconciling the server:
// it asked for a power cycle that has not settled, a reboot is pending, or
// a request is present.
func (h hostRecord) needsKeeping() bool {
	return h.Abandoned == "" && (h.Watch || h.Status.Pending() || h.hasRequest())
}

// boltHosts is the reboot.HostStore of the fleet: one hostRecord per
// server in the state file.
type boltHosts struct {
	db *bolt.DB
	// written, if set, is told every record written.
	written func(name string, rec hostRecord)
}

func (s *boltHosts) load(name string) (hostRecord, error) {
	var rec hostRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketHosts).Get([]byte(name))
		if raw == nil {
			return nil
		}
		return json.Unmarshal(raw, &rec)
	})
	return rec, err
}

// modify changes the record in one transaction and bumps its version.
// change returning errSkip writes nothing.
func (s *boltHosts) modify(name string, change func(*hostRecord) error) (hostRecord, error) {
	var rec hostRecord
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHosts)
		rec = hostRecord{}
		if raw := b.Get([]byte(name)); raw != nil {
			if err := json.Unmarshal(raw, &rec); err != nil {
				return err
			}
		}
		if err := change(&rec); err != nil {
			return err
		}
		rec.Version++
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), raw)
	})
	if errors.Is(err, errSkip) {
		err = nil
	} else if err == nil && s.written != nil {
		s.written(name, rec)
	}
	return rec, err
}

var errSkip = errors.New("nothing to write")

// Get returns the host's record, or an error wrapping reboot.ErrNotFound
// if the state file holds none (the fleet reconciles only servers whose
// record it wrote).
func (s *boltHosts) Get(_ context.Context, name string) (reboot.Host, error) {
	var rec hostRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketHosts).Get([]byte(name))
		if raw == nil {
			return fmt.Errorf("inventory: host %s has no record in the state file: %w", name, reboot.ErrNotFound)
		}
		return json.Unmarshal(raw, &rec)
	})
	if err != nil {
		return reboot.Host{}, err
	}
	return reboot.Host{Name: name, Version: strconv.FormatUint(rec.Version, 10), Annotations: rec.Annotations, Online: true, Status: rec.Status}, nil
}

// Update writes h's annotations and status if h.Version is the record's
// (reboot.ErrConflict if not), and nothing once ctx has ended: ctx.Err()
// is asked inside the write transaction, just before the write (a Guard's
// context ends by the clock before its Done closes: a paused leader's
// late write is refused).
func (s *boltHosts) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	rec, err := s.modify(h.Name, func(rec *hostRecord) error {
		if strconv.FormatUint(rec.Version, 10) != h.Version {
			return fmt.Errorf("host %s: %w", h.Name, reboot.ErrConflict)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("inventory: host %s not written, its context ended: %w", h.Name, err)
		}
		rec.Annotations, rec.Status = h.Annotations, h.Status
		return nil
	})
	if err != nil {
		return reboot.Host{}, err
	}
	out := h
	out.Version = strconv.FormatUint(rec.Version, 10)
	return out, nil
}

// phaseText is where a power cycle stands after a reboot decision, in an
// operator's words.
func phaseText(d reboot.Decision, st power.State) string {
	if st == power.StateUnknown && d.Phase != reboot.PhaseHeldOff {
		return "waiting for the BMC to report the power state (nothing sent)"
	}
	switch d.Phase {
	case reboot.PhasePoweringOff:
		if d.Status.Mode == power.ModeHard {
			return "hard power-off (soft shutdown timed out or failed)"
		}
		return "soft power-off: waiting for the OS to shut down"
	case reboot.PhaseHeldOff:
		return "off, held until the job releases it"
	case reboot.PhasePoweringOn:
		return "powering on"
	}
	switch st {
	case power.StateOn:
		return "on"
	case power.StateOff:
		return "off: powering on"
	}
	return "power state unknown"
}
