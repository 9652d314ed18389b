package conntrack

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// For tests and the bench harness (bench/cmd/xlbbench): set shmem THP to
// advise for the duration of a run, as the appliance's unit does
// (deploy/systemd), and put back what was there. Several holders may
// overlap (two test binaries, a test during a bench run): each holds a
// shared flock on shmemTHPLock while it needs advise, the first one
// saves the previous mode in shmemTHPSaved, and the last one to let go
// (the one whose release can take the lock exclusively) restores it.
const (
	shmemTHPLock  = "/tmp/xlb-shmem-thp.lock"
	shmemTHPSaved = "/tmp/xlb-shmem-thp.saved"
)

// AdviseShmemTHP sets ShmemTHPPath to advise unless it already honours
// MADV_HUGEPAGE (or is deny, the operator's emergency off switch, which
// it leaves and reports as an error), and returns the function that puts
// the previous mode back once no other holder needs it. Root only.
func AdviseShmemTHP() (release func() error, err error) {
	lf, err := os.OpenFile(shmemTHPLock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shmem thp lock: %w", err)
	}
	fd := int(lf.Fd())
	fail := func(err error) (func() error, error) {
		lf.Close()
		return nil, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return fail(fmt.Errorf("shmem thp lock: %w", err))
	}
	switch mode := ShmemTHP(); {
	case mode == "":
		return fail(errors.New("kernel without transparent huge pages"))
	case mode == "deny":
		return fail(fmt.Errorf("%s is deny", ShmemTHPPath))
	case !ShmemTHPAdvised(mode):
		if _, err := os.Stat(shmemTHPSaved); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(shmemTHPSaved, []byte(mode+"\n"), 0o600); err != nil {
				return fail(fmt.Errorf("save shmem thp mode: %w", err))
			}
		}
		if err := os.WriteFile(ShmemTHPPath, []byte("advise"), 0); err != nil {
			return fail(fmt.Errorf("set shmem thp to advise: %w", err))
		}
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return fail(fmt.Errorf("shmem thp lock: %w", err))
	}
	return func() error {
		defer lf.Close()
		// A failed conversion drops this holder's shared lock: exactly
		// one of the holders leaving together gets the exclusive lock.
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			return nil // another holder still needs advise
		}
		saved, err := os.ReadFile(shmemTHPSaved)
		if errors.Is(err, os.ErrNotExist) {
			return nil // advise (or better) was there before
		} else if err != nil {
			return fmt.Errorf("restore shmem thp mode: %w", err)
		}
		if err := os.WriteFile(ShmemTHPPath, []byte(strings.TrimSpace(string(saved))), 0); err != nil {
			return fmt.Errorf("restore shmem thp mode %q: %w", strings.TrimSpace(string(saved)), err)
		}
		return os.Remove(shmemTHPSaved)
	}, nil
}
