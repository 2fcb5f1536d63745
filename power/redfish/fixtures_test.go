package redfish_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureBMC serves a recorded ComputerSystem (written from the Redfish
// schema in the shapes vendors send) and records the reset types posted.
func fixtureBMC(t *testing.T, systemFile string) (*httptest.Server, *[]string) {
	sys, err := os.ReadFile("testdata/" + systemFile)
	require.NoError(t, err)
	var meta struct {
		ID string `json:"@odata.id"`
	}
	require.NoError(t, json.Unmarshal(sys, &meta))
	info, _ := os.ReadFile("testdata/actioninfo.json")
	var mu sync.Mutex
	var resets []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); (!ok || u != "root" || p != secret) && strings.TrimSuffix(r.URL.Path, "/") != "/redfish/v1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		path := strings.TrimSuffix(r.URL.Path, "/")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case path == "/redfish/v1":
			_, _ = w.Write([]byte(`{"@odata.id":"/redfish/v1/","Systems":{"@odata.id":"/redfish/v1/Systems"}}`))
		case path == "/redfish/v1/Systems":
			_, _ = w.Write([]byte(`{"@odata.id":"/redfish/v1/Systems","Members":[{"@odata.id":"` + meta.ID + `"}]}`))
		case path == strings.TrimSuffix(meta.ID, "/"):
			_, _ = w.Write(sys)
		case strings.HasSuffix(path, "/ResetActionInfo"):
			_, _ = w.Write(info)
		case strings.HasSuffix(path, "/Actions/ComputerSystem.Reset") && r.Method == http.MethodPost:
			var body struct{ ResetType string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			resets = append(resets, body.ResetType)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &resets
}

func TestRecordedVendorResponses(t *testing.T) {
	tests := []struct {
		file    string
		state   power.State
		softOff string // reset posted for a soft power-off ("" if already off)
		on      string // reset posted for power-on ("" if already on)
	}{
		{"dell-idrac9.json", power.StateOn, "GracefulShutdown", ""},
		{"hpe-ilo5.json", power.StateOn, "PushPowerButton", ""}, // no Graceful* on iLO 5
		{"supermicro.json", power.StateOn, "GracefulShutdown", ""},
		{"actioninfo-system.json", power.StateTransitioning, "GracefulShutdown", "On"},
		{"lowercase.json", power.StateOn, "gracefulshutdown", ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv, resets := fixtureBMC(t, tt.file)
			c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, Username: "root", Password: secret, BasicAuth: true})
			require.NoError(t, err)
			defer c.Close()
			s, err := c.State(ctx)
			require.NoError(t, err)
			assert.Equal(t, tt.state, s)
			require.NoError(t, c.Off(ctx, power.ModeSoft))
			require.NoError(t, c.On(ctx))
			var want []string
			for _, r := range []string{tt.softOff, tt.on} {
				if r != "" {
					want = append(want, r)
				}
			}
			assert.Equal(t, want, *resets)
		})
	}
}
