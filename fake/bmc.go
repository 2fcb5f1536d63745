package fake

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// BMCQuirks are behaviours of real BMCs a BMC can imitate.
type BMCQuirks struct {
	// NoGraceful: no Graceful* reset types (HPE iLO 5); soft power-off must
	// use PushPowerButton.
	NoGraceful bool
	// MalformedAllowable lists "GracefulShutdownGracefulRestart" as one
	// allowable value instead of two (a Supermicro firmware).
	MalformedAllowable bool
	// Lowercase lists allowable reset types in lower case.
	Lowercase bool
	// ActionInfo puts the allowable values behind @Redfish.ActionInfo
	// instead of inline.
	ActionInfo bool
	// BusyAfterOff answers 409 to power-on for this long after a
	// power-off (Dell iDRAC).
	BusyAfterOff time.Duration
	// BusyWhileTransitioning answers 409 to any reset while the power is
	// changing.
	BusyWhileTransitioning bool
	// StateLag keeps reporting the old PowerState this long after a reset.
	StateLag time.Duration
	// SessionRequests expires a session token after this many requests
	// (0: never).
	SessionRequests int
}

// BMC is a Redfish BMC emulator for one ComputerSystem, backed by a Power
// that models the hardware. It serves the service root, the session
// service, the Systems collection, the ComputerSystem with PowerState and
// the Reset action (inline allowable values or an ActionInfo), checks
// credentials (basic auth or session token), and counts requests. Not for
// production.
type BMC struct {
	Power    *Power
	Username string
	Password string
	Quirks   BMCQuirks

	mu       sync.Mutex
	now      func() time.Time
	sessions map[string]int // token -> requests served
	nextID   int
	requests int
	resets   []string
	lastOff  time.Time
	lagUntil time.Time
	lagState string
	failNext int
	applyBad bool
}

// FailNextReset answers the next reset with this HTTP status and a Redfish
// error body; with applied the reset takes effect all the same (a BMC that
// refuses what it just did). Zero clears it. Safe while the BMC serves.
func (b *BMC) FailNextReset(status int, applied bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failNext, b.applyBad = status, applied
}

// NewBMC returns a BMC for the hardware p, with clock now and credentials.
func NewBMC(now func() time.Time, p *Power, username, password string) *BMC {
	return &BMC{Power: p, Username: username, Password: password, now: now, sessions: map[string]int{}}
}

// Requests returns how many HTTP requests the BMC has served.
func (b *BMC) Requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

// Resets returns the reset types received, in order.
func (b *BMC) Resets() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.resets...)
}

// Sessions returns how many sessions are open.
func (b *BMC) Sessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// StartTLS serves the BMC on a loopback TLS listener; the caller closes
// the server. Clients trust srv.Certificate() (or use srv.Client()).
func (b *BMC) StartTLS() *httptest.Server { return httptest.NewTLSServer(b) }

const sysPath = "/redfish/v1/Systems/1"

