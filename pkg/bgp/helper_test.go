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
)

// helperEnv makes the test binary run a speaker driven over stdin instead
// of the tests: the BIRD tests start it inside a lab appliance's network
// namespace (a process lives in one namespace; GoBGP's goroutines would
// not stay in a namespace switched by one thread).
const helperEnv = "XLB_BGP_TEST_SPEAKER"

// runHelper reads Options (JSON) from the environment, starts a speaker
// and executes one command per stdin line: "announce PREFIX", "withdraw
// PREFIX", "peers", "close", "detach". Each gets one reply line: "ok",
// JSON, or "error: …".
func runHelper() int {
	var o Options
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &o); err != nil {
		fmt.Println("error:", err)
		return 2
	}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := Start(context.Background(), o)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		var err error
		switch cmd {
		case "announce", "withdraw":
			var p netip.Prefix
			if p, err = netip.ParsePrefix(arg); err == nil {
				if cmd == "announce" {
					err = s.Announce(p)
				} else {
					err = s.Withdraw(p)
				}
			}
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
	s.Close()
	return 0
}
