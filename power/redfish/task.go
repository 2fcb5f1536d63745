package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/rebootkit/rebootkit/power"
)

// maxMonitor bounds the length of a task monitor's address taken from a
// BMC's answer; maxTaskBody bounds what is read of a 202's body or of a
// monitor's answer.
const (
	maxMonitor  = 512
	maxTaskBody = 64 << 10
)

// noteAccepted tells ctx's power.Queued (if any) that the BMC accepted
// a reset for later (resp, a 202): with the task monitor it names, when
// one is valid (taskMonitor), so that the caller can read whether the
// task ended (taskEnded). It returns that monitor (empty: none valid).
func (c *Controller) noteAccepted(ctx context.Context, resp *http.Response) string {
	var body struct {
		ID string `json:"@odata.id"`
	}
	if resp.Body != nil {
		_ = json.NewDecoder(io.LimitReader(resp.Body, maxTaskBody)).Decode(&body)
	}
	m := c.taskMonitor(resp.Header.Get("Location"))
	if m == "" {
		m = c.taskMonitor(body.ID)
	}
	if m == "" {
		power.NoteQueued(ctx)
		return ""
	}
	power.NoteTask(ctx, m, func(ctx context.Context) (bool, error) { return c.taskEnded(ctx, m) })
	return m
}

// taskMonitor is the path on the endpoint's origin that s (a Location
// header or an @odata.id of the BMC's: hostile) names, if it is a
// Redfish resource's path of at most maxMonitor bytes, of letters,
// digits and "/_-.~" only; else "". An absolute URL counts only on the
// endpoint's own origin (scheme and host), the endpoint having no path
// of its own.
func (c *Controller) taskMonitor(s string) string {
	if s == "" || len(s) > maxMonitor {
		return ""
	}
	if !strings.HasPrefix(s, "/") {
		u, err := url.Parse(s)
		e, eerr := url.Parse(c.cfg.Endpoint)
		if err != nil || eerr != nil || u.Scheme == "" || !sameOrigin(e, u) ||
			strings.Trim(e.Path, "/") != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return ""
		}
		s = u.EscapedPath()
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/_-.~", r)) {
			return ""
		}
	}
	if !bmcPath(s) || !strings.HasPrefix(s, "/redfish/v1/") { // bmcPath: no dot segment
		return ""
	}
	return s
}

// taskEnded reads the task monitor m (one GET on the session, within
// ctx; readTask) and reports whether its task ended (power.TaskEnded). A
// 202, a TaskState that is not final (Running, New, Pending,
// Suspended...), an answer that is another resource, a refusal, a 404 or
// 410 (a BMC that forgot its task tells nothing of what it did meanwhile)
// or no answer: not ended.
func (c *Controller) taskEnded(ctx context.Context, m string) (bool, error) {
	r, err := c.readTask(ctx, m)
	return r == power.TaskEnded, err
}

// ReadTask reads the task monitor monitor once, within ctx
// (power.TaskReader): monitor is taken as hostile, as the 202's own
// (taskMonitor: a bounded Redfish path on the endpoint's origin; anything
// else is not read, an error of class unsupported that matches
// power.ErrNotSent), then read as readTask says.
func (c *Controller) ReadTask(ctx context.Context, monitor string) (power.TaskReading, error) {
	m := c.taskMonitor(monitor)
	if m == "" {
		return power.TaskNotEnded, &power.Error{Op: "task", Class: power.ClassUnsupported,
			Message: "not read: not a Redfish task monitor path on this BMC", Err: power.ErrNotSent}
	}
	return c.readTask(ctx, m)
}

// readTask reads the task monitor m (one GET on the session, within
// ctx): power.TaskEnded for an answer other than 202 Accepted that says
// the task ended (taskStateEnded), power.TaskGone for 404 Not Found or
// 410 Gone (the BMC has no such task), power.TaskNotEnded for a 202 or
// any other answer; a refusal or no answer is an error. A task read ended
// that is the task of this system's latest reset, queued, ends that
// reset's lost window: its windows count from this reading's answer
// (windows.go).
func (c *Controller) readTask(ctx context.Context, m string) (power.TaskReading, error) {
	if err := c.lockRead(ctx, "task"); err != nil {
		return power.TaskNotEnded, err
	}
	defer c.unlockRead()
	reading := power.TaskNotEnded
	err := c.withSession(ctx, func(cl *reqPath) error {
		reading = power.TaskNotEnded
		resp, err := cl.Get(m)
		var re *schemas.Error
		if errors.As(err, &re) && (re.HTTPReturnedStatusCode == http.StatusNotFound || re.HTTPReturnedStatusCode == http.StatusGone) {
			reading = power.TaskGone
			return nil
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxTaskBody))
		_, _ = io.Copy(io.Discard, resp.Body) // bounded (MaxBody)
		if resp.StatusCode == http.StatusAccepted {
			return nil
		}
		if rerr != nil {
			return rerr
		}
		if taskStateEnded(b) {
			reading = power.TaskEnded
		}
		return nil
	})
	if err != nil {
		return power.TaskNotEnded, c.classify("task", err)
	}
	if reading == power.TaskEnded {
		// The reset queued with this task reached the hardware by now:
		// its windows count from now, as an answered reset's
		// (resetReturned, windows.go).
		windows.taskEnded(c.windowKey(), m, c.now(), c.staleReads(), c.softTimeout()+c.staleReads())
	}
	return reading, nil
}

// taskStateEnded reports whether b, a task monitor's answer other than
// 202, says its task ended: a Task with a final TaskState (Completed,
// Exception, Killed, Cancelled), or the command's own outcome, which is
// no resource (an empty body, as a 204 has, or a JSON object with no
// TaskState that names no resource: no @odata.id nor @odata.type, such as
// a message or an error). A TaskState that is not final, and any
// resource with none (the monitor's address answering another resource,
// say the system itself, tells nothing of the task), do not; nor does
// anything that is not a JSON object.
func taskStateEnded(b []byte) bool {
	var t struct {
		TaskState *string
		ID        *json.RawMessage `json:"@odata.id"`
		Type      *json.RawMessage `json:"@odata.type"`
	}
	body := strings.TrimSpace(string(b))
	if body == "" {
		return true
	}
	if !strings.HasPrefix(body, "{") || json.Unmarshal(b, &t) != nil {
		return false // neither a task nor an outcome: tells nothing
	}
	if t.TaskState == nil {
		return t.ID == nil && t.Type == nil // an outcome, not another resource
	}
	switch strings.ToLower(*t.TaskState) {
	case "completed", "exception", "killed", "cancelled":
		return true
	}
	return false
}
