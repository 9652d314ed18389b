package main

import (
	"fmt"
	"os"
)

// runMainEnv marks a process started by xlb itself (lab, tests) to run the
// command line, so a test binary can re-execute itself as xlb.
const runMainEnv = "XLB_RUN_MAIN"

func main() {
	if err := runApp(newApp(os.Stdout, os.Stderr), os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", progName, err)
		os.Exit(exitCode(err))
	}
}
