package bgp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/xlbnet/xlb/pkg/bfd"
)

// helperEnv makes the test binary run a speaker driven over stdin instead
// of the tests: the BIRD tests start it inside a lab appliance's network
// namespace (a process lives in one namespace; GoBGP's goroutines would
// not stay in a namespace switched by one thread).
const helperEnv = "XLB_BGP_TEST_SPEAKER"

// helperCarriedEnv, when set (JSON []bfd.Carried), makes the helper a
// hand-over's successor: it resumes those BFD sessions at once
// (StartBFD) and starts the speaker, taking them over, only on "start".
const helperCarriedEnv = "XLB_BGP_TEST_CARRIED"

// hostRange is n host prefixes from addr up.
func hostRange(addr netip.Addr, n int) []netip.Prefix {
	out := make([]netip.Prefix, 0, n)
	for range n {
		out = append(out, HostPrefix(addr))
		addr = addr.Next()
	}
	return out
}

// rangeCommand announces or withdraws "ADDR N each|batch".
func (s *Speaker) rangeCommand(announce bool, arg string) error {
	var a string
	var n int
	var how string
	if _, err := fmt.Sscan(arg, &a, &n, &how); err != nil {
		return fmt.Errorf("want ADDR N each|batch: %w", err)
	}
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return err
	}
	ps := hostRange(addr, n)
	switch {
	case how == "batch" && announce:
		return s.Update(ps, nil)
	case how == "batch":
		return s.Update(nil, ps)
	case how != "each":
		return fmt.Errorf("%q: want each or batch", how)
	}
	for _, p := range ps {
		if announce {
			err = s.Announce(p)
		} else {
			err = s.Withdraw(p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runHelper reads Options (JSON) from the environment, starts a speaker
// (or, as a successor, its BFD sessions) and executes one command per
// stdin line: "start" (a successor's speaker), "announce PREFIX",
// "withdraw PREFIX", "announce-range" and "withdraw-range" (rangeCommand),
// "sent" (UpdatesSent), "peers", "holdbfd on|off", "bfdexport", "close",
// "detach". Each gets
// one reply line: "ok", JSON, or "error: …".
func runHelper() int {
	var o Options
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &o); err != nil {
		fmt.Println("error:", err)
		return 2
	}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	var s *Speaker
	start := func() (err error) {
		s, err = Start(context.Background(), o)
		return err
	}
	if c := os.Getenv(helperCarriedEnv); c != "" {
		var carried []bfd.Carried
		err := json.Unmarshal([]byte(c), &carried)
		if err == nil {
			o.BFD, err = StartBFD(o.Log, o.Peers, carried)
		}
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
	} else if err := start(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if (s == nil) != (cmd == "start") {
			fmt.Printf("error: %q with the speaker started: %v\n", cmd, s != nil)
			continue
		}
		var err error
		switch cmd {
		case "start":
			err = start()
		case "holdbfd":
			s.HoldBFD(arg == "on")
		case "bfdexport":
			b, _ := json.Marshal(s.BFDExport())
			fmt.Println(string(b))
			continue
		case "announce", "withdraw":
			var p netip.Prefix
			if p, err = netip.ParsePrefix(arg); err == nil {
				if cmd == "announce" {
					err = s.Announce(p)
				} else {
					err = s.Withdraw(p)
				}
			}
		case "announce-range", "withdraw-range":
			// "announce-range ADDR N each|batch": N host prefixes from
			// ADDR, one call per prefix or one Update.
			err = s.rangeCommand(cmd == "announce-range", arg)
		case "sent":
			sent, err := s.UpdatesSent(context.Background())
			if err != nil {
				fmt.Println("error:", err)
				continue
			}
			b, _ := json.Marshal(sent)
			fmt.Println(string(b))
			continue
		case "peers":
			b, _ := json.Marshal(s.Peers())
			fmt.Println(string(b))
			continue
		case "close":
			s.Close()
			fmt.Println("ok")
			return 0
		case "detach":
			s.Detach()
			fmt.Println("ok")
			return 0
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("ok")
		}
	}
	if s != nil {
		s.Close()
	} else if o.BFD != nil {
		o.BFD.Detach()
	}
	return 0
}
