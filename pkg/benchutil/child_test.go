package benchutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childRoleEnv makes this test binary TestChild's helper: it answers each
// line of its stdin with the line in upper case and its pid, until stdin
// closes.
const childRoleEnv = "XLB_BENCHUTIL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childRoleEnv) == "echo" {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			fmt.Printf("%s %d\n", strings.ToUpper(in.Text()), os.Getpid())
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChild: the test binary started again in a role answers through its
// pipes from a process of its own, and Stop ends it.
func TestChild(t *testing.T) {
	cmd, err := Self(exec.Command)
	if err != nil {
		t.Fatal(err)
	}
	c := StartChild(t, cmd, childRoleEnv+"=echo")
	for _, word := range []string{"one", "two"} {
		fmt.Fprintln(c.In, word)
		line, err := c.Out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var got string
		var pid int
		if _, err := fmt.Sscanf(line, "%s %d", &got, &pid); err != nil || got != strings.ToUpper(word) || pid == os.Getpid() || pid != cmd.Process.Pid {
			t.Errorf("answer %q, want %s from pid %d (this process %d)", line, strings.ToUpper(word), cmd.Process.Pid, os.Getpid())
		}
	}
	c.Stop()
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("after Stop: %v, want the child ended cleanly", cmd.ProcessState)
	}
	c.Stop() // a second Stop (and the cleanup's) is harmless
}
