package logflags

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string // "" for a logger
		json    bool
		debug   bool
	}{
		{args: nil},
		{args: []string{"--log-format", "json", "--log-level", "debug"}, json: true, debug: true},
		{args: []string{"--log-level", "debug"}, debug: true},
		{args: []string{"--log-level", "warn"}},
		{args: []string{"--log-format", "xml"}, wantErr: `--log-format "xml": want text or json`},
		{args: []string{"--log-level", "loud"}, wantErr: `--log-level "loud": want debug, info, warn or error`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			set := flag.NewFlagSet("t", flag.ContinueOnError)
			for _, f := range Flags() {
				if err := f.Apply(set); err != nil {
					t.Fatal(err)
				}
			}
			if err := set.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			log, err := New(cli.NewContext(cli.NewApp(), set, nil), &out)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d")
			log.Info("i")
			got := out.String()
			if strings.HasPrefix(got, "{") != tc.json {
				t.Errorf("json %v, got %q", tc.json, got)
			}
			if debug := strings.Contains(got, "msg=d") || strings.Contains(got, `"msg":"d"`); debug != tc.debug {
				t.Errorf("debug %v, got %q", tc.debug, got)
			}
		})
	}
}