func redfishError(w http.ResponseWriter, status int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": "Base.1.8." + id, "message": msg,
		"@Message.ExtendedInfo": []map[string]any{{"MessageId": "Base.1.8." + id, "Message": msg}},
	}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP implements http.Handler.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "/redfish/v1" || path == "/redfish" {
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/", "Id": "RootService", "RedfishVersion": "1.15.0",
			"Systems": map[string]string{"@odata.id": "/redfish/v1/Systems"}, "SessionService": map[string]string{"@odata.id": "/redfish/v1/SessionService"},
			"Links": map[string]any{"Sessions": map[string]string{"@odata.id": "/redfish/v1/SessionService/Sessions"}}})
		return
	}
	if path == "/redfish/v1/SessionService/Sessions" && r.Method == http.MethodPost {
		var body struct{ UserName, Password string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !b.credsOK(body.UserName, body.Password) {
			redfishError(w, http.StatusUnauthorized, "NoValidSession", "invalid credentials")
			return
		}
		b.nextID++
		id := strconv.Itoa(b.nextID)
		token := fmt.Sprintf("token-%d-%d", b.nextID, b.now().UnixNano())
		b.sessions[token] = 0
		w.Header().Set("X-Auth-Token", token)
		w.Header().Set("Location", "/redfish/v1/SessionService/Sessions/"+id+"?t="+token)
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/SessionService/Sessions/" + id, "Id": id, "UserName": body.UserName})
		return
	}
	if !b.authorized(r) {
		redfishError(w, http.StatusUnauthorized, "NoValidSession", "authentication required")
		return
	}
	switch {
	case strings.HasPrefix(path, "/redfish/v1/SessionService/Sessions/") && r.Method == http.MethodDelete:
		delete(b.sessions, r.Header.Get("X-Auth-Token"))
		w.WriteHeader(http.StatusNoContent)
	case path == "/redfish/v1/SessionService":
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/SessionService", "Sessions": map[string]string{"@odata.id": "/redfish/v1/SessionService/Sessions"}})
	case path == "/redfish/v1/Systems":
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/Systems", "Members@odata.count": 1,
			"Members": []map[string]string{{"@odata.id": sysPath}}})
	case path == sysPath && r.Method == http.MethodGet:
		writeJSON(w, b.system(r.Context()))
	case path == sysPath+"/ResetActionInfo":
		writeJSON(w, map[string]any{"@odata.id": sysPath + "/ResetActionInfo", "Id": "ResetActionInfo",
			"Parameters": []map[string]any{{"Name": "ResetType", "Required": true, "DataType": "String", "AllowableValues": b.allowable()}}})
	case path == sysPath+"/Actions/ComputerSystem.Reset" && r.Method == http.MethodPost:
		b.reset(w, r)
	default:
		redfishError(w, http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+path)
	}
}

func (b *BMC) credsOK(u, p string) bool {
	return subtle.ConstantTimeCompare([]byte(u), []byte(b.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(p), []byte(b.Password)) == 1
}

func (b *BMC) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		n, ok := b.sessions[tok]
		if !ok {
			return false
		}
		if b.Quirks.SessionRequests > 0 && n >= b.Quirks.SessionRequests {
			delete(b.sessions, tok) // expired
			return false
		}
		b.sessions[tok] = n + 1
		return true
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Basic ") {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
		if err != nil {
			return false
		}
		u, p, _ := strings.Cut(string(raw), ":")
		return b.credsOK(u, p)
	}
	return false
}

func (b *BMC) allowable() []string {
	types := []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "ForceOn", "PushPowerButton"}
	var out []string
	for _, t := range types {
		if b.Quirks.NoGraceful && strings.HasPrefix(t, "Graceful") {
			continue
		}
		if b.Quirks.MalformedAllowable && t == "GracefulShutdown" {
			continue
		}
		if b.Quirks.MalformedAllowable && t == "GracefulRestart" {
			t = "GracefulShutdownGracefulRestart"
		}
		if b.Quirks.Lowercase {
			t = strings.ToLower(t)
		}
		out = append(out, t)
	}
	return out
}

// powerState returns the PowerState to show, through the Power's reporting
// model (stale, flapping, unknown as null, missing or Paused) and the
// StateLag quirk. ok is false when PowerState is to be left out; a nil
// value is shown as null.
func (b *BMC) powerState(ctx context.Context) (v any, ok bool) {
	if b.now().Before(b.lagUntil) {
		return b.lagState, true
	}
	rd, err := b.Power.Read(ctx)
	if err != nil {
		return nil, true
	}
	switch rd.State {
	case power.StateOn:
		return "On", true
	case power.StateOff:
		return "Off", true
	case power.StateTransitioning:
		if rd.Target == power.StateOff {
			return "PoweringOff", true
		}
		return "PoweringOn", true
	}
	switch rd.Unknown {
	case UnknownMissing:
		return nil, false
	case UnknownPaused:
		return "Paused", true
	}
	return nil, true
}

