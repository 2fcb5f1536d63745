package redfishtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
	// NoForceRestart: ForceRestart is not among the allowable reset
	// types (the system cannot be restarted without a power-off).
	NoForceRestart bool
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
	// LoginDelay: a login takes this long (a slow BMC: 800 ms is common)
	// before it is answered; other requests are served meanwhile.
	LoginDelay time.Duration
}

// LoginRecord is one login the BMC received.
type LoginRecord struct {
	// At is the BMC's clock when the login arrived.
	At time.Time
	// Credentials names the credentials tried: a short fingerprint of the
	// user name and password (the same credentials, the same fingerprint),
	// never the secret.
	Credentials string
	// OK: the BMC accepted them.
	OK bool
}

// BMC is a Redfish BMC emulator for one ComputerSystem (Id "1"), or several
// (AddSystem), each backed by a fake.Power that models the hardware. It
// serves the service root, the session service, the Systems collection,
// each ComputerSystem with PowerState and the Reset action (inline
// allowable values or an ActionInfo), checks credentials (basic auth or
// session token), and counts requests. Not for production.
type BMC struct {
	// Power is the hardware of system "1".
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
	loginLog []LoginRecord
	inLogin  int // logins being answered (LoginDelay)
	mostAt   int // the most logins being answered at once
	resets   []string
	systems  map[string]*system // by Id; "1" is Power
	extra    []string           // Ids added by AddSystem, in order
	failNext int
	applyBad bool
}

// system is one ComputerSystem's hardware and the BMC's memory of it.
type system struct {
	power    *fake.Power
	lastOff  time.Time
	lagUntil time.Time
	lagState string
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
	return &BMC{Power: p, Username: username, Password: password, now: now, sessions: map[string]*bmcSession{},
		systems: map[string]*system{}}
}

// AddSystem adds a ComputerSystem with Id id over the hardware p (a blade
// or a node of a multi-node chassis); the Systems collection lists "1" and
// then the added ones in order. An Id already served is replaced. Safe
// while the BMC serves.
func (b *BMC) AddSystem(id string, p *fake.Power) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.systems == nil {
		b.systems = map[string]*system{}
	}
	if _, ok := b.systems[id]; !ok && id != "1" {
		b.extra = append(b.extra, id)
	}
	if id == "1" {
		b.Power = p
	}
	b.systems[id] = &system{power: p}
}

// systemIDs lists the systems served (b.mu held).
func (b *BMC) systemIDs() []string {
	return append([]string{"1"}, b.extra...)
}

// sys returns system id (b.mu held); "1" is always there, over b.Power.
func (b *BMC) sys(id string) (*system, bool) {
	if b.systems == nil {
		b.systems = map[string]*system{}
	}
	s, ok := b.systems[id]
	if id == "1" {
		if !ok {
			s = &system{}
			b.systems[id] = s
		}
		s.power, ok = b.Power, true
	}
	return s, ok
}

// systemPower reports whether system id is served (b.mu held).
func (b *BMC) systemPower(id string) (*fake.Power, bool) {
	s, ok := b.sys(id)
	if !ok {
		return nil, false
	}
	return s.power, true
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

// LoginLog returns the logins received, in order.
func (b *BMC) LoginLog() []LoginRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]LoginRecord(nil), b.loginLog...)
}

// MostLoginsAtOnce returns the most logins the BMC was answering at the
// same time (meaningful with Quirks.LoginDelay).
func (b *BMC) MostLoginsAtOnce() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mostAt
}

