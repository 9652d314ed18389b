// Package logflags is the --log-format and --log-level flags that xlb's
// long-running commands (xlb run, xlb-k8s) take, and the logger they
// choose: one definition, so the binaries spell and check them alike.
package logflags

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
)

// Flags returns the two flags, with their defaults (text, info).
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log format: text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level: debug, info, warn or error"},
	}
}

// New returns the logger the flags of c ask for, writing to w. Its error
// says which flag is wrong and what it takes: the caller reports it as a
// usage error.
func New(c *cli.Context, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level"))
	}
	o := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", c.String("log-format"))
}
