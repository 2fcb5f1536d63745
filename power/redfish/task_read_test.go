package redfish_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReadTaskAnswers (review 39 round 16): ReadTask (power.TaskReader),
// the reading of a task monitor by the address a record kept, says
// ended only for a Task with a final TaskState or the command's own
// outcome (a 204), gone for 404 and 410, and not ended for a 202, a
// running Task, or another resource answered at the monitor's address
// (a 200 with the system: it tells nothing of the task); a monitor that
// is no Redfish path on the BMC's origin is not read at all.
func TestReadTaskAnswers(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	var mu sync.Mutex
	answer := map[string]func(w http.ResponseWriter){}
	var read []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		f := answer[r.URL.Path]
		if f != nil {
			read = append(read, r.URL.Path)
		}
		mu.Unlock()
		if f != nil {
			f(w)
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	body := func(code int, s string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(s))
		}
	}
	const tasks = "/redfish/v1/TaskService/Tasks/"
	cases := []struct {
		path string
		f    func(w http.ResponseWriter)
		want power.TaskReading
	}{
		{tasks + "running", body(http.StatusAccepted, `{"TaskState":"Running"}`), power.TaskNotEnded},
		{tasks + "running200", body(http.StatusOK, `{"@odata.id":"/redfish/v1/TaskService/Tasks/running200","TaskState":"Running"}`), power.TaskNotEnded},
		{tasks + "done", body(http.StatusOK, `{"@odata.id":"/redfish/v1/TaskService/Tasks/done","TaskState":"Completed"}`), power.TaskEnded},
		{tasks + "killed", body(http.StatusOK, `{"TaskState":"Killed"}`), power.TaskEnded},
		{tasks + "outcome", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, power.TaskEnded},
		{tasks + "other", body(http.StatusOK, `{"@odata.id":"/redfish/v1/Systems/1","@odata.type":"#ComputerSystem.v1_0_0.ComputerSystem","PowerState":"On"}`), power.TaskNotEnded},
		{tasks + "gone404", body(http.StatusNotFound, `{"error":{"code":"Base.1.8.ResourceMissingAtURI"}}`), power.TaskGone},
		{tasks + "gone410", body(http.StatusGone, ``), power.TaskGone},
	}
	for _, c := range cases {
		answer[c.path] = c.f
	}
	answer[tasks+"busy"] = body(http.StatusServiceUnavailable, `{"error":{"code":"Base.1.8.ServiceTemporarilyUnavailable"}}`)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ctx := context.Background()
	ctl, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: roots})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctl.Close() })
	var tr power.TaskReader = ctl
	for _, c := range cases {
		got, err := tr.ReadTask(ctx, c.path)
		require.NoError(t, err, c.path)
		assert.Equal(t, c.want, got, "%s: %v", c.path, got)
	}
	got, err := tr.ReadTask(ctx, tasks+"busy")
	assert.Error(t, err, "a refusal other than 404/410 is an error")
	assert.Equal(t, power.TaskNotEnded, got)

	mu.Lock()
	n := len(read)
	mu.Unlock()
	for _, bad := range []string{"https://evil.example" + tasks + "1", tasks + "1?x=1", "/redfish/v1/../../etc", "(none named)", ""} {
		got, err := tr.ReadTask(ctx, bad)
		assert.ErrorIs(t, err, power.ErrNotSent, "%q is not read", bad)
		assert.Equal(t, power.TaskNotEnded, got)
	}
	mu.Lock()
	assert.Len(t, read, n, "no invalid monitor was requested")
	mu.Unlock()
}
