package redfish

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

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
// task ended (taskEnded).
func (c *Controller) noteAccepted(ctx context.Context, resp *http.Response) {
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
		return
	}
	power.NoteTask(ctx, m, func(ctx context.Context) (bool, error) { return c.taskEnded(ctx, m) })
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
		if err != nil || eerr != nil || u.Scheme == "" || !strings.EqualFold(u.Scheme, e.Scheme) || !strings.EqualFold(u.Host, e.Host) ||
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
	if !bmcPath(s) || !strings.HasPrefix(s, "/redfish/v1/") || strings.Contains(s, "/../") || strings.HasSuffix(s, "/..") {
		return ""
	}
	return s
}

// taskEnded reads the task monitor m (one GET on the session, within
// ctx) and reports whether its task ended: an answer other than 202
// Accepted whose body has no TaskState (the command's own outcome, per
// Redfish), or a TaskState of Completed, Exception, Killed or Cancelled.
// A 202, any other TaskState (Running, New, Pending, Suspended...), a
// refusal (404 included: a BMC that forgot its task tells nothing) or
// no answer: not ended.
func (c *Controller) taskEnded(ctx context.Context, m string) (bool, error) {
	if err := c.lockRead(ctx, "task"); err != nil {
		return false, err
	}
	defer c.unlockRead()
	var ended bool
	err := c.withSession(ctx, func(cl *reqPath) error {
		resp, err := cl.Get(m)
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
		ended = taskStateEnded(b)
		return nil
	})
	if err != nil {
		return false, c.classify("task", err)
	}
	return ended, nil
}

// taskStateEnded reports whether b, a task monitor's answer other than
// 202, says its task ended: no TaskState at all (the command's own
// answer, also an empty body), or one of the final ones.
func taskStateEnded(b []byte) bool {
	var t struct {
		TaskState *string
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return true
	}
	if json.Unmarshal(b, &t) != nil {
		return false // neither a task nor an outcome: tells nothing
	}
	if t.TaskState == nil {
		return true
	}
	switch strings.ToLower(*t.TaskState) {
	case "completed", "exception", "killed", "cancelled":
		return true
	}
	return false
}
