// Package tmpfstest gives a test a directory on a tmpfs, the file system
// whose fsync persists nothing (its pages are all there is), for the
// tests that must see how the engine judges one (the disk check). It
// looks where Linux keeps one (/dev/shm, /run/shm, the user's runtime
// directory, the temporary directory), makes a directory of its own in
// the first that statfs says is a tmpfs, and removes it at the test's
// end. A machine with none fails the test, saying where it looked: no
// test is skipped, and a Linux machine has one at /dev/shm (a container
// without it needs one mounted there: --shm-size, or mount -t tmpfs).
// A fake statfs would prove nothing the simulated disk's tests do not:
// these tests are the real file system's.
package tmpfstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// Dir is a new directory on a tmpfs, removed with what it holds when the
// test ends; the test fails, saying where it looked, when no tmpfs is
// found.
func Dir(t testing.TB) string {
	t.Helper()
	return dirIn(t, candidates())
}

// dirIn is Dir, looking where candidates say.
func dirIn(t testing.TB, candidates []string) string {
	t.Helper()
	var tried []string
	for _, candidate := range candidates {
		info, err := vfs.OS{}.DescribeFS(candidate)
		if err != nil || info.Type != "tmpfs" {
			tried = append(tried, fmt.Sprintf("%s (%s)", candidate, describe(info, err)))
			continue
		}
		dir, err := os.MkdirTemp(candidate, "narad-tmpfstest-")
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (tmpfs, but %v)", candidate, err))
			continue
		}
		t.Cleanup(func() {
			if err := (vfs.OS{}).RemoveAll(dir); err != nil {
				t.Errorf("remove the tmpfs test directory: %v", err)
			}
		})
		return dir
	}
	t.Fatalf("no tmpfs on this machine, which the test needs: looked at %s; mount one at /dev/shm (mount -t tmpfs tmpfs /dev/shm, or a container's --shm-size)", strings.Join(tried, ", "))
	return ""
}

// candidates are where a Linux system keeps a tmpfs, most likely first.
func candidates() []string {
	out := []string{"/dev/shm", "/run/shm"}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		out = append(out, dir)
	}
	return append(out, filepath.Join("/run/user", fmt.Sprint(os.Getuid())), os.TempDir())
}

func describe(info vfs.FSInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return info.Type
}
