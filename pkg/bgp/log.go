package bgp

import (
	"context"
	"log/slog"
)

// quietHandler passes GoBGP's warnings and errors on (its info lines are
// one per message and timer), except the one GoBGP logs when
// BgpServer.Stop finds the server already stopped by StopBgp (which Detach
// needs, to ask for a stop without NOTIFICATION).
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "failed to stop BGP server" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
