package redfishtest

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// Quirks are behaviours of real BMCs a BMC can imitate.
type Quirks struct {
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
	// NoSessionService: the service root links no SessionService and
	// sessions cannot be created (sushy-tools' emulator).
	NoSessionService bool
	// EchoErrors: error bodies echo what the client sent (the request body
	// and the Authorization and X-Auth-Token headers), as Redfish's
	// PropertyValueFormatError does with the rejected value.
	EchoErrors bool
}

// BMC is a Redfish BMC emulator for one ComputerSystem, backed by a Power
// that models the hardware. It serves the service root, the session
// service, the Systems collection, the ComputerSystem with PowerState and
// the Reset action (inline allowable values or an ActionInfo), checks
// credentials (basic auth or session token), and counts requests. Not for
// production.
type BMC struct {
	Power    *fake.Power
	Username string
	Password string
	Quirks   Quirks

	mu       sync.Mutex
	now      func() time.Time
	sessions map[string]*bmcSession // id -> session
	nextID   int
	failGet  map[string]bmcFail // path -> one-shot failure
	requests int
	logins   int
	resets   []string
	lastOff  time.Time
	lagUntil time.Time
	lagState string
	failNext int
	applyBad bool
}

type bmcSession struct {
	id, token, user string
	requests        int
}

type bmcFail struct {
	status int
	body   string
}

// FailNextGet answers the next GET of path (e.g. "/redfish/v1/Systems")
// with status and body as is (empty body: a Redfish error). Safe while the
// BMC serves.
func (b *BMC) FailNextGet(path string, status int, body string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failGet == nil {
		b.failGet = map[string]bmcFail{}
	}
	b.failGet[path] = bmcFail{status, body}
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
func NewBMC(now func() time.Time, p *fake.Power, username, password string) *BMC {
	return &BMC{Power: p, Username: username, Password: password, now: now, sessions: map[string]*bmcSession{}}
}

// Requests returns how many HTTP requests the BMC has served.
func (b *BMC) Requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

// Logins returns how many logins (POSTs to the Sessions collection,
// failed ones included) the BMC has received.
func (b *BMC) Logins() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logins
}

// Resets returns the reset types received, in order.
func (b *BMC) Resets() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.resets...)
}

// SetCredentials replaces the username and password. Safe while the BMC
// serves.
func (b *BMC) SetCredentials(username, password string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Username, b.Password = username, password
}

// Tokens returns the tokens of the open sessions, sorted by session id
// (for tests that check what a client lets out).
func (b *BMC) Tokens() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.sessions))
	for id := range b.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = b.sessions[id].token
	}
	return out
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

const (
	sysPath      = "/redfish/v1/Systems/1"
	sessionsPath = "/redfish/v1/SessionService/Sessions"
)

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

func link(path string) map[string]string { return map[string]string{"@odata.id": path} }

// echo returns what the client sent, for EchoErrors.
func echo(r *http.Request, body []byte) string {
	return fmt.Sprintf(" (request: %s; Authorization: %s; X-Auth-Token: %s)", body,
		r.Header.Get("Authorization"), r.Header.Get("X-Auth-Token"))
}

