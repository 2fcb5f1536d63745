package inventory

import (
	"context"
	"log/slog"
)

// hostnames is a slog.Handler that names servers by hostname: the reboot
// package logs its hosts by name, which in a Fleet is the server's UUID;
// operators know servers by hostname (the UUID stays, as "uuid").
type hostnames struct {
	slog.Handler
	inv Inventory
}

// withHostnames wraps l so that "host" attributes holding a server UUID
// show its hostname. A nil logger stays nil.
func withHostnames(l *slog.Logger, inv Inventory) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(hostnames{Handler: l.Handler(), inv: inv})
}

func (h hostnames) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "host" && a.Value.Kind() == slog.KindString {
			if s, ok := h.inv.Server(a.Value.String()); ok && s.Hostname != s.UUID {
				out.AddAttrs(slog.String("host", s.Hostname), slog.String("uuid", s.UUID))
				return true
			}
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h hostnames) WithAttrs(as []slog.Attr) slog.Handler {
	return hostnames{Handler: h.Handler.WithAttrs(as), inv: h.inv}
}

func (h hostnames) WithGroup(name string) slog.Handler {
	return hostnames{Handler: h.Handler.WithGroup(name), inv: h.inv}
}
