package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// CheckHealth runs server s's health check once, bounded by the
// inventory's health_timeout (default 5s). nil means it passed.
func (inv Inventory) CheckHealth(ctx context.Context, s Server) error {
	ctx, cancel := context.WithTimeout(ctx, inv.Defaults.healthTimeout())
	defer cancel()
	h := s.Health
	switch {
	case h.TCP != "":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.TCP)
		if err != nil {
			return err
		}
		return c.Close()
	case h.HTTP != "":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.HTTP, nil)
		if err != nil {
			return fmt.Errorf("health.http %s: not a valid URL", Scrub(h.HTTP))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = Scrub(ue.URL) // never a user:password
			}
			return err
		}
		resp.Body.Close()
		want := h.Status
		if want == 0 {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			return fmt.Errorf("health %s: status %d, want %d", Scrub(h.HTTP), resp.StatusCode, want)
		}
		return nil
	default:
		// Its process group is killed at the timeout and when it exits.
		_, err := runGrouped(ctx, h.Command, inv.CommandEnv(nil))
		return err
	}
}