// ServeHTTP implements http.Handler.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
	w.Header().Set("OData-Version", "4.0")
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	path := strings.TrimSuffix(r.URL.Path, "/")
	fail := func(status int, id, msg string) {
		if b.Quirks.EchoErrors {
			msg += echo(r, body)
		}
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="Redfish"`)
		}
		redfishError(w, status, id, msg)
	}
	if r.Method == http.MethodGet {
		if f, ok := b.failGet[path]; ok {
			delete(b.failGet, path)
			if f.body != "" {
				w.WriteHeader(f.status)
				_, _ = io.WriteString(w, f.body)
			} else {
				fail(f.status, "GeneralError", "injected failure")
			}
			return
		}
	}

	// Unauthenticated resources (DSP0266: the version document, the
	// service root, $metadata and the OData service document).
	switch {
	case path == "/redfish" && r.Method == http.MethodGet:
		writeJSON(w, map[string]string{"v1": "/redfish/v1/"})
		return
	case path == "/redfish/v1" && r.Method == http.MethodGet:
		root := map[string]any{"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
			"Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.15.0",
			"UUID": "92384634-2938-2342-8820-489239905423", "Systems": link("/redfish/v1/Systems"), "Links": map[string]any{}}
		if !b.Quirks.NoSessionService {
			root["SessionService"] = link("/redfish/v1/SessionService")
			root["Links"] = map[string]any{"Sessions": link(sessionsPath)}
		}
		writeJSON(w, root)
		return
	case path == "/redfish/v1/$metadata" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/xml")
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ServiceRoot_v1.xml"><edmx:Include Namespace="ServiceRoot.v1_15_0"/></edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ComputerSystem_v1.xml"><edmx:Include Namespace="ComputerSystem.v1_20_0"/></edmx:Reference>
  <edmx:DataServices><Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service"><EntityContainer Name="Service" Extends="ServiceRoot.v1_15_0.ServiceContainer"/></Schema></edmx:DataServices>
</edmx:Edmx>
`)
		return
	case path == "/redfish/v1/odata" && r.Method == http.MethodGet:
		writeJSON(w, map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": []map[string]string{
			{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"},
			{"name": "Systems", "kind": "Singleton", "url": "/redfish/v1/Systems"},
			{"name": "SessionService", "kind": "Singleton", "url": "/redfish/v1/SessionService"}}})
		return
	case path == sessionsPath && r.Method == http.MethodPost:
		b.logins++
		if b.Quirks.NoSessionService {
			fail(http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+path)
			return
		}
		var cred struct{ UserName, Password string }
		if err := json.Unmarshal(body, &cred); err != nil {
			fail(http.StatusBadRequest, "MalformedJSON", "malformed request body")
			return
		}
		if !b.credsOK(cred.UserName, cred.Password) {
			fail(http.StatusUnauthorized, "NoValidSession", "invalid credentials")
			return
		}
		b.nextID++
		id := strconv.Itoa(b.nextID)
		sess := &bmcSession{id: id, user: cred.UserName, token: fmt.Sprintf("token-%d-%d", b.nextID, b.now().UnixNano())}
		b.sessions[id] = sess
		w.Header().Set("X-Auth-Token", sess.token)
		w.Header().Set("Location", sessionsPath+"/"+id)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(b.session(sess))
		return
	}
	if !b.authorized(r) {
		fail(http.StatusUnauthorized, "NoValidSession", "authentication required")
		return
	}
	switch {
	case path == "/redfish/v1/SessionService" && r.Method == http.MethodGet && !b.Quirks.NoSessionService:
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/SessionService", "@odata.type": "#SessionService.v1_1_8.SessionService",
			"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true, "SessionTimeout": 1800,
			"Sessions": link(sessionsPath)})
	case path == sessionsPath && r.Method == http.MethodGet && !b.Quirks.NoSessionService:
		ids := make([]string, 0, len(b.sessions))
		for id := range b.sessions {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		members := make([]map[string]string, len(ids))
		for i, id := range ids {
			members[i] = link(sessionsPath + "/" + id)
		}
		writeJSON(w, map[string]any{"@odata.id": sessionsPath, "@odata.type": "#SessionCollection.SessionCollection",
			"Name": "Session Collection", "Members@odata.count": len(members), "Members": members})
	case strings.HasPrefix(path, sessionsPath+"/"):
		sess, ok := b.sessions[strings.TrimPrefix(path, sessionsPath+"/")]
		switch {
		case !ok:
			fail(http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+path)
		case r.Method == http.MethodGet:
			writeJSON(w, b.session(sess))
		case r.Method == http.MethodDelete:
			delete(b.sessions, sess.id) // the session named by the URI, whoever asks
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Allow", "GET, DELETE")
			fail(http.StatusMethodNotAllowed, "ActionNotSupported", r.Method+" not allowed on a session")
		}
	case path == "/redfish/v1/Systems" && r.Method == http.MethodGet:
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/Systems", "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
			"Name": "Computer System Collection", "Members@odata.count": 1, "Members": []map[string]string{link(sysPath)}})
	case path == sysPath && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		writeJSON(w, b.system(r.Context()))
	case path == sysPath:
		w.Header().Set("Allow", "GET, HEAD")
		fail(http.StatusMethodNotAllowed, "ActionNotSupported", r.Method+" not allowed on the ComputerSystem")
	case path == sysPath+"/ResetActionInfo" && r.Method == http.MethodGet:
		writeJSON(w, map[string]any{"@odata.id": sysPath + "/ResetActionInfo", "@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
			"Id": "ResetActionInfo", "Name": "Reset Action Info",
			"Parameters": []map[string]any{{"Name": "ResetType", "Required": true, "DataType": "String", "AllowableValues": b.allowable()}}})
	case path == sysPath+"/Actions/ComputerSystem.Reset" && r.Method == http.MethodPost:
		b.reset(w, r, body, fail)
	default:
		fail(http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+path)
	}
}

