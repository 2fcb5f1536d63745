package redfish

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTaskMonitorValidated (review 39 round 14): a task monitor named by
// a BMC's 202 (hostile bytes) is taken only as a bounded Redfish path on
// the endpoint's own origin.
func TestTaskMonitorValidated(t *testing.T) {
	c := &Controller{cfg: Config{Endpoint: "https://bmc.example:8443"}}
	for in, want := range map[string]string{
		"/redfish/v1/TaskService/Tasks/7":                         "/redfish/v1/TaskService/Tasks/7",
		"/redfish/v1/TaskService/TaskMonitors/a-b_c.1":            "/redfish/v1/TaskService/TaskMonitors/a-b_c.1",
		"/redfish/v1/%2e%2e/AccountService":                       "",
		"https://bmc.example:8443/redfish/v1/TaskService/Tasks/7": "/redfish/v1/TaskService/Tasks/7",
		"https://evil.example/redfish/v1/TaskService/Tasks/7":     "",
		"https://u:p@bmc.example:8443/redfish/v1/Tasks/7":         "",
		"//evil.example/redfish/v1/Tasks/7":                       "",
		"/redfish/v1/../../etc":                                   "",
		"/redfish/v1/Tasks/7?x=1":                                 "",
		"/redfish/v1/Tasks/7\r\nX: y":                             "",
		"/other/Tasks/7":                                          "",
		"redfish/v1/Tasks/7":                                      "",
		"/redfish/v1/" + strings.Repeat("a", maxMonitor):          "",
		"": "",
	} {
		assert.Equal(t, want, c.taskMonitor(in), "%q", in)
	}
	pathed := &Controller{cfg: Config{Endpoint: "https://bmc.example/prefix"}}
	assert.Empty(t, pathed.taskMonitor("https://bmc.example/redfish/v1/Tasks/7"), "an endpoint with a path of its own takes no absolute URL")
}

// TestTaskStateEnded: only a final TaskState, or an answer that is no
// task (the command's own outcome), ends the task.
func TestTaskStateEnded(t *testing.T) {
	for in, want := range map[string]bool{
		``:                                   true,
		`{}`:                                 true,
		`{"TaskState":"Completed"}`:          true,
		`{"TaskState":"exception"}`:          true,
		`{"TaskState":"Killed"}`:             true,
		`{"TaskState":"Cancelled"}`:          true,
		`{"TaskState":"Running"}`:            false,
		`{"TaskState":"New"}`:                false,
		`{"TaskState":"Cancelling"}`:         false,
		`{"TaskState":"Suspended"}`:          false,
		`{"TaskState":null}`:                 true,
		`{"TaskState":7}`:                    false,
		`not json`:                           false,
		`{"TaskState":"Completed\u0000x"}`:   false,
		`{"error":{"code":"Base.1.8.Oops"}}`: true,
		// Review 39 round 16: another resource (the monitor's address
		// answering the system, say) tells nothing of the task.
		`{"@odata.id":"/redfish/v1/Systems/1","PowerState":"On"}`:                 false,
		`{"@odata.type":"#Task.v1_4_3.Task","Id":"7"}`:                            false,
		`{"@odata.id":"/redfish/v1/TaskService/Tasks/7","TaskState":"Completed"}`: true,
		`{"@odata.id":"/redfish/v1/TaskService/Tasks/7","TaskState":"Running"}`:   false,
		`null`: false,
		`[]`:   false,
	} {
		assert.Equal(t, want, taskStateEnded([]byte(in)), "%q", in)
	}
}

func FuzzTaskMonitor(f *testing.F) {
	for _, s := range []string{"/redfish/v1/TaskService/Tasks/1", "https://bmc.example/redfish/v1/T", "//x", "/redfish/v1/%2e%2e/"} {
		f.Add(s)
	}
	c := &Controller{cfg: Config{Endpoint: "https://bmc.example"}}
	f.Fuzz(func(t *testing.T, s string) {
		m := c.taskMonitor(s)
		if m == "" {
			return
		}
		if len(m) > maxMonitor || !bmcPath(m) || !strings.HasPrefix(m, "/redfish/v1/") || strings.ContainsAny(m, "?#@\\\r\n ") {
			t.Fatalf("taskMonitor(%q) = %q", s, m)
		}
	})
}

func FuzzTaskStateEnded(f *testing.F) {
	for _, s := range []string{`{"TaskState":"Running"}`, `{"TaskState":"Completed"}`, ``, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { _ = taskStateEnded(b) })
}