// Fingerprint is the LoginRecord.Credentials of user and password.
func Fingerprint(user, password string) string {
	sum := sha256.Sum256([]byte(user + "\x00" + password))
	return hex.EncodeToString(sum[:6])
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
	systemsPath  = "/redfish/v1/Systems"
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

// resource is what the BMC serves at a path: the methods it allows, and
// the schema that describes it (for the Link header), if any.
type resource struct {
	allow       []string
	describedBy string
	// public: served without authentication (DSP0266: the version
	// document, the service root, $metadata, the OData service document,
	// and session creation).
	public func(method string) bool
}

func always(string) bool { return true }
func never(string) bool  { return false }

const schemaBase = "http://redfish.dmtf.org/schemas/v1/"

// resource returns what is served at path, and the system it belongs to
// (for the system's resources).
func (b *BMC) resource(path string) (resource, string, bool) {
	get := []string{http.MethodGet, http.MethodHead}
	switch path {
	case "/redfish":
		return resource{allow: get, public: always}, "", true
	case "/redfish/v1":
		return resource{allow: get, public: always, describedBy: schemaBase + "ServiceRoot.v1_15_0.json"}, "", true
	case "/redfish/v1/$metadata", "/redfish/v1/odata":
		return resource{allow: get, public: always}, "", true
	case "/redfish/v1/JsonSchemas", "/redfish/v1/Registries":
		return resource{allow: get, public: never}, "", true
	case "/redfish/v1/Systems":
		return resource{allow: get, public: never, describedBy: schemaBase + "ComputerSystemCollection.json"}, "", true
	}
	if !b.Quirks.NoSessionService {
		switch {
		case path == "/redfish/v1/SessionService":
			return resource{allow: get, public: never, describedBy: schemaBase + "SessionService.v1_1_8.json"}, "", true
		case path == sessionsPath:
			return resource{allow: []string{http.MethodGet, http.MethodHead, http.MethodPost},
				public:      func(m string) bool { return m == http.MethodPost },
				describedBy: schemaBase + "SessionCollection.json"}, "", true
		case path == sessionsPath+"/Members":
			return resource{allow: []string{http.MethodPost}, public: always}, "", true
		case strings.HasPrefix(path, sessionsPath+"/"):
			if _, ok := b.sessions[strings.TrimPrefix(path, sessionsPath+"/")]; ok {
				return resource{allow: []string{http.MethodGet, http.MethodHead, http.MethodDelete}, public: never,
					describedBy: schemaBase + "Session.v1_6_0.json"}, "", true
			}
			return resource{}, "", false
		}
	}
	if rest, ok := strings.CutPrefix(path, systemsPath+"/"); ok {
		id, sub, _ := strings.Cut(rest, "/")
		if _, ok := b.systemPower(id); !ok {
			return resource{}, "", false
		}
		switch sub {
		case "":
			return resource{allow: get, public: never, describedBy: schemaBase + "ComputerSystem.v1_20_0.json"}, id, true
		case "ResetActionInfo":
			return resource{allow: get, public: never}, id, true
		case "Actions/ComputerSystem.Reset":
			return resource{allow: []string{http.MethodPost}, public: never}, id, true
		}
	}
	return resource{}, "", false
}

// ServeHTTP implements http.Handler. HEAD is served wherever GET is (net/http
// sends no body); a method a resource does not allow is 405 with an Allow
// header; GET and HEAD answers carry Allow, Cache-Control and, for the
// service root, the collections, sessions and systems, a Link to their
// schema (rel=describedby); a request with an OData-Version other than 4.0
// is 412.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasPrefix(strings.TrimSuffix(r.URL.Path, "/"), sessionsPath) {
		b.mu.Lock()
		delay := b.Quirks.LoginDelay
		if delay > 0 {
			b.inLogin++
			b.mostAt = max(b.mostAt, b.inLogin)
		}
		b.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
			defer func() { b.mu.Lock(); b.inLogin--; b.mu.Unlock() }()
		}
	}
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
	if v := r.Header.Get("OData-Version"); v != "" && v != "4.0" {
		fail(http.StatusPreconditionFailed, "PreconditionFailed", "OData-Version "+v+" is not supported (4.0 is)")
		return
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
	res, sysID, found := b.resource(path)
	public := found && res.public(r.Method)
	if !public && !b.authorized(r) {
		fail(http.StatusUnauthorized, "NoValidSession", "authentication required")
		return
	}
	if !found {
		fail(http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+path)
		return
	}
	allow := strings.Join(res.allow, ", ")
	if !slices.Contains(res.allow, r.Method) {
		w.Header().Set("Allow", allow)
		fail(http.StatusMethodNotAllowed, "OperationNotAllowed", r.Method+" is not allowed on "+path)
		return
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		w.Header().Set("Allow", allow)
		w.Header().Set("Cache-Control", "no-cache")
		if res.describedBy != "" {
			w.Header().Set("Link", "<"+res.describedBy+">; rel=describedby")
		}
	}
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case path == "/redfish":
		writeJSON(w, map[string]string{"v1": "/redfish/v1/"})
	case path == "/redfish/v1":
		root := map[string]any{"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
			"Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.15.0",
			"UUID": "92384634-2938-2342-8820-489239905423", "Systems": link(systemsPath),
			"JsonSchemas": link("/redfish/v1/JsonSchemas"), "Registries": link("/redfish/v1/Registries"),
			"Links": map[string]any{}}
		if !b.Quirks.NoSessionService {
			root["SessionService"] = link("/redfish/v1/SessionService")
			root["Links"] = map[string]any{"Sessions": link(sessionsPath)}
		}
		writeJSON(w, root)
	case path == "/redfish/v1/$metadata":
		w.Header().Set("Content-Type", "application/xml")
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ServiceRoot_v1.xml"><edmx:Include Namespace="ServiceRoot.v1_15_0"/></edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ComputerSystem_v1.xml"><edmx:Include Namespace="ComputerSystem.v1_20_0"/></edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/JsonSchemaFileCollection_v1.xml"><edmx:Include Namespace="JsonSchemaFileCollection"/></edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/MessageRegistryFileCollection_v1.xml"><edmx:Include Namespace="MessageRegistryFileCollection"/></edmx:Reference>
  <edmx:DataServices><Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service"><EntityContainer Name="Service" Extends="ServiceRoot.v1_15_0.ServiceContainer"/></Schema></edmx:DataServices>
</edmx:Edmx>
`)
	case path == "/redfish/v1/odata":
		writeJSON(w, map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": []map[string]string{
			{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"},
			{"name": "Systems", "kind": "Singleton", "url": "/redfish/v1/Systems"},
			{"name": "JsonSchemas", "kind": "Singleton", "url": "/redfish/v1/JsonSchemas"},
			{"name": "Registries", "kind": "Singleton", "url": "/redfish/v1/Registries"},
			{"name": "SessionService", "kind": "Singleton", "url": "/redfish/v1/SessionService"}}})
	case path == "/redfish/v1/JsonSchemas":
		writeJSON(w, map[string]any{"@odata.id": path, "@odata.type": "#JsonSchemaFileCollection.JsonSchemaFileCollection",
			"Name": "JSON Schema File Collection", "Members@odata.count": 0, "Members": []any{}})
	case path == "/redfish/v1/Registries":
		writeJSON(w, map[string]any{"@odata.id": path, "@odata.type": "#MessageRegistryFileCollection.MessageRegistryFileCollection",
			"Name": "Message Registry File Collection", "Members@odata.count": 0, "Members": []any{}})
	case (path == sessionsPath || path == sessionsPath+"/Members") && r.Method == http.MethodPost:
		b.login(w, body, fail)
	case path == "/redfish/v1/SessionService":
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/SessionService", "@odata.type": "#SessionService.v1_1_8.SessionService",
			"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true, "SessionTimeout": 1800,
			"Sessions": link(sessionsPath)})
	case path == sessionsPath:
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
		sess := b.sessions[strings.TrimPrefix(path, sessionsPath+"/")]
		if read {
			writeJSON(w, b.session(sess))
		} else { // DELETE
			delete(b.sessions, sess.id) // the session named by the URI, whoever asks
			w.WriteHeader(http.StatusNoContent)
		}
	case path == systemsPath:
		ids := b.systemIDs()
		members := make([]map[string]string, len(ids))
		for i, id := range ids {
			members[i] = link(systemsPath + "/" + id)
		}
		writeJSON(w, map[string]any{"@odata.id": systemsPath, "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
			"Name": "Computer System Collection", "Members@odata.count": len(members), "Members": members})
	case path == systemsPath+"/"+sysID:
		writeJSON(w, b.system(r.Context(), sysID))
	case path == systemsPath+"/"+sysID+"/ResetActionInfo":
		writeJSON(w, map[string]any{"@odata.id": path, "@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
			"Id": "ResetActionInfo", "Name": "Reset Action Info",
			"Parameters": []map[string]any{{"Name": "ResetType", "Required": true, "DataType": "String", "AllowableValues": b.allowable()}}})
	case path == systemsPath+"/"+sysID+"/Actions/ComputerSystem.Reset":
		b.reset(w, r, sysID, body, fail)
	default:
		fail(http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+path)
	}
}

// login creates a session (POST to the Sessions collection or to its
// Members), with a token from crypto/rand.
func (b *BMC) login(w http.ResponseWriter, body []byte, fail func(status int, id, msg string)) {
	b.logins++
	var cred struct{ UserName, Password string }
	if err := json.Unmarshal(body, &cred); err != nil {
		fail(http.StatusBadRequest, "MalformedJSON", "malformed request body")
		return
	}
	ok := b.credsOK(cred.UserName, cred.Password)
	b.loginLog = append(b.loginLog, LoginRecord{At: b.now(), Credentials: Fingerprint(cred.UserName, cred.Password), OK: ok})
	if !ok {
		fail(http.StatusUnauthorized, "NoValidSession", "invalid credentials")
		return
	}
	b.nextID++
	id := strconv.Itoa(b.nextID)
	sess := &bmcSession{id: id, user: cred.UserName, token: rand.Text()}
	b.sessions[id] = sess
	w.Header().Set("X-Auth-Token", sess.token)
	w.Header().Set("Location", sessionsPath+"/"+id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(b.session(sess))
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
		if b.Quirks.NoForceRestart && t == "ForceRestart" {
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

// powerState returns the PowerState of system s to show, through the
// Power's reporting model (stale, flapping, unknown as null, missing or
// Paused) and the StateLag quirk. ok is false when PowerState is to be left
// out; a nil value is shown as null.
func (b *BMC) powerState(ctx context.Context, s *system) (v any, ok bool) {
	if b.now().Before(s.lagUntil) {
		return s.lagState, true
	}
	rd, err := s.power.Read(ctx)
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
func honestState(p *fake.Power) string {
	switch p.Current() {
	case power.StateOn:
		return "On"
	case power.StateOff:
		return "Off"
	}
	return "PoweringOn"
}

func (b *BMC) system(ctx context.Context, id string) map[string]any {
	s, _ := b.sys(id)
	path := systemsPath + "/" + id
	reset := map[string]any{"target": path + "/Actions/ComputerSystem.Reset"}
	if b.Quirks.ActionInfo {
		reset["@Redfish.ActionInfo"] = path + "/ResetActionInfo"
	} else {
		reset["ResetType@Redfish.AllowableValues"] = b.allowable()
	}
	uuid := "38947555-7742-3448-3784-823347823834"
	if id != "1" {
		uuid = fmt.Sprintf("38947555-7742-3448-3784-%012x", crc32.ChecksumIEEE([]byte(id)))
	}
	sys := map[string]any{"@odata.id": path, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": id,
		"Name": "Simulated server " + id, "SystemType": "Physical", "Manufacturer": "rebootkit", "Model": "redfishtest.BMC",
		"UUID": uuid, "Status": map[string]string{"State": "Enabled", "Health": "OK"},
		"Boot": map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
			"BootSourceOverrideMode": "UEFI", "BootSourceOverrideTarget@Redfish.AllowableValues": []string{"None", "Pxe", "Hdd", "Cd", "BiosSetup"}},
		"Links":   map[string]any{},
		"Actions": map[string]any{"#ComputerSystem.Reset": reset}}
	if v, ok := b.powerState(ctx, s); ok {
		sys["PowerState"] = v
	}
	return sys
}

func (b *BMC) reset(w http.ResponseWriter, r *http.Request, id string, raw []byte, fail func(status int, id, msg string)) {
	s, _ := b.sys(id)
	hw := s.power
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
	cur := hw.Current()
	if b.Quirks.BusyWhileTransitioning && cur == power.StateTransitioning {
		fail(http.StatusConflict, "ResourceInUse", "a power operation is in progress")
		return
	}
	rt := strings.ToLower(body.ResetType)
	if b.Quirks.BusyAfterOff > 0 && (rt == "on" || rt == "forceon") && now.Sub(s.lastOff) < b.Quirks.BusyAfterOff {
		fail(http.StatusConflict, "ResourceInUse", "server is not ready to power on")
		return
	}
	old := honestState(hw)
	ctx := r.Context()
	var err error
	switch rt {
	case "gracefulshutdown":
		err = hw.Off(ctx, power.ModeSoft)
	case "forceoff":
		err = hw.Off(ctx, power.ModeHard)
		s.lastOff = now
	case "on", "forceon":
		err = hw.On(ctx)
	case "forcerestart":
		// A restart without a power-off: the hardware stays on (it
		// refuses a system that is off, as this emulator's firmware does).
		err = hw.Reset(ctx)
	case "pushpowerbutton":
		// The button toggles the hardware, whatever anyone reports.
		if !hw.HardwareOn() {
			err = hw.On(ctx)
		} else {
			err = hw.Off(ctx, power.ModeSoft)
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
		s.lagUntil, s.lagState = now.Add(b.Quirks.StateLag), old
	}
	if failWith != 0 {
		fail(failWith, "GeneralError", "injected failure after the reset took effect")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