func (b *BMC) session(s *bmcSession) map[string]any {
	return map[string]any{"@odata.id": sessionsPath + "/" + s.id, "@odata.type": "#Session.v1_6_0.Session",
		"Id": s.id, "Name": "User Session", "UserName": s.user}
}

func (b *BMC) credsOK(u, p string) bool {
	return subtle.ConstantTimeCompare([]byte(u), []byte(b.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(p), []byte(b.Password)) == 1
}

func (b *BMC) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		for _, s := range b.sessions {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
				continue
			}
			if b.Quirks.SessionRequests > 0 && s.requests >= b.Quirks.SessionRequests {
				delete(b.sessions, s.id) // expired
				return false
			}
			s.requests++
			return true
		}
		return false
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
	case fake.UnknownMissing:
		return nil, false
	case fake.UnknownPaused:
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
		"Name": "Simulated server", "SystemType": "Physical", "Manufacturer": "rebootkit", "Model": "redfishtest.BMC",
		"UUID": "38947555-7742-3448-3784-823347823834", "Status": map[string]string{"State": "Enabled", "Health": "OK"},
		"Boot": map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
			"BootSourceOverrideMode": "UEFI", "BootSourceOverrideTarget@Redfish.AllowableValues": []string{"None", "Pxe", "Hdd", "Cd", "BiosSetup"}},
		"Links":   map[string]any{},
		"Actions": map[string]any{"#ComputerSystem.Reset": reset}}
	if v, ok := b.powerState(ctx); ok {
		sys["PowerState"] = v
	}
	return sys
}

func (b *BMC) reset(w http.ResponseWriter, r *http.Request, raw []byte, fail func(status int, id, msg string)) {
	var body struct{ ResetType string }
	if err := json.Unmarshal(raw, &body); err != nil {
		fail(http.StatusBadRequest, "MalformedJSON", "malformed request body")
		return
	}
	b.resets = append(b.resets, body.ResetType)
	failWith := b.failNext
	b.failNext = 0
	if failWith != 0 && !b.applyBad {
		fail(failWith, "GeneralError", "injected failure")
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
		fail(http.StatusBadRequest, "ActionParameterValueNotInList", "ResetType "+body.ResetType+" is not supported")
		return
	}
	now := b.now()
	cur := b.Power.Current()
	if b.Quirks.BusyWhileTransitioning && cur == power.StateTransitioning {
		fail(http.StatusConflict, "ResourceInUse", "a power operation is in progress")
		return
	}
	rt := strings.ToLower(body.ResetType)
	if b.Quirks.BusyAfterOff > 0 && (rt == "on" || rt == "forceon") && now.Sub(b.lastOff) < b.Quirks.BusyAfterOff {
		fail(http.StatusConflict, "ResourceInUse", "server is not ready to power on")
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
		fail(http.StatusBadRequest, "ActionParameterNotSupported", "reset type not emulated: "+body.ResetType)
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
		fail(status, "GeneralError", "power operation failed")
		return
	}
	if b.Quirks.StateLag > 0 {
		b.lagUntil, b.lagState = now.Add(b.Quirks.StateLag), old
	}
	if failWith != 0 {
		fail(failWith, "GeneralError", "injected failure after the reset took effect")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