// honestState is the PowerState string of the hardware's honest state, for
// the emulator's own bookkeeping (never shown to clients as a read).
func (b *BMC) honestState() string {
	switch b.Power.Current() {
	case power.StateOn:
		return "On"
	case power.StateOff:
		return "Off"
	}
	return "PoweringOn"
}

func (b *BMC) system(ctx context.Context) map[string]any {
	reset := map[string]any{"target": sysPath + "/Actions/ComputerSystem.Reset"}
	if b.Quirks.ActionInfo {
		reset["@Redfish.ActionInfo"] = sysPath + "/ResetActionInfo"
	} else {
		reset["ResetType@Redfish.AllowableValues"] = b.allowable()
	}
	sys := map[string]any{"@odata.id": sysPath, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": "1",
		"Name": "Simulated server", "Actions": map[string]any{"#ComputerSystem.Reset": reset}}
	if v, ok := b.powerState(ctx); ok {
		sys["PowerState"] = v
	}
	return sys
}

func (b *BMC) reset(w http.ResponseWriter, r *http.Request) {
	var body struct{ ResetType string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		redfishError(w, http.StatusBadRequest, "MalformedJSON", "malformed request body")
		return
	}
	b.resets = append(b.resets, body.ResetType)
	failWith := b.failNext
	b.failNext = 0
	if failWith != 0 && !b.applyBad {
		redfishError(w, failWith, "GeneralError", "injected failure")
		return
	}
	allowed := false
	for _, t := range b.allowable() {
		if t == body.ResetType {
			allowed = true
		}
	}
	if b.Quirks.MalformedAllowable && (body.ResetType == "GracefulShutdown" || body.ResetType == "GracefulRestart") {
		allowed = true // the list is malformed; the firmware accepts the real names
	}
	if !allowed {
		redfishError(w, http.StatusBadRequest, "ActionParameterValueNotInList", "ResetType "+body.ResetType+" is not supported")
		return
	}
	now := b.now()
	cur := b.Power.Current()
	if b.Quirks.BusyWhileTransitioning && cur == power.StateTransitioning {
		redfishError(w, http.StatusConflict, "ResourceInUse", "a power operation is in progress")
		return
	}
	rt := strings.ToLower(body.ResetType)
	if b.Quirks.BusyAfterOff > 0 && (rt == "on" || rt == "forceon") && now.Sub(b.lastOff) < b.Quirks.BusyAfterOff {
		redfishError(w, http.StatusConflict, "ResourceInUse", "server is not ready to power on")
		return
	}
	old := b.honestState()
	ctx := r.Context()
	var err error
	switch rt {
	case "gracefulshutdown":
		err = b.Power.Off(ctx, power.ModeSoft)
	case "forceoff":
		err = b.Power.Off(ctx, power.ModeHard)
		b.lastOff = now
	case "on", "forceon":
		err = b.Power.On(ctx)
	case "pushpowerbutton":
		// The button toggles the hardware, whatever anyone reports.
		if !b.Power.HardwareOn() {
			err = b.Power.On(ctx)
		} else {
			err = b.Power.Off(ctx, power.ModeSoft)
		}
	default:
		redfishError(w, http.StatusBadRequest, "ActionParameterNotSupported", "reset type not emulated: "+body.ResetType)
		return
	}
	if err != nil {
		status := http.StatusInternalServerError
		switch power.Classify(err) {
		case power.ClassBusy:
			status = http.StatusServiceUnavailable
		case power.ClassUnsupported:
			status = http.StatusNotImplemented
		}
		redfishError(w, status, "GeneralError", "power operation failed")
		return
	}
	if b.Quirks.StateLag > 0 {
		b.lagUntil, b.lagState = now.Add(b.Quirks.StateLag), old
	}
	if failWith != 0 {
		redfishError(w, failWith, "GeneralError", "injected failure after the reset took effect")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
