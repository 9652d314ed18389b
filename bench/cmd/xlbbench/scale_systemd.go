package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/sdnotify/sdnotifytest"
)

// fdStore stands in for systemd's notification socket and file
// descriptor store (scale --systemd, pkg/sdnotify/sdnotifytest): the
// daemon under Type=notify stores its state document there at every
// publication, which is part of what a change costs.
type fdStore struct {
	*sdnotifytest.Manager
	dir string
}

func newFDStore() (*fdStore, error) {
	dir, err := os.MkdirTemp("", "xlbbench-notify")
	if err != nil {
		return nil, err
	}
	m, err := sdnotifytest.New(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &fdStore{Manager: m, dir: dir}, nil
}

// summary says what the store holds: its fds, how many of them are the
// state document's and their bytes, and the messages received.
func (s *fdStore) summary() string {
	var names []string
	fds, stateFDs, stateBytes := 0, 0, int64(0)
	s.With(func(store []sdnotifytest.Stored) []sdnotifytest.Stored {
		fds = len(store)
		for _, f := range store {
			if f.Name != "state" && !strings.HasPrefix(f.Name, "state-") {
				names = append(names, f.Name)
				continue
			}
			stateFDs++
			var st unix.Stat_t
			if unix.Fstat(f.FD, &st) == nil {
				stateBytes += st.Size
			}
		}
		return store
	})
	slices.Sort(names)
	names = slices.Compact(names) // each kind of fd once
	return fmt.Sprintf("%d fds (%d of the state document, %.1f MB; others %s), %d messages", fds, stateFDs, float64(stateBytes)/1e6, strings.Join(names, " "), len(s.Log()))
}

func (s *fdStore) close() {
	s.Close()
	os.RemoveAll(s.dir)
}
